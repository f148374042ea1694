"""The shared estimator plumbing: every selector, calibrator and head gets scikit-learn's
parameter API from ``core.estimator.Estimator``; ``sklearn.base.clone`` works on each."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.calibration.adaptive import ADAPTIVE_PARAMS, AdaptiveModel
from rubric_induce.calibration.calibrator import PARAMS, Calibrator
from rubric_induce.calibration.pairwise import BradleyTerryHead
from rubric_induce.core.estimator import Estimator, param_names
from rubric_induce.selection.baselines import RandomSelector
from rubric_induce.selection.pairwise import PairwiseSelector
from rubric_induce.selection.selector import RubiconSelector

ESTIMATORS = [Calibrator, AdaptiveModel, BradleyTerryHead, PairwiseSelector, RubiconSelector, RandomSelector]


class _Toy(Estimator):
    def __init__(self, a: int = 1, weights: tuple = (1.0, 2.0), arr=None) -> None:
        self.a = a
        self.weights = weights
        self.arr = arr


def test_params_are_the_constructor_arguments_and_repr_shows_what_differs():
    toy = _Toy(a=3)
    assert toy.get_params() == {"a": 3, "weights": (1.0, 2.0), "arr": None}
    assert repr(toy) == "_Toy(a=3)" and repr(_Toy()) == "_Toy()"
    assert "arr=array([1, 2])" in repr(_Toy(arr=np.array([1, 2])))  # an array is shown, never compared
    assert toy.set_params(a=5, weights=(0.5,)) is toy and toy.a == 5 and toy.weights == (0.5,)
    with pytest.raises(ValueError, match=r"unknown _Toy parameter 'b'; valid: a, weights, arr"):
        toy.set_params(b=1)
    twin = toy.clone(arr=7)
    assert type(twin) is _Toy and twin.get_params() == {"a": 5, "weights": (0.5,), "arr": 7} and toy.arr is None


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_estimator_round_trips_through_sklearn_clone(cls):
    sklearn_base = pytest.importorskip("sklearn.base")
    est = cls()
    params = est.get_params()
    assert tuple(params) == param_names(cls)
    copy = sklearn_base.clone(est)
    assert type(copy) is cls and copy.get_params().keys() == params.keys() and copy is not est
    assert repr(est) == f"{cls.__name__}()"
    with pytest.raises(ValueError, match=f"unknown {cls.__name__} parameter"):
        est.set_params(no_such_parameter=1)


def test_the_config_keys_are_the_constructor_arguments():
    assert PARAMS == param_names(Calibrator) and "learning_rate" in PARAMS and "main_question" in PARAMS
    assert ADAPTIVE_PARAMS == param_names(AdaptiveModel) and "n_members" in ADAPTIVE_PARAMS
