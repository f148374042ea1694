"""Seeded synthetic calibration data with planted judge biases (shared by the calibration tests)."""
from __future__ import annotations

import numpy as np
import pytest

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the torch-free tests still run; the others skip themselves
    torch = None


def make_data(n_texts: int = 200, judges: int = 4, per_text: int = 2, bias: float = 1.0, seed: int = 0):
    """Texts with a latent quality q; the LLM sees q through a noisy, overconfident 4-way
    distribution for 3 questions; judge ``j`` answers Q0 = round(q + bias_j + noise) in 1..4 and
    Q1 = round(q + noise) (Q2 is a 3-point question, not applicable on a third of the texts).

    Returns ``(X [rows, 3, 4], judge_ids, targets [rows, 3], groups, latent per row)``.
    """
    rng = np.random.default_rng(seed)
    q = rng.uniform(1, 4, n_texts)
    biases = np.linspace(-bias, bias, judges)
    X_text = np.zeros((n_texts, 3, 4))
    for i in range(3):
        noisy = q + rng.normal(0, 0.5, n_texts)
        logits = -2.0 * (np.arange(1, 5)[None, :] - noisy[:, None]) ** 2
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        X_text[:, i] = 0.97 * p / p.sum(axis=1, keepdims=True)  # mass Z < 1, as real LLMs give
    rows_t, rows_j = [], []
    for t in range(n_texts):
        for j in rng.choice(judges, size=per_text, replace=False):
            rows_t.append(t)
            rows_j.append(int(j))
    rows_t, rows_j = np.array(rows_t), np.array(rows_j)
    lat = q[rows_t]
    y0 = np.clip(np.round(lat + biases[rows_j] + rng.normal(0, 0.4, len(lat))), 1, 4)
    y1 = np.clip(np.round(lat + rng.normal(0, 0.4, len(lat))), 1, 4)
    y2 = np.clip(np.round((lat + 2) / 2 + rng.normal(0, 0.3, len(lat))), 1, 3)
    y2[rows_t % 3 == 0] = 0.0  # not applicable
    targets = np.stack([y0, y1, y2], axis=1)
    judge_ids = np.array([f"j{j}" for j in rows_j], dtype=object)
    groups = np.array([f"t{t}" for t in rows_t], dtype=object)
    return X_text[rows_t], judge_ids, targets, groups, lat


SCALES = [(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3)]


@pytest.fixture(scope="session")
def planted():
    return make_data()


@pytest.fixture(scope="session")
def scales():
    return SCALES


@pytest.fixture(scope="session")
def data_factory():
    return make_data


@pytest.fixture(scope="session")
def make_planted():
    """:func:`make_data` itself, for a test that needs other sizes (``from conftest import`` would pick
    whichever conftest module a full run imported first under that name)."""
    return make_data
