"""Batch export -> engine -> ingest: the exact live body, the live parser, zero calls afterwards."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from _engine import Engine, backend, completion, run_requests  # noqa: E402

from rubric_induce.backends.cache import CachedBackend, CallCache  # noqa: E402
from rubric_induce.batch.export import MAX_LINES, export_batch, ingest_results, read_manifest  # noqa: E402
from rubric_induce.core.errors import DataError  # noqa: E402
from rubric_induce.probing.api import ProbeParams, probe  # noqa: E402
from rubric_induce.probing.calls import probe_calls  # noqa: E402


def _records(table):
    return [(r.example_id, r.rubric_id, [round(x, 12) for x in r.raw], r.bound, r.error) for r in table.records]


@pytest.mark.parametrize("routing", [False, True])
def test_batch_body_is_the_live_body(tmp_path, examples, rubrics, routing):
    eng = Engine()
    be = backend(eng, extra_body={"repeat_penalty": 1.0, "top_k": -1}, prompt_cache_key=routing)
    calls = probe_calls(examples[:2], rubrics, be, ProbeParams())
    export = export_batch(calls, be, tmp_path / "b")
    lines = [json.loads(x) for x in export.files[0].read_text().splitlines()]
    probe(examples[:2], rubrics, be, ProbeParams())  # live: the engine records what the SDK posted
    def canon(bodies):  # the live calls run concurrently: compare as sorted multisets
        return sorted(json.dumps(b, sort_keys=True) for b in bodies)

    assert canon(ln["body"] for ln in lines) == canon(eng.bodies) and len(eng.bodies) == len(lines)
    assert all(ln["method"] == "POST" and ln["url"] == "/v1/chat/completions" for ln in lines)
    assert [ln["custom_id"] for ln in lines] == [c.key for c in calls]
    assert lines[0]["body"]["repeat_penalty"] == 1.0 and lines[0]["body"]["max_tokens"] == 1
    # the prefix-routing key: one per text, the same in the batch body as in the live request
    assert ("prompt_cache_key" in lines[0]["body"]) is routing
    if routing:
        assert len({ln["body"]["prompt_cache_key"] for ln in lines}) == 2


@pytest.mark.parametrize("shape", ["openai", "vllm"])
def test_round_trip_makes_zero_calls_and_equals_a_direct_run(tmp_path, examples, rubrics, shape):
    params = ProbeParams()
    # a direct run
    # kind openai (no base URL; the mock transport stands in for the API): priced from the table
    direct = probe(examples, rubrics, CachedBackend(backend(Engine(), base_url=None),
                                                    CallCache(tmp_path / "direct.sqlite")), params)
    # export -> engine -> ingest into another cache
    cache = CallCache(tmp_path / "batch.sqlite")
    be = CachedBackend(backend(Engine(), base_url=None), cache)
    export = export_batch(probe_calls(examples, rubrics, be, params), be, tmp_path / "b", max_lines=7)
    n = len(examples) * len(rubrics)
    assert export.exported == n and [len(f.read_text().splitlines()) for f in export.files] == [7, 7, 4]
    results = []
    for i, f in enumerate(export.files):
        results.append(tmp_path / f"out-{i}.jsonl")
        run_requests(f, results[-1], shape=shape)
    report = ingest_results(results, tmp_path / "b", cache)
    assert report.ingested == n and not (report.failed or report.expired or report.unknown or report.missing)
    assert report.cost_usd == pytest.approx((report.prompt_tokens * 0.075 + report.completion_tokens * 0.30) / 1e6)
    # now probing makes no call at all (the engine refuses any) and gives the direct run's probes
    refusing = CachedBackend(backend(Engine(refuse=True), base_url=None), cache)
    again = probe(examples, rubrics, refusing, params)
    assert refusing.tally.calls == 0 and refusing.tally.cache_hits == n
    assert _records(again) == _records(direct)
    # a second export holds nothing
    assert export_batch(probe_calls(examples, rubrics, be, params), be, tmp_path / "b2").exported == 0


def test_failed_lines_are_listed_and_re_exported(tmp_path, examples, rubrics):
    cache = CallCache(tmp_path / "c.sqlite")
    be = CachedBackend(backend(Engine()), cache)
    calls = probe_calls(examples, rubrics, be, ProbeParams())
    export = export_batch(calls, be, tmp_path / "b")
    bad = {calls[0].key, calls[5].key}
    run_requests(export.files[0], tmp_path / "out.jsonl", fail=bad)
    report = ingest_results([tmp_path / "out.jsonl"], tmp_path / "b", cache)
    assert set(report.failed) == bad and report.ingested == len(calls) - 2
    retry = [json.loads(x) for x in report.retry_file.read_text().splitlines()]
    assert {r["custom_id"] for r in retry} == bad
    # the retry file is a request file: run it and ingest its results
    run_requests(report.retry_file, tmp_path / "out2.jsonl")
    second = ingest_results([tmp_path / "out2.jsonl"], tmp_path / "b", cache)
    assert second.ingested == 2 and not second.failed
    refusing = CachedBackend(backend(Engine(refuse=True)), cache)
    probe(examples, rubrics, refusing, ProbeParams())
    assert refusing.tally.calls == 0


def test_export_refuses_a_non_empty_folder_and_non_http_backends(tmp_path, examples, rubrics):
    from rubric_induce.backends.fake import FakeBackend

    be = backend(Engine())
    calls = probe_calls(examples[:1], rubrics, be, ProbeParams())
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "mine.txt").write_text("keep")
    with pytest.raises(DataError, match="not empty"):
        export_batch(calls, be, tmp_path / "x")
    with pytest.raises(DataError, match="not a batch export"):
        export_batch(calls, be, tmp_path / "x", overwrite=True)
    assert (tmp_path / "x" / "mine.txt").read_text() == "keep"
    export_batch(calls, be, tmp_path / "y")
    export_batch(calls, be, tmp_path / "y", overwrite=True)  # replaces its own export
    with pytest.raises(DataError, match="OpenAI-compatible"):
        export_batch(probe_calls(examples[:1], rubrics, FakeBackend(), ProbeParams()), FakeBackend(), tmp_path / "z")
    with pytest.raises(DataError):
        export_batch(calls, be, tmp_path / "w", max_lines=MAX_LINES + 1)


def test_manifest_names_the_backend_without_secrets(tmp_path, examples, rubrics):
    be = backend(Engine(), base_url="http://user:hunter2@127.0.0.1:9/v1")
    export_batch(probe_calls(examples[:1], rubrics, be, ProbeParams()), be, tmp_path / "b")
    text = (tmp_path / "b" / "manifest.json").read_text()
    assert "hunter2" not in text
    man = read_manifest(tmp_path / "b")
    assert man["backend"]["model"] == "gpt-4o-mini" and man["counts"]["exported"] == len(rubrics)
    assert man["files"][0]["lines"] == len(rubrics) and len(man["files"][0]["sha256"]) == 64


def test_analyze_rate_dependent_calls_stay_out(tmp_path, examples, rubrics):
    be = backend(Engine())
    calls = probe_calls(examples[:2], rubrics, be, ProbeParams(style="analyze-rate"))
    export = export_batch(calls, be, tmp_path / "b")
    # the OpenAI-compatible backend reads analyze-rate from the analysis' own logprobs: one chat call
    assert export.exported == len(calls) and all(c.method == "chat" for c in calls)
    body = json.loads(export.files[0].read_text().splitlines()[0])["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 200
    assert completion(body)["choices"]


def test_sampling_estimator_chat_calls_round_trip(tmp_path, examples, rubrics):
    params = ProbeParams(estimator="sampling", samples=3)
    cache = CallCache(tmp_path / "c.sqlite")
    be = CachedBackend(backend(Engine()), cache)
    calls = probe_calls(examples[:2], rubrics, be, params)
    export = export_batch(calls, be, tmp_path / "b")
    assert export.exported == 2 * len(rubrics) * 3 and all(c.method == "chat" for c in calls)
    bodies = [json.loads(x)["body"] for x in export.files[0].read_text().splitlines()]
    assert {b["seed"] for b in bodies} == {0, 1, 2} and all("logprobs" not in b for b in bodies)
    run_requests(export.files[0], tmp_path / "out.jsonl")
    assert ingest_results([tmp_path / "out.jsonl"], tmp_path / "b", cache).ingested == len(calls)
    refusing = CachedBackend(backend(Engine(refuse=True)), cache)
    table = probe(examples[:2], rubrics, refusing, params)
    assert refusing.tally.calls == 0 and all(r.n_samples == 3 for r in table.records)


def test_ingest_refuses_another_backend(tmp_path, examples, rubrics):
    be = backend(Engine())
    export_batch(probe_calls(examples[:1], rubrics, be, ProbeParams()), be, tmp_path / "b")
    (tmp_path / "out.jsonl").write_text("")
    with pytest.raises(DataError, match="not the one the batch was exported for"):
        ingest_results([tmp_path / "out.jsonl"], tmp_path / "b", CallCache(tmp_path / "c.sqlite"),
                       backend=backend(Engine(), model="another-model"))
