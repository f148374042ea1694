"""Adaptive scoring: ask each text only the rubric questions that matter, live or replayed on probes.

The loop behind ``RubricScorer.score(..., adaptive=AdaptiveOptions(...))`` and ``score --adaptive``. All
texts advance in lockstep: at each step the :class:`~rubric_induce.calibration.policy.AskPolicy`
picks one rubric per text still going (or stops it), the chosen (text, rubric) pairs are probed
rubric by rubric through the ordinary probing path (so the call cache and bounded concurrency
apply, and a cached pair costs nothing), and the answers are fed back. The prediction is the
:class:`~rubric_induce.calibration.adaptive.AdaptiveModel`'s target distribution given the
answers observed. A failed probe counts as a call and is not asked again; its block stays unknown.

:func:`score_live` probes the chosen pairs through the scorer's backend; :func:`replay` reads them
from probes already made (what adaptive scoring would have paid for). Both hand back
``make(start, stop)``, the results of a range of texts (scoring in chunks).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.calibration.policy import AskPolicy
from rubric_induce.calibration.predict import resolve_judge
from rubric_induce.core.errors import DataError
from rubric_induce.data import Example
from rubric_induce.data.probes import ProbeTable
from rubric_induce.data.results import ScoreResult
from rubric_induce.probing.api import probe
from rubric_induce.scoring.numbers import netsat_results, require_finite
from rubric_induce.scoring.options import AdaptiveOptions, ScoreParams
from rubric_induce.scoring.surprise import block_rubrics, fit_width
from rubric_induce.selection.scores import unit_scores

__all__ = ["AdaptiveOutcome", "run_adaptive", "missing_adaptive_message", "require_adaptive", "score_live",
           "replay", "Maker"]

#: make(start, stop): the results of texts start:stop.
Maker = Callable[[int, int], list[ScoreResult]]

#: fetch(example_rows, block) -> (raw [rows, answers], probs [rows, answers], ok [rows])
Fetch = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


def missing_adaptive_message(source: str | None, calibrated: bool) -> str:
    """What to rerun when an artifact has no adaptive model."""
    where = f" ({source})" if source else ""
    if not calibrated:
        return (f"adaptive scoring needs a calibrated run, and this artifact{where} has no calibration network: "
                "rerun `rubric-induce run` with calibration on ([calibrate] enabled = true, adaptive = true) and a "
                "label to calibrate (data.label or calibrate.question)")
    return (f"this artifact's calibration{where} has no adaptive-scoring model (it was trained before adaptive "
            "scoring existed, or with calibrate.adaptive = false): rerun the calibrate stage with "
            "calibrate.adaptive = true (`rubric-induce run CONFIG --from calibrate`, or `rubric-induce calibrate "
            "... --adaptive`)")


@dataclass
class AdaptiveOutcome:
    """The loop's result: final inputs and masks, and per text the order asked and why it stopped."""

    X: np.ndarray            # [texts, blocks, answers] raw distributions (zero where not asked / failed)
    probs: np.ndarray        # [texts, blocks, answers] normalised distributions of the asked blocks
    observed: np.ndarray     # [texts, blocks] asked and read
    failed: np.ndarray       # [texts, blocks] asked, probe failed
    order: list[list[int]]   # blocks asked (failed ones included), in order
    gains: list[list[float]]
    stop: list[str]
    proba: np.ndarray        # [texts, answers] target distribution given the observed blocks
    scale: np.ndarray
    surprise: np.ndarray     # [texts] excess surprise of the answers read (AdaptiveModel.answer_surprise)

    @property
    def prediction(self) -> np.ndarray:
        return self.proba @ self.scale

    @property
    def sd(self) -> np.ndarray:
        m = self.prediction
        return np.sqrt(np.clip(self.proba @ self.scale ** 2 - m ** 2, 0.0, None))


def run_adaptive(model: Any, n_texts: int, fetch: Fetch, options: AdaptiveOptions, *, judges: Any = None,
                 on_step: Callable[[int, int], None] | None = None) -> AdaptiveOutcome:
    """Ask ``n_texts`` texts adaptively; ``fetch`` returns the answers of one block for some texts.

    ``judges``: what :meth:`AdaptiveModel.judge_rows` takes (None: shared weights; a name; a list
    of names, whose distributions are averaged). ``options``: the policy's budget, stop, criterion
    and outcomes (see :class:`~rubric_induce.calibration.policy.AskPolicy`; ``stop_at`` None: its
    scale-relative default). ``on_step(step, pairs)`` is told how many pairs each step probes.
    """
    policy = AskPolicy(model, budget=options.budget, stop_at=options.stop_at, criterion=options.criterion,
                       outcomes=options.outcomes)
    nb, k = model.n_features_in_shape_
    X = np.zeros((n_texts, nb, k))
    probs = np.zeros((n_texts, nb, k))
    observed = np.zeros((n_texts, nb), dtype=bool)
    failed = np.zeros((n_texts, nb), dtype=bool)
    n_asked = np.zeros(n_texts, dtype=np.int64)
    done = np.zeros(n_texts, dtype=bool)
    order_out: list[list[int]] = [[] for _ in range(n_texts)]
    gains: list[list[float]] = [[] for _ in range(n_texts)]
    stops = [""] * n_texts
    jrows = model.judge_rows(judges, n_texts)
    rank = None  # the adaptive order: the policy chooses each text's next rubric at every step
    step = 0
    while n_texts:
        choice, gain, stop = policy.step(X, observed, n_asked, jrows, ~failed, rank, done)
        for i, s in enumerate(stop):
            if s is not None:
                stops[i], done[i] = s, True
        go = np.flatnonzero(choice >= 0)
        if len(go) == 0:
            break
        step += 1
        if on_step is not None:
            on_step(step, len(go))
        for b in np.unique(choice[go]):
            rows = go[choice[go] == b]
            raw, pr, ok = fetch(rows, int(b))
            raw = fit_width(np.asarray(raw, dtype=np.float64), k)
            pr = fit_width(np.asarray(pr, dtype=np.float64), k)
            ok = np.asarray(ok, dtype=bool)
            X[rows[ok], b] = raw[ok]
            probs[rows[ok], b] = pr[ok]
            observed[rows[ok], b] = True
            failed[rows[~ok], b] = True
        n_asked[go] += 1
        for i in go:
            order_out[i].append(int(choice[i]))
            gains[i].append(float(gain[i]))
    proba = model.target_proba_rows(X, observed, jrows, policy.q) if n_texts else np.zeros((0, len(policy.values)))
    surprise = model.answer_surprise(X, order_out, observed) if n_texts else np.zeros(0)
    return AdaptiveOutcome(X, probs, observed, failed, order_out, gains, stops, proba, policy.values, surprise)


def require_adaptive(scorer: Any) -> None:
    """The scorer can score adaptively (its run trained an adaptive model), checked before any work."""
    if scorer.adaptive is None:
        raise DataError(missing_adaptive_message(scorer.source, scorer.calibrator is not None), field="adaptive")


def _judges(scorer: Any, params: ScoreParams) -> tuple[Any, Any]:
    """(the judges as results name them, as the model's judge rows take them)."""
    who = params.judges if params.judge is not None else (scorer.judges or None)
    if who is not None and not isinstance(who, str):
        who = list(who)
    model = scorer.calibrator if scorer.calibrator is not None else scorer.adaptive
    return who, resolve_judge(model, who, params.unseen_judge)


def score_live(scorer: Any, examples: list[Example], params: ScoreParams, *, progress: bool = False) -> Maker:
    """Adaptive scoring of texts: probe only the chosen (text, rubric) pairs, step by step, through
    the scorer's backend (its call cache and probe options)."""
    backend = scorer.require_backend()
    rubrics = scorer.rubrics
    cols = block_rubrics(scorer.adaptive, [r.id for r in rubrics], scorer.source)
    opts = scorer.scoring_options()
    records: list = []

    def fetch(rows: np.ndarray, block: int):
        rubric = rubrics[cols[block]]
        exs = [examples[i] for i in rows]
        table = probe(exs, [rubric], backend, opts.probe, fields=scorer.fields, task=scorer.task)
        records.extend(table.records)
        arr = table.arrays(example_ids=[e.id for e in exs], rubric_ids=[rubric.id])
        return arr.raw[:, 0], arr.probs[:, 0], arr.ok[:, 0]

    who, resolved = _judges(scorer, params)
    out = run_adaptive(scorer.adaptive, len(examples), fetch, params.adaptive, judges=resolved,
                       on_step=_step_echo if progress else None)
    ids = [e.id for e in examples]
    arr = ProbeTable(records=records).arrays(example_ids=ids, rubric_ids=[r.id for r in rubrics])
    return _maker(scorer, out, arr, ids, cols, who, params.answer_check)


def replay(scorer: Any, arr, ids: list[str], params: ScoreParams) -> Maker:
    """Adaptive scoring replayed on existing probes: an asked rubric is read from ``arr``."""
    cols = block_rubrics(scorer.adaptive, [r.id for r in scorer.rubrics], scorer.source)

    def fetch(rows: np.ndarray, block: int):
        j = cols[block]
        return arr.raw[rows, j], arr.probs[rows, j], arr.ok[rows, j]

    who, resolved = _judges(scorer, params)
    out = run_adaptive(scorer.adaptive, len(ids), fetch, params.adaptive, judges=resolved)
    return _maker(scorer, out, arr, ids, cols, who, params.answer_check)


def _maker(scorer: Any, out: AdaptiveOutcome, arr, ids: list[str], cols: list[int], who: Any,
           answer_check: bool) -> Maker:
    """``make(start, stop)``: the adaptive results of texts ``start:stop`` (checked finite first)."""
    rubrics = scorer.rubrics
    asked = np.zeros((len(ids), len(rubrics)), dtype=bool)
    for i, order in enumerate(out.order):
        asked[i, [cols[b] for b in order]] = True
    require_finite(ids, out.prediction, out.sd, out.proba, scorer.source)
    model = scorer.adaptive
    q = scorer.question or model.question_names_[model.main_question_index_]
    units = unit_scores(arr, rubrics, example_ids=ids, score=scorer.score_mode, fill=0.0)

    def make(start: int, stop: int) -> list[ScoreResult]:
        results = netsat_results(scorer, arr, ids, asked, units=units, rows=range(start, stop))
        for i, res in zip(range(start, stop), results):
            res.prediction, res.uncertainty = float(out.prediction[i]), float(out.sd[i])
            res.proba, res.scale = [float(p) for p in out.proba[i]], [float(v) for v in out.scale]
            res.judge, res.question = who, q
            res.asked = [rubrics[cols[b]].id for b in out.order[i]]
            res.calls_saved = len(rubrics) - len(res.asked)
            res.stop_reason = out.stop[i] or None
            res.expected_gains = [float(g) for g in out.gains[i]]
            if answer_check and np.isfinite(out.surprise[i]):
                res.answer_surprise = float(out.surprise[i])
            res.drivers.sort(key=lambda d: -abs(d.get("netsat_contribution") or 0.0))
        return results

    return make


def _step_echo(step: int, pairs: int) -> None:
    """An ``on_step`` callback printing each adaptive step's number of probes (stderr)."""
    print(f"adaptive step {step}: probing {pairs} (text, rubric) pair(s)", file=sys.stderr)
