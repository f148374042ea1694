"""Position consistency of the pairwise probe (issue 33, item 5), on hand-computed cases, and the
side-by-side pairs table of the evaluation page (escaped: texts come from the data)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rubric_induce.data.pairs import Pair
from rubric_induce.evaluation.pairwise import pair_rows, pairwise_evaluation, pairwise_markdown, position_consistency


def test_hand_computed_consistency_and_first_position_rate():
    # 3 pairs x 2 rubrics of P(first shown wins): with A shown first (ab) and with B shown first (ba)
    ab = np.array([[0.9, 0.8],    # r1: A ; r2: A
                   [0.7, 0.3],    # r1: A ; r2: B
                   [0.2, 0.5]])   # r1: B ; r2: none (exactly 0.5)
    ba = np.array([[0.1, 0.6],    # r1: A (second shown) ; r2: B (first shown) -> r1 agrees, r2 does not
                   [0.8, 0.9],    # r1: B ; r2: B -> r1 disagrees, r2 agrees
                   [0.6, np.nan]])  # r1: B -> agrees ; r2: missing -> left out
    pc = position_consistency(ab, ba, ["r1", "r2"])
    r1, r2, allc = pc["rubrics"]["r1"], pc["rubrics"]["r2"], pc["all"]
    assert r1["n"] == 3 and r1["consistent"] == pytest.approx(2 / 3)
    # r1's verdicts over both orders: first shown on 0.9, 0.7, 0.8, 0.6 (4 of 6 decided)
    assert r1["first_rate"] == pytest.approx(4 / 6)
    assert r1["mean_p_first"] == pytest.approx((0.9 + 0.7 + 0.2 + 0.1 + 0.8 + 0.6) / 6)
    assert r2["n"] == 2 and r2["consistent"] == pytest.approx(1 / 2)
    assert r2["first_rate"] == pytest.approx(3 / 4)  # 0.8, 0.6, 0.9 of 0.8, 0.3, 0.6, 0.9
    assert allc["n"] == 5 and allc["consistent"] == pytest.approx(3 / 5)
    assert allc["first_rate"] == pytest.approx(7 / 10) and allc["decided_verdicts"] == 10


def test_two_undecided_orders_agree_and_one_undecided_order_does_not():
    pc = position_consistency(np.array([[0.5]]), np.array([[0.5]]), ["r"])["all"]
    assert pc["consistent"] == 1.0 and math.isnan(pc["first_rate"]) and pc["decided_verdicts"] == 0
    pc = position_consistency(np.array([[0.5]]), np.array([[0.7]]), ["r"])["all"]
    assert pc["consistent"] == 0.0 and pc["first_rate"] == 1.0


HOSTILE = "<img src=x onerror=alert(1)> | [link](javascript:alert(1)) `code`"


def test_side_by_side_rows_and_their_markdown_are_escaped():
    pairs = [Pair(id="p|1", prompt=HOSTILE, response_a="fine " * 100, response_b=HOSTILE, preferred="A"),
             Pair(id="p2", prompt="q", response_a="a", response_b="b", preferred="B")]
    ab, ba = np.array([[0.9], [0.4]]), np.array([[0.2], [np.nan]])
    rows = pair_rows(pairs, np.array([0.7, 0.2]), rubric_ids=["r<1>"], ab=ab, ba=ba)
    assert rows[0]["verdicts"] == {"r<1>": {"AB": 0.9, "BA": 0.2}} and rows[1]["verdicts"]["r<1>"]["BA"] is None
    assert len(rows[0]["a"]) <= 240 and rows[0]["p_a"] == 0.7
    result = pairwise_evaluation({"m": np.array([1.0, -1.0])}, pairs, n_boot=20, reference="m")
    result["position_consistency"] = position_consistency(ab, ba, ["r<1>"])
    result["pairs"] = rows
    md = pairwise_markdown(result)
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "r&lt;1&gt;: A 0.90 / A 0.20" in md        # A first: A wins; B first: the second shown (A) wins
    assert "r&lt;1&gt;: B 0.40 / –" in md               # a missing order shows a dash
    table = [line for line in md.splitlines() if line.startswith("| p\\|1 |")]
    assert len(table) == 1 and table[0].count(" | ") == 6  # the cell's pipes are escaped: 7 columns
    assert "Position consistency" in md and "| r&lt;1&gt; | 1 | 100.0 |" in md


def test_subset_names_from_the_data_are_escaped():
    pairs = [Pair(id="p1", prompt="q", response_a="a", response_b="b", preferred="A", subset="<b>x</b>")]
    md = pairwise_markdown(pairwise_evaluation({"m": np.array([1.0])}, pairs, n_boot=5, reference="m"))
    assert "<b>" not in md and "## Subset &lt;b&gt;x&lt;/b&gt; (1 pairs)" in md
