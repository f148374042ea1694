"""Hyperparameter search (optuna) and cross-validation, always split by text.

:func:`search_hyperparameters` maximises the held-out log-likelihood of the main question,
averaged over ``n_splits`` folds of the *texts* (every row of a text stays in one fold), over
hidden sizes, learning rate, batch size, the epochs of each phase and weight decay (the paper's
grid, §4, plus decay). :func:`cross_val_predict` gives out-of-fold predictions; with
``search=True`` each outer fold runs its own inner search on its training part only (nested
cross-validation, paper footnote 12), so reported figures never see their test texts.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rubric_induce.calibration.calibrator import Calibrator
from rubric_induce.calibration.data import CalibrationData
from rubric_induce.core.errors import MissingDependencyError

__all__ = [
    "group_kfold",
    "cv_log_likelihood",
    "search_hyperparameters",
    "cross_val_predict",
    "SEARCH_SPACE",
    "SearchResult",
]

# Paper §4 grid (hidden sizes, batch sizes, learning rates, epochs) plus weight decay.
SEARCH_SPACE: dict[str, tuple] = {
    "hidden1": (10, 25, 50, 100),
    "hidden2": (10, 25, 50, 100),
    "batch_size": (32, 64, 128, 256),
    "learning_rate": (1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2),
    "pretrain_epochs": (5, 10, 20, 30, 40, 50),
    "finetune_epochs": (5, 10, 20, 30, 40, 50),
    "weight_decay": (0.0, 1e-3, 1e-2, 1e-1),
}


def group_kfold(n_groups: int, n_splits: int = 5, seed: int = 0) -> list[np.ndarray]:
    """Shuffled fold id per group (text): ``n_splits`` folds of as-equal-as-possible size."""
    if n_splits < 2:
        raise ValueError("n_splits must be >= 2")
    if n_groups < n_splits:
        raise ValueError(f"cannot make {n_splits} folds from {n_groups} texts")
    order = np.random.default_rng(seed).permutation(n_groups)
    fold = np.empty(n_groups, dtype=np.int64)
    fold[order] = np.arange(n_groups) % n_splits
    return [np.flatnonzero(fold == k) for k in range(n_splits)]


def _fit(est: Calibrator, data: CalibrationData) -> Calibrator:
    X, J, Y, kw = data.fit_args()
    return est.fit(X, J, Y, **kw)


def cv_log_likelihood(est: Calibrator, data: CalibrationData, n_splits: int = 5, seed: int = 0) -> float:
    """Mean held-out log-likelihood per main-question answer, over text folds."""
    total, count = 0.0, 0
    for test_texts in group_kfold(len(data.text_ids), n_splits, seed):
        train_texts = np.setdiff1d(np.arange(len(data.text_ids)), test_texts)
        tr, te = data.subset_texts(train_texts), data.subset_texts(test_texts)
        fitted = _fit(est.clone(), tr)
        q = fitted.main_question_index_
        y = te.targets[:, q]
        ok = np.isfinite(y) & ~np.isin(y, te.not_applicable)
        if not ok.any():
            continue
        ll = fitted.log_likelihood(te.row_X[ok], te.row_judge[ok], y[ok], question=q)
        total += ll * ok.sum()
        count += int(ok.sum())
    return total / count if count else float("nan")


class SearchResult(dict):
    """``best_params`` (Calibrator parameters), ``best_value`` (CV log-lik), ``trials``."""


def _params_from_trial(trial, space: Mapping[str, tuple]) -> dict[str, Any]:
    p = {k: trial.suggest_categorical(k, list(v)) for k, v in space.items()}
    return _to_calibrator_params(p)


def _to_calibrator_params(p: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(p)
    if "hidden1" in out or "hidden2" in out:
        out["hidden"] = (int(out.pop("hidden1", 25)), int(out.pop("hidden2", 25)))
    return out


def search_hyperparameters(
    base: Calibrator,
    data: CalibrationData,
    *,
    n_trials: int = 20,
    n_splits: int = 5,
    seed: int = 0,
    space: Mapping[str, tuple] | None = None,
    timeout: float | None = None,
    callback: Callable[[int, dict[str, Any], float], None] | None = None,
) -> SearchResult:
    """Optuna TPE search (seeded) of ``space`` by ``n_splits``-fold CV log-likelihood (by text)."""
    try:
        import optuna
    except ImportError as exc:
        raise MissingDependencyError("optuna", "hyperparameter search", extra="calibrate") from exc
    space = dict(SEARCH_SPACE if space is None else space)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(1, min(8, n_trials // 2)))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    # Start from the base estimator's own setting, so the search can only improve on it.
    first = {k: getattr(base, k) for k in space if hasattr(base, k)}
    if "hidden1" in space and "hidden2" in space:
        first["hidden1"], first["hidden2"] = (int(h) for h in base.hidden)
    if all(first.get(k) in v for k, v in space.items()):
        study.enqueue_trial(first)

    def objective(trial) -> float:
        params = _params_from_trial(trial, space)
        value = cv_log_likelihood(base.clone(**params), data, n_splits=n_splits, seed=seed)
        if callback is not None:
            callback(trial.number, params, value)
        return value if np.isfinite(value) else -1e9

    study.optimize(objective, n_trials=int(n_trials), timeout=timeout)
    best = _to_calibrator_params(study.best_trial.params)
    trials = [{"params": _to_calibrator_params(t.params), "value": t.value} for t in study.trials]
    return SearchResult(best_params=best, best_value=float(study.best_value), trials=trials)


def cross_val_predict(  # noqa: PLR0913 (scikit-learn's cross_val_predict shape: estimator, data, then the CV settings)
    base: Calibrator,
    data: CalibrationData,
    *,
    n_splits: int = 5,
    seed: int = 0,
    search: bool = False,
    n_trials: int = 10,
    inner_splits: int = 5,
    make_model: Callable[[CalibrationData], Any] | None = None,
    predict: Callable[[Any, CalibrationData], np.ndarray] | None = None,
    n_jobs: int = 1,
) -> dict[str, Any]:
    """Out-of-fold predictions of the main question for every row (folds by text).

    ``search=True``: nested CV, an inner search per outer fold on that fold's training texts.
    ``make_model(train_data)`` / ``predict(model, test_data)`` override what is fitted and how
    it predicts (baselines); by default the (searched) ``base`` calibrator, predicting each
    row's own judge. Returns ``{"pred", "proba" (or None), "fold", "params"}``.
    """
    n_rows = data.n_rows
    pred = np.full(n_rows, np.nan)
    proba: np.ndarray | None = None
    fold_of_row = np.full(n_rows, -1)
    folds = group_kfold(len(data.text_ids), n_splits, seed)
    jobs = [(k, test_texts) for k, test_texts in enumerate(folds)]
    if make_model is None and predict is None and n_jobs > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("spawn")  # a fresh interpreter: no torch state shared with the parent
        with ProcessPoolExecutor(max_workers=min(n_jobs, len(jobs)), mp_context=ctx) as pool:
            results = list(pool.map(_outer_fold, [(base, data, t, search, n_trials, inner_splits, seed + k)
                                                  for k, t in jobs]))
    else:
        results = [_outer_fold((base, data, t, search, n_trials, inner_splits, seed + k), make_model, predict)
                   for k, t in jobs]
    params_per_fold = []
    for (k, test_texts), (fold_pred, fold_proba, params) in zip(jobs, results):
        # subset_texts keeps rows in their original order, so ``rows`` aligns with the fold's rows.
        rows = np.flatnonzero(np.isin(data.row_text, test_texts))
        pred[rows] = fold_pred
        if fold_proba is not None:
            if proba is None:
                proba = np.full((n_rows, fold_proba.shape[1]), np.nan)
            proba[rows] = fold_proba
        fold_of_row[rows] = k
        params_per_fold.append(params)
    return {"pred": pred, "proba": proba, "fold": fold_of_row, "params": params_per_fold}


def _outer_fold(args, make_model=None, predict=None):
    """Fit on every text but ``test_texts`` (searching first when asked); predict the rest."""
    base, data, test_texts, search, n_trials, inner_splits, seed = args
    train_texts = np.setdiff1d(np.arange(len(data.text_ids)), test_texts)
    tr, te = data.subset_texts(train_texts), data.subset_texts(test_texts)
    params: dict[str, Any] = {}
    if make_model is not None:
        model = make_model(tr)
    else:
        est = base.clone()
        if search:
            params = search_hyperparameters(est, tr, n_trials=n_trials, n_splits=inner_splits, seed=seed)["best_params"]
            est = est.clone(**params)
        model = _fit(est, tr)
    if predict is not None:
        return predict(model, te), None, params
    return (model.predict(te.row_X, judge_ids=te.row_judge),
            model.predict_proba(te.row_X, judge_ids=te.row_judge), params)
