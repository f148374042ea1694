"""The one judge-to-row mapping (calibration.judges) and the three models that use it."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.calibration.judges import judge_index, judge_key, judge_names, judge_rows, judge_vocabulary
from rubric_induce.calibration.pairwise import BradleyTerryHead
from rubric_induce.core.errors import DataError


def test_vocabulary_orders_numeric_names_by_value_then_the_others_by_name():
    ids = ["b", 10, "2", "a", 2, "10", None, "1"]
    assert judge_vocabulary(ids) == ["1", "2", "10", "a", "b"]


def test_order_does_not_depend_on_the_data_order_even_for_equal_numbers():
    ids = ["1", "01", "001", "x"]
    orders = {tuple(judge_vocabulary(p)) for p in (ids, ids[::-1], ids[1:] + ids[:1])}
    assert orders == {("001", "01", "1", "x")}


def test_key_takes_unicode_digits_that_int_cannot_read():
    assert "²".isdigit()  # isdigit, but int("²") fails: such a name sorts as a name
    assert judge_vocabulary(["²", "3"]) == ["3", "²"]
    assert judge_key("3") < judge_key("a")


def test_index_compares_ids_as_strings_and_maps_none_and_unknown_to_minus_one():
    vocab = ["1", "2", "ann"]
    idx = judge_index(vocab, [2, "2", np.int64(1), "ann", "bob", None, "None"])
    assert idx.dtype == np.int64
    assert idx.tolist() == [1, 1, 0, 2, -1, -1, -1]
    assert judge_names([3, None, "x"]) == ["3", None, "x"]


def test_rows_for_one_judge_a_list_of_judges_or_one_judge_per_row():
    vocab = ["1", "2", "ann"]
    assert [r.tolist() for r in judge_rows(vocab, None, 3)] == [[-1, -1, -1]]
    assert [r.tolist() for r in judge_rows(vocab, 2, 2)] == [[1, 1]]
    assert [r.tolist() for r in judge_rows(vocab, "zed", 2)] == [[-1, -1]]
    assert [r.tolist() for r in judge_rows(vocab, ["ann", "1", "zed"], 2)] == [[2, 2], [0, 0], [-1, -1]]
    assert [r.tolist() for r in judge_rows(vocab, None, 3, ["ann", 1, None])] == [[2, 0, -1]]
    with pytest.raises(ValueError, match="either judge= or judge_ids="):
        judge_rows(vocab, "1", 1, ["1"])
    with pytest.raises(DataError, match="2 entries for 3 rows"):
        judge_rows(vocab, None, 3, ["1", "2"])
    with pytest.raises(ValueError, match="empty"):
        judge_rows(vocab, [], 3)


@pytest.mark.slow  # scipy's optimiser import: about 2 s
def test_pairwise_head_orders_its_judges_as_the_calibrators_do():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = np.where(X[:, 0] > 0, "A", "B")
    ids = [10, "2", None] * 20
    head = BradleyTerryHead().fit(X, y, judge_ids=ids)
    assert head.judges_ == ["2", "10"]
    assert head.judge_coef_.shape == (2, 2)
    same = head.decision_function(X[:3], judge_ids=["10", 2, "unknown"])
    assert np.allclose(same, head.decision_function(X[:3], judge_ids=[10, "2", None]))
    assert np.allclose(same[2], head.decision_function(X[2:3])[0])


@pytest.mark.slow  # two small torch fits
def test_calibrator_and_adaptive_model_use_the_same_mapping(make_planted):
    pytest.importorskip("torch")
    from rubric_induce.calibration.adaptive import AdaptiveModel
    from rubric_induce.calibration.calibrator import Calibrator

    X, judges, y, groups, _ = make_planted(n_texts=40, judges=12)
    ids = [int(str(j).lstrip("j")) for j in judges]  # 0..11 as ints: "10" and "11" must come after "9"
    cal = Calibrator(pretrain_epochs=1, finetune_epochs=1).fit(X, ids, y, groups=groups)
    ada = AdaptiveModel(epochs=1, n_members=1).fit(X, ids, y, groups=groups)
    expected = [str(j) for j in range(12)]
    assert cal.judges_ == expected and ada.judges_ == expected
    assert np.allclose(cal.predict(X[:5], 3), cal.predict(X[:5], "3"))
    assert np.allclose(cal.predict(X[:5], "nobody"), cal.predict(X[:5]))
    assert [r.tolist() for r in ada.judge_rows(["11", 0], 2)] == [[11, 11], [0, 0]]
