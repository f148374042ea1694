"""Batch execution of probe calls: request files out, an engine runs them, results back into the cache.

The stage's entry points: :func:`export_batch` writes the calls the call cache does not hold as
OpenAI Batch input files (``probe --export-batch``); :func:`run_batch` sends them to
OpenAI-compatible endpoints with the ``http`` or ``ray`` engine (``rubric-induce batch-run``);
:func:`ingest_results` reads the result files back into the cache (``rubric-induce ingest``), after
which ``probe`` and ``run`` answer those calls from it. The file shapes live in
:mod:`rubric_induce.batch.files`, the endpoints in :mod:`rubric_induce.batch.endpoints`, the
engines in :mod:`rubric_induce.batch.engines`.
"""
from rubric_induce.batch.export import BatchExport, IngestReport, export_batch, ingest_results
from rubric_induce.batch.run import BatchRunSummary, run_batch

__all__ = ["export_batch", "BatchExport", "ingest_results", "IngestReport", "run_batch", "BatchRunSummary"]
