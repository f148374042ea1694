"""Shards (--shard i/n) are disjoint and complete; merged shard caches give a full run 100 % hits."""
from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from rubric_induce.backends.cache import CallCache
from rubric_induce.backends.cache_merge import merge_caches
from rubric_induce.cli import main
from rubric_induce.core.errors import DataError
from rubric_induce.probing.shards import Shard, parse_shard, select_shard, shard_of


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16])
def test_shards_are_disjoint_and_complete(n):
    ids = [f"text-{i}" for i in range(500)] + ["", "ünïcode", "a/b", "42"]
    parts = [select_shard(ids, Shard(i, n), key=str) for i in range(1, n + 1)]
    assert sorted(x for p in parts for x in p) == sorted(ids)
    assert sum(len(p) for p in parts) == len(ids)
    if n > 1:  # the hash spreads the texts: no shard is empty or holds most of them
        assert all(0 < len(p) < 0.5 * len(ids) + 40 for p in parts)
    # stable: a text's shard does not depend on the others
    assert [shard_of(x, n) for x in ids[:10]] == [shard_of(x, n) for x in ids[:10]]
    assert select_shard(ids[:50], Shard(1, n), key=str) == [x for x in parts[0] if x in ids[:50]]


@pytest.mark.parametrize("text", ["0/2", "3/2", "a/b", "2", "1/0", "-1/2"])
def test_bad_shard_specs(text):
    with pytest.raises(DataError, match="shard|i/n"):
        parse_shard(text)


def test_shard_hash_is_fixed():
    # the split must not change between releases (machines running different versions)
    assert [shard_of(f"ex{i}", 4) for i in range(8)] == [shard_of(f"ex{i}", 4) for i in range(8)]
    assert shard_of("ex0", 1) == 1


def _run(args, capsys):
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr()


def _probe_usage(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())["stages"]["probe"]["usage"]


@pytest.mark.slow
def test_sharded_run_then_merge_gives_a_full_run_all_hits(tmp_path, fake_run_config, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(fake_run_config)
    a, b = tmp_path / "a", tmp_path / "b"
    code, _ = _run(["run", str(cfg), "--out", str(a), "--stop-after", "dedup"], capsys)
    assert code == 0
    shutil.copytree(a, b)  # the second machine gets the same run folder (its pool and cache)
    assert _run(["run", str(cfg), "--out", str(a), "--shard", "1/2"], capsys)[0] == 0
    code, io = _run(["run", str(cfg), "--out", str(b), "--shard", "2/2"], capsys)
    assert code == 0 and "stopped after the probe stage" in io.err
    merged = tmp_path / "merged.sqlite"
    code, io = _run(["cache", "merge", str(a / "llm_calls.sqlite"), str(b / "llm_calls.sqlite"), "-o", str(merged)],
                    capsys)
    assert code == 0 and "identical rows" in io.out
    # the merge refuses to overwrite without being asked
    code, io = _run(["cache", "merge", str(a / "llm_calls.sqlite"), "-o", str(merged)], capsys)
    assert code == 2 and "--overwrite" in io.err
    shutil.copy(merged, a / "llm_calls.sqlite")
    for suffix in ("-wal", "-shm"):
        (a / f"llm_calls.sqlite{suffix}").unlink(missing_ok=True)
    # the plan sees every probe call in the cache
    code, io = _run(["plan", str(cfg), "--out", str(a)], capsys)
    assert code == 0 and "0 to make" in io.out
    assert _run(["run", str(cfg), "--out", str(a)], capsys)[0] == 0
    usage = _probe_usage(a)
    assert usage["calls"] == 0 and usage["cache_hits"] > 0
    # the shards' probes are the full run's, split
    full = [json.loads(x) for x in (a / "probes.jsonl").read_text().splitlines()]
    shard_rows = [json.loads(x) for d, t in ((a, "1-of-2"), (b, "2-of-2"))
                  for x in (d / "shards" / f"probes.shard-{t}.jsonl").read_text().splitlines()]
    key = lambda r: (r["example_id"], r["rubric_id"])  # noqa: E731
    assert sorted(map(key, shard_rows)) == sorted(map(key, full))
    by = {key(r): r["raw"] for r in full}
    assert all(by[key(r)] == r["raw"] for r in shard_rows)


def test_sharded_probe_cli_is_disjoint_and_complete(tmp_path, examples, rubrics, capsys):
    from rubric_induce.data import RubricPool
    from rubric_induce.data.jsonl import write_jsonl

    ex = tmp_path / "ex.jsonl"
    write_jsonl(ex, [{"id": e.id, **e.fields, **e.labels} for e in examples])
    rb = tmp_path / "rb.jsonl"
    RubricPool(rubrics).save(rb)
    got = []
    for i in (1, 2, 3):
        code, io = _run(["probe", "--examples", str(ex), "--rubrics", str(rb), "--backend", "fake", "--cache",
                         str(tmp_path / f"c{i}.sqlite"), "--shard", f"{i}/3", "--out", str(tmp_path / f"p{i}.jsonl")],
                        capsys)
        assert code == 0, io.err
        if (tmp_path / f"p{i}.jsonl").exists():
            got += [json.loads(x)["example_id"] for x in (tmp_path / f"p{i}.jsonl").read_text().splitlines()]
    assert sorted(got) == sorted(e.id for e in examples for _ in rubrics)


def _cache_with(path, rows):
    c = CallCache(path)
    c.put_rows(rows)
    c.close()


def test_merge_counts_and_conflicts(tmp_path):
    row = lambda k, resp: (k, "chat", "m", json.dumps(resp), 1, 1, None, 0.0)  # noqa: E731
    _cache_with(tmp_path / "a.sqlite", [row("k1", {"text": "a"}), row("k2", {"text": "b"})])
    _cache_with(tmp_path / "b.sqlite", [row("k2", {"text": "b"}), row("k3", {"text": "c"}), row("k1", {"text": "X"})])
    rep = merge_caches([tmp_path / "a.sqlite", tmp_path / "b.sqlite"], tmp_path / "c.sqlite")
    assert (rep.rows, rep.same, rep.differ) == (3, 1, ["k1"])
    assert rep.added == {str(tmp_path / "a.sqlite"): 2, str(tmp_path / "b.sqlite"): 1}
    c = CallCache(tmp_path / "c.sqlite")
    assert c.get("k1") == {"text": "a"} and len(c) == 3  # the first input's row kept
    c.close()
    with pytest.raises(DataError, match="exists"):
        merge_caches([tmp_path / "a.sqlite"], tmp_path / "c.sqlite")
    with pytest.raises(DataError, match="one of the inputs"):
        merge_caches([tmp_path / "a.sqlite"], tmp_path / "a.sqlite", overwrite=True)
    with pytest.raises(DataError, match="no such"):
        merge_caches([tmp_path / "zz.sqlite"], tmp_path / "d.sqlite")
    (tmp_path / "junk.sqlite").write_text("not a database")
    with pytest.raises(DataError, match="damaged"):
        merge_caches([tmp_path / "junk.sqlite"], tmp_path / "e.sqlite")
    assert not (tmp_path / "e.sqlite").exists()  # nothing half written
    rep = merge_caches([tmp_path / "b.sqlite"], tmp_path / "c.sqlite", overwrite=True)
    assert rep.rows == 3 and sqlite3.connect(tmp_path / "c.sqlite").execute("select count(*) from calls").fetchone()[0] == 3


def test_run_refuses_logprobs_on_a_reasoning_model_before_any_call(tmp_path, fake_run_config, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(fake_run_config.replace('spec = "fake"', 'spec = "openai/gpt-5-mini"'))
    for args in (["run", str(cfg), "--out", str(tmp_path / "r")], ["plan", str(cfg), "--out", str(tmp_path / "r")],
                 ["run", str(cfg), "--out", str(tmp_path / "r"), "--check"]):
        code, io = _run(args, capsys)
        assert code == 2 and "--estimator sampling" in io.err and "probe.estimator" in io.err, io.err
    cfg.write_text(fake_run_config.replace('spec = "fake"', 'spec = "openai/gpt-5-mini"') +
                   '\n[probe]\nestimator = "sampling"\nsamples = 3\n')
    code, io = _run(["plan", str(cfg), "--out", str(tmp_path / "r")], capsys)
    assert code == 0 and "gpt-5-mini" in io.out and "batch API:" in io.out and "$" in io.out, io.err


def test_export_batch_needs_the_pool_and_an_http_backend(tmp_path, fake_run_config, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(fake_run_config)
    code, io = _run(["run", str(cfg), "--out", str(tmp_path / "r"), "--export-batch", str(tmp_path / "b")], capsys)
    assert code == 2 and "--stop-after dedup" in io.err
    assert _run(["run", str(cfg), "--out", str(tmp_path / "r"), "--stop-after", "dedup"], capsys)[0] == 0
    code, io = _run(["run", str(cfg), "--out", str(tmp_path / "r"), "--export-batch", str(tmp_path / "b")], capsys)
    assert code == 2 and "OpenAI-compatible" in io.err


def test_prices_in_the_config_and_bad_prices(tmp_path, fake_run_config, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(fake_run_config + '\n[prices.fake]\ninput = 1.0\noutput = 2.0\ncached_input = 0.1\n')
    code, io = _run(["plan", str(cfg), "--out", str(tmp_path / "r")], capsys)
    assert code == 0 and "cost, plain calls:  $" in io.out and "no batch rate" in io.out
    cfg.write_text(fake_run_config + '\n[prices.fake]\ninput = -1.0\noutput = 2.0\n')
    code, io = _run(["plan", str(cfg), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "prices.fake.input" in io.err and str(cfg) in io.err


def test_a_pool_from_other_settings_is_not_exported(tmp_path, fake_run_config, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(fake_run_config)
    out = tmp_path / "r"
    assert _run(["run", str(cfg), "--out", str(out), "--stop-after", "dedup"], capsys)[0] == 0
    code, io = _run(["plan", str(cfg), "--out", str(out)], capsys)
    assert code == 0 and "no rubric pool" not in io.out and "other settings" not in io.out
    cfg.write_text(fake_run_config.replace("per_class = 3", "per_class = 2"))
    code, io = _run(["plan", str(cfg), "--out", str(out)], capsys)
    assert code == 0 and "other settings" in io.out
    code, io = _run(["run", str(cfg), "--out", str(out), "--shard", "1/2"], capsys)
    assert code == 2 and "--stop-after dedup" in io.err
