"""Behaviour on the released LLM-RUBRIC data: train on synthetic judgments, test on real dialogues."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rubric_induce.calibration.baselines import ConstantBaseline  # noqa: E402
from rubric_induce.calibration.calibrator import Calibrator  # noqa: E402
from rubric_induce.calibration.data import from_llm_rubric  # noqa: E402
from rubric_induce.calibration.metrics import regression_metrics  # noqa: E402


@pytest.fixture(scope="module")
def splits(shared_data_root):
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric

    # With the data folder present, a missing or broken LLM-RUBRIC file is a failure, not a skip.
    syn, real = load_llm_rubric(shared_data_root, "synthetic"), load_llm_rubric(shared_data_root, "real")
    return from_llm_rubric(syn), from_llm_rubric(real)


def test_data_lines_up(splits):
    syn, real = splits
    assert syn.X.shape == (225, 9, 4) and real.X.shape == (223, 9, 4) and real.n_rows == 223
    assert set(real.row_judge) <= set(syn.row_judge)  # judge-specific weights transfer
    assert syn.meta["n_zeroed"] == 50 and real.meta["n_zeroed"] == 76  # no-reference dialogues
    cite = [syn.input_names.index(q) for q in ("Q2", "Q3", "Q4", "Q5")]
    # Where the inputs say "not applicable", the judges said so too (Q2-Q5 answered 0).
    na_rows = (real.row_X[:, cite].sum(axis=(1, 2)) == 0)
    assert (real.targets[na_rows][:, 2:6] == 0).mean() > 0.95


@pytest.mark.slow
def test_fast_fit_beats_constant_on_real_q0(splits):
    syn, real = splits
    X, J, Y, kw = syn.fit_args()
    cal = Calibrator(main_question="Q0", random_state=0, n_threads=1).fit(X, J, Y, **kw)
    y = real.target("Q0")
    ours = regression_metrics(cal.predict(real.row_X, judge_ids=real.row_judge), y)
    const = regression_metrics(ConstantBaseline().fit(X, J, Y).predict(real.row_X), y)
    assert ours["pearson"] > 0.1
    assert ours["rmse"] < const["rmse"]
    # Judge-specific weights carry the signal: the shared-only prediction is much weaker.
    shared = regression_metrics(cal.predict(real.row_X), y)
    assert ours["pearson"] > shared["pearson"]
