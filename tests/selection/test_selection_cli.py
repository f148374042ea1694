"""`rubric-induce select` end to end on probes produced by the fake backend."""
from __future__ import annotations

import json
import zlib

import pytest
from click.testing import CliRunner

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.data import Example, Rubric, RubricPool, RubricSet, write_examples
from rubric_induce.probing.api import probe

RUBRICS = ([Rubric.create(f"The system solves the task (aspect {k}).", "SAT") for k in range(3)]
           + [Rubric.create(f"The user gets frustrated (aspect {k}).", "DSAT") for k in range(3)]
           + [Rubric.create(f"The dialogue mentions topic {k}.", "SAT") for k in range(3)]
           + [Rubric.create(f"The system uses long sentences {k}.", "DSAT") for k in range(3)])


def _answers(messages, answers, prefix):
    text = " ".join(m["content"] for m in messages)
    good = "GOOD" in text
    h = zlib.crc32(text.encode()) % 100 / 100
    if "solves the task" in text:
        hi = good if h < 0.85 else not good
    elif "frustrated" in text:
        hi = (not good) if h < 0.85 else good
    else:
        hi = h < 0.5
    return {"5": 0.7, "4": 0.2, "1": 0.1} if hi else {"1": 0.7, "2": 0.2, "5": 0.1}


@pytest.fixture
def run_dir(tmp_path):
    examples = [Example.create({"text": f"USER: help {i}\nSYSTEM: {'GOOD' if i % 2 else 'BAD'} reply {i}"},
                               {"sat": i % 2, "satisfaction": 1 + 4 * (i % 2)}, id=f"ex{i}") for i in range(40)]
    write_examples(tmp_path / "examples.jsonl", examples)
    RubricPool(RUBRICS).save(tmp_path / "pool.jsonl")
    table = probe(examples, RUBRICS, FakeBackend(answers=_answers))
    table.save(tmp_path / "probes.jsonl")
    return tmp_path


def _invoke(run_dir, *extra):
    args = ["--examples", str(run_dir / "examples.jsonl"), "--rubrics", str(run_dir / "pool.jsonl"),
            "--probes", str(run_dir / "probes.jsonl"), "--bootstrap", "50", *extra]
    return CliRunner().invoke(cli, ["select", *args], catch_exceptions=False)


def test_select_writes_set_metrics_and_plot(run_dir):
    out = run_dir / "sel"
    res = _invoke(run_dir, "--n-sat", "3", "--n-dsat", "3", "--out", str(out))
    assert res.exit_code == 0, res.output
    chosen = RubricSet.load(out / "selected.jsonl")
    assert chosen.threshold is not None and len(chosen) == 6
    assert {r.text.split(" (")[0] for r in chosen} == {"The system solves the task", "The user gets frustrated"}
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"train", "test"}
    assert metrics["metrics"]["test"]["accuracy"]["value"] > 0.8
    assert "YieldRate@90" in (out / "metrics.md").read_text()
    assert (out / "precision_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert chosen.manifest["alpha"] is not None and chosen.manifest["n_test"] == 20


@pytest.mark.parametrize("method", ["correctness", "brute-force", "ucb", "random", "topk"])
def test_select_baseline_methods(run_dir, method):
    res = _invoke(run_dir, "--method", method, "--n-sat", "2", "--n-dsat", "2", "--no-plot",
                  "--out", str(run_dir / method))
    assert res.exit_code == 0, res.output
    assert len(RubricSet.load(run_dir / method / "selected.jsonl")) == 4


def test_select_clear_errors(run_dir):
    res = _invoke(run_dir, "--label", "satisfaction", "--out", str(run_dir / "x"))
    assert res.exit_code == 2 and "not 0/1" in res.output and "--label-threshold" in res.output
    res = _invoke(run_dir, "--label", "satisfaction", "--label-threshold", "3", "--n-sat", "2", "--n-dsat", "2",
                  "--alpha", "1", "--no-plot", "--out", str(run_dir / "y"))
    assert res.exit_code == 0, res.output
    pool = RubricPool.load(run_dir / "pool.jsonl")
    RubricPool(pool.rubrics + [Rubric.create("Never probed.", "SAT")]).save(run_dir / "bigger.jsonl")
    args = ["select", "--examples", str(run_dir / "examples.jsonl"), "--rubrics", str(run_dir / "bigger.jsonl"),
            "--probes", str(run_dir / "probes.jsonl"), "--no-plot", "--bootstrap", "20"]
    res = CliRunner().invoke(cli, [*args, "--out", str(run_dir / "z")])
    assert res.exit_code == 2 and "1 of 13 rubric(s)" in res.output and "40 absent over 40 examples" in res.output
    assert "--missing drop" in res.output
    # the same pool with --missing drop: the unprobed rubric is dropped and reported
    res = CliRunner().invoke(cli, [*args, "--missing", "drop", "--out", str(run_dir / "z")])
    assert res.exit_code == 0 and "dropped 1 of 13 rubric(s)" in res.output and "12 left in the pool" in res.output
    never = Rubric.create("Never probed.", "SAT").id
    assert json.loads((run_dir / "z" / "metrics.json").read_text())["dropped"] == [never]
    assert never not in {r.id for r in RubricSet.load(run_dir / "z" / "selected.jsonl")}
    res = _invoke(run_dir, "--limit", "1", "--out", str(run_dir / "w"))
    assert res.exit_code == 2 and "same 'sat' label" in res.output
