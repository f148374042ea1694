"""``rubric-induce score --probes FILE.parquet``: a Parquet probe table scored a chunk of texts at a time.

The Parquet twin of :func:`~rubric_induce.scoring.stream.stream_probes`, with the same results
byte for byte and the same memory bound: texts are scored in the order of their ids; a table of at
most :data:`~rubric_induce.scoring.stream.BUCKET_TEXTS` texts is read into one
:class:`~rubric_induce.data.probes.ProbeStore`; a larger one is read three times: its id column
alone, then each batch of rows checked and split into bucket files of ``BUCKET_TEXTS``
consecutive ids (Parquet, in a temporary folder beside the table, removed at the end), then one
bucket at a time. Every row is checked before the first result is handed on.
"""
from __future__ import annotations

import bisect
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.data.probes_parquet import (
    READ_ROWS,
    ParquetProbeWriter,
    iter_parquet_tables,
    parquet_example_ids,
    read_parquet_store,
)
from rubric_induce.data.results import ScoreResult
from rubric_induce.scoring.options import ScoreParams
from rubric_induce.scoring.stream import BUCKET_TEXTS

__all__ = ["stream_parquet_probes"]


def stream_parquet_probes(scorer: Any, path: str | Path, params: ScoreParams, *,
                          bucket_texts: int | None = None) -> Iterator[list[ScoreResult]]:
    """The results of every text of the Parquet probe table at ``path``, in the order of their ids,
    one list per chunk (``score_probes(table, sorted(ids))``, a chunk at a time); ``bucket_texts``:
    texts per bucket (default :data:`BUCKET_TEXTS`)."""
    path = Path(path)
    bucket_texts = bucket_texts or BUCKET_TEXTS
    rubric_ids = [r.id for r in scorer.rubrics]
    ids = sorted(parquet_example_ids(path))
    if len(ids) <= bucket_texts:
        yield from scorer.iter_score_probes(read_parquet_store(path, rubric_ids), ids, params)
        return
    groups = [ids[start:start + bucket_texts] for start in range(0, len(ids), bucket_texts)]
    with tempfile.TemporaryDirectory(prefix=".score-buckets-", dir=path.parent) as folder:
        buckets = _write_buckets(path, [g[0] for g in groups[1:]], Path(folder))
        for group, bucket in zip(groups, buckets):
            store = read_parquet_store(bucket, rubric_ids, group)
            bucket.unlink()
            yield from scorer.iter_score_probes(store, group, params)


def _write_buckets(path: Path, bounds: list[str], folder: Path) -> list[Path]:
    """Copy each row of ``path`` (checked) into the bucket of its text's id (``bounds``: the first id
    of every bucket but the first), keeping the rows' order; returns the bucket files, in id order."""
    buckets = [folder / f"bucket-{b:05d}.parquet" for b in range(len(bounds) + 1)]
    writers: list[Any] = []
    try:
        for bucket in buckets:
            writers.append(ParquetProbeWriter(bucket, compression="none", row_group=READ_ROWS))
        for _, table in iter_parquet_tables(path):
            ex = table.column("example_id").combine_chunks().dictionary_encode()
            of_id = np.array([bisect.bisect_right(bounds, e) for e in ex.dictionary.to_pylist()], dtype=np.int64)
            where = of_id[ex.indices.to_numpy()] if len(of_id) else np.zeros(0, dtype=np.int64)
            for b in np.unique(where).tolist():
                writers[b].write_table(table.take(np.flatnonzero(where == b)))
        for writer in writers:
            writer.close()
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    return buckets
