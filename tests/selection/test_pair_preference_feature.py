"""Selection and the Bradley-Terry head on the pairwise probe's feature ([select] pair_feature, issue 33
item 3): where the pointwise differences say nothing and the pairwise probe (read in both orders)
does, the selector picks the rubric whose debiased preference follows the gold side and the head
learns from it; ``both`` gives the head two features per rubric."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.calibration.pairwise import BradleyTerryHead
from rubric_induce.data.model import Rubric
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.selection.pair_features import n_pair_features, pair_features, pair_signal
from rubric_induce.selection.pairwise import PairwiseSelector

RUBRICS = [Rubric(id="noise", text="noise", polarity="SAT"), Rubric(id="good", text="good", polarity="SAT")]


def _table(n: int = 12, bias: float = 0.3) -> tuple[ProbeTable, list[str], list[str]]:
    """Pointwise probes equal on both sides (difference 0); pairwise probes with a first-position bias:
    'good' leans 0.1 toward the gold side, 'noise' toward a fixed pseudo-random side."""
    rng = np.random.default_rng(0)
    recs, pair_ids, y = [], [], []
    scale = RUBRICS[0].scale
    for i in range(n):
        pid, gold = f"p{i}", ("A" if i % 2 == 0 else "B")
        pair_ids.append(pid)
        y.append(gold)
        noise_side = "A" if rng.random() < 0.5 else "B"
        for side in ("A", "B"):
            for r in RUBRICS:
                recs.append(ProbeRecord(f"{pid}/{side}", r.id, list(scale.labels), list(scale.values),
                                        [1.0] * scale.size, "score-only", "logprobs", "h"))
        for order in ("AB", "BA"):
            first = order[0]
            for r, side in ((RUBRICS[0], noise_side), (RUBRICS[1], gold)):
                p = 0.5 + bias + (0.1 if first == side else -0.1)
                recs.append(ProbeRecord(f"{pid}/{order}", r.id, ["A", "B"], [1.0, 0.0], [p, 1 - p],
                                        "score-only", "logprobs", "hp", order=order))
    return ProbeTable(recs), pair_ids, y


def test_selector_and_head_read_the_debiased_preference():
    table, ids, y = _table()
    D = pair_features(table, RUBRICS, ids, "difference")
    assert not D.any()  # the pointwise differences decide nothing here
    P = pair_features(table, RUBRICS, ids, "preference")
    assert P[:, 1] == pytest.approx([0.2 if g == "A" else -0.2 for g in y])  # the bias is gone
    sel = PairwiseSelector(n_rubrics=2).fit(P, y)
    assert sel.selected_.tolist() == [1] and sel.train_metrics_["accuracy"] == 1.0
    head = BradleyTerryHead(l2=1e-3).fit(P[:, sel.selected_], y)
    assert (head.predict(P[:, sel.selected_]) == np.array(y, dtype=object)).all()


def test_both_gives_the_head_two_features_and_the_selector_their_mean():
    table, ids, y = _table()
    X = pair_features(table, RUBRICS, ids, "both")
    assert X.shape == (len(ids), n_pair_features(len(RUBRICS), "both")) == (12, 4)
    S = pair_signal(X, "both")
    assert S == pytest.approx((X[:, :2] + X[:, 2:]) / 2)
    assert PairwiseSelector(n_rubrics=2).fit(S, y).selected_.tolist() == [1]
