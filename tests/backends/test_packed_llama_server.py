"""Packed probing (issue 35) on the llama.cpp server tier: ``run`` with ``probe.packing = "packed"`` through
a real OpenAI-compatible server on 127.0.0.1, ``score`` of new texts through the run's artifact (packed
calls again), and ``probe --export-batch`` -> ``batch-run`` -> ``ingest`` -> ``probe`` from the cache,
whose records equal the live packed probes of the same texts. The 135M model may stop before the last
line of a packed reply: such a rubric is a recorded failure (``error`` names the missing label), never a
silent answer. The run on the 6 shortest demo dialogues, the batch files on the 2 shortest.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.backends.cache import CallCache
from rubric_induce.cli import cli
from rubric_induce.data import RubricSet
from rubric_induce.data.probes import ProbeTable
from rubric_induce.pipeline import config_from_dict, run_pipeline
from rubric_induce.probing.api import PROBES_FILE

pytestmark = [pytest.mark.server, pytest.mark.local_model]

RESOURCES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"
N_EXAMPLES = 6
TEST_SIZE = 0.34  # 4 training texts (calibration needs at least 4), 2 held out
N_BATCH = 2  # texts through export-batch -> batch-run -> ingest (and probed live to compare)
RUBRIC_IDS = ("rb-b17a24c895e5", "rb-e36ae7fd989f", "rb-2f0196ea2ea2", "rb-ec33705d5317")  # 2 SAT, 2 DSAT


def _rows() -> list[dict]:
    rows = [json.loads(line) for line in (RESOURCES / "demo_uss_dialogues.jsonl").read_text().splitlines() if line]
    return sorted(rows, key=lambda r: len(json.dumps(r["fields"])))


def _inputs(folder: Path, n: int = N_EXAMPLES) -> tuple[Path, Path]:
    """The n shortest demo dialogues and four hand-written rubrics, as files."""
    from rubric_induce.data import RubricPool
    from rubric_induce.handoff import import_rubrics

    examples = folder / "dialogues.jsonl"
    examples.write_text("".join(json.dumps(r) + "\n" for r in _rows()[:n]))
    rubrics = folder / "rubrics.jsonl"
    RubricPool([r for r in import_rubrics(RESOURCES / "demo_uss_rubrics.json") if r.id in RUBRIC_IDS]).save(rubrics)
    return examples, rubrics


def _packed_records_are_read_or_say_why(table: ProbeTable, n_texts: int) -> None:
    assert len(table.records) == n_texts * len(RUBRIC_IDS)
    assert {r.pack_size for r in table.records} == {len(RUBRIC_IDS)}
    for ex_id in {r.example_id for r in table.records}:  # each text's rubrics hold positions 0..k-1 once
        assert sorted(r.pack_position for r in table.records if r.example_id == ex_id) == list(range(len(RUBRIC_IDS)))
    failed = [r for r in table.records if not r.ok]
    assert all(r.error and "'R" in r.error and not r.call_failed for r in failed), [r.error for r in failed]
    ok = [r for r in table.records if r.ok]
    assert len(ok) >= n_texts // 2  # the 135M model often stops after the first line or two, but not always
    assert all(abs(sum(r.probs) - 1.0) < 1e-6 for r in ok)


@pytest.fixture(scope="module")
def packed_run(tmp_path_factory, llama_server, embedded_model_path):
    base = tmp_path_factory.mktemp("packed_served")
    inputs = _inputs(base)
    raw = {
        "run": {"out": str(base / "run"), "seed": 0, "test_size": TEST_SIZE},
        "data": {"examples": str(inputs[0]), "label": "sat"},
        "backend": {"spec": f"openai-compatible/smollm2@{llama_server}", "cache": "llm_calls.sqlite",
                    "max_retries": 1, "concurrency": 1, "timeout": 600},  # a busy 2-core CI box: 60 s is short
        "generate": {"method": "none", "include": [str(inputs[1])]},
        "dedup": {"enabled": False},
        "probe": {"packing": "packed"},
        "select": {"method": "rubicon", "n_sat": 1, "n_dsat": 1, "missing": "drop", "max_failure_rate": 1.0,
                   "options": {"alpha": 1.0}},
        # one fit: the cross-validated report and the adaptive model do not depend on how the probes were asked
        "calibrate": {"question": "satisfaction", "cv_folds": 0, "adaptive": False,
                      "options": {"hidden": [4, 4], "finetune_epochs": 20, "pretrain": False}},
        # the direct-judge baseline asks its own (unpacked) question per held-out text; off, so the cache
        # holds the probe stage's calls only
        "evaluate": {"bootstrap": 50, "direct_baseline": False},
        "feedback": {"enabled": False},
        "report": {"figures": False},
    }
    result = run_pipeline(config_from_dict(raw), out=base / "run", echo=lambda m: None)
    return result, base


def test_a_packed_run_through_the_server_probes_one_call_per_text(packed_run):
    result, _ = packed_run
    table = ProbeTable.load(result.out / PROBES_FILE)
    assert table.meta["packing"] == {"mode": "packed", "pack_size": None, "seed": 0}
    _packed_records_are_read_or_say_why(table, N_EXAMPLES)
    # one server request per text: the run's cache holds exactly those (no generation, no dedup, no feedback)
    assert _cached_methods(result.out / "llm_calls.sqlite") == ["chat"] * N_EXAMPLES
    doc = json.loads((result.out / "artifact.json").read_text())
    assert doc["probe"]["packing"] == "packed"
    assert (result.out / "evaluation.json").is_file() and "## Probes" in (result.out / "report.md").read_text()


def test_score_through_the_packed_artifact_sends_one_packed_call_per_text(packed_run):
    result, base = packed_run
    seen = {json.loads(line)["id"] for line in (base / "dialogues.jsonl").read_text().splitlines() if line}
    new = [r for r in _rows() if r["id"] not in seen][:2]
    texts = base / "new.jsonl"
    texts.write_text("".join(json.dumps({"id": r["id"], "fields": r["fields"]}) + "\n" for r in new))
    cache, out = base / "score_calls.sqlite", base / "scores.jsonl"
    res = CliRunner().invoke(cli, ["score", str(result.out), "--input", str(texts), "--cache", str(cache),
                                   "--out", str(out), "--no-progress", "--timeout", "600"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    n_rubrics = len(RubricSet.load(result.out / "selected.jsonl"))  # the artifact's rubrics
    assert len(rows) == 2 and n_rubrics >= 1
    for r in rows:  # each rubric read from the packed reply, or its failure listed
        assert len(r["distributions"]) + len(r.get("errors") or []) == n_rubrics
        assert all(abs(sum(d) - 1.0) < 1e-6 for d in r["distributions"].values())
    assert len(CallCache(cache)) == 2  # all of a text's rubrics in one call
    assert _cached_methods(cache) == ["chat"] * 2  # packed calls are chat replies, not answer logprobs


def _cached_methods(path: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT method FROM calls")]


def test_packed_export_batch_run_and_ingest_equal_the_live_probes(tmp_path, llama_server, embedded_model_path):
    """export-batch -> batch-run against the server -> ingest -> probe with a dead endpoint answers every
    record from the cache, equal to a live packed probe of the same texts."""
    import socket

    examples, rubrics = _inputs(tmp_path, n=N_BATCH)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    runner = CliRunner()

    def probe(url, *more):
        return runner.invoke(cli, ["probe", "--examples", str(examples), "--rubrics", str(rubrics), "--backend",
                                   f"openai-compatible/smollm2@{url}", "--packing", "packed", "--max-retries", "0", "--timeout", "600",
                                   "--concurrency", "1", "--no-progress", *more])

    batch, cache = tmp_path / "batch", tmp_path / "batch_calls.sqlite"
    res = probe(dead, "--cache", str(cache), "--export-batch", str(batch))
    assert res.exit_code == 0, res.output
    requests = [json.loads(line) for f in sorted(batch.glob("requests-*.jsonl")) for line in f.read_text().splitlines()]
    assert len(requests) == N_BATCH  # one request line per text
    assert all(r["body"]["top_logprobs"] == 20 and r["body"]["logprobs"] is True for r in requests)
    res = runner.invoke(cli, ["batch-run", str(batch), "-o", str(batch), "--endpoint", llama_server,
                              "--max-in-flight", "1", "--timeout", "600", "--no-progress"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["ingest", *map(str, sorted(batch.glob("results-*.jsonl"))), "--batch-dir", str(batch),
                              "--cache", str(cache)])
    assert res.exit_code == 0, res.output
    res = probe(dead, "--cache", str(cache), "--out", str(tmp_path / "from_batch.jsonl"))
    assert res.exit_code == 0, res.output  # the dead endpoint is never asked: every call is in the cache
    from_batch = ProbeTable.load(tmp_path / "from_batch.jsonl")
    res = probe(llama_server, "--cache", str(tmp_path / "live_calls.sqlite"), "--out", str(tmp_path / "live.jsonl"))
    assert res.exit_code == 0, res.output
    live = ProbeTable.load(tmp_path / "live.jsonl")
    _packed_records_are_read_or_say_why(from_batch, N_BATCH)
    key = (lambda r: (r.example_id, r.rubric_id))
    assert [key(r) for r in from_batch.records] == [key(r) for r in live.records]
    for a, b in zip(from_batch.records, live.records):
        assert (a.ok, a.error, a.pack_position) == (b.ok, b.error, b.pack_position)
        if a.ok:
            np.testing.assert_allclose(a.probs, b.probs, atol=1e-6)
