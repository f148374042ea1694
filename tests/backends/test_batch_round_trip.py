"""The batch bridge round trip through a real engine on loopback: export the probe job's calls ->
batch-run posts each line to ``python -m llama_cpp.server`` on 127.0.0.1 (HTTP engine; Ray Data's
HTTP request processor under the ``ray`` marker) -> ingest into the cache -> ``probe`` makes zero
calls and its probes equal a direct run's."""
from __future__ import annotations

import math

import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.openai_compat import OpenAICompatibleBackend
from rubric_induce.batch.export import export_batch, ingest_results
from rubric_induce.batch.run import run_batch
from rubric_induce.probing.api import ProbeParams, probe
from rubric_induce.probing.calls import probe_calls

pytestmark = pytest.mark.server

N_TEXTS = 2  # x 3 rubrics: 6 calls, in three request files of at most MAX_LINES lines
MAX_LINES = 2


def _served(url: str) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend("smollm2", url, timeout=60.0, max_retries=1, max_concurrency=2)


def _no_calls(backend: OpenAICompatibleBackend):
    def refuse(*args, **kwargs):
        raise AssertionError("the re-probe called the server")

    backend._create = refuse  # every live call goes through _create
    return backend


@pytest.fixture(scope="module")
def direct(llama_server, examples_module, rubrics_module, tmp_path_factory):
    """The direct run: probe live through the cache."""
    be = CachedBackend(_served(llama_server), CallCache(tmp_path_factory.mktemp("direct") / "c.sqlite"))
    table = probe(examples_module, rubrics_module, be, ProbeParams())
    assert be.tally.calls == len(examples_module) * len(rubrics_module)
    return table


@pytest.fixture(scope="module")
def examples_module():
    from rubric_induce.data import Example

    texts = ["USER: book a table for {n} people tonight\nSYSTEM: done, a table for {n} at 8pm.",
             "USER: what's the weather in Oslo for {n} days?\nSYSTEM: I can only help with restaurant bookings.",
             "USER: cancel my booking\nSYSTEM: which booking? USER: the one for {n}\nSYSTEM: cancelled."]
    return [Example.create({"text": texts[i % 3].format(n=i + 2)}, {"sat": i % 2}, id=f"ex{i}") for i in range(N_TEXTS)]


@pytest.fixture(scope="module")
def rubrics_module():
    from rubric_induce.data import Rubric

    return [Rubric.create("The system does what the user asked.", "SAT"),
            Rubric.create("The user has to repeat a request.", "DSAT"),
            Rubric.create("The system confirms the details.", "SAT")]


def _round_trip(tmp_path, llama_server, examples, rubrics, direct, **run_kw):
    cache = CallCache(tmp_path / "batch.sqlite")
    be = CachedBackend(_served(llama_server), cache)
    export = export_batch(probe_calls(examples, rubrics, be, ProbeParams()), be, tmp_path / "export", max_lines=MAX_LINES)
    n = len(examples) * len(rubrics)
    assert export.exported == n and len(export.files) == 3
    summary = run_batch(export.files, [llama_server], tmp_path / "results", **run_kw)
    assert (summary.sent, summary.ok, summary.failed) == (n, n, 0)
    results = sorted((tmp_path / "results").glob("results-*.jsonl"))
    report = ingest_results(results, tmp_path / "export", cache)
    assert report.ingested == n and not (report.failed or report.expired or report.unknown or report.missing)
    # probe again: every call is in the cache, none reaches the server
    again_be = CachedBackend(_no_calls(_served(llama_server)), cache)
    again = probe(examples, rubrics, again_be, ProbeParams())
    assert again_be.tally.calls == 0 and again_be.tally.cache_hits == n
    assert len(again.records) == len(direct.records) == n
    for a, d in zip(again.records, direct.records):
        assert (a.example_id, a.rubric_id, a.error) == (d.example_id, d.rubric_id, d.error)
        assert a.error is None
        assert len(a.raw) == len(d.raw)
        for x, y in zip(a.raw, d.raw):
            assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, abs=1e-6)
    # a second run of batch-run sends nothing
    assert run_batch(export.files, [llama_server], tmp_path / "results", **run_kw).sent == 0


def test_round_trip_http_engine(tmp_path, llama_server, examples_module, rubrics_module, direct):
    _round_trip(tmp_path, llama_server, examples_module, rubrics_module, direct, max_in_flight=2)


@pytest.mark.ray
def test_round_trip_ray_engine(tmp_path, llama_server, examples_module, rubrics_module, direct, ray_local):
    _round_trip(tmp_path, llama_server, examples_module, rubrics_module, direct, engine="ray",
                max_in_flight=2, ray_batch_size=4)


@pytest.mark.parametrize("engine", ["http", pytest.param("ray", marks=pytest.mark.ray)])
def test_round_trip_through_the_cli(tmp_path, llama_server, examples_module, rubrics_module, direct, engine,
                                    request):
    """The documented recipe: probe --export-batch, batch-run, ingest, probe (zero calls)."""
    from click.testing import CliRunner

    from rubric_induce.cli import cli
    from rubric_induce.data import RubricPool, write_examples
    from rubric_induce.data.probes import ProbeTable

    if engine == "ray":
        request.getfixturevalue("ray_local")      # batch-run uses this process's Ray runtime
    ex = write_examples(tmp_path / "ex.jsonl", examples_module)
    rb = RubricPool(rubrics_module).save(tmp_path / "rb.jsonl")
    common = ["--examples", str(ex), "--rubrics", str(rb), "--backend", f"openai-compatible/smollm2@{llama_server}",
              "--cache", str(tmp_path / "c.sqlite")]
    batch = tmp_path / "batch"
    runner = CliRunner()
    res = runner.invoke(cli, ["probe", *common, "--export-batch", str(batch), "--max-lines", str(MAX_LINES)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["batch-run", str(batch), "-o", str(batch), "--endpoint", llama_server,
                              "--engine", engine, "--max-in-flight", "2", "--no-progress"])
    assert res.exit_code == 0, res.output
    results = sorted(batch.glob("results-*.jsonl"))
    assert [p.name for p in results] == ["results-00000.jsonl", "results-00001.jsonl", "results-00002.jsonl"]
    res = runner.invoke(cli, ["ingest", *map(str, results), "--cache", str(tmp_path / "c.sqlite")])
    assert res.exit_code == 0 and f"ingested {N_TEXTS * 3} result(s)" in res.output, res.output
    res = runner.invoke(cli, ["probe", *common, "--out", str(tmp_path / "p.jsonl")])
    assert res.exit_code == 0 and f"LLM calls: 0 new, {N_TEXTS * 3} cached" in res.output, res.output
    table = ProbeTable.load(tmp_path / "p.jsonl")
    for a, d in zip(table.records, direct.records):
        assert (a.example_id, a.rubric_id) == (d.example_id, d.rubric_id)
        assert a.raw == pytest.approx(d.raw, abs=1e-6)
