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


def _one_shot_intervals(methods, t, n_boot, rng, reference):
    """The bootstrap as one ``[n_boot, n]`` draw per resampled set (the computation before chunks)."""
    n, no_tie = len(t), np.flatnonzero(t != 0)
    idx = rng.integers(0, n, size=(n_boot, n))
    idx_nt = no_tie[rng.integers(0, no_tie.size, size=(n_boot, no_tie.size))]

    def ci(v, i):
        reps = v[i].mean(axis=1)
        return [float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5))]

    out = {}
    credit = {}
    for name, diff in methods.items():
        decided = diff != 0
        right = np.where(decided, np.sign(diff) == t, t == 0).astype(float)
        credit[name] = np.where(decided | (t == 0), right, 0.5)
        out[name] = {"accuracy_ci": ci(credit[name], idx), "accuracy_no_ties_ci": ci(credit[name], idx_nt)}
    for name in methods:
        if name != reference:
            out[name]["reference_minus_this_ci"] = ci(credit[reference] - credit[name], idx)
    return out


@pytest.mark.parametrize("block", [1 << 30, 4096, 8 * 37])
def test_the_bootstrap_in_chunks_equals_one_draw_and_holds_no_full_index_array(monkeypatch, block):
    """The replicates are drawn a chunk at a time from the one seeded stream: every interval equals
    the one-shot ``[n_boot, n]`` computation's, whatever the chunk size (subsets continue the stream)."""
    from rubric_induce.core import stats
    from rubric_induce.evaluation import pairwise

    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", block)
    shapes = []

    def recording(strata, n_boot, rng):
        for idx in stats.stratified_index_chunks(strata, n_boot, rng):
            shapes.append(idx.shape)
            yield idx

    monkeypatch.setattr(pairwise, "stratified_index_chunks", recording)
    rng = np.random.default_rng(11)
    n = 37
    prefs = rng.choice(["A", "B", "tie"], size=n, p=[0.45, 0.45, 0.1])
    pairs = [Pair(f"p{i}", "q", "a" * int(rng.integers(1, 9)), "b" * int(rng.integers(1, 9)), str(p),
                  subset=("s1" if i % 3 else "s2")) for i, p in enumerate(prefs)]
    methods = {"rubrics": np.round(rng.normal(size=n), 1), "coin": rng.choice([-1.0, 0.0, 1.0], size=n)}
    got = pairwise_evaluation(methods, pairs, n_boot=1000, seed=5, reference="rubrics")
    t = np.array([{"A": 1.0, "B": -1.0, "tie": 0.0}[p] for p in prefs])
    ref_rng = np.random.default_rng(5)
    want_all = _one_shot_intervals(methods, t, 1000, ref_rng, "rubrics")
    for name, w in want_all.items():
        for key, ci in w.items():
            assert got["all"]["methods"][name][key] == ci, (name, key)
    for s in ("s1", "s2"):
        rows = np.array([p.subset == s for p in pairs])
        want = _one_shot_intervals({k: v[rows] for k, v in methods.items()}, t[rows], 1000, ref_rng, "rubrics")
        for name, w in want.items():
            for key, ci in w.items():
                assert got["subsets"][s]["methods"][name][key] == ci, (s, name, key)
    assert max(r * c for r, c in shapes) <= max(block, 8 * n)  # at least 8 replicates a chunk
    assert (len(shapes) > 6) == (block < 1000 * n)


def test_the_table_leads_with_strict_accuracy_and_holm_adjusted_differences():
    """An undecided method looks like a coin flip under half credit; strict accuracy (the headline)
    counts it wrong. Differences to the reference carry Holm-adjusted p-values over the table."""
    rng = np.random.default_rng(0)
    n = 200
    pairs = [Pair(f"p{i}", "q", "a", "b", "A" if rng.random() < 0.5 else "B") for i in range(n)]
    t = np.array([1.0 if p.preferred == "A" else -1.0 for p in pairs])
    methods = {"good": np.where(rng.random(n) < 0.8, t, -t), "silent": np.zeros(n),
               "coin": rng.choice([-1.0, 1.0], size=n), "near": np.where(rng.random(n) < 0.78, t, -t)}
    res = pairwise_evaluation(methods, pairs, n_boot=400, seed=0, reference="good")["all"]["methods"]
    assert res["silent"]["accuracy"] == pytest.approx(0.5) and res["silent"]["strict"] == 0.0
    assert res["silent"]["undecided_share"] == 1.0 and res["good"]["undecided_share"] == 0.0
    lo, hi = res["good"]["strict_ci"]
    assert lo <= res["good"]["strict"] <= hi
    p_raw = [res[m]["reference_minus_this_strict_p"] for m in ("silent", "coin", "near")]
    p_holm = [res[m]["reference_minus_this_strict_p_holm"] for m in ("silent", "coin", "near")]
    assert all(h >= p for h, p in zip(p_holm, p_raw))
    assert p_holm[0] < 0.01 and p_holm[1] < 0.01 and p_holm[2] > 0.05  # 'near' is not distinguishable
    md = pairwise_markdown(pairwise_evaluation(methods, pairs, n_boot=100, seed=0, reference="good"))
    header = next(line for line in md.splitlines() if line.startswith("| method"))
    assert header.index("strict accuracy") < header.index("undecided") < header.index("half credit")
    assert "p (Holm)" in header and "Holm-adjusted" in md
