"""Where rare-but-precise rubrics are the right choice, the sharpness term must find them (issue 18).

:func:`make_sharpness_pool` plants, per polarity, broad-but-weak rubrics (more ΔNetSAT each, but
sharing one halo factor) next to rare-but-precise ones (less ΔNetSAT each, far higher yield).
Correctness alone takes the broad ones; RUBICON with its default cross-validated alpha must take
the precise ones and label more held-out texts at precision 0.9.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from rubric_induce.selection.baselines import CorrectnessOnlySelector
from rubric_induce.selection.metrics import yield_rate
from rubric_induce.selection.selector import DEFAULT_ALPHAS, RubiconSelector, SelectionWarning
from rubric_induce.selection.synthetic import make_sharpness_pool


def test_sharpness_pool_properties():
    pool = make_sharpness_pool(n_examples=2000, mix=0.5, random_state=0)
    kinds = {k: int((pool.kind == k).sum()) for k in ("broad", "precise", "noise")}
    assert kinds == {"broad": 12, "precise": 12, "noise": 80}
    assert set(pool.informative.tolist()) == set(np.flatnonzero(pool.kind != "noise").tolist())
    assert pool.scores.min() >= 0 and pool.scores.max() <= 10
    y = pool.y.astype(bool)
    signed = pool.scores * pool.signs[None, :]
    gain = signed[y].mean(axis=0) - signed[~y].mean(axis=0)
    broad, precise, noise = (pool.kind == k for k in ("broad", "precise", "noise"))
    # Correctness prefers broad rubrics: each adds more ΔNetSAT than any precise one ...
    assert gain[broad].min() > gain[precise].max() > 0
    assert np.abs(gain[noise]).max() < 0.6
    # ... while a precise rubric fires (score >= 8) on its own class far more often than on the other.
    for j in np.flatnonzero(precise):
        own = y if pool.polarity[j] == "SAT" else ~y
        fire = pool.scores[:, j] >= 8
        assert fire[own].mean() > 0.2 and fire[~own].mean() < 0.06
    # Broad rubrics of one polarity share the halo factor: strongly correlated within a class.
    sat_broad = np.flatnonzero(broad & (pool.signs > 0))
    r = np.corrcoef(pool.scores[y][:, sat_broad].T)
    assert r[np.triu_indices(len(sat_broad), 1)].min() > 0.6
    with pytest.raises(ValueError, match="mix"):
        make_sharpness_pool(mix=1.5)


def test_default_grid_reaches_the_alphas_where_sharpness_decides():
    assert max(DEFAULT_ALPHAS) >= 1000


def test_sharpness_picks_precise_rubrics_where_correctness_does_not():
    gains = []
    for seed in range(4):
        pool = make_sharpness_pool(n_examples=300, mix=0.5, random_state=seed)
        tr, te = np.arange(0, 300, 2), np.arange(1, 300, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SelectionWarning)
            full = RubiconSelector(n_sat=4, n_dsat=4, random_state=seed).fit(
                pool.scores[tr], pool.y[tr], polarity=pool.polarity)
            corr = CorrectnessOnlySelector(n_sat=4, n_dsat=4).fit(pool.scores[tr], pool.y[tr],
                                                                 polarity=pool.polarity)
        share_full = pool.kind_share(full.selected_)["precise"]
        share_corr = pool.kind_share(corr.selected_)["precise"]
        assert share_corr == 0.0
        assert share_full >= 0.5 > share_corr
        gains.append(yield_rate(full.decision_function(pool.scores[te]), pool.y[te])
                     - yield_rate(corr.decision_function(pool.scores[te]), pool.y[te]))
    assert min(gains) > 0.15 and np.mean(gains) > 0.3
