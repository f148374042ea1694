"""The evaluate stage's scoring of the held-out texts from a probe table file, a bucket of texts at a time.

:func:`score_buckets` gives what :func:`~rubric_induce.evaluation.heldout.score_columns` gives over
the probe arrays of every held-out text (the per-text :class:`ScoredColumns` and each judge's
predictions), with the same numbers bit for bit, in memory bounded by a bucket of texts rather
than by the split (issue 44):

* The table is read once, every line checked, for the probe checks (every record counts) and its
  widest answer scale; then its held-out lines are copied into bucket files of ``bucket_texts``
  consecutive held-out texts, in the examples' order (a temporary folder beside the table), and one
  bucket at a time is read into a :class:`~rubric_induce.data.probes.ProbeStore`, made into arrays
  padded to the table's widest scale (as one store of the whole table pads them) and scored. The
  bucket size is a multiple of the scorer's block of texts (``SCORE_CHUNK``, 4,096), and blocks are
  counted from the first text, so the calibration network, the answer check and a guarantee see the
  blocks they see over the whole split.
* Each judge's predictions: while the buckets are scored, the calibration inputs of the texts some
  judge rated are appended to a file beside them, as the float64 values the network is given (not
  float32: the calibrator checks the float64 values, and a rounded 1 + 1e-6 would fail its check),
  and each judge's rows are read back and predicted :data:`JUDGE_ROWS` texts at a time. The network
  is row by row (its matrix products give a row the same bits in batches of whole kernel blocks:
  see :data:`JUDGE_ROWS`), so the numbers equal one batch of every text the judge rated; one such
  batch of 250,000 texts held about 800 MB in the judge-specific layers (texts x judges x inputs).

Memory: the ids and one router entry per text, one bucket's probe arrays and its store (about 3 KB
a text at 20 rubrics x 5 answers: 200 MB at 65,536 texts), one block's numbers, the per-text columns
(:class:`ScoredColumns`, about 90 bytes a text), each judge's predictions (8 bytes a text each) and
one chunk of a judge's inputs. The probe checks' values (16 bytes a probe) are reduced once the table
is read (:meth:`~rubric_induce.probing.checks.ProbeStats.finish`). A table of at most one bucket is
read once, as before; a larger one three times (checks, buckets, arrays).
"""
from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.data import Example
from rubric_induce.data.probe_buckets import read_bucket, write_buckets
from rubric_induce.data.probes import ProbeTable, iter_records
from rubric_induce.evaluation.columns import ScoredColumns
from rubric_induce.evaluation.judges import judge_ratings

__all__ = ["BUCKET_TEXTS", "JUDGE_ROWS", "score_buckets", "judge_predictions"]

#: Held-out texts scored at a time from a probe table file: a multiple of the scorer's block of texts
#: (``rubric_induce.scoring.numbers.SCORE_CHUNK``, 4,096; a test checks it), so the results equal one
#: pass over the whole split bit for bit.
BUCKET_TEXTS = 16 * 4096
_READ_ROWS = 1 << 15  # rows of the judges' input file read at a time (26 MB at 20 rubrics x 5 answers)
#: A judge's texts predicted at a time. The network is row by row and its matrix products give a row
#: the same bits in any batch whose chunks are whole blocks of the kernel's rows (measured here: chunks
#: of 32 to 4,096 rows, powers of two, equal one batch of 10,000 bit for bit; chunks of 8, 16 or 97 rows
#: do not, their last row taking another path), so a power of two, as the scorer's blocks (a test checks
#: it). One batch of a judge's 250,000 texts held about 800 MB in the judge-specific layers (texts x
#: judges x inputs, float32).
JUDGE_ROWS = 4096


def score_buckets(scorer: Any, path: str | Path, examples: Sequence[Example], stats: Any, *, on_result: Any = None,
                  chunk_size: int | None = None, bucket_texts: int | None = None
                  ) -> tuple[ScoredColumns, dict[str, np.ndarray] | None]:
    """``score_columns`` of the held-out ``examples`` over their probes in the table at ``path``,
    read a bucket of ``bucket_texts`` texts (default :data:`BUCKET_TEXTS`) at a time; every record
    of the table goes to ``stats.add`` (the probe checks; ``stats.finish()`` once all are read), every
    result to ``on_result`` in order."""
    size = BUCKET_TEXTS if bucket_texts is None else bucket_texts
    ids = [ex.id for ex in examples]
    rubric_ids = [r.id for r in scorer.rubrics]
    path = Path(path)
    n_buckets = max(1, math.ceil(len(ids) / size))
    questions = _judge_questions(scorer)
    rated = None if scorer.calibrator is None else _rated_any(examples, [q for q, _ in questions])
    cols = ScoredColumns()
    with tempfile.TemporaryDirectory(prefix=".evaluate-buckets-", dir=path.parent) as tmp:
        folder = Path(tmp)
        feats = None if rated is None else _InputFile(folder / "judge-inputs.f64")
        for lo, arr in _bucket_arrays(path, ids, rubric_ids, stats, folder, size, n_buckets):
            hi = lo + len(arr.example_ids)
            if feats is not None:
                feats.add(arr.features()[rated[lo:hi]])
            for chunk in scorer.iter_score_probes(arr, examples[lo:hi], chunk_size=chunk_size):
                if on_result is not None:
                    for res in chunk:
                        on_result(res)
                cols.add(chunk)
            del arr
            chunk = res = None  # the last chunk's results (about 17 KB a text) are not kept past the loop
        cols.finish()
        if feats is None:
            return cols, None
        feats.close()
        row_of = np.cumsum(rated) - 1  # a rated text's row in the inputs file

        def inputs(which: np.ndarray) -> _Inputs:
            return _Inputs(feats.rows(row_of[which]))

        preds = [judge_predictions(scorer, inputs, examples, ids, q, aspect=aspect) for q, aspect in questions]
    #: Each other calibrated aspect's per-judge predictions (``{aspect: {judge: per-text array}}``).
    cols.aspect_judges = {q: p for (q, aspect), p in zip(questions, preds) if aspect is not None}
    return cols, preds[0]


def judge_predictions(scorer: Any, inputs: Callable[[np.ndarray], Any], examples: Sequence[Example],
                      ids: Sequence[str], question: str, *, aspect: str | None = None) -> dict[str, np.ndarray]:
    """For each judge who rated ``question`` on ``examples``: the calibrated prediction (of ``aspect``'s
    head; None: the main one) for that judge on the texts they rated, NaN elsewhere; predicted
    :data:`JUDGE_ROWS` of those texts at a time (the numbers of one batch). ``inputs(rated)``: the
    probe arrays ``scorer.predict_probes`` takes those texts' rows from (the arrays of every text, or
    :class:`_Inputs` of just those rows)."""
    judges, ratings = judge_ratings(examples, question)
    rated_by = [np.flatnonzero(np.isfinite(ratings[:, k])) for k in range(len(judges))]
    del ratings
    judge_pred: dict[str, np.ndarray] = {}
    for name, rated in zip(judges, rated_by):  # only the texts this judge rated (many raters, few texts each)
        pred = np.full(len(examples), np.nan)
        for lo in range(0, len(rated), JUDGE_ROWS):
            part = rated[lo:lo + JUDGE_ROWS]
            # a held-out judge the calibrator has not seen is predicted with the shared weights
            pred[part] = scorer.predict_probes(inputs(part), [ids[i] for i in part.tolist()], judge=name,
                                               unseen_judge="shared",
                                               **({"aspect": aspect} if aspect is not None else {}))
        judge_pred[name] = pred
    return judge_pred


def _judge_questions(scorer: Any) -> list[tuple[str, str | None]]:
    """``(question, aspect)`` of every calibrated question whose judges are predicted: the main one
    (aspect None), then each other aspect's head."""
    if scorer.calibrator is None:
        return []
    return [(scorer.question, None), *((q, q) for q in getattr(scorer, "heads", {}))]


def _rated_any(examples: Sequence[Example], questions: Sequence[str]) -> np.ndarray:
    """Per text: whether some judge rated one of ``questions`` on it (its inputs are then kept)."""
    out = np.zeros(len(examples), dtype=bool)
    for q in questions:
        _, ratings = judge_ratings(examples, q)
        if ratings.size:
            out |= np.isfinite(ratings).any(axis=1)
    return out


def _bucket_arrays(path: Path, ids: list[str], rubric_ids: list[str], stats: Any, folder: Path, size: int,
                   n_buckets: int):
    """``(first position, probe arrays)`` of each bucket of held-out texts, in order: equal to the rows
    of one store of the whole table (``ProbeTable.scan(path, rubric_ids, ids).arrays(ids)``)."""
    if n_buckets == 1:  # one read, as before buckets
        arrays = ProbeTable.scan(path, rubric_ids, ids, on_record=stats.add).arrays(ids)
        stats.finish()  # every record read: the checks' values reduced before the texts are scored
        yield 0, arrays
        return
    k = 1  # the widest answer scale of any record in the table (a store pads its arrays to it)
    for rec in iter_records(path):  # every line read and checked before any bucket is written
        stats.add(rec)
        k = max(k, len(rec.answers))
    stats.finish()
    buckets = write_buckets(path, folder, n_buckets, _router(ids, size))
    for b, bucket in enumerate(buckets):
        group = ids[b * size:(b + 1) * size]
        store = read_bucket(bucket, path, rubric_ids, group)
        store.k = max(store.k, k)
        arrays = store.arrays(group)
        del store
        yield b * size, arrays
        del arrays


def _router(ids: Sequence[str], size: int) -> Callable[[str], int | list[int] | None]:
    """``route(example_id)``: the bucket(s) of held-out positions ``size`` at a time that hold the text
    (several when its id repeats across buckets; None when it is not held out)."""
    first: dict[str, int] = {}
    more: dict[str, list[int]] = {}
    for pos, ex_id in enumerate(ids):
        b = pos // size
        f = first.setdefault(ex_id, b)
        if f != b:
            seen = more.setdefault(ex_id, [f])
            if seen[-1] != b:
                seen.append(b)
    if not more:
        return first.get
    return lambda ex_id: more.get(ex_id) or first.get(ex_id)


class _Inputs:
    """Stands in for the probe arrays of some texts in ``scorer.predict_probes``, which takes their rows
    (``take``) and reads their calibration inputs (``features``): here those inputs themselves,
    ``[texts, rubrics, answers]`` float64, already in the rows and rubric order asked for."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def take(self, example_ids: Any = None, rubric_ids: Any = None) -> _Inputs:
        return self

    def features(self) -> np.ndarray:
        return self.x


class _InputFile:
    """Calibration inputs appended row by row to a float64 file, read back by row (a block at a time)."""

    def __init__(self, path: Path) -> None:
        self.path, self.n, self.shape = path, 0, None
        self._fh = path.open("wb")

    def add(self, x: np.ndarray) -> None:
        self.shape = x.shape[1:]
        np.ascontiguousarray(x, dtype=np.float64).tofile(self._fh)
        self.n += len(x)

    def close(self) -> None:
        self._fh.close()

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` (ascending) of the file, as a ``[rows, *shape]`` array: the span from the first
        to the last read a block of rows at a time (a judge's chunk of texts reads its span only)."""
        shape = tuple(self.shape or (0,))
        width = int(np.prod(shape))
        out = np.empty((len(rows), *shape))
        with self.path.open("rb") as fh:
            a = 0
            while a < len(rows):
                start = int(rows[a])
                stop = min(self.n, start + _READ_ROWS, int(rows[-1]) + 1)
                b = int(np.searchsorted(rows, stop))
                fh.seek(start * width * 8)
                block = np.fromfile(fh, dtype=np.float64, count=(stop - start) * width).reshape(stop - start, *shape)
                out[a:b] = block[rows[a:b] - start]
                a = b
        return out
