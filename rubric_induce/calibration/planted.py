"""Planted data for adaptive scoring: the informative rubric question differs from text to text.

The case an adaptive rubric exists for (LLM-RUBRIC Appendix B), shaped like a questionnaire with
follow-ups: every text has a hidden type (``n_types`` of them, e.g. the kind of request) that
shifts its quality, and a latent quality within the type. Block 0 (a screening question) shows the
type; block ``1 + t`` is a follow-up that reads the quality sharply *only on texts of type t*
(elsewhere its answer is noise); ``n_noise`` more blocks are always noise. Each judge answers
``round(quality + bias_judge + noise)`` on 1..4. So two well-chosen questions (the screen, then the
text's own follow-up) carry nearly all the signal, while a static order needs the screen and every
follow-up. A greedy one-step policy can find this order: the screen has the largest immediate
gain (the type shifts the quality), then the text's own follow-up.
Used by the tests and ``experiments/bench/adaptive_scoring.py``.

:func:`planted_redundant` is the opposite case, the one the LLM-RUBRIC release looks like: every
question reads the same quality through its own small noise, so one answer predicts the others
and a single well-chosen question carries nearly all the signal of the whole set.
"""
from __future__ import annotations

import numpy as np

from rubric_induce.calibration.data import CalibrationData

__all__ = ["planted_adaptive", "planted_redundant"]


def _peaked(center: np.ndarray, sharpness: float, k: int, mass: float = 0.97) -> np.ndarray:
    """``[n, k]`` distributions peaked at ``center`` (answer values 1..k)."""
    logits = -sharpness * (np.arange(1, k + 1)[None, :] - center[:, None]) ** 2
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return mass * p / p.sum(axis=1, keepdims=True)


def planted_adaptive(n_texts: int = 400, *, n_types: int = 2, n_noise: int = 2, n_judges: int = 4,
                     per_text: int = 2, bias: float = 0.6, seed: int = 0) -> CalibrationData:
    """Calibration data (``[texts, 1 + n_types + n_noise, 4]`` inputs, target ``"y"`` on 1..4);
    ``meta["types"]`` holds each text's type, ``meta["informative"]`` its follow-up block."""
    if not 2 <= n_types <= 4:
        raise ValueError("n_types must be 2..4 (the router shows the type on a 4-answer scale)")
    rng = np.random.default_rng(seed)
    k = 4
    types = rng.integers(0, n_types, n_texts)
    z = rng.uniform(1.5, 3.5, n_texts) + np.linspace(-0.6, 0.6, n_types)[types]
    blocks = [_peaked(types + 1 + rng.normal(0, 0.15, n_texts), 4.0, k)]
    for t in range(n_types):
        own = z + rng.normal(0, 0.3, n_texts)
        noise = rng.uniform(1, 4, n_texts)
        blocks.append(_peaked(np.where(types == t, own, noise), 2.0, k))
    for _ in range(n_noise):
        blocks.append(_peaked(rng.uniform(1, 4, n_texts), 2.0, k))
    X = np.stack(blocks, axis=1)
    biases = np.linspace(-bias, bias, n_judges)
    rows_t = np.repeat(np.arange(n_texts), per_text)
    rows_j = np.concatenate([rng.choice(n_judges, size=per_text, replace=False) for _ in range(n_texts)])
    y = np.clip(np.round(z[rows_t] + biases[rows_j] + rng.normal(0, 0.35, len(rows_t))), 1, 4)
    names = ["screen", *[f"type{t}" for t in range(n_types)], *[f"noise{i}" for i in range(n_noise)]]
    return CalibrationData(
        X=X, text_ids=[f"t{i}" for i in range(n_texts)], input_names=names, row_text=rows_t,
        row_judge=np.array([f"j{j}" for j in rows_j], dtype=object), targets=y[:, None], question_names=["y"],
        scales=[(1.0, 2.0, 3.0, 4.0)], not_applicable=(),
        meta={"source": "planted-adaptive", "types": types, "informative": types + 1, "latent": z})


def planted_redundant(n_texts: int = 300, *, n_questions: int = 6, n_judges: int = 4, per_text: int = 2,
                      noise: float = 0.25, seed: int = 0) -> CalibrationData:
    """Calibration data whose ``n_questions`` blocks are noisy readings of one latent quality
    (answer values 1..4, the LLM's answers strongly correlated across questions); judges answer
    ``round(quality + bias + noise)``. ``meta["latent"]`` holds the quality."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(1.2, 3.8, n_texts)
    X = np.stack([_peaked(z + rng.normal(0, noise, n_texts), 2.0, 4) for _ in range(n_questions)], axis=1)
    biases = np.linspace(-0.5, 0.5, n_judges)
    rows_t = np.repeat(np.arange(n_texts), per_text)
    rows_j = np.concatenate([rng.choice(n_judges, size=per_text, replace=False) for _ in range(n_texts)])
    y = np.clip(np.round(z[rows_t] + biases[rows_j] + rng.normal(0, 0.35, len(rows_t))), 1, 4)
    return CalibrationData(
        X=X, text_ids=[f"t{i}" for i in range(n_texts)], input_names=[f"q{i}" for i in range(n_questions)],
        row_text=rows_t, row_judge=np.array([f"j{j}" for j in rows_j], dtype=object), targets=y[:, None],
        question_names=["y"], scales=[(1.0, 2.0, 3.0, 4.0)], not_applicable=(),
        meta={"source": "planted-redundant", "latent": z})
