"""The ``generate`` command through click's CliRunner, with the fake backend."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.data import Example, RubricPool, write_examples


@pytest.fixture
def files(tmp_path, dialogues, likert_examples):
    write_examples(tmp_path / "dialogues.jsonl", dialogues)
    write_examples(tmp_path / "summaries.jsonl", likert_examples)
    (tmp_path / "domain.txt").write_text("A restaurant booking assistant.", encoding="utf-8")
    return tmp_path


def run(args):
    return CliRunner().invoke(cli, ["generate", *args, "--backend", "fake", "--no-progress"], catch_exceptions=False)


def test_generate_rubicon_writes_pool_and_reports_usage(files):
    out = files / "rubric_pools" / "p.jsonl"
    args = ["--examples", str(files / "dialogues.jsonl"), "--domain", str(files / "domain.txt"),
            "--top-k", "2", "--batch-size", "3", "--max-new", "2", "--seed", "3",
            "--cache", str(files / "c.sqlite"), "--out", str(out)]
    res = run(args)
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and "SAT" in res.output and "tokens" in res.output and "cost" in res.output
    pool = RubricPool.load(out)
    assert len(pool) > 0
    manifest = json.loads((files / "rubric_pools" / "p.manifest.json").read_text())
    assert manifest["settings"]["top_k"] == 2 and manifest["settings"]["batch_size"] == 3
    assert manifest["seed"] == 3 and manifest["usage"]["calls"] > 0 and "rubicon_ds" in manifest["prompts"]
    again = run(args)
    assert "0 new" in again.output
    assert [r.to_dict() for r in RubricPool.load(out)] == [r.to_dict() for r in pool]


def test_generate_no_ds_no_cdp_and_spur(files):
    out = files / "spur.jsonl"
    res = run(["--examples", str(files / "dialogues.jsonl"), "--method", "spur", "--spur-size", "2",
               "--no-cache", "--out", str(out)])
    assert res.exit_code == 0, res.output
    m = RubricPool.load(out).manifest
    assert m["method"] == "spur" and m["settings"]["use_ds"] is False and m["settings"]["use_cdp"] is False
    assert all(len(RubricPool.load(out).by_polarity(p)) <= 2 for p in ("SAT", "DSAT"))
    out2 = files / "abl.jsonl"
    res = run(["--examples", str(files / "dialogues.jsonl"), "--no-ds", "--no-cdp", "--no-cache",
               "--out", str(out2)])
    assert res.exit_code == 0, res.output
    assert set(RubricPool.load(out2).manifest["prompts"]) == {"rubicon_extract", "rubicon_summarize"}


def test_generate_rubicon_without_domain_is_a_usage_error(files):
    res = CliRunner().invoke(cli, ["generate", "--examples", str(files / "dialogues.jsonl"), "--backend", "fake",
                                        "--no-cache", "--out", str(files / "x.jsonl")])
    assert res.exit_code == 2 and "--domain" in res.output


def test_generate_autocalibrate(files):
    out = files / "ac.jsonl"
    res = run(["--examples", str(files / "summaries.jsonl"), "--method", "autocalibrate", "--aspect", "coherence",
               "--sample-sizes", "2,3", "--trials", "1", "--draft-samples", "2", "--keep", "2",
               "--refine-sizes", "1", "--refine-trials", "1", "--refine-samples", "1", "--levels", "4",
               "--metric", "kendall", "--no-cache", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "best kendall" in res.output
    pool = RubricPool.load(out)
    assert len(pool) == 2 and all(r.levels and len(r.levels) == 4 for r in pool)
    assert pool.manifest["settings"]["metric"] == "kendall"


def test_generate_bad_sample_sizes_and_missing_classes(files, tmp_path):
    res = CliRunner().invoke(cli, ["generate", "--examples", str(files / "summaries.jsonl"), "--method", "autocalibrate",
                                        "--aspect", "coherence", "--sample-sizes", "2,x", "--backend", "fake"])
    assert res.exit_code == 2 and "expected an integer" in res.output and "sample_sizes" in res.output
    only_pos = [Example.create({"text": f"USER: hi {i}"}, {"sat": 1}, id=f"p{i}") for i in range(3)]
    write_examples(tmp_path / "pos.jsonl", only_pos)
    res = CliRunner().invoke(cli, ["generate", "--examples", str(tmp_path / "pos.jsonl"), "--no-ds", "--backend", "fake",
                                        "--no-cache", "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "no negative examples" in res.output


def test_generate_contrastive_points_to_pairwise_runs(files):
    """`generate` reads pointwise examples; --method contrastive says where it runs (exit 2, the field)."""
    res = CliRunner().invoke(cli, ["generate", "--examples", str(files / "dialogues.jsonl"), "--method", "contrastive",
                                   "--backend", "fake", "--out", str(files / "p.jsonl")])
    assert res.exit_code == 2
    assert "generate.method" in res.output and 'kind = "pairwise"' in res.output
    assert not (files / "p.jsonl").exists()
