"""Golden batch files: request lines as the live backend builds them, result lines in both engines'
shapes (OpenAI Batch and vllm run-batch) with an error line, an expired one, a duplicate and an
unknown id. The golden export is frozen (its keys do not follow later template changes): ingest
needs only its manifest, index and request files."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

pytest.importorskip("openai")

from rubric_induce.backends.cache import CallCache, answer_logprobs_payload, cache_key  # noqa: E402
from rubric_induce.backends.options import CallOptions  # noqa: E402
from rubric_induce.batch.export import backend_from_manifest, ingest_results, read_manifest  # noqa: E402
from rubric_induce.cli import main  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def batch_dir(tmp_path) -> Path:
    target = tmp_path / "export"
    shutil.copytree(GOLDEN / "export", target)
    return target


def _requests(batch_dir):
    return [json.loads(x) for x in (batch_dir / "requests-00000.jsonl").read_text().splitlines()]


def test_golden_requests_are_live_bodies_keyed_by_cache_key(batch_dir):
    manifest = read_manifest(batch_dir)
    backend = backend_from_manifest(manifest)
    index = {json.loads(x)["custom_id"]: json.loads(x) for x in (batch_dir / "index.jsonl").read_text().splitlines()}
    for req in _requests(batch_dir):
        assert set(req) == {"custom_id", "method", "url", "body"}
        assert (req["method"], req["url"]) == ("POST", "/v1/chat/completions")
        entry = index[req["custom_id"]]
        body = req["body"]
        assert body == backend.logprobs_request(body["messages"], entry["answers"], CallOptions())
        payload = answer_logprobs_payload(body["messages"], entry["answers"], CallOptions())
        assert req["custom_id"] == cache_key(backend.identity(), "answer_logprobs", payload)


def _expected(body, answers):
    top = body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    out = {}
    for a in answers:
        lps = [t["logprob"] for t in top if t["token"].strip() == a]
        out[a] = math.log(sum(math.exp(x) for x in lps)) if lps else None
    return out


def test_golden_openai_results(batch_dir, tmp_path):
    reqs = _requests(batch_dir)
    ids = [r["custom_id"] for r in reqs]
    cache = CallCache(tmp_path / "c.sqlite")
    report = ingest_results([GOLDEN / "openai_results.jsonl"], batch_dir, cache)
    assert report.ingested == 2
    assert set(report.failed) == {ids[2]} and "HTTP 500" in report.failed[ids[2]]
    assert set(report.expired) == {ids[3]} and "batch_expired" in report.expired[ids[3]]
    assert report.duplicates == [ids[0]] and report.unknown == ["0" * 64] and report.missing == []
    retry = [json.loads(x) for x in report.retry_file.read_text().splitlines()]
    assert [r["custom_id"] for r in retry] == [ids[2], ids[3]] and retry == reqs[2:4]
    lines = [json.loads(x) for x in (GOLDEN / "openai_results.jsonl").read_text().splitlines()]
    row = cache.get(ids[0])
    expected = _expected(lines[0]["response"]["body"], ["1", "2", "3", "4", "5"])
    assert row["logprobs"] == pytest.approx(expected)  # " 3" and "3" summed: float rounding only
    assert row["usage"]["prompt_tokens"] == lines[0]["response"]["body"]["usage"]["prompt_tokens"]
    assert row["bound"] == pytest.approx(min(t["logprob"] for t in
                                             lines[0]["response"]["body"]["choices"][0]["logprobs"]["content"][0]
                                             ["top_logprobs"]))
    # ingesting again writes nothing new
    again = ingest_results([GOLDEN / "openai_results.jsonl"], batch_dir, cache)
    assert again.ingested == 0 and again.already_cached == 2


def test_golden_vllm_results(batch_dir, tmp_path):
    ids = [r["custom_id"] for r in _requests(batch_dir)]
    cache = CallCache(tmp_path / "c.sqlite")
    report = ingest_results([GOLDEN / "vllm_results.jsonl"], batch_dir, cache, retry_file=tmp_path / "retry.jsonl")
    assert report.ingested == 3 and cache.contains(ids) == {ids[0], ids[1], ids[3]}
    assert set(report.failed) == {ids[2]} and "maximum context length" in report.failed[ids[2]]
    assert report.duplicates == [ids[1]] and report.unknown == ["not-a-key-of-this-export"]
    assert report.retry_file == tmp_path / "retry.jsonl" and report.retry_lines == 1


def test_both_shapes_together_and_missing_ids(batch_dir, tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    only_first = tmp_path / "first.jsonl"
    only_first.write_text((GOLDEN / "openai_results.jsonl").read_text().splitlines()[0] + "\n")
    report = ingest_results([only_first], batch_dir, cache, retry_missing=True)
    assert report.ingested == 1 and len(report.missing) == 3 and report.retry_lines == 3


def _cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


def test_cli_ingest_and_bad_lines(batch_dir, tmp_path, capsys):
    cache = tmp_path / "c.sqlite"
    code, io = _cli(["ingest", str(GOLDEN / "vllm_results.jsonl"), "--batch-dir", str(batch_dir), "--cache",
                     str(cache), "--report-json", str(tmp_path / "r.json")], capsys)
    out = io.out
    assert "ingested 3 result(s)" in out and "1 failed" in out and "unknown" in out
    assert json.loads((tmp_path / "r.json").read_text())["unknown"] == ["not-a-key-of-this-export"]
    # a failed line or an unknown id makes the exit code 1 (the good lines are in the cache anyway) ...
    assert code == 1 and "1 failed, 1 unknown id" in io.err and "--allow-failed" in io.err, io.err
    assert "retry-requests.jsonl" in io.err
    # ... unless --allow-failed says that is expected (a rerun finds the good lines cached)
    main(["ingest", str(GOLDEN / "vllm_results.jsonl"), "--batch-dir", str(batch_dir), "--cache", str(cache),
          "--allow-failed"])
    assert "ingested 0 result(s) into the cache (3 were there already)" in capsys.readouterr().out
    # all lines good: exit 0 without the flag
    good = tmp_path / "good.jsonl"
    good.write_text("".join(ln + "\n" for ln in (GOLDEN / "vllm_results.jsonl").read_text().splitlines()
                            if '"error": null' in ln and '"status_code": 200' in ln and "not-a-key" not in ln))
    main(["ingest", str(good), "--batch-dir", str(batch_dir), "--cache", str(tmp_path / "c2.sqlite")])
    assert "ingested 3 result(s)" in capsys.readouterr().out
    cases = [
        ('{"custom_id": "x", "response": {"status_code": 200, "body": {}}}\nnot json\n', "line 2"),
        ('{"response": null, "error": {"code": "x"}}\n', "field 'custom_id'"),
        ('{"custom_id": "x", "response": {"status_code": "200", "body": {}}, "error": null}\n',
         "field 'response.status_code'"),
        ('{"custom_id": "x", "response": null, "error": null}\n', "field 'response'"),
        ('[1, 2]\n', "line 1"),
    ]
    for text, where in cases:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        code, io = _cli(["ingest", str(bad), "--batch-dir", str(batch_dir), "--cache", str(cache)], capsys)
        assert code == 2 and str(bad) in io.err and where in io.err, io.err
    code, io = _cli(["ingest", str(GOLDEN / "vllm_results.jsonl"), "--batch-dir", str(tmp_path), "--cache",
                     str(cache)], capsys)
    assert code == 2 and "manifest.json" in io.err
    code, io = _cli(["ingest", str(tmp_path / "nope.jsonl"), "--batch-dir", str(batch_dir)], capsys)
    assert code == 2 and "nope.jsonl" in io.err
