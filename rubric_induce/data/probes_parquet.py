"""Probe tables as Parquet: a columnar copy of the JSONL probe table, for tables of millions of probes.

JSONL stays the default and the interchange format (``probing`` writes it; every stage reads it).
A Parquet probe table holds the same records, one row per record and one column per
:class:`~rubric_induce.data.probes.ProbeRecord` field (the derived ``probs``, ``mass`` and
``expected`` are not stored; the table's manifest is in the file's key-value metadata). At 2M
probes it took 81 MB against 916 MB of JSONL, and ``score --probes``'s streamed read 13 s of CPU
against 81 s, for about 170 MB more peak RSS (pyarrow and its read buffers; BENCHMARKS.md, "Probe
tables as Parquet"). It needs pyarrow (the ``parquet`` extra), imported
only when a Parquet file is read or written.

* :func:`jsonl_to_parquet` / :class:`ParquetProbeWriter`: write one, a row group at a time.
* :func:`scan_probes` / :func:`load_probe_table`: read a probe table of either format (by suffix).
* :func:`read_parquet_store`: :data:`READ_ROWS` rows at a time into a :class:`~rubric_induce.data.probes.ProbeStore`,
  never a record object per row; :func:`parquet_example_ids` reads the id column alone.

Every batch of rows is checked before it is used: a missing column, a column of the wrong type, a
null where a value is required or lists of different lengths is a
:class:`~rubric_induce.core.errors.DataError` naming the file, the column and the row (1-based,
counted over the whole file).
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.data.jsonl import read_json
from rubric_induce.data.model import manifest_path
from rubric_induce.data.probes import ProbeBlock, ProbeRecord, ProbeStore, ProbeTable, iter_records

__all__ = ["SUFFIXES", "ROW_GROUP", "READ_ROWS", "is_parquet", "ParquetProbeWriter", "jsonl_to_parquet",
           "iter_parquet_records", "iter_parquet_tables", "parquet_example_ids", "read_parquet_store", "scan_probes", "load_probe_table"]

#: File suffixes read as Parquet (anything else is a JSONL probe table).
SUFFIXES = (".parquet", ".pq")
#: Rows per row group when writing (larger groups compress better; reading does not depend on it).
ROW_GROUP = 1 << 17
#: Rows read at a time: what bounds the reader's memory (pyarrow's batches of 16,384 rows took about 85 MB
#: of RSS, whatever the file's row groups; pyarrow's default row group is a million rows).
READ_ROWS = 1 << 14
_META_KEY = b"rubric_induce.probe_meta"
_LISTS = ("answers", "values", "raw")  # one entry per answer: the same length on a row


def is_parquet(path: str | Path) -> bool:
    return Path(path).suffix.lower() in SUFFIXES


def _pyarrow() -> tuple[Any, Any, Any]:
    """pyarrow, pyarrow.parquet and pyarrow.compute, or an error naming the package to install."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError("pyarrow", "Parquet probe tables", extra="parquet") from None
    return pa, pq, pc


def _schema(pa: Any) -> Any:
    """The columns of a probe table file: the ProbeRecord fields (required ones not nullable)."""
    text, number, whole, flag = pa.string(), pa.float64(), pa.int64(), pa.bool_()
    return pa.schema([
        pa.field("example_id", text, nullable=False), pa.field("rubric_id", text, nullable=False),
        pa.field("answers", pa.list_(text), nullable=False), pa.field("values", pa.list_(number), nullable=False),
        pa.field("raw", pa.list_(number), nullable=False), pa.field("style", text, nullable=False),
        pa.field("estimator", text, nullable=False), pa.field("prompt_hash", text, nullable=False),
        pa.field("n_samples", whole), pa.field("forced_answer", flag), pa.field("analysis", text),
        pa.field("error", text), pa.field("bound", number), pa.field("bounded", pa.list_(text)),
        pa.field("truncated", flag), pa.field("example_tokens", whole), pa.field("call_failed", flag),
        pa.field("pack_position", whole), pa.field("pack_size", whole), pa.field("pack_seed", whole),
        pa.field("order", text),
    ])


class ParquetProbeWriter:
    """Writes probe records to a Parquet file, :data:`ROW_GROUP` rows per row group, through a
    temporary file in the same folder renamed on :meth:`close` (a failed write leaves no file).
    ``meta``: the table's manifest, kept in the file's metadata."""

    def __init__(self, path: str | Path, meta: dict[str, Any] | None = None, *, row_group: int = ROW_GROUP,
                 compression: str = "zstd") -> None:
        self._pa, pq, _ = _pyarrow()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        schema = _schema(self._pa)
        self._schema = schema.with_metadata({_META_KEY: json.dumps(meta or {}, allow_nan=False).encode()})
        fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.close(fd)
        self._writer = pq.ParquetWriter(self._tmp, self._schema, compression=compression)
        self._row_group = row_group
        self._pending: list[ProbeRecord] = []
        self._tables: list[Any] = []
        self._table_rows = 0
        self.n_records = 0

    def write(self, records: Iterable[ProbeRecord]) -> None:
        self._flush_tables()
        for rec in records:
            self._pending.append(rec)
            if len(self._pending) >= self._row_group:
                self._flush()

    def write_table(self, table: Any) -> None:
        """Write rows that are already a table of the probe table's columns (a checked batch's),
        gathered into row groups of ``row_group`` rows."""
        self._flush()
        self._tables.append(table.replace_schema_metadata(self._schema.metadata))
        self._table_rows += table.num_rows
        if self._table_rows >= self._row_group:
            self._flush_tables()

    def _flush_tables(self) -> None:
        tables, self._tables, self._table_rows = self._tables, [], 0
        if tables:
            table = self._pa.concat_tables(tables)
            self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
            self.n_records += table.num_rows

    def _flush(self) -> None:
        recs, self._pending = self._pending, []
        if not recs:
            return
        cols = {name: [getattr(r, name) for r in recs] for name in self._schema.names}
        self._writer.write_table(self._pa.Table.from_pydict(cols, schema=self._schema), row_group_size=len(recs))
        self.n_records += len(recs)

    def close(self) -> Path:
        try:
            self._flush()
            self._flush_tables()
            self._writer.close()
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        return self.path

    def abort(self) -> None:
        try:
            if self._writer.is_open:
                self._writer.close()
        finally:
            Path(self._tmp).unlink(missing_ok=True)

    def __enter__(self) -> ParquetProbeWriter:
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def jsonl_to_parquet(src: str | Path, dst: str | Path, *, row_group: int = ROW_GROUP) -> Path:
    """Copy the JSONL probe table ``src`` (and its manifest) to the Parquet file ``dst``, a row
    group at a time; a bad line is the DataError reading ``src`` gives."""
    mpath = manifest_path(src)
    with ParquetProbeWriter(dst, read_json(mpath) if mpath.exists() else {}, row_group=row_group) as writer:
        writer.write(iter_records(src))
    return Path(dst)


def _open(path: str | Path) -> Any:
    """The ParquetFile at ``path``, with its columns checked against the probe table's. Opened without
    pre-buffering: pyarrow's pre-buffered reads keep every row group's bytes read so far for as long as
    the batch iterator lives, so a whole-table read held the table's size in memory (20M rows: 836 MB)."""
    pa, pq, _ = _pyarrow()
    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
    except FileNotFoundError:
        raise DataError("no such probe table", path=path) from None
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"not a readable Parquet file: {exc}", path=path) from None
    names = set(pf.schema_arrow.names)
    for f in _schema(pa):
        if not f.nullable and f.name not in names:
            raise DataError("missing required column", path=path, field=f.name)
    return pf


def _meta(pf: Any, path: str | Path) -> dict[str, Any]:
    raw = (pf.schema_arrow.metadata or {}).get(_META_KEY)
    if raw is None:
        return {}
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise DataError(f"the manifest in the file's metadata is not JSON: {exc}", path=path) from None
    return meta if isinstance(meta, dict) else {}


def _fail_at(path: str | Path, name: str, first_row: int, bad: Any, message: str) -> DataError:
    row = first_row + int(np.flatnonzero(np.asarray(bad))[0]) + 1
    return DataError(f"row {row}: {message}", path=path, field=name)


def _checked(table: Any, path: str | Path, first_row: int) -> Any:
    """A batch of rows cast to the probe table's columns (absent optional ones as nulls), or a
    DataError naming the column and the row."""
    pa, _, pc = _pyarrow()
    cols = []
    for f in _schema(pa):
        if f.name not in table.column_names:
            cols.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        try:
            col = col.cast(f.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise DataError(f"column of type {col.type}, expected {f.type}: {exc}", path=path, field=f.name) from None
        col = col.combine_chunks()
        if not f.nullable and col.null_count:
            raise _fail_at(path, f.name, first_row, pc.is_null(col), "a null where a value is required")
        if pa.types.is_list(f.type):
            flat = pc.list_flatten(col)
            if flat.null_count:
                parents = pc.list_parent_indices(col).to_numpy()
                row_mask = np.zeros(len(col), dtype=bool)
                row_mask[parents[pc.is_null(flat).to_numpy(zero_copy_only=False)]] = True
                raise _fail_at(path, f.name, first_row, row_mask, "a null inside the list")
        cols.append(col)
    out = pa.Table.from_arrays(cols, schema=_schema(pa))
    lens = [pc.list_value_length(out.column(n)).to_numpy() for n in _LISTS]
    for name, n in zip(_LISTS[1:], lens[1:]):
        if (n != lens[0]).any():
            raise _fail_at(path, name, first_row, n != lens[0], "a different number of entries than answers")
    return out


def iter_parquet_tables(path: str | Path, columns: Sequence[str] | None = None) -> Iterator[tuple[int, Any]]:
    """``(first row, table)`` of each :data:`READ_ROWS` rows of the Parquet probe table at ``path``,
    checked (all columns; with ``columns``, only those are read and not checked)."""
    pa, _, _ = _pyarrow()
    batches = _open(path).iter_batches(batch_size=READ_ROWS, columns=list(columns) if columns is not None else None)
    first = 0
    while True:
        try:
            batch = next(batches, None)
        except (pa.ArrowException, OSError) as exc:
            raise DataError(f"the rows from {first + 1} cannot be read: {exc}", path=path) from None
        if batch is None:
            return
        table = pa.Table.from_batches([batch])
        if columns is None:
            table = _checked(table, path, first)
        yield first, table
        first += table.num_rows


def parquet_example_ids(path: str | Path) -> list[str]:
    """The distinct example ids of the Parquet probe table at ``path`` (the id column alone read)."""
    pa, _, pc = _pyarrow()
    seen: set[str] = set()
    for first, table in iter_parquet_tables(path, ["example_id"]):
        col = table.column("example_id")
        try:
            col = col.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise DataError(f"column of type {col.type}, expected string: {exc}", path=path,
                            field="example_id") from None
        if col.null_count:
            raise _fail_at(path, "example_id", first, pc.is_null(col.combine_chunks()),
                           "a null where a value is required")
        seen.update(pc.unique(col).to_pylist())
    return list(seen)


def iter_parquet_records(path: str | Path) -> Iterator[ProbeRecord]:
    """The records of the Parquet probe table at ``path``, one at a time (rows as JSONL lines read)."""
    for first, table in iter_parquet_tables(path):
        for k, row in enumerate(table.to_pylist()):
            try:
                yield ProbeRecord.from_dict(row)
            except (TypeError, ValueError) as exc:
                raise DataError(f"row {first + k + 1}: invalid probe record: {exc}", path=path) from None


def _padded(col: Any, pc: Any) -> tuple[np.ndarray, np.ndarray]:
    """A list<double> column as ``(lengths, rows x widest matrix)``, zero-padded."""
    lens = pc.list_value_length(col).to_numpy().astype(np.int64)
    flat = pc.list_flatten(col).to_numpy()
    out = np.zeros((len(lens), int(lens.max(initial=0))))
    if flat.size:
        rows = np.repeat(np.arange(len(lens)), lens)
        starts = np.cumsum(lens) - lens
        out[rows, np.arange(flat.size) - np.repeat(starts, lens)] = flat
    return lens, out


def _block(table: Any) -> ProbeBlock:
    """A checked batch of rows as the arrays a ProbeStore takes (ids dictionary-encoded)."""
    _, _, pc = _pyarrow()
    ex = pc.dictionary_encode(table.column("example_id")).combine_chunks()
    rb = pc.dictionary_encode(table.column("rubric_id")).combine_chunks()
    lens, raw = _padded(table.column("raw").combine_chunks(), pc)
    _, values = _padded(table.column("values").combine_chunks(), pc)
    ok = pc.is_null(table.column("error")).to_numpy(zero_copy_only=False) & (raw.sum(axis=1) > 0)
    return ProbeBlock(example_ids=ex.dictionary.to_pylist(), example_codes=ex.indices.to_numpy().astype(np.int64),
                      rubric_ids=rb.dictionary.to_pylist(), rubric_codes=rb.indices.to_numpy().astype(np.int64),
                      n_answers=lens, values=values, raw=raw, ok=ok)


def read_parquet_store(path: str | Path, rubric_ids: Sequence[str],
                       example_ids: Sequence[str] | None = None) -> ProbeStore:
    """The probes of ``rubric_ids`` in the Parquet file at ``path`` as a :class:`ProbeStore`,
    :data:`READ_ROWS` rows at a time: the same arrays as ``ProbeTable.scan`` of the table as JSONL. ``example_ids``:
    keep only these (default: every example in the file)."""
    store = ProbeStore(rubric_ids, example_ids or (), _meta(_open(path), path), fixed=example_ids is not None)
    for _, table in iter_parquet_tables(path):
        store.add_block(_block(table))
    return store


def scan_probes(path: str | Path, rubric_ids: Sequence[str], example_ids: Sequence[str] | None = None) -> ProbeStore:
    """:meth:`ProbeTable.scan` of a probe table file of either format (Parquet by its suffix)."""
    if is_parquet(path):
        return read_parquet_store(path, rubric_ids, example_ids)
    return ProbeTable.scan(path, rubric_ids, example_ids)


def load_probe_table(path: str | Path) -> ProbeTable:
    """:meth:`ProbeTable.load` of a probe table file of either format (Parquet by its suffix)."""
    if not is_parquet(path):
        return ProbeTable.load(path)
    return ProbeTable(list(iter_parquet_records(path)), _meta(_open(path), path))
