"""Benchmark: a probe table as JSONL against the same table as Parquet (issue 44, item 4).

One seeded probe table of ``--rows`` records (default 20M: 1M texts x 20 rubrics, Likert 1-5,
``--failed`` (0.2%) failed probes with an error and no distribution; every distribution drawn
afresh, so the numbers do not repeat and compress as real probes do; ids are 16-hex-digit hashes,
so the file's order is not the ids' order, as with the content ids of texts without an id). It is
written both ways, a block of ``--block`` texts at a time:

* JSONL: ``ProbeRecord.to_dict`` as ``ProbeTable.save`` writes each line;
* Parquet: :class:`rubric_induce.data.probes_parquet.ParquetProbeWriter` (zstd, ``--row-group`` rows).

The write times count the writing only (the records are made outside the timed part). Each read
then runs in a fresh process (wall and CPU seconds, peak RSS ``VmHWM``, the 1-minute load
before and after), for each format:

* ``ids``: the distinct text ids (the first pass of ``score --probes``);
* ``full``: every probe into a :class:`~rubric_induce.data.probes.ProbeStore` (the arrays ``score``
  and the evaluate stage read; ``ProbeTable.scan`` / ``read_parquet_store``);
* ``stream``: ``score --probes``'s streamed read (``stream_probes`` / ``stream_parquet_probes``,
  bucket files beyond 65,536 texts) with a scorer that only takes each chunk's
  :class:`~rubric_induce.data.probes.ProbeArrays` (the scoring itself costs the same either way).

The files live under ``--dir`` (default ``/tmp/bench_probe_formats``) and are deleted at the end
(``--keep`` keeps them). Run it niced on a shared machine: the CPU seconds are the comparable
figure there, the wall seconds also count the other jobs.

    nice -n 10 .venv/bin/python experiments/bench/bench_probe_formats.py --rows 2000000
    nice -n 10 .venv/bin/python experiments/bench/bench_probe_formats.py            # 20M rows
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

import numpy as np
from _harness import begin, measure_child, parser, peak_rss_mb

from rubric_induce.data.probes import ProbeRecord, ProbeTable, iter_records
from rubric_induce.data.probes_parquet import ParquetProbeWriter, parquet_example_ids, read_parquet_store
from rubric_induce.scoring.numbers import SCORE_CHUNK
from rubric_induce.scoring.stream import stream_probes
from rubric_induce.scoring.stream_parquet import stream_parquet_probes

ANSWERS = ["1", "2", "3", "4", "5"]
VALUES = [1.0, 2.0, 3.0, 4.0, 5.0]
STEPS = ("ids", "full", "stream")


def make_block(start: int, n_texts: int, n_rubrics: int, failed: float, rng: np.random.Generator) -> list[ProbeRecord]:
    """The records of texts ``start`` .. ``start + n_texts - 1``, every rubric of each text in turn."""
    raw = rng.dirichlet(np.ones(5), size=(n_texts, n_rubrics)) * rng.uniform(0.5, 1.0, (n_texts, n_rubrics, 1))
    fail = rng.random((n_texts, n_rubrics)) < failed
    out = []
    for t in range(n_texts):
        ex_id = hashlib.sha1(str(start + t).encode()).hexdigest()[:16]
        for j in range(n_rubrics):
            bad = bool(fail[t, j])
            out.append(ProbeRecord(ex_id, f"rubric-{j:02d}", ANSWERS, VALUES, [0.0] * 5 if bad else raw[t, j].tolist(),
                                   "direct", "logprobs", f"{j:016x}", error="synthetic failure" if bad else None))
    return out


def write_both(folder: Path, args: Any) -> dict[str, dict[str, float]]:
    """Write the table as JSONL and as Parquet; the seconds (wall, CPU) spent writing, and the sizes."""
    folder.mkdir(parents=True, exist_ok=True)
    n_texts = args.rows // args.rubrics
    rng = np.random.default_rng(args.seed)
    timing = {fmt: {"wall_s": 0.0, "cpu_s": 0.0} for fmt in ("jsonl", "parquet")}
    paths = {"jsonl": folder / "probes.jsonl", "parquet": folder / "probes.parquet"}
    with open(paths["jsonl"], "w", encoding="utf-8") as jsonl, ParquetProbeWriter(
            paths["parquet"], {"synthetic": True}, row_group=args.row_group) as pq_writer:
        for start in range(0, n_texts, args.block):
            block = make_block(start, min(args.block, n_texts - start), args.rubrics, args.failed, rng)
            w, c = time.perf_counter(), time.process_time()
            jsonl.write("".join(json.dumps(r.to_dict(), ensure_ascii=False, allow_nan=False) + "\n" for r in block))
            timing["jsonl"]["wall_s"] += time.perf_counter() - w
            timing["jsonl"]["cpu_s"] += time.process_time() - c
            w, c = time.perf_counter(), time.process_time()
            pq_writer.write(block)
            timing["parquet"]["wall_s"] += time.perf_counter() - w
            timing["parquet"]["cpu_s"] += time.process_time() - c
        w, c = time.perf_counter(), time.process_time()
    timing["parquet"]["wall_s"] += time.perf_counter() - w  # the last row group, written on close
    timing["parquet"]["cpu_s"] += time.process_time() - c
    for fmt, path in paths.items():
        timing[fmt]["bytes"] = path.stat().st_size
    return timing


class _ReadOnly:
    """A scorer that takes each chunk's probe arrays and scores nothing: ``score --probes``'s reading alone."""

    def __init__(self, n_rubrics: int) -> None:
        self.rubrics = [type("R", (), {"id": f"rubric-{j:02d}"})() for j in range(n_rubrics)]

    def iter_score_probes(self, store, ids, params):
        for start in range(0, len(ids), SCORE_CHUNK):
            yield [store.arrays(ids[start:start + SCORE_CHUNK]).ok.sum()]


def child(step: str, path: str, n_rubrics: int) -> dict[str, Any]:
    """One read of ``path`` in this (fresh) process: wall and CPU seconds, peak RSS."""
    parquet = path.endswith(".parquet")
    rubric_ids = [f"rubric-{j:02d}" for j in range(n_rubrics)]
    w0, c0 = time.perf_counter(), time.process_time()
    if step == "ids":
        n = len(parquet_example_ids(path) if parquet else {r.example_id for r in iter_records(path)})
    elif step == "full":
        store = read_parquet_store(path, rubric_ids) if parquet else ProbeTable.scan(path, rubric_ids)
        store.arrays(store.example_ids[:SCORE_CHUNK])  # the first chunk's arrays, as scoring takes them
        n = len(store)
    elif step == "stream":
        chunks = (stream_parquet_probes if parquet else stream_probes)(_ReadOnly(n_rubrics), path, None)
        n = sum(1 for _ in chunks)
    else:
        raise SystemExit(f"unknown step {step!r}")
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"step": step, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak_rss_mb(), "n": n}


def read_all(folder: Path, args: Any) -> list[dict[str, Any]]:
    rows = []
    for step in [s for s in args.steps.split(",") if s]:
        for fmt, name in (("jsonl", "probes.jsonl"), ("parquet", "probes.parquet")):
            cmd = [sys.executable, __file__, "--child", step, "--path", str(folder / name),
                   "--rubrics", str(args.rubrics)]
            rows.append(measure_child(cmd, format=fmt, step=step))
    return rows


def report(args: Any, written: dict[str, dict[str, float]], rows: list[dict[str, Any]]) -> str:
    n_texts = args.rows // args.rubrics
    out = [f"Probe table of {n_texts * args.rubrics:,} rows ({n_texts:,} texts x {args.rubrics} rubrics), "
           f"{100 * args.failed:g}% failed probes; Parquet zstd, {args.row_group:,} rows per row group",
           f"(CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, Python "
           f"{platform.python_version()}, numpy {np.__version__}, pyarrow {_pyarrow_version()}, nice "
           f"{os.nice(0)})", "",
           "| format | size (MB) | write wall (s) | write CPU (s) |", "|---|---|---|---|"]
    for fmt, t in written.items():
        out.append(f"| {fmt} | {t['bytes'] / 1e6:,.0f} | {t['wall_s']:.1f} | {t['cpu_s']:.1f} |")
    out += ["", "| read | format | wall (s) | CPU (s) | peak RSS (MB) | load 1-min before / after |",
            "|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            out.append(f"| {r['step']} | {r['format']} | failed (exit {r['failed']}) | | | |")
            continue
        out.append(f"| {r['step']} | {r['format']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:,.0f} | "
                   f"{r['load_before']:.2f} / {r['load_after']:.2f} |")
    return "\n".join(out)


def _pyarrow_version() -> str:
    import pyarrow

    return pyarrow.__version__


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_probe_formats", __doc__)
    ap.add_argument("--rows", type=int, default=20_000_000, help="probe records (texts x rubrics)")
    ap.add_argument("--rubrics", type=int, default=20)
    ap.add_argument("--failed", type=float, default=0.002, help="share of failed probes")
    ap.add_argument("--block", type=int, default=5_000, help="texts made and written at a time")
    ap.add_argument("--row-group", type=int, default=1 << 17, help="Parquet rows per row group")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"reads to time, of {', '.join(STEPS)}")
    ap.add_argument("--dir", default="/tmp/bench_probe_formats", help="where the two files are written")
    ap.add_argument("--keep", action="store_true", help="keep the files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--path", default=None, help=argparse.SUPPRESS)
    if argv is None and "--child" in sys.argv:  # one timed read in this process: no run record
        args = ap.parse_args()
        print(json.dumps(child(args.child, args.path, args.rubrics)))
        return 0
    exp, args = begin(ap, argv)
    folder = Path(args.dir) / f"rows{args.rows}"
    try:
        written = write_both(folder, args)
        print(json.dumps({"written": written, "load": os.getloadavg()[0]}), file=sys.stderr)
        rows = read_all(folder, args)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(report(args, written, rows))
    ok = all("failed" not in r for r in rows)
    return exp.close({"written": written, "reads": rows}, exit_code=0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())
