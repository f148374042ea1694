"""``rubric-induce score`` a chunk of texts at a time: memory bounded by the chunk, not by the input.

Each text's score depends on no other text, so texts are read, probed, scored and written
:data:`~rubric_induce.scoring.numbers.SCORE_CHUNK` at a time. The results equal the in-memory
path's (:meth:`RubricScorer.score <rubric_induce.scoring.scorer.RubricScorer.score>` of every text,
or ``score_probes`` of the whole table) byte for byte: the calibration network, the answer check
and a guarantee see the texts in blocks of ``SCORE_CHUNK`` in both paths
(:mod:`~rubric_induce.scoring.numbers`).

* Texts (:func:`stream_texts`): the input file is read ``SCORE_CHUNK`` rows at a time; checks that
  need every row (an id used twice) hold per chunk, and scoring allows repeated ids anyway.
* A probe table (:func:`stream_probes`): its texts are scored in the order of their ids, and a
  text's probes may lie anywhere in the file, so a table of more than :data:`BUCKET_TEXTS` texts is
  read three times: its ids (every line checked, so a bad line fails before any row is written),
  then its lines copied into bucket files of :data:`BUCKET_TEXTS` consecutive ids (a temporary
  folder beside the table, removed at the end), then one bucket at a time into a
  :class:`~rubric_induce.data.probes.ProbeStore`. Memory: the ids, one bucket and one chunk.

Adaptive scoring asks every text in lockstep, so it reads all texts first (``--adaptive``).
"""
from __future__ import annotations

import bisect
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rubric_induce.data import Example
from rubric_induce.data.mapping import InputMapping
from rubric_induce.data.probe_buckets import read_bucket, write_buckets
from rubric_induce.data.probes import ProbeTable, iter_records
from rubric_induce.data.results import ScoreResult
from rubric_induce.scoring.numbers import SCORE_CHUNK
from rubric_induce.scoring.options import ScoreParams

__all__ = ["stream_texts", "read_chunks", "score_chunks", "stream_probes", "BUCKET_TEXTS"]

#: Texts per bucket of a probe table (a multiple of SCORE_CHUNK): about 75 MB of probe arrays at 20 rubrics.
BUCKET_TEXTS = 16 * SCORE_CHUNK


def stream_texts(scorer: Any, path: str | Path, mapping: InputMapping | None, params: ScoreParams, *,
                 optional_run_id: bool | None = None, progress: bool = False,
                 chunk_size: int | None = None) -> Iterator[list[ScoreResult]]:
    """The results of the texts of ``path`` (read as :meth:`RubricScorer.read` reads them), one list
    per chunk of ``chunk_size`` rows (default :data:`SCORE_CHUNK`), probing each chunk as it is read."""
    return score_chunks(scorer, read_chunks(scorer, path, mapping, optional_run_id=optional_run_id,
                                            chunk_size=chunk_size), params, progress=progress)


def read_chunks(scorer: Any, path: str | Path, mapping: InputMapping | None, *, optional_run_id: bool | None = None,
                chunk_size: int | None = None) -> Iterator[list[Example]]:
    """The texts of ``path`` as :meth:`RubricScorer.read` reads them, ``chunk_size`` rows at a time."""
    mapping = scorer.read_mapping(path, mapping, optional_run_id=optional_run_id)
    return mapping.iter_load(path, unique=False, chunk_size=chunk_size or SCORE_CHUNK)


def score_chunks(scorer: Any, chunks: Iterable[list[Example]], params: ScoreParams, *,
                 progress: bool = False) -> Iterator[list[ScoreResult]]:
    """Each chunk of texts probed and scored as it comes (``score_probes`` of its probes)."""
    for examples in chunks:
        yield scorer.score_probes(scorer.probe(examples, progress=progress), examples, params)


def stream_probes(scorer: Any, path: str | Path, params: ScoreParams) -> Iterator[list[ScoreResult]]:
    """The results of every text of the probe table at ``path``, in the order of their ids, one list
    per chunk of :data:`SCORE_CHUNK` texts (``score_probes(table, sorted(ids))``, a chunk at a time)."""
    path = Path(path)
    rubric_ids = [r.id for r in scorer.rubrics]
    ids = sorted({rec.example_id for rec in iter_records(path)})  # every line read and checked
    if len(ids) <= BUCKET_TEXTS:
        yield from scorer.iter_score_probes(ProbeTable.scan(path, rubric_ids), ids, params)
        return
    groups = [ids[start:start + BUCKET_TEXTS] for start in range(0, len(ids), BUCKET_TEXTS)]
    with tempfile.TemporaryDirectory(prefix=".score-buckets-", dir=path.parent) as folder:
        buckets = _write_buckets(path, [g[0] for g in groups[1:]], Path(folder))
        for group, bucket in zip(groups, buckets):
            yield from scorer.iter_score_probes(read_bucket(bucket, path, rubric_ids, group), group, params)


def _write_buckets(path: Path, bounds: list[str], folder: Path) -> list[Path]:
    """Copy each line of ``path`` into the bucket of its text's id (``bounds``: the first id of every
    bucket but the first), keeping the lines' order; returns the bucket files, in id order."""
    return write_buckets(path, folder, len(bounds) + 1, lambda ex_id: bisect.bisect_right(bounds, ex_id))
