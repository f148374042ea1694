"""A probe table's lines copied into bucket files by their text, for readers that take a bucket of
texts at a time (``score`` and the evaluate stage): a text's probes may lie anywhere in the table,
so a reader bounded by its bucket first sorts the lines into one file per bucket.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from rubric_induce.core.errors import DataError
from rubric_induce.core.textfiles import open_binary
from rubric_induce.data.probes import ProbeStore, ProbeTable

__all__ = ["write_buckets", "read_bucket"]


def write_buckets(path: str | Path, folder: Path, n_buckets: int,
                  route: Callable[[str], int | Sequence[int] | None]) -> list[Path]:
    """Copy each line of the probe table at ``path`` into the bucket files of its text, keeping the
    lines' order: ``route(example_id)`` gives the bucket (an index below ``n_buckets``), several
    buckets, or None (the line is left out). Returns the bucket files, in bucket order. The lines
    are copied as they are (a reader parses them as it parses the table); call this on a table
    whose every line was read and checked already (``example_id`` is all that is read here)."""
    buckets = [folder / f"bucket-{b:05d}.jsonl" for b in range(n_buckets)]
    sinks = [p.open("wb") for p in buckets]
    try:
        with open_binary(path) as fh:
            for line_no, raw in enumerate(fh, start=1):
                line = raw[3:] if line_no == 1 and raw.startswith(b"\xef\xbb\xbf") else raw
                if not line.strip():
                    continue
                where = route(str(json.loads(line)["example_id"]))  # as ProbeRecord reads it
                if where is None:
                    continue
                line = line if line.endswith(b"\n") else line + b"\n"
                for b in ((where,) if isinstance(where, int) else where):
                    sinks[b].write(line)
    finally:
        for sink in sinks:
            sink.close()
    return buckets


def read_bucket(bucket: Path, table: str | Path, rubric_ids: Sequence[str], example_ids: Sequence[str]) -> ProbeStore:
    """The probes of ``example_ids`` from their bucket file (deleted once read). A bad record is
    reported at the probe table's own file and line (the bucket's records of these texts are read
    from ``table`` again to name it), never at a temporary bucket the user has not seen."""
    try:
        store = ProbeTable.scan(bucket, rubric_ids, example_ids)
    except DataError:
        ProbeTable.scan(table, rubric_ids, example_ids)
        raise
    bucket.unlink()
    return store
