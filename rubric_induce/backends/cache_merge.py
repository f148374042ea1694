"""Merge call caches: shards probed on different machines become one cache.

Keys are content hashes of the call (backend identity, method, arguments), so two caches never
disagree on what a key *means*; merging is a union. Rows present in several inputs are compared:
identical responses count as ``same``; different ones (a non-deterministic server answered the
same call twice) are reported as ``differ`` and the first input's row is kept. The output is
written to a temporary file and moved into place only when complete, and an existing output is
never replaced unless asked.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rubric_induce.backends.cache import CallCache
from rubric_induce.core.errors import DataError

__all__ = ["MergeReport", "merge_caches"]


@dataclass
class MergeReport:
    output: Path
    rows: int = 0
    per_input: dict[str, int] = field(default_factory=dict)   # input -> rows it holds
    added: dict[str, int] = field(default_factory=dict)       # input -> rows it added to the output
    same: int = 0
    differ: list[str] = field(default_factory=list)           # keys whose rows differ between inputs

    def format(self) -> str:
        lines = [f"merged {len(self.per_input)} cache(s) into {self.output}: {self.rows} rows"]
        for name, n in self.per_input.items():
            lines.append(f"  {name}: {n} rows, {self.added[name]} new")
        lines.append(f"  {self.same} key(s) held by several inputs with identical rows")
        if self.differ:
            lines.append(f"  {len(self.differ)} key(s) with different rows (the first input's kept): "
                         + ", ".join(k[:12] + "..." for k in self.differ[:5]) + (" ..." if len(self.differ) > 5 else ""))
        return "\n".join(lines)


def _same(a: tuple, b: tuple) -> bool:
    """Rows are the same call result: method, model and response (as JSON values) equal."""
    if a[1] != b[1] or a[2] != b[2]:
        return False
    try:
        return json.loads(a[3]) == json.loads(b[3])
    except (TypeError, ValueError):
        return a[3] == b[3]


def _check_input(path: Path) -> None:
    """An input must be a call cache already: opened read-only, so an empty or foreign file is
    named (a DataError) instead of being turned into a new, empty database."""
    import sqlite3
    from urllib.parse import quote

    if path.stat().st_size == 0:
        raise DataError("the file is empty, not a call cache (nothing to merge)", path=path)
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise DataError(f"cannot open it as a call cache ({exc})", path=path) from None
    try:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'calls'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise DataError(f"not a call cache: damaged, or not an SQLite database ({exc})", path=path) from None
    finally:
        conn.close()
    if found is None:
        raise DataError("not a call cache: an SQLite database without its 'calls' table", path=path)


def merge_caches(inputs: Sequence[str | Path], output: str | Path, *, overwrite: bool = False,
                 batch: int = 2000) -> MergeReport:
    """Write the union of the ``inputs`` caches to ``output`` (see the module doc)."""
    output = Path(output)
    paths = [Path(p) for p in inputs]
    _check_paths(paths, output, overwrite)
    tmp = output.with_name(f".{output.name}.merging-{os.getpid()}")
    for suffix in ("", "-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    report = MergeReport(output)
    out = CallCache(tmp)
    try:
        for p in paths:
            src = CallCache(p)
            name = str(p)
            report.per_input[name] = report.added[name] = 0
            try:
                _copy_rows(src, out, name, batch, report)
            finally:
                src.close()
        report.rows = len(out)
        out._execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except BaseException:
        out.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(tmp) + suffix).unlink(missing_ok=True)
        raise
    out.close()
    output.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("-wal", "-shm"):
        Path(str(output) + suffix).unlink(missing_ok=True)
    os.replace(tmp, output)
    for suffix in ("-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    return report


def _check_paths(paths: list[Path], output: Path, overwrite: bool) -> None:
    """Refuse missing or damaged inputs, an output that is one of them, exists (without ``overwrite``)
    or is a folder."""
    if not paths:
        raise DataError("name at least one cache to merge", field="inputs")
    for p in paths:
        if not p.is_file():
            raise DataError("no such cache file", path=p)
        if p.resolve() == output.resolve():
            raise DataError("the output is one of the inputs: write the merge to a new file", path=output)
        _check_input(p)
    if output.exists() and not overwrite:
        raise DataError("exists already: pick a new file, or pass --overwrite to replace it", path=output)
    if output.exists() and output.is_dir():
        raise DataError("expected a file for the merged cache, found a folder", path=output)


def _copy_rows(src: CallCache, out: CallCache, name: str, batch: int, report: MergeReport) -> None:
    """Every row of ``src`` into ``out``, ``batch`` rows at a time, counted under ``name``."""
    chunk: list[tuple] = []
    for row in src.rows(batch):
        report.per_input[name] += 1
        chunk.append(row)
        if len(chunk) >= batch:
            report.added[name] += _add(out, chunk, report)
            chunk = []
    if chunk:
        report.added[name] += _add(out, chunk, report)


def _add(out: CallCache, rows: list[tuple], report: MergeReport) -> int:
    held = out.contains([r[0] for r in rows])
    new = []
    for row in rows:
        if row[0] in held:
            if _same(out.get_row(row[0]), row):
                report.same += 1
            else:
                report.differ.append(row[0])
        else:
            new.append(row)
            held.add(row[0])
    out.put_rows(new)
    return len(new)
