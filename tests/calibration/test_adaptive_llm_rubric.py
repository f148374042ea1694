"""Adaptive scoring on the released LLM-RUBRIC gpt-3.5 answers: train on synthetic, replay on real."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rubric_induce.calibration.adaptive import AdaptiveModel  # noqa: E402
from rubric_induce.calibration.data import from_llm_rubric  # noqa: E402
from rubric_induce.calibration.policy import AskPolicy  # noqa: E402
from rubric_induce.calibration.search import group_kfold  # noqa: E402
from rubric_induce.core.stats import (
    check_answer_shift,  # noqa: E402
    pearson,  # noqa: E402
)

# every test reads a model fitted on the LLM-RUBRIC answers (several seconds on 2 cores)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fitted(shared_data_root):
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric

    syn = from_llm_rubric(load_llm_rubric(shared_data_root, "synthetic"))
    real = from_llm_rubric(load_llm_rubric(shared_data_root, "real"))
    held_out = group_kfold(len(syn.text_ids), 5, seed=0)[0]  # a fifth of the synthetic dialogues
    train = syn.subset_texts(np.setdiff1d(np.arange(len(syn.text_ids)), held_out))
    X, J, Y, kw = train.fit_args()
    model = AdaptiveModel(main_question="Q0", n_threads=1, early_stopping=True, epochs=60,
                          random_state=0).fit(X, J, Y, **kw)
    return syn.subset_texts(held_out), real, model


def test_target_predictions_from_partial_answers(fitted):
    _, real, model = fitted
    y = real.target("Q0")
    ok = np.isfinite(y)
    n, nb = real.row_X.shape[:2]
    none = model.predict(real.row_X, np.zeros((n, nb), dtype=bool), judge_ids=real.row_judge)
    full = model.predict(real.row_X, np.ones((n, nb), dtype=bool), judge_ids=real.row_judge)
    assert pearson(none[ok], y[ok]) > 0.1  # no question: the judges' leniency alone
    assert pearson(full[ok], y[ok]) > 0.1
    assert not np.allclose(none, full)


def test_unasked_llm_answers_are_predicted_better_than_their_frequencies(fitted):
    _, real, model = fitted
    X = real.X  # one row per real dialogue
    soft = model._soft_targets(X, np.asarray(model.input_widths_))
    ce_model, ce_freq = [], []
    for b in range(X.shape[1]):
        obs = np.ones(X.shape[:2], dtype=bool)
        obs[:, b] = False  # every other answer observed, this one not asked
        pa = np.clip(model.predict_answers(X, obs)[:, b], 1e-12, None)
        ce_model.append(-(soft[:, b] * np.log(pa)).sum(axis=1).mean())
        ce_freq.append(-(soft[:, b] * np.log(np.clip(model.class_freq_[b], 1e-12, None))).sum(axis=1).mean())
    assert np.mean(ce_model) < np.mean(ce_freq) - 0.02


def test_policy_saves_calls_on_real_dialogues(fitted):
    _, real, model = fitted
    trace = AskPolicy(model, stop_at=0.002).simulate(real.row_X, judge_ids=real.row_judge)
    assert 0 < trace.n_asked.mean() < 9  # some questions are not worth asking
    assert all(g >= 0 for gs in trace.gains for g in gs)
    capped = AskPolicy(model, budget=3, stop_at=-np.inf).simulate(real.row_X, judge_ids=real.row_judge)
    assert (capped.n_asked == 3).all() and all(len(set(o)) == 3 for o in capped.order)


def test_answer_check_flags_the_real_dialogues_and_not_held_out_synthetic_ones(fitted):
    """The synthetic-to-real shift of issue 5, seen from the LLM's answers alone (no labels): on
    held-out synthetic dialogues the excess surprise stays near the model's reference; on the real
    ones it is well above it, whether every rubric was read or the policy chose a few."""
    held_out, real, model = fitted
    assert model.answer_surprise_reference_ is not None
    nb = real.X.shape[1]
    checks = {}
    for name, d in (("synthetic", held_out), ("real", real)):
        every = model.answer_surprise(d.X, [list(range(nb))] * len(d.X))
        trace = AskPolicy(model, budget=3, stop_at=-np.inf).simulate(d.X)
        few = model.answer_surprise(d.X, trace.order)
        checks[name] = (check_answer_shift(every, model.answer_surprise_reference_),
                        check_answer_shift(few, model.answer_surprise_reference_))
    for name, pair in checks.items():
        print(name, [f"{c.mean - c.reference:+.3f} [{c.low - c.reference:+.3f}, {c.high - c.reference:+.3f}]"
                     for c in pair])
    for shift in checks["synthetic"]:
        assert not shift.shifted and shift.mean - shift.reference < 0.1
    for shift in checks["real"]:
        assert shift.shifted and shift.low > shift.reference + 0.1
        assert "unlike the training texts" in shift.message()
