"""The evaluate stage's one entry point: held-out metrics of a scored split (:func:`evaluate`).

Takes what the scorer produced for the held-out texts (:class:`~rubric_induce.data.results.ScoreResult`)
and their human labels; returns an :class:`EvaluationResult` that writes ``scores.jsonl`` (the
meta-evaluation score table), ``evaluation.md``, ``evaluation.json`` and ``test_scores.json``.
The steps, one per section of ``evaluation.md``, are in :mod:`rubric_induce.evaluation.sections`;
the settings (:class:`EvaluateParams`) and the run's facts (:class:`HeldoutOptions`) in
:mod:`rubric_induce.evaluation.options`. Intervals resample the split's groups
(:class:`~rubric_induce.evaluation.intervals.Intervals`).
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.mdtext import md_text
from rubric_induce.core.params import resolve_params
from rubric_induce.data import Example
from rubric_induce.data.jsonl import JsonArrayWriter, atomic_write_text, jsonable, write_json
from rubric_induce.data.probes import ProbeStore, ProbeTable
from rubric_induce.data.results import ScoreResult
from rubric_induce.evaluation.columns import ScoredColumns
from rubric_induce.evaluation.heldout_stream import judge_predictions, score_buckets
from rubric_induce.evaluation.intervals import Intervals
from rubric_induce.evaluation.judges import judge_ratings
from rubric_induce.evaluation.options import EvaluateParams, HeldoutOptions
from rubric_induce.evaluation.score_table import ScoreRow, write_scores
from rubric_induce.evaluation.sections import (
    NEAR_CONSTANT_SPREAD,
    Heldout,
    Report,
    answer_check_section,
    aspects_section,
    binary_aspect,
    calibrated_section,
    consensus_section,
    constant_warning,
    graded_section,
    human_value,
    intervals_note,
    judges_section,
    probes_section,
    selection_section,
)
from rubric_induce.probing.checks import ProbeStats

__all__ = ["EvaluateParams", "HeldoutOptions", "EvaluationResult", "evaluate", "evaluate_probes", "score_heldout",
           "score_columns", "ScoredColumns", "human_value", "binary_aspect", "constant_warning",
           "NEAR_CONSTANT_SPREAD"]


@dataclass
class EvaluationResult:
    """Held-out score rows, headline metrics and their markdown."""

    rows: Sequence[ScoreRow]
    summary: dict[str, Any]
    markdown: str
    results: list[ScoreResult] = field(default_factory=list)
    #: ``test_scores.json`` already written while scoring (:func:`evaluate_probes`): ``results`` is
    #: then empty and :meth:`save` leaves that file as it is.
    results_file: Path | None = None

    def brief(self) -> dict[str, Any]:
        """The summary without the long lists (every judge's row, every near-constant rubric), for
        the stage marker and the manifest; ``evaluation.json`` keeps everything."""
        out = dict(self.summary)
        if "judges" in out:
            j = out["judges"]
            out["judges"] = {"question": j["question"], "n_judges": j["n_judges"], "pooled": j["pooled"]}
        if "probes" in out:
            p = out["probes"]
            out["probes"] = {"n_rubrics": p["n_rubrics"], "near_constant": len(p["near_constant"]),
                             "median_mass": p["median_mass"]}
        return out

    def save(self, out: str | Path) -> list[Path]:
        """Write ``scores.jsonl``, ``evaluation.json``, ``evaluation.md`` and ``test_scores.json`` into ``out``."""
        out = Path(out)
        paths = [write_scores(out / "scores.jsonl", self.rows), write_json(out / "evaluation.json", jsonable(self.summary)),
                 atomic_write_text(out / "evaluation.md", self.markdown)]
        if self.results_file is not None and Path(self.results_file).resolve() == (out / "test_scores.json").resolve():
            paths.append(out / "test_scores.json")
        elif self.results_file is not None:
            paths.append(shutil.copyfile(self.results_file, out / "test_scores.json"))
        else:
            paths.append(write_json(out / "test_scores.json", [r.to_dict() for r in self.results]))
        return [Path(p) for p in paths]


class _Rows(Sequence):
    """The held-out score rows, made when read (a list of every row of a million texts is gigabytes)."""

    def __init__(self, make, n: int) -> None:
        self._make, self._n = make, n

    def __iter__(self):
        return iter(self._make())

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return list(self._make())[i]


def _value(v: float) -> float | None:
    return None if np.isnan(v) else float(v)


def score_heldout(scorer: Any, probes: ProbeTable, examples: Sequence[Example]
                  ) -> tuple[list[ScoreResult], dict[str, list[ScoreResult | None]] | None]:
    """What :func:`evaluate` takes from a scorer: ``(results, judge_results)``.

    ``results``: ``scorer.score_probes`` of every example (mean over the trained judges);
    ``judge_results`` (None without a calibrator): for each judge who rated the calibrated
    question on these examples, the prediction for that judge on the texts they rated (None
    elsewhere). The probes of ``examples`` are read from the table once, and each judge's texts
    are then taken from those arrays, so the time is linear in the number of examples and
    ratings, not (examples x table size).
    """

    examples = list(examples)
    arrays = probes.arrays([ex.id for ex in examples], [r.id for r in scorer.rubrics])
    results = scorer.score_probes(arrays, examples)
    if scorer.calibrator is None:
        return results, None
    judges, ratings = judge_ratings(examples, scorer.question)
    judge_results: dict[str, list[ScoreResult | None]] = {}
    for k, name in enumerate(judges):  # only the texts this judge rated (many raters, few texts each)
        rated = np.flatnonzero(np.isfinite(ratings[:, k])).tolist()
        row: list[ScoreResult | None] = [None] * len(examples)
        # a held-out judge the calibrator has not seen is predicted with the shared weights
        scored = scorer.score_probes(arrays, [examples[i] for i in rated], judge=name, unseen_judge="shared",
                                     answer_check=False)  # the check is on the texts, already in results
        for i, res in zip(rated, scored):
            row[i] = res
        judge_results[name] = row
    return results, judge_results


def score_columns(scorer: Any, probes: Any, examples: Sequence[Example], *, on_result: Any = None,
                  chunk_size: int | None = None) -> tuple[ScoredColumns, dict[str, np.ndarray] | None]:
    """:func:`score_heldout` keeping only what :func:`evaluate` reads.

    ``probes``: the :class:`~rubric_induce.data.probes.ProbeArrays` (or the
    :class:`~rubric_induce.data.probes.ProbeStore`) of the examples' probes. The results are made
    a chunk of ``chunk_size`` texts at a time (:meth:`RubricScorer.iter_score_probes`), each handed
    to ``on_result`` (the evaluate stage writes it to ``test_scores.json``) and kept as
    :class:`ScoredColumns`; each judge's predictions (calibrated runs; None otherwise) are one
    array per judge (NaN where the judge did not rate the text), predicted as
    :func:`score_heldout` predicts them. The same numbers as :func:`score_heldout`, in memory
    that grows by about 150 bytes a text beyond the probe arrays. A run with several calibrated
    aspects also gets each other aspect's per-judge predictions (``cols.aspect_judges``).
    """

    examples = list(examples)
    ids = [ex.id for ex in examples]
    arr = probes.arrays(ids) if isinstance(probes, ProbeStore) else probes
    cols = ScoredColumns()
    for chunk in scorer.iter_score_probes(arr, examples, chunk_size=chunk_size):
        if on_result is not None:
            for res in chunk:
                on_result(res)
        cols.add(chunk)
    chunk = res = None  # the last chunk's results are not kept while the judges are predicted
    if scorer.calibrator is None:
        return cols.finish(), None
    cols = cols.finish()
    judge_pred = judge_predictions(scorer, lambda rated: arr, examples, ids, scorer.question)
    #: Each other calibrated aspect's per-judge predictions (``{aspect: {judge: per-text array}}``).
    cols.aspect_judges = {q: judge_predictions(scorer, lambda rated: arr, examples, ids, q, aspect=q)
                          for q in getattr(scorer, "heads", {})}
    return cols, judge_pred


def evaluate_probes(scorer: Any, probes: ProbeTable | str | Path, examples: Sequence[Example], y: np.ndarray,
                    params: EvaluateParams | None = None, *, out: str | Path, chunk_size: int | None = None,
                    bucket_texts: int | None = None, **options: Any) -> EvaluationResult:
    """The evaluate stage in bounded memory: :func:`score_heldout`, :func:`evaluate` and
    :meth:`EvaluationResult.save` into ``out``, with the same files and numbers. A probe table file
    (``probes``: its path) is read a bucket of ``bucket_texts`` held-out texts at a time
    (:func:`~rubric_induce.evaluation.heldout_stream.score_buckets`; default
    :data:`~rubric_induce.evaluation.heldout_stream.BUCKET_TEXTS`), an in-memory ``ProbeTable``
    as arrays of every held-out text; either way the texts are scored a chunk at a time, the
    results go to ``test_scores.json`` as they come, what the metrics read is kept as per-text
    numeric columns (:class:`ScoredColumns`, each judge's predictions as one array) and the
    score rows are written one by one. ``options``: the keyword arguments of :func:`evaluate`
    (``label``, ``threshold``, ...; not ``judge_results`` nor ``probes``)."""
    examples = list(examples)
    stats = ProbeStats()  # the probe checks read every record of the table, held-out or not
    out = Path(out)
    with JsonArrayWriter(out / "test_scores.json") as writer:
        def write(res: ScoreResult) -> None:
            writer.write(res.to_dict())

        if isinstance(probes, ProbeTable):
            for rec in probes.records:
                stats.add(rec)
            stats.finish()
            arrays = ProbeStore.from_records(probes.records, [r.id for r in scorer.rubrics],
                                             [ex.id for ex in examples]).arrays([ex.id for ex in examples])
            cols, judge_pred = score_columns(scorer, arrays, examples, chunk_size=chunk_size, on_result=write)
            del arrays
        else:
            cols, judge_pred = score_buckets(scorer, probes, examples, stats, on_result=write, chunk_size=chunk_size,
                                             bucket_texts=bucket_texts)
    result = evaluate(cols, examples, y, params, judge_results=judge_pred, probes=stats, **options)
    result.results_file = out / "test_scores.json"
    result.save(out)
    return result


def evaluate(results: Sequence[ScoreResult] | ScoredColumns, examples: Sequence[Example], y: np.ndarray,
             params: EvaluateParams | None = None, options: HeldoutOptions | None = None,
             **overrides: Any) -> EvaluationResult:
    """Metrics of scored held-out ``examples``, each next to a baseline, with warnings.

    * NetSAT at ``threshold`` against the selection label ``y`` (binary), next to the majority
      class of ``train_y`` (flagged when NetSAT accuracy is not above it); for a graded ``y``,
      NetSAT's correlation with it.
    * When calibrated (``question``): the calibrated prediction and NetSAT against the human
      ``question`` with intervals, next to the constant training mean of ``question`` over ``train``.
    * The run's other calibrated questions (``aspects``): one table each.
    * Per judge (from ``Example.judgments`` of ``question``, else of ``label``): the calibrated
      prediction for that judge, NetSAT, the judge's training mean and the leave-one-judge-out
      human ceiling; a pooled row with intervals that resample texts.
    * Where several raters rated a text: agreement on the unanimous and on the split texts.
    * Warnings: near-constant probes and low answer mass in ``probes``, any metric not above its
      baseline, and the answer check (held-out texts unlike the training texts).

    Every interval resamples the examples' groups (a text without one is its own).
    ``results`` may also be :class:`ScoredColumns` (per-text arrays), ``judge_results`` values
    arrays of predictions (NaN: none) and ``probes`` a :class:`~rubric_induce.probing.checks.ProbeStats`:
    what :func:`evaluate_probes` passes, to evaluate a million texts without a result object each;
    the score rows are then made as they are written (``rows`` is a lazy sequence).

    Args:
        results: The scorer's results on the held-out ``examples`` (or :class:`ScoredColumns`).
        examples: The held-out examples, in the order of ``results``.
        y: Their selection labels (binary or graded).
        params: The stage's settings (default: :class:`EvaluateParams` defaults).
        options: The run's facts (:class:`HeldoutOptions`: label, threshold, question, seed,
            training texts, per-judge results, probes ...).
        **overrides: Fields of ``options`` (``label=``, ``threshold=``, ``binary=``,
            ``question=``, ``seed=`` ...) or of ``params``.

    Returns:
        The metrics next to their baselines, the warnings and the score rows.
    """
    opts, param_overrides = HeldoutOptions.split(options, overrides)
    params = resolve_params(EvaluateParams, params, param_overrides)
    cols = results if isinstance(results, ScoredColumns) else ScoredColumns.from_results(results)
    y = np.asarray(y, dtype=float)
    h = Heldout(cols, examples, y, params, opts,
                Intervals.of([ex.group for ex in examples], params.bootstrap, opts.seed))
    rep = Report({"n_test": len(examples), "label": opts.label, "label_threshold": opts.label_threshold,
                  "aspect": h.aspect, "question": opts.question, "baselines": {}})
    _run_steps(h, rep)
    head = (f"# Held-out evaluation\n\n{len(examples)} held-out examples (split by group, seed {opts.seed}). "
            + intervals_note(h))
    if rep.warnings:
        head += "\n## Warnings\n\n" + "".join(f"- {md_text(w)}\n" for w in rep.warnings)
    rep.summary["warnings"] = rep.warnings
    streamed = isinstance(results, ScoredColumns)
    rows: Sequence[ScoreRow] = (_Rows(lambda: _score_rows(h, rep), rep.row_count) if streamed
                                else list(_score_rows(h, rep)))
    return EvaluationResult(rows, jsonable(rep.summary), head + "".join(rep.sections),
                            [] if streamed else list(results))


def _run_steps(h: Heldout, rep: Report) -> None:
    """The sections of ``evaluation.md``, in order (each step adds to ``rep``)."""
    opts, n = h.opts, min(len(h.examples), len(h.cols), len(h.y))
    ok = np.isfinite(h.netsat)
    rep.row_count = int(np.isfinite(h.netsat[:n]).sum())
    if opts.binary and opts.threshold is not None and ok.sum() >= 2 and len(set(h.y[ok])) == 2:
        selection_section(h, rep)
    elif not opts.binary and ok.sum() >= 3 and (opts.question is None or opts.question != opts.label):
        graded_section(h, rep)
    if opts.question is not None:
        n_q = min(len(h.examples), len(h.cols), len(h.human))
        # NetSAT against the question is the same data as NetSAT against the label when they are
        # one ungraded label: its rows are written once.
        rep.row_count += n_q + (0 if opts.question == h.aspect else int(np.isfinite(h.netsat[:n_q]).sum()))
        calibrated_section(h, rep)
        if opts.aspects:
            aspects_section(h, rep)
    judges_section(h, rep)
    consensus_section(h, rep)
    if opts.probes is not None:
        probes_section(h, rep)
    answer_check_section(h, rep)


def _score_rows(h: Heldout, rep: Report) -> Iterator[ScoreRow]:
    """The held-out score rows: NetSAT against the label, then (calibrated) per text the calibrated
    row and NetSAT against the question, then the other aspects' rows."""
    examples, cols, netsat, y = h.examples, h.cols, h.netsat, h.y
    for i in range(min(len(examples), len(cols), len(y))):
        if np.isfinite(netsat[i]):
            yield ScoreRow(example_id=examples[i].id, group=examples[i].group, aspect=h.aspect, system="netsat",
                           score=float(netsat[i]), human=float(y[i]), threshold=_value(cols.threshold[i]))
    question = h.opts.question
    if question is None:
        return
    same_rows = question == h.aspect
    for i in range(min(len(examples), len(cols), len(h.human))):
        ex, hv = examples[i], h.human[i]
        yield ScoreRow(example_id=ex.id, group=ex.group, aspect=question, system="calibrated",
                       score=_value(h.pred[i]), human=None if np.isnan(hv) else float(hv),
                       probs=cols.vector("proba", i), scale=cols.vector("scale", i))
        if np.isfinite(netsat[i]) and not same_rows:
            yield ScoreRow(example_id=ex.id, group=ex.group, aspect=question, system="netsat",
                           score=float(netsat[i]), human=None if np.isnan(hv) else float(hv))
    if rep.extra is not None:
        yield from rep.extra.rows(examples, netsat)
