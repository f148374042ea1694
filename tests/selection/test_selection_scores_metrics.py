"""Scores, precision curves and metrics against hand-computed values."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data import AnswerScale, Example, Rubric
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.selection.metrics import (
    classification_metrics,
    delta_netsat,
    evaluate_selection,
    metrics_markdown,
    selection_metrics,
    selection_metrics_ci,
    yield_rate,
)
from rubric_induce.selection.precision import confident_mask, precision_curves, sharpness_error
from rubric_induce.selection.scores import netsat, prepare_inputs, unit_scores


def _table(dists: dict[tuple[str, str], list[float]], rubrics: list[Rubric]) -> ProbeTable:
    by_id = {r.id: r for r in rubrics}
    recs = [ProbeRecord(e, r, list(by_id[r].scale.labels), list(by_id[r].scale.values), p, "score-only",
                        "logprobs", "h") for (e, r), p in dists.items()]
    return ProbeTable(recs)


@pytest.fixture
def pair():
    sat = Rubric.create("good thing", "SAT")
    dsat = Rubric.create("bad thing", "DSAT", scale=AnswerScale.likert(0, 2))
    return sat, dsat


def test_unit_scores_expected_and_argmax(pair):
    sat, dsat = pair
    table = _table({("a", sat.id): [0, 0, 0, 0, 1.0], ("a", dsat.id): [0.5, 0.5, 0],
                    ("b", sat.id): [0.5, 0, 0, 0, 0.5], ("b", dsat.id): [0, 0, 0.8]}, [sat, dsat])
    exp = unit_scores(table, [sat, dsat], example_ids=["a", "b"])
    # 1..5 -> 0..10: 5 -> 10, mean 3 -> 5; 0..2 -> 0..10: mean 0.5 -> 2.5, 2 -> 10.
    np.testing.assert_allclose(exp, [[10, 2.5], [5, 10]])
    arg = unit_scores(table, [sat, dsat], example_ids=["a", "b"], score="argmax")
    # Ties go to the lower answer: a/dsat (0.5, 0.5, 0) -> 0; b/sat (0.5, ..., 0.5) -> 1.
    np.testing.assert_allclose(arg, [[10, 0], [0, 10]])
    inp = prepare_inputs(table, [Example.create({"text": "x"}, {"sat": 1}, id="a"),
                                 Example.create({"text": "y"}, {"sat": 0}, id="b")], rubrics=[sat, dsat])
    np.testing.assert_allclose(inp.signed, [[10, -2.5], [5, -10]])
    np.testing.assert_allclose(netsat(inp.signed, [0, 1]), [7.5, -5])
    assert inp.y.tolist() == [1, 0]


def test_missing_probe_is_named(pair):
    sat, dsat = pair
    table = _table({("a", sat.id): [0, 0, 0, 0, 1.0]}, [sat, dsat])
    with pytest.raises(DataError, match=r"1 of 2 .*no probe distribution.*'a'"):
        unit_scores(table, [sat, dsat], example_ids=["a"])


def test_bad_labels_and_polarity():
    x = np.ones((4, 2))
    with pytest.raises(DataError, match="single class"):
        prepare_inputs(x, [1, 1, 1, 1])
    with pytest.raises(DataError, match="0/1 labels"):
        prepare_inputs(x, [1, 2, 3, 4])
    with pytest.raises(DataError, match="polarity"):
        prepare_inputs(x, [0, 1, 0, 1], polarity=["SAT", "meh"])
    with pytest.raises(DataError, match="NaN"):
        prepare_inputs(np.array([[np.nan, 1.0]] * 2), [0, 1])


def test_precision_curves_by_hand():
    theta, pp, pn = precision_curves(np.array([1, 2, 3, 4.0]), np.array([0, 0, 1, 1]))
    np.testing.assert_allclose(theta, [1, 2, 3])
    np.testing.assert_allclose(pp, [2 / 3, 1, 1])
    np.testing.assert_allclose(pn, [1, 1, 2 / 3])
    assert precision_curves(np.ones(3), np.array([0, 1, 1]))[0].size == 0


def test_yield_rate_by_hand():
    s = np.array([1, 2, 3, 4, 5, 6.0])
    y = np.array([0, 1, 0, 1, 0, 1])
    assert confident_mask(s, y, 0.9).tolist() == [True, False, False, False, False, True]
    assert yield_rate(s, y) == pytest.approx(2 / 6)
    assert yield_rate(np.array([1, 2, 3, 4.0]), np.array([0, 0, 1, 1])) == 1.0
    # Ties share a verdict: two tied examples of different classes are both uncertain.
    assert confident_mask(np.array([0, 1, 1, 2.0]), np.array([0, 0, 1, 1]), 0.9).tolist() == [True, False, False, True]


def test_classification_and_delta_by_hand():
    m = classification_metrics(np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1]))
    assert m == pytest.approx({"accuracy": 0.6, "precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3})
    assert classification_metrics(np.array([1, 0]), np.array([0, 0]))["precision"] == 0.0
    assert delta_netsat(np.array([5, 7, 1, 2.0]), np.array([1, 1, 0, 0])) == pytest.approx(4.5)
    sm = selection_metrics(np.array([5, 7, 1, 2.0]), np.array([1, 1, 0, 0]), threshold=3.0)
    assert sm["accuracy"] == 1.0 and sm["yield_rate"] == 1.0


def test_bootstrap_ci_contains_point_and_is_seeded():
    rng = np.random.default_rng(3)
    y = (rng.random(200) < 0.5).astype(int)
    s = y * 3 + rng.normal(size=200) * 2
    res = evaluate_selection(s, y, 1.5, n_boot=300, random_state=7)
    for name, m in res.items():
        assert m["low"] <= m["value"] <= m["high"], name
    assert (selection_metrics_ci(s, y, 1.5, n_boot=50, random_state=1)
            == selection_metrics_ci(s, y, 1.5, n_boot=50, random_state=1))
    md = metrics_markdown({"test": res})
    assert "YieldRate@90" in md and "ΔNetSAT" in md


def test_sharper_set_has_lower_sharpness_error():
    rng = np.random.default_rng(0)
    tight_p, tight_n = 5 + rng.normal(size=(1, 200)) * 0.3, -5 + rng.normal(size=(1, 200)) * 0.3
    loose_p, loose_n = 1 + rng.normal(size=(1, 200)) * 3, -1 + rng.normal(size=(1, 200)) * 3
    for two_sided in (False, True):
        e = sharpness_error(np.vstack([tight_p, loose_p]), np.vstack([tight_n, loose_n]), np.zeros(2), 1,
                            two_sided=two_sided, width=0.25)
        assert e[0] < e[1]
    # One-sided: a clean gap between the classes is perfectly sharp.
    assert sharpness_error(tight_p, tight_n, np.zeros(1), 1)[0] == 0.0
    # Constant NetSAT: the defined worst value, no NaN.
    assert np.isfinite(sharpness_error(np.ones((1, 3)), np.ones((1, 3)), np.ones(1), 1)).all()


def test_selection_metrics_ci_in_chunks_equals_one_shot(monkeypatch):
    """Issue 35 item 4: the class-stratified bootstrap draws and reduces its replicates in chunks,
    with the draws and intervals of one [n_boot, n] draw, and holds a chunk, not all of them."""
    import tracemalloc

    from rubric_induce.core import stats

    r = np.random.default_rng(4)
    for n, pos in ((1201, 0.3), (400, 0.05), (50, 1.0)):
        s, y = r.normal(size=n), (r.random(n) < pos).astype(int)
        s[y == 1] += 0.5
        monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", 1 << 30)  # one chunk: as before chunks
        ref = selection_metrics_ci(s, y, 0.2, n_boot=200, random_state=7)
        for block in (n * 8, n * 64 + 5) if n > 50 else (n * 16,):
            monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", block)
            got = selection_metrics_ci(s, y, 0.2, n_boot=200, random_state=7)
            assert got.keys() == ref.keys()
            for k in ref:
                np.testing.assert_array_equal(got[k], ref[k])
    n = 2000
    s, y = r.normal(size=n), (r.random(n) < 0.4).astype(int)
    monkeypatch.setattr(stats, "BOOTSTRAP_BLOCK", n * 8)
    tracemalloc.start()
    try:
        selection_metrics_ci(s, y, 0.0, n_boot=1000, random_state=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1000 * n * 8 / 10  # the [1000, n] index array alone: 16 MB
