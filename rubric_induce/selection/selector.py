"""RUBICON's greedy rubric selector (Algorithm 1) and the estimator base the baselines share.

Objective and its sign
----------------------
The paper calls both terms "losses" and writes ``argmax Loss(R_S + r)`` with
``Loss = LC + alpha * LS`` in Algorithm 1, while the text says the chosen rubric *minimises* the
weighted sum. Taken literally either way one term pulls the wrong way: the correctness term
``LC = mean NetSAT(C+) - mean NetSAT(C-)`` is a separation (larger is better) and the sharpness
term ``LS`` is an error between the precision curves and their tanh steps (smaller is better).
We therefore maximise

    J(R) = LC(R) - alpha * LS(R),    alpha > 0

i.e. minimise ``-LC + alpha * LS``: larger separation and sharper precision curves both win,
which is what §3.3 motivates and what Table 3 reports (the full objective trades a little
ΔNetSAT for a higher YieldRate). ``alpha = 0`` is the CorrectnessLoss ablation.

Greedy growth adds, at each step, the open rubric that maximises ``J`` of the grown set; a
polarity stops taking rubrics once its budget (``n_sat`` / ``n_dsat``) is reached, and the loop
stops when both are reached or the pool runs dry (the paper adds no early stop). Ties go to the
rubric that comes first in the pool. The threshold is the midpoint of the class means of NetSAT.

Scale of alpha: ``LC`` is in NetSAT points and grows with the set, ``LS`` is a bounded error
(the paper elides the scaling factors), so the alpha at which sharpness matters is large (tens
to thousands for sets of 4-10 rubrics); :data:`DEFAULT_ALPHAS` spans 0.1-3000 for that reason.
A greedy limitation that no alpha removes: a lone one-sided rubric (a SAT rubric that fires
precisely on a few positives) is never sharp by itself, since only one of the two precision
curves can rise, so the first pick goes to a broad rubric even when precise ones are better.

Speed: NetSAT of the current set is kept per example and every candidate's correctness is
``LC + d_r`` with ``d_r`` precomputed; the sharpness of all candidates is one vectorised block
computation per step (:func:`~rubric_induce.selection.precision.sharpness_error`).
``incremental=False`` recomputes everything from the raw score matrix for each candidate (the
reference the tests and the benchmark compare against).
"""
from __future__ import annotations

import dataclasses
import itertools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError, NotFittedError, RubricInduceError
from rubric_induce.core.estimator import Estimator
from rubric_induce.data.labels import is_binary
from rubric_induce.data.model import Example, Rubric
from rubric_induce.data.probe_arrays import ProbeArrays
from rubric_induce.data.probes import ProbeTable
from rubric_induce.selection.metrics import classification_metrics, delta_netsat, yield_rate
from rubric_induce.selection.precision import sharpness_error
from rubric_induce.selection.scores import SelectionInput, netsat, prepare_inputs, unit_scores

__all__ = [
    "NotFittedError",
    "SelectionWarning",
    "GreedyResult",
    "greedy_select",
    "midpoint_threshold",
    "BaseSelector",
    "RubiconSelector",
    "CV_SCORINGS",
]

CV_SCORINGS = ("yield_accuracy", "yield_rate", "accuracy", "delta_netsat")
# The CV grid must reach the alphas where sharpness can outvote correctness. Between two
# candidates, the correctness term differs by their single-rubric separations (NetSAT points,
# about 0.5-1 on planted pools where the terms disagree) while the sharpness loss lives on [0, 4]
# and one added rubric moves it by about 0.1 once the set holds a few rubrics; so alpha has to
# reach 10-1000 before sharpness decides anything, and the old grid's top (100) was CV's choice
# whenever sharpness mattered (experiments/bench/selection_sharpness.py, issue 18).
DEFAULT_ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)


class SelectionWarning(UserWarning):
    """Selection ran, but on input that limits what it could do (small pool, tiny class, ...)."""


def midpoint_threshold(scores: np.ndarray, y: np.ndarray) -> float:
    """RUBICON's GetThreshold: halfway between the mean NetSAT of positives and of negatives."""
    y = np.asarray(y).astype(bool)
    return float((scores[y].mean() + scores[~y].mean()) / 2)


@dataclass
class GreedyResult:
    """Chosen pool indices in the order they were added, and one history row per step."""

    selected: list[int]
    history: list[dict[str, Any]] = field(default_factory=list)


def _budget_open(signs: np.ndarray, used_sat: int, used_dsat: int, n_sat: int, n_dsat: int) -> np.ndarray:
    return np.where(signs > 0, used_sat < n_sat, used_dsat < n_dsat)


@dataclass(frozen=True)
class GreedyOptions:
    """How :func:`greedy_select` scores candidates: the sharpness term's shape (``n_bins``,
    ``tanh_width``, ``two_sided``; see :mod:`.precision`), and running sums over blocks of about
    ``block_elems`` values (``incremental``) or each candidate's sum from scratch."""

    n_bins: int = 64
    tanh_width: float = 1.0
    two_sided: bool = False
    incremental: bool = True
    block_elems: int = 1 << 20


def greedy_select(signed: np.ndarray, y: np.ndarray, signs: np.ndarray, *, alpha: float, n_sat: int, n_dsat: int,
                  options: GreedyOptions | None = None, **overrides: Any) -> GreedyResult:
    """Algorithm 1 on a signed score matrix [examples, rubrics] with 0/1 labels ``y``.

    Maximises ``LC - alpha * LS`` at each step (see the module docstring for the sign).
    ``options`` (a :class:`GreedyOptions`; its fields may also be given as keywords, which win).
    """
    opts = dataclasses.replace(options or GreedyOptions(), **overrides)
    n_bins, tanh_width, two_sided = opts.n_bins, opts.tanh_width, opts.two_sided
    incremental, block_elems = opts.incremental, opts.block_elems
    yb = np.asarray(y).astype(bool)
    signed = np.asarray(signed, dtype=float)
    m = signed.shape[1]
    xp = np.ascontiguousarray(signed[yb].T)    # [rubrics, positives]
    xn = np.ascontiguousarray(signed[~yb].T)   # [rubrics, negatives]
    mean_p, mean_n = xp.mean(axis=1), xn.mean(axis=1)
    gain, half = mean_p - mean_n, (mean_p + mean_n) / 2
    cur_p, cur_n = np.zeros(xp.shape[1]), np.zeros(xn.shape[1])
    lc, center = 0.0, 0.0
    available = np.ones(m, dtype=bool)
    used_sat = used_dsat = 0
    out = GreedyResult([])
    while True:
        cand = np.flatnonzero(available & _budget_open(signs, used_sat, used_dsat, n_sat, n_dsat))
        if cand.size == 0:
            break
        k = len(out.selected) + 1
        if incremental:
            corr = lc + gain[cand]
            cen = center + half[cand]
            sharp = np.zeros(cand.size)
            if alpha > 0:
                step = max(1, block_elems // max(1, signed.shape[0]))
                for b in range(0, cand.size, step):
                    sl = cand[b:b + step]
                    bp = xp[sl]
                    bp += cur_p
                    bn = xn[sl]
                    bn += cur_n
                    sharp[b:b + step] = sharpness_error(bp, bn, cen[b:b + step], k, n_bins=n_bins,
                                                        width=tanh_width, two_sided=two_sided)
        else:
            corr, cen, sharp = (np.empty(cand.size) for _ in range(3))
            for i, r in enumerate(cand):
                s = signed[:, out.selected + [int(r)]].sum(axis=1)
                sp, sn = s[yb], s[~yb]
                corr[i] = sp.mean() - sn.mean()
                cen[i] = (sp.mean() + sn.mean()) / 2
                sharp[i] = (sharpness_error(sp[None], sn[None], cen[i:i + 1], k, n_bins=n_bins,
                                            width=tanh_width, two_sided=two_sided)[0]
                            if alpha > 0 else 0.0)
        objective = corr - alpha * sharp
        best = int(np.argmax(objective))  # first maximum: ties go to the earlier pool rubric
        r = int(cand[best])
        out.selected.append(r)
        available[r] = False
        if signs[r] > 0:
            used_sat += 1
        else:
            used_dsat += 1
        cur_p += xp[r]
        cur_n += xn[r]
        lc, center = float(corr[best]), float(cen[best])
        out.history.append({"step": k, "rubric": r, "polarity": "SAT" if signs[r] > 0 else "DSAT",
                            "correctness": lc, "sharpness": float(sharp[best]),
                            "objective": float(objective[best]), "threshold": center,
                            "n_candidates": int(cand.size)})
    return out


def _stratified_folds(y: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold number of every example, each class spread evenly over the folds."""
    fold = np.empty(len(y), dtype=int)
    for cls in (0, 1):
        idx = rng.permutation(np.flatnonzero(y == cls))
        fold[idx] = np.arange(len(idx)) % n_folds
    return fold


class BaseSelector(Estimator):
    """Shared estimator shape: ``fit`` -> self, ``selected_``, ``threshold_``, NetSAT predictions.

    Subclasses implement ``_select(inp) -> (indices, info)``. ``fit`` accepts an [examples,
    rubrics] array of unsigned [0, 10] scores plus 0/1 labels and ``polarity``, or a ProbeTable /
    ProbeArrays with ``rubrics=`` and the Examples as labels (``label=`` names the label key).
    """

    _binary_labels = True

    def __init__(self, n_sat: int = 10, n_dsat: int = 10, score: str = "expected",
                 random_state: int = 0) -> None:
        self.n_sat = n_sat
        self.n_dsat = n_dsat
        self.score = score
        self.random_state = random_state

    # -- fitting -----------------------------------------------------------------------------
    def _check_budgets(self) -> None:
        if self.n_sat < 0 or self.n_dsat < 0 or self.n_sat + self.n_dsat < 1:
            raise RubricInduceError(f"budgets must be >= 0 and sum to >= 1, got n_sat={self.n_sat}, "
                                    f"n_dsat={self.n_dsat}")

    def _warn_budget_shortfall(self, signs: np.ndarray) -> None:
        n_sat_pool, n_dsat_pool = int((signs > 0).sum()), int((signs < 0).sum())
        short = []
        if n_sat_pool < self.n_sat:
            short.append(f"{n_sat_pool} SAT rubric(s) for n_sat={self.n_sat}")
        if n_dsat_pool < self.n_dsat:
            short.append(f"{n_dsat_pool} DSAT rubric(s) for n_dsat={self.n_dsat}")
        if short:
            warnings.warn(f"the pool holds only {' and '.join(short)}; every rubric of that polarity "
                          "is a candidate and the set will be smaller than the budget (set the "
                          "budget to the pool size to silence this)", SelectionWarning, stacklevel=3)

    def fit(self, X: np.ndarray | ProbeTable | ProbeArrays,
            y: np.ndarray | Sequence[float] | Sequence[Example], *,
            polarity: Sequence[Any] | np.ndarray | None = None,
            rubrics: Sequence[Rubric] | None = None, label: str = "sat") -> BaseSelector:
        """Select rubrics on training data; returns self."""
        self._check_budgets()
        inp = prepare_inputs(X, y, polarity=polarity, rubrics=rubrics, label=label, score=self.score,
                             binary=self._binary_labels)
        self._warn_budget_shortfall(inp.signs)
        selected, info = self._select(inp)
        self._finish(inp, selected, info)
        return self

    def _select(self, inp: SelectionInput) -> tuple[list[int], dict[str, Any]]:
        raise NotImplementedError

    def _finish(self, inp: SelectionInput, selected: list[int], info: dict[str, Any]) -> None:
        self.n_features_in_ = inp.scores.shape[1]
        self.rubric_ids_ = list(inp.rubric_ids)
        self.signs_ = inp.signs.copy()
        self.selected_ = np.asarray(selected, dtype=int)
        self.selected_ids_ = [inp.rubric_ids[j] for j in selected]
        self.selected_rubrics_ = [inp.rubrics[j] for j in selected] if inp.rubrics is not None else None
        self.history_ = info.get("history", [])
        train = netsat(inp.signed, self.selected_)
        y = inp.y
        binary = y is not None and is_binary(y)
        self.threshold_ = midpoint_threshold(train, y) if binary else None
        self.train_delta_netsat_ = delta_netsat(train, y) if binary else float("nan")
        if binary and np.ptp(train) == 0:
            warnings.warn("every training example gets the same NetSAT from the selected rubrics "
                          "(constant scores): no threshold separates the classes, and predict() "
                          "calls every example negative", SelectionWarning, stacklevel=3)
        elif binary and not self.train_delta_netsat_ > 0:
            warnings.warn(f"the selected set does not separate the classes on training data "
                          f"(ΔNetSAT = {self.train_delta_netsat_:.3g} <= 0)", SelectionWarning, stacklevel=3)

    # -- prediction ---------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "selected_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call "
                                 "fit(scores, labels, polarity=...) first")

    def _selected_signed(self, X: np.ndarray | ProbeTable | ProbeArrays,
                         examples: Sequence[Example] | None = None) -> np.ndarray:
        if isinstance(X, (ProbeTable, ProbeArrays)):
            if self.selected_rubrics_ is None:
                raise RubricInduceError("this selector was fitted on plain arrays; pass a score "
                                        "array with the pool's columns")
            ids = [ex.id for ex in examples] if examples is not None else None
            if ids is None and isinstance(X, ProbeTable):
                ids = list(dict.fromkeys(r.example_id for r in X.records))
            scores = unit_scores(X, self.selected_rubrics_, example_ids=ids, score=self.score)
            return scores * self.signs_[self.selected_][None, :]
        scores = np.asarray(X, dtype=float)
        if scores.ndim != 2 or scores.shape[1] != self.n_features_in_:
            raise DataError(f"expected scores of shape [examples, {self.n_features_in_}] (the whole "
                            f"pool, in fit's column order), got {scores.shape}", field="scores")
        return scores[:, self.selected_] * self.signs_[self.selected_][None, :]

    def decision_function(self, X: np.ndarray | ProbeTable | ProbeArrays,
                          examples: Sequence[Example] | None = None) -> np.ndarray:
        """NetSAT of every example under the selected set."""
        self._check_fitted()
        return self._selected_signed(X, examples).sum(axis=1)

    def predict(self, X: np.ndarray | ProbeTable | ProbeArrays,
                examples: Sequence[Example] | None = None) -> np.ndarray:
        """1 where NetSAT > threshold_ (RUBICON's rule), else 0."""
        self._check_fitted()
        if self.threshold_ is None:
            raise RubricInduceError(f"{type(self).__name__} was fitted on non-binary labels and has "
                                    "no threshold; use decision_function")
        return (self.decision_function(X, examples) > self.threshold_).astype(int)


class RubiconSelector(BaseSelector):
    """Greedy correctness + sharpness selection with separate SAT and DSAT budgets (RUBICON §3.3).

    ``alpha=None`` picks alpha (and, with ``budgets``, the (n_sat, n_dsat) pair) by ``cv``-fold
    stratified cross-validation on the training data over the grid ``alphas``, scoring each
    setting by ``cv_scoring`` on the held-out folds: ``yield_accuracy`` (mean of YieldRate@
    ``precision`` and accuracy, the default: both of RUBICON's goals), ``yield_rate``,
    ``accuracy`` or ``delta_netsat``. Ties go to the earlier grid point. ``n_bins``,
    ``tanh_width`` and ``two_sided`` shape the sharpness term (see :mod:`.precision`).

    Learned: ``selected_`` (pool indices in order of addition), ``selected_ids_``,
    ``threshold_``, ``alpha_``, ``n_sat_``/``n_dsat_``, ``history_`` (one row per step),
    ``cv_results_`` (one row per grid point, None without CV).
    """

    DEFAULT_ALPHA = 1.0

    def __init__(  # noqa: PLR0913 (a scikit-learn estimator: each setting is a constructor parameter)
        self,
        alpha: float | None = None,
        n_sat: int = 10,
        n_dsat: int = 10,
        score: str = "expected",
        cv: int = 5,
        alphas: Sequence[float] = DEFAULT_ALPHAS,
        budgets: Sequence[tuple[int, int]] | None = None,
        cv_scoring: str = "yield_accuracy",
        precision: float = 0.9,
        n_bins: int = 64,
        tanh_width: float = 1.0,
        two_sided: bool = False,
        random_state: int = 0,
    ) -> None:
        super().__init__(n_sat=n_sat, n_dsat=n_dsat, score=score, random_state=random_state)
        self.alpha = alpha
        self.cv = cv
        self.alphas = alphas
        self.budgets = budgets
        self.cv_scoring = cv_scoring
        self.precision = precision
        self.n_bins = n_bins
        self.tanh_width = tanh_width
        self.two_sided = two_sided

    def _greedy(self, signed: np.ndarray, y: np.ndarray, signs: np.ndarray, alpha: float,
                n_sat: int, n_dsat: int) -> GreedyResult:
        return greedy_select(signed, y, signs, alpha=alpha, n_sat=n_sat, n_dsat=n_dsat,
                             n_bins=self.n_bins, tanh_width=self.tanh_width, two_sided=self.two_sided)

    def _cv_score(self, s_val: np.ndarray, y_val: np.ndarray, threshold: float) -> float:
        if self.cv_scoring == "yield_rate":
            return yield_rate(s_val, y_val, self.precision)
        if self.cv_scoring == "accuracy":
            return classification_metrics(y_val, s_val > threshold)["accuracy"]
        if self.cv_scoring == "delta_netsat":
            return delta_netsat(s_val, y_val)
        return (yield_rate(s_val, y_val, self.precision)
                + classification_metrics(y_val, s_val > threshold)["accuracy"]) / 2

    def _cross_validate(self, signed: np.ndarray, y: np.ndarray, signs: np.ndarray,
                        grid: list[tuple[float, int, int]]) -> list[dict[str, Any]] | None:
        min_class = int(min((y == 1).sum(), (y == 0).sum()))
        n_folds = min(int(self.cv), min_class)
        if n_folds < 2:
            fallback = self.alpha if self.alpha is not None else self.DEFAULT_ALPHA
            warnings.warn(f"cross-validation needs >= 2 examples of each class, the smaller class has "
                          f"{min_class}; using alpha={fallback:g}, n_sat={self.n_sat}, "
                          f"n_dsat={self.n_dsat} without CV", SelectionWarning, stacklevel=4)
            return None
        if n_folds < self.cv:
            warnings.warn(f"the smaller class has {min_class} examples: {n_folds}-fold instead of "
                          f"{self.cv}-fold cross-validation", SelectionWarning, stacklevel=4)
        folds = _stratified_folds(y, n_folds, np.random.default_rng(self.random_state))
        rows = []
        for alpha, n_sat, n_dsat in grid:
            scores = []
            for f in range(n_folds):
                tr, va = folds != f, folds == f
                res = self._greedy(signed[tr], y[tr], signs, alpha, n_sat, n_dsat)
                thr = midpoint_threshold(netsat(signed[tr], res.selected), y[tr])
                scores.append(self._cv_score(netsat(signed[va], res.selected), y[va], thr))
            rows.append({"alpha": alpha, "n_sat": n_sat, "n_dsat": n_dsat,
                         "score": float(np.nanmean(scores)), "fold_scores": [float(s) for s in scores]})
        return rows

    def _select(self, inp: SelectionInput) -> tuple[list[int], dict[str, Any]]:
        if self.cv_scoring not in CV_SCORINGS:
            raise RubricInduceError(f"unknown cv_scoring {self.cv_scoring!r}; choose from {CV_SCORINGS}")
        if self.alpha is not None and self.alpha < 0:
            raise RubricInduceError(f"alpha must be >= 0, got {self.alpha}")
        signed, y, signs = inp.signed, inp.y, inp.signs
        budgets = list(self.budgets) if self.budgets else [(self.n_sat, self.n_dsat)]
        alphas = [self.alpha] if self.alpha is not None else [float(a) for a in self.alphas]
        if not alphas:
            raise RubricInduceError("alphas is empty; give alpha=... or a grid of alphas")
        grid = [(a, ns, nd) for a, (ns, nd) in itertools.product(alphas, budgets)]
        self.cv_results_ = None
        if len(grid) == 1:
            alpha, n_sat, n_dsat = grid[0]
        else:
            self.cv_results_ = self._cross_validate(signed, y, signs, grid)
            if self.cv_results_ is None:
                alpha = self.alpha if self.alpha is not None else self.DEFAULT_ALPHA
                n_sat, n_dsat = self.n_sat, self.n_dsat
            else:
                cv_scores = [r["score"] if np.isfinite(r["score"]) else -np.inf for r in self.cv_results_]
                best = max(range(len(grid)), key=lambda i: (cv_scores[i], -i))
                alpha, n_sat, n_dsat = grid[best]
        self.alpha_, self.n_sat_, self.n_dsat_ = float(alpha), int(n_sat), int(n_dsat)
        res = self._greedy(signed, y, signs, self.alpha_, self.n_sat_, self.n_dsat_)
        return res.selected, {"history": res.history}
