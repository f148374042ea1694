"""Row-level inputs (the LLM-RUBRIC Oracle rows), text-embedding inputs and the judge-mean baseline."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.calibration.baselines import JudgeMeanBaseline
from rubric_induce.calibration.data import CalibrationData, TextEmbeddingFeatures
from rubric_induce.calibration.metrics import regression_metrics
from rubric_induce.core.errors import DataError


def _data(n_texts: int = 6, seed: int = 0) -> CalibrationData:
    """Small hand-checkable data: 3 texts x 2 judges + texts with one judge, Q2 partly not applicable."""
    rng = np.random.default_rng(seed)
    X = rng.dirichlet(np.ones(4), size=(n_texts, 2)) * 0.9
    row_text = np.array([0, 0, 1, 1, 2, 2, 3, 4, 5])
    judges = np.array(["a", "b", "a", "c", "b", "c", "a", "b", "c"], dtype=object)
    targets = np.array([[1, 2, 3], [2, 3, 0], [3, 1, 1], [4, 4, 2], [2, 2, np.nan], [1, 1, 3],
                        [3, 3, 3], [4, 4, 1], [2, 2, 2]], dtype=float)
    return CalibrationData(X=X, text_ids=[f"t{i}" for i in range(n_texts)], input_names=["L0", "L1"],
                           row_text=row_text, row_judge=judges, targets=targets,
                           question_names=["Q0", "Q1", "Q2"], scales=[(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3)])


def test_own_answers_are_one_hot_rows_after_the_text_inputs():
    d = _data().with_judge_answers(["Q1", "Q2"])
    assert d.row_input_names == ["Q1@judge", "Q2@judge"]
    assert d.all_input_names == ["L0", "L1", "Q1@judge", "Q2@judge"]
    rx = d.row_X
    assert rx.shape == (9, 4, 4)
    np.testing.assert_array_equal(rx[:, :2], d.X[d.row_text])  # text inputs first, unchanged
    np.testing.assert_array_equal(rx[:, 2].argmax(axis=1) + 1, d.targets[:, 1])
    assert (rx[:, 2].sum(axis=1) == 1).all()
    # Not applicable (0) and unanswered (NaN) give an all-zero block; Q2's 3-point scale is padded.
    assert rx[1, 3].sum() == 0 and rx[4, 3].sum() == 0
    np.testing.assert_array_equal(rx[0, 3], [0, 0, 1, 0])
    assert (rx[:, 3, 3] == 0).all()
    X, J, Y, kw = d.fit_args()
    assert X.shape == (9, 4, 4) and kw["input_names"] == d.all_input_names


def test_others_answers_leave_the_row_out():
    d = _data().with_judge_answers(["Q1"], source="others")
    rx = d.row_X[:, 2]
    np.testing.assert_array_equal(rx[0], [0, 0, 1, 0])  # text 0: the other judge answered 3
    np.testing.assert_array_equal(rx[1], [0, 1, 0, 0])  # ... and for that judge, 2
    assert (rx[6:] == 0).all()  # texts with a single judge: nobody else answered
    # Two other applicable answers average; a not-applicable one does not dilute the mean.
    big = CalibrationData(X=np.full((1, 1, 4), 0.25), text_ids=["t"], input_names=["L"],
                          row_text=np.zeros(4, dtype=np.int64), row_judge=np.array(list("abcd"), dtype=object),
                          targets=np.array([[1, 1], [1, 3], [1, 0], [1, 4]], dtype=float),
                          question_names=["Q0", "Q1"], scales=[(1, 2, 3, 4), (1, 2, 3, 4)])
    o = big.with_judge_answers(["Q1"], source="others").row_X[:, 1]
    np.testing.assert_allclose(o[0], [0, 0, 0.5, 0.5])
    np.testing.assert_allclose(o[2], [1 / 3, 0, 1 / 3, 1 / 3])
    assert o.sum(axis=1).max() <= 1 + 1e-12


def test_row_inputs_follow_subsets_and_ablations():
    d = _data().with_judge_answers(["Q1"])
    sub = d.subset_texts([1, 3])
    np.testing.assert_array_equal(sub.row_X, d.row_X[[2, 3, 6]])
    only_oracle = d.drop_inputs(["L0", "L1"])  # the "w/o LLM probs" row
    assert only_oracle.all_input_names == ["Q1@judge"] and only_oracle.row_X.shape == (9, 1, 4)
    no_oracle = d.drop_inputs(["Q1@judge"])
    assert no_oracle.row_inputs is None and no_oracle.row_X.shape == (9, 2, 4)
    assert d.select_inputs(["Q1@judge", "L1"]).all_input_names == ["L1", "Q1@judge"]
    with pytest.raises(DataError, match="leaves none"):
        d.drop_inputs(d.all_input_names)
    with pytest.raises(DataError, match="unknown input"):
        d.drop_inputs(["Q9@judge"])


def test_judge_answer_errors():
    d = _data()
    with pytest.raises(DataError, match="unknown or no question"):
        d.with_judge_answers(["Q7"])
    with pytest.raises(DataError, match="source"):
        d.with_judge_answers(["Q1"], source="mine")
    narrow = CalibrationData(X=np.full((1, 1, 2), 0.5), text_ids=["t"], input_names=["L"],
                             row_text=np.zeros(1, dtype=np.int64), row_judge=np.array(["a"], dtype=object),
                             targets=np.array([[1.0, 3.0]]), question_names=["Q0", "Q1"],
                             scales=[(1, 2), (1, 2, 3)])
    with pytest.raises(DataError, match="more than the input width"):
        narrow.with_judge_answers(["Q1"])


def test_text_embedding_features_are_standardised_two_way_blocks():
    rng = np.random.default_rng(3)
    V = rng.normal(size=(40, 16)) @ rng.normal(size=(16, 16))
    feats = TextEmbeddingFeatures(n_components=5).fit(V[:30])
    B = feats.transform(V)
    assert B.shape == (40, 5, 4) and feats.names_ == [f"text_pc{i}" for i in range(5)]
    assert np.all((B >= 0) & (B <= 1)) and np.allclose(B.sum(axis=2), 1) and (B[:, :, 2:] == 0).all()
    z = np.log(B[:30, :, 0] / B[:30, :, 1])  # logit undoes the squashing: standardised PCs
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-9)
    np.testing.assert_allclose(z.std(axis=0, ddof=1), 1, rtol=1e-6)
    assert np.all(np.diff(np.var(V[:30] @ feats.components_.T, axis=0)) <= 1e-9)  # ordered by variance
    d = _data(n_texts=6).with_text_inputs(feats.transform(V[:6]), feats.names_)
    assert d.input_names[-5:] == feats.names_ and d.row_X.shape == (9, 7, 4)
    with pytest.raises(DataError, match="already used"):
        d.with_text_inputs(feats.transform(V[:6]), feats.names_)
    with pytest.raises(DataError, match="texts"):
        _data().with_text_inputs(B[:5], feats.names_)
    with pytest.raises(DataError, match="not fitted"):
        TextEmbeddingFeatures().transform(V)
    with pytest.raises(DataError, match=r"\[texts, 16\]"):
        feats.transform(V[:, :8])
    with pytest.raises(DataError, match="finite"):
        TextEmbeddingFeatures().fit(np.full((3, 2), np.nan))


def test_judge_mean_baseline():
    X = np.zeros((6, 1, 4))
    J = ["a", "a", "b", "b", "b", "c"]
    Y = np.array([[1.0], [3.0], [4.0], [4.0], [0.0], [np.nan]])  # 0 = not applicable, NaN = unanswered
    m = JudgeMeanBaseline().fit(X, J, Y)
    assert m.judge_means_ == {"a": 2.0, "b": 4.0}
    np.testing.assert_allclose(m.predict(X[:3], judge_ids=["a", "b", "zz"]), [2.0, 4.0, 3.0])
    np.testing.assert_allclose(m.predict(X[:2]), [3.0, 3.0])  # no judge given: the overall mean
    with pytest.raises(DataError, match="judge_ids"):
        m.predict(X[:2], judge_ids=["a"])


def test_oracle_inputs_raise_q0_accuracy_on_planted_data(data_factory, scales):
    """Q1 is the latent quality plus noise; giving the judge's own Q1 answer must help predict Q0."""
    pytest.importorskip("torch")
    from rubric_induce.calibration.calibrator import Calibrator

    X, J, Y, G, _ = data_factory(n_texts=160, seed=4)
    Xt, Jt, Yt, Gt, _ = data_factory(n_texts=80, seed=5)
    # Replace the LLM features by noise: only the oracle answers then carry the latent quality.
    rng = np.random.default_rng(0)
    X, Xt = (0.9 * rng.dirichlet(np.ones(4), size=(len(a), 1)) for a in (X, Xt))

    def as_data(X, J, Y, G):
        return CalibrationData(X=X, text_ids=list(G), input_names=["L0"], row_text=np.arange(len(G)),
                               row_judge=J, targets=Y, question_names=["Q0", "Q1", "Q2"], scales=scales)

    tr, te = as_data(X, J, Y, G), as_data(Xt, Jt, Yt, Gt)
    scores = {}
    for name, (a, b) in {"llm": (tr, te), "oracle": (tr.with_judge_answers(["Q1"]),
                                                      te.with_judge_answers(["Q1"]))}.items():
        Xa, Ja, Ya, kw = a.fit_args()
        cal = Calibrator(main_question="Q0", hidden=(8, 8), pretrain_epochs=10, finetune_epochs=15,
                         learning_rate=0.01, random_state=0, n_threads=1).fit(Xa, Ja, Ya, **kw)
        scores[name] = regression_metrics(cal.predict(b.row_X, judge_ids=b.row_judge), Yt[:, 0])["pearson"]
    assert scores["oracle"] > scores["llm"] + 0.1, scores


def test_concat_keeps_rows_with_their_texts_and_round_trips_subsets():
    d = _data().with_judge_answers(["Q1"])
    n = len(d.text_ids)
    a, b = d.subset_texts([0, 1]), d.subset_texts(np.arange(2, n))
    both = a.concat(b)
    assert both.text_ids == d.text_ids
    np.testing.assert_array_equal(both.row_X, d.row_X)
    np.testing.assert_array_equal(both.targets, d.targets)
    np.testing.assert_array_equal(both.row_judge, d.row_judge)
    np.testing.assert_array_equal(both.groups, d.groups)
    np.testing.assert_array_equal(both.subset_texts(np.arange(2, n)).row_X, b.row_X)
    # the same texts twice need prefixes: splits group rows by text id
    with pytest.raises(DataError, match="pass prefixes"):
        a.concat(a)
    twice = a.concat(a, prefixes=("syn:", "real:"))
    assert twice.text_ids == ["syn:" + t for t in a.text_ids] + ["real:" + t for t in a.text_ids]
    assert twice.n_rows == 2 * a.n_rows and len(set(twice.groups)) == 2 * len(a.text_ids)
    with pytest.raises(DataError, match="input_names differ"):
        a.concat(b.drop_inputs(["L0"]))
    with pytest.raises(DataError, match="row_input_names differ"):
        a.concat(_data().subset_texts([2, 3]))
