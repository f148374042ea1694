"""The select stage's polarity pre-filter: a rubric whose training probes go against its stated
polarity ("The response contains harmful content." tagged SAT) is flipped or dropped, with the
reason counted; the test sees the training examples only."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.core.errors import DataError
from rubric_induce.data import Example, Rubric
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.selection.api import SelectContext, SelectParams, select
from rubric_induce.selection.polarity import check_polarity, inverted_p

GOOD_SAT = Rubric.create("The response answers the question that was asked.", "SAT")
INVERTED = Rubric.create("The response contains harmful content.", "SAT")  # planted: tagged SAT, means bad
GOOD_DSAT = Rubric.create("The response ignores the question.", "DSAT")
NOISE = Rubric.create("The response mentions a date.", "SAT")
RUBRICS = [GOOD_SAT, INVERTED, GOOD_DSAT, NOISE]


def _onehot(level: int) -> list[float]:
    return [1.0 if i == level else 0.0 for i in range(5)]


def _data(seed: int, n: int = 40, inverted_on: str = "all"):
    """Examples e0..e{n-1} with 0/1 labels and one-hot probes; the planted SAT rubric holds on bad
    texts (on every example, or only on the second half when ``inverted_on='test'``)."""
    rng = np.random.default_rng(seed)
    y = np.array([i % 2 for i in range(n)])
    rng.shuffle(y)
    examples = [Example.create({"text": f"text {i}"}, {"sat": int(y[i])}, id=f"e{i}") for i in range(n)]
    recs = []
    for i, (e, yi) in enumerate(zip(examples, y)):
        noisy = lambda hi: int(np.clip((3 if hi else 1) + rng.integers(-1, 2), 0, 4))  # noqa: E731
        inverted = inverted_on == "all" or i >= n // 2
        levels = {GOOD_SAT.id: noisy(yi), INVERTED.id: noisy(not yi) if inverted else noisy(yi),
                  GOOD_DSAT.id: noisy(not yi), NOISE.id: int(rng.integers(0, 5))}
        for r in RUBRICS:
            recs.append(ProbeRecord(e.id, r.id, list(r.scale.labels), list(r.scale.values), _onehot(levels[r.id]),
                                    "score-only", "logprobs", "h"))
    return examples, y, ProbeTable(recs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_inverted_sat_rubric_is_flipped_and_the_correct_ones_kept(seed):
    examples, y, table = _data(seed)
    res = select(table, RUBRICS, examples, y, SelectParams(n_sat=2, n_dsat=2), context=SelectContext(seed=seed))
    pol = {r.id: r.polarity for r in res.pool}
    assert pol == {GOOD_SAT.id: "SAT", INVERTED.id: "DSAT", GOOD_DSAT.id: "DSAT", NOISE.id: "SAT"}
    flipped = next(r for r in res.pool if r.id == INVERTED.id)
    assert flipped.provenance["polarity_flipped"]["from"] == "SAT"
    manifest = res.manifest()["polarity_check"]
    assert manifest["flipped"] == [INVERTED.id] and manifest["counts"] == {"SAT rubric goes with bad labels": 1}
    s = res.summary()
    assert s["polarity_flipped"] == 1 and s["polarity_dropped"] == 0
    assert s["polarity_reasons"] == {"SAT rubric goes with bad labels": 1}
    # flipped, it now helps: the selected set separates the classes on its training texts
    assert INVERTED.id in {r.id for r in res.chosen}


@pytest.mark.parametrize("seed", [0, 1])
def test_drop_removes_the_inverted_rubric_and_off_keeps_it_as_tagged(seed):
    examples, y, table = _data(seed)
    dropped = select(table, RUBRICS, examples, y, SelectParams(n_sat=2, n_dsat=2, polarity_check="drop"))
    assert {r.id for r in dropped.pool} == {GOOD_SAT.id, GOOD_DSAT.id, NOISE.id}
    assert dropped.summary()["polarity_dropped"] == 1 and dropped.polarity["dropped"] == [INVERTED.id]
    off = select(table, RUBRICS, examples, y, SelectParams(n_sat=2, n_dsat=2, polarity_check="off"))
    assert {r.id: r.polarity for r in off.pool}[INVERTED.id] == "SAT" and not off.polarity["inverted"]


def test_only_the_examples_given_decide_the_polarity():
    """Inverted only on the held-out half: selection on the training half leaves it alone."""
    examples, y, table = _data(0, n=80, inverted_on="test")
    train, y_train = examples[:40], y[:40]
    res = select(table, RUBRICS, train, y_train, SelectParams(n_sat=2, n_dsat=2))
    assert {r.id: r.polarity for r in res.pool}[INVERTED.id] == "SAT" and not res.polarity["inverted"]
    on_test = select(table, RUBRICS, examples[40:], y[40:], SelectParams(n_sat=2, n_dsat=2))
    assert on_test.polarity["flipped"] == [INVERTED.id]


def test_drop_that_would_empty_the_pool_is_a_data_error():
    examples, y, table = _data(0)
    with pytest.raises(DataError, match="polarity"):
        select(table, [INVERTED], examples, y, SelectParams(n_sat=1, n_dsat=0, polarity_check="drop"))


def test_polarity_options_are_checked():
    with pytest.raises(DataError, match="select.polarity_check"):
        SelectParams.from_mapping({"polarity_check": "invert"})
    with pytest.raises(DataError, match="select.polarity_alpha"):
        SelectParams.from_mapping({"polarity_alpha": 1.5})
    assert SelectParams().polarity_check == "flip"


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), effect=st.floats(3.0, 6.0), n=st.integers(30, 80))
def test_property_clear_inversions_are_caught_and_agreement_never_is(seed, effect, n):
    """A column that goes with its polarity is never called inverted; one that goes against it by a
    clear margin always is (SAT and DSAT alike), and a graded label works the same way."""
    rng = np.random.default_rng(seed)
    y = np.array([i % 2 for i in range(n)], dtype=float)
    base = rng.normal(5, 1, n)
    with_y = np.clip(base + effect * (y - 0.5), 0, 10)
    against = np.clip(base - effect * (y - 0.5), 0, 10)
    sat, dsat = Rubric.create("The response cites a source.", "SAT"), Rubric.create("The response stalls.", "DSAT")
    x = np.column_stack([with_y, against, against, with_y])
    out = check_polarity(x, y, [sat, sat, dsat, dsat], action="drop")
    assert out.keep == [0, 2]
    graded = y * 4 + rng.integers(0, 2, n)
    assert inverted_p(with_y, graded, "SAT") > 0.01 and inverted_p(against, graded, "SAT") < 0.01


def test_constant_or_one_class_scores_are_not_tested():
    assert inverted_p(np.full(10, 5.0), np.array([0, 1] * 5), "SAT") is None
    assert inverted_p(np.arange(10.0), np.zeros(10), "SAT") is None
