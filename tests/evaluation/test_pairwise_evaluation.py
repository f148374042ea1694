"""Held-out pairwise evaluation: accuracy arithmetic, ties, baselines, subsets, seeded intervals."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.data.pairs import Pair
from rubric_induce.evaluation.pairwise import pair_baselines, pairwise_evaluation, pairwise_markdown


def _pairs():
    return [Pair("p1", "q", "long answer", "x", "A", subset="s1"), Pair("p2", "q", "y", "longer one", "B", subset="s1"),
            Pair("p3", "q", "aa", "bb", "tie", subset="s2"), Pair("p4", "q", "z", "zz", "A", subset="s2")]


def test_accuracy_with_and_without_ties_and_strict():
    pairs = _pairs()
    diff = np.array([0.3, 0.2, 0.0, 0.0])  # right, wrong, tie left undecided (right), undecided (half)
    r = pairwise_evaluation({"m": diff}, pairs, n_boot=200, seed=1)["all"]["methods"]["m"]
    assert r["accuracy"] == pytest.approx((1 + 0 + 1 + 0.5) / 4)
    assert r["accuracy_no_ties"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert r["strict"] == pytest.approx(2 / 4) and r["undecided"] == 2
    assert r["accuracy_ci"][0] <= r["accuracy"] <= r["accuracy_ci"][1]


def test_baselines_subsets_seed_and_reference():
    pairs = _pairs()
    base = pair_baselines(pairs, train=pairs)
    assert base["always first"].tolist() == [1, 1, 1, 1]
    assert np.sign(base["longer wins"]).tolist() == [1, -1, 0, -1]
    assert "majority side (A)" in base  # 2 A, 1 B, 1 tie in training
    methods = {"rubrics": np.array([1.0, -1.0, 0.0, 1.0]), **base}
    a = pairwise_evaluation(methods, pairs, n_boot=300, seed=3, reference="rubrics")
    b = pairwise_evaluation(methods, pairs, n_boot=300, seed=3, reference="rubrics")
    assert a == b  # seeded
    assert set(a["subsets"]) == {"s1", "s2"} and a["subsets"]["s1"]["n"] == 2
    assert a["all"]["methods"]["rubrics"]["accuracy"] == 1.0
    assert a["all"]["methods"]["always first"]["reference_minus_this"] == pytest.approx(1 - (1 + 0 + 0 + 1) / 4)
    md = pairwise_markdown(a)
    assert "| **rubrics** |" in md and "## Subset s2" in md
    assert pairwise_evaluation(methods, pairs, n_boot=0)["all"]["methods"]["rubrics"]["accuracy_ci"] != [0, 0]
