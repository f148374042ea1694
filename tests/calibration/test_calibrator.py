"""Properties of the calibration network on seeded synthetic data, and its edge cases."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rubric_induce.calibration.calibrator import Calibrator, NotFittedError, check_features  # noqa: E402
from rubric_induce.calibration.network import CalibrationNetwork, masked_nll  # noqa: E402
from rubric_induce.core.errors import DataError  # noqa: E402

SCALES = [(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3)]
FAST = dict(hidden=(10, 10), learning_rate=1e-2, batch_size=32, pretrain_epochs=15, finetune_epochs=15)


def split(data, frac=0.75):
    X, J, Y, G, lat = data
    texts = np.unique(G)
    train_texts = set(texts[: int(len(texts) * frac)])
    tr = np.array([g in train_texts for g in G])
    return (X[tr], J[tr], Y[tr], G[tr]), (X[~tr], J[~tr], Y[~tr], G[~tr])


@pytest.fixture(scope="module")
def fitted(planted):
    (X, J, Y, G), test = split(planted)
    cal = Calibrator(**FAST, random_state=0).fit(X, J, Y, scales=SCALES, groups=G)
    return cal, test


def _nll(p, y, scale):
    idx = np.searchsorted(np.asarray(scale, dtype=float), y)
    return -np.mean(np.log(np.clip(p[np.arange(len(y)), idx], 1e-12, None)))


def test_calibration_lowers_log_loss_vs_raw_llm(fitted):
    cal, (X, J, Y, G) = fitted
    y = Y[:, 0]
    raw = X[:, 0, :] / X[:, 0, :].sum(axis=1, keepdims=True)
    raw = np.clip(raw, 1e-6, None)
    raw = raw / raw.sum(axis=1, keepdims=True)
    assert _nll(cal.predict_proba(X, judge_ids=J), y, SCALES[0]) < _nll(raw, y, SCALES[0]) - 0.1


def test_predictions_are_distributions_and_decodes(fitted):
    cal, (X, J, Y, G) = fitted
    p = cal.predict_proba(X, judge_ids=J)
    assert p.shape == (len(X), 4)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(cal.predict(X, judge_ids=J), p @ np.arange(1, 5), atol=1e-6)
    assert (cal.predictive_variance(X, judge_ids=J) >= 0).all()
    ent = cal.entropy(X, judge_ids=J)
    assert ((ent >= 0) & (ent <= np.log(4) + 1e-9)).all()
    p2 = cal.predict_proba(X, judge_ids=J, question="Q2")  # 3-point question: its own scale
    assert p2.shape == (len(X), 3)
    assert ((cal.predict(X, judge_ids=J, question=2) >= 1) & (cal.predict(X, judge_ids=J, question=2) <= 3)).all()


def test_personalization_helps_with_planted_biases(planted):
    (X, J, Y, G), (Xt, Jt, Yt, Gt) = split(planted)
    errs = {}
    for pers in (True, False):
        cal = Calibrator(**FAST, personalized=pers, random_state=0).fit(X, J, Y, scales=SCALES, groups=G)
        errs[pers] = np.sqrt(np.mean((cal.predict(Xt, judge_ids=Jt) - Yt[:, 0]) ** 2))
    assert errs[True] < errs[False] - 0.1


def test_masked_loss_matches_hand_computation():
    torch.manual_seed(0)
    logits = torch.randn(3, 2, 4)
    logp = torch.log_softmax(logits, dim=-1)
    targets = torch.tensor([[0, -1], [-1, -1], [3, 1]])
    got = float(masked_nll(logp, targets))
    lp = logp.numpy()
    hand = -(lp[0, 0, 0] + lp[2, 0, 3] + lp[2, 1, 1]) / 3  # the 3 observed cells, not 6
    assert got == pytest.approx(hand, rel=1e-6)
    assert float(masked_nll(logp, targets, questions=[1])) == pytest.approx(-lp[2, 1, 1], rel=1e-6)
    assert float(masked_nll(logp, torch.full((3, 2), -1))) == 0.0


def test_not_applicable_rows_do_not_change_the_fit(planted):
    X, J, Y, G, _ = planted
    X, J, Y, G = X[:120], J[:120], Y[:120], G[:120]
    a = Calibrator(**FAST, random_state=3).fit(X, J, Y, scales=SCALES, groups=G)
    # Extra rows whose every answer is not applicable (or unanswered) are ignored exactly.
    Xx = np.concatenate([X, X[:7]])
    Yx = np.concatenate([Y, np.tile([[0.0, np.nan, 0.0]], (7, 1))])
    b = Calibrator(**FAST, random_state=3).fit(Xx, np.concatenate([J, J[:7]]), Yx, scales=SCALES,
                                               groups=np.concatenate([G, G[:7]]))
    assert b.n_rows_ignored_ == 7
    np.testing.assert_allclose(a.predict_proba(X, judge_ids=J), b.predict_proba(X, judge_ids=J), atol=1e-6)


def test_unseen_judge_uses_shared_weights_only(fitted):
    cal, (X, J, Y, G) = fitted
    shared = cal.predict_proba(X)  # judge=None
    np.testing.assert_allclose(cal.predict_proba(X, "never-seen"), shared, atol=1e-7)
    np.testing.assert_allclose(cal.predict_proba(X, judge_ids=["never-seen"] * len(X)), shared, atol=1e-7)
    # Same as a copy of the network with every judge-specific weight set to zero.
    net = cal.networks_[0]
    clone = CalibrationNetwork(net.n_inputs, net.n_judges, net.scale_sizes, net.hidden)
    clone.load_state_dict(net.state_dict())
    with torch.no_grad():
        for p in clone.judge_parameters():
            p.zero_()
        xt = torch.tensor(X.reshape(len(X), -1), dtype=torch.float32)
        p0 = clone(xt, torch.zeros(len(X), dtype=torch.long))[:, 0].exp().numpy()
    np.testing.assert_allclose(shared, p0 / p0.sum(1, keepdims=True), atol=1e-5)
    assert not np.allclose(cal.predict_proba(X, "j0"), shared)


def test_trusted_judges_mean_and_max(fitted):
    cal, (X, J, Y, G) = fitted
    a, b = cal.predict(X, "j0"), cal.predict(X, "j3")
    np.testing.assert_allclose(cal.predict(X, ["j0", "j3"]), (a + b) / 2, atol=1e-9)
    np.testing.assert_allclose(cal.predict(X, ["j0", "j3"], aggregate="max"), np.maximum(a, b), atol=1e-9)
    mix = (cal.predict_proba(X, "j0") + cal.predict_proba(X, "j3")) / 2
    np.testing.assert_allclose(cal.predict_proba(X, ["j0", "j3"]), mix, atol=1e-9)
    with pytest.raises(ValueError):
        cal.predict(X, [])
    with pytest.raises(ValueError):
        cal.predict(X, ["j0"], aggregate="median")


def test_seeded_fits_repeat(planted):
    X, J, Y, G, _ = planted
    a = Calibrator(**FAST, random_state=5).fit(X[:100], J[:100], Y[:100], scales=SCALES)
    b = Calibrator(**FAST, random_state=5).fit(X[:100], J[:100], Y[:100], scales=SCALES)
    np.testing.assert_array_equal(a.predict_proba(X[:20]), b.predict_proba(X[:20]))


@pytest.mark.slow
@pytest.mark.parametrize("head", ["ordinal", "softmax"])
def test_heads_early_stopping_and_ensemble(planted, head):
    X, J, Y, G, _ = planted
    cal = Calibrator(**{**FAST, "pretrain_epochs": 40, "finetune_epochs": 40}, head=head, early_stopping=True,
                     patience=3, n_ensemble=2, random_state=0).fit(X, J, Y, scales=SCALES, groups=G)
    assert len(cal.networks_) == 2
    h = cal.history_[0]
    assert h["n_val_rows"] > 0 and h["finetune"]["epochs_run"] <= 40
    p = cal.predict_proba(X[:10], judge_ids=J[:10], question=2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    assert np.isfinite(cal.predict(X, judge_ids=J)).all()


# ---- edge cases ---------------------------------------------------------------------------

def test_judge_seen_only_once(planted):
    X, J, Y, G, _ = planted
    J2 = J.copy()
    J2[0] = "lonely"
    cal = Calibrator(**FAST).fit(X, J2, Y, scales=SCALES, groups=G)
    assert cal.judge_counts_["lonely"] == 1
    p = cal.predict(X[:5], "lonely")
    assert np.isfinite(p).all() and ((p >= 1) & (p <= 4)).all()


def test_question_never_answered_warns_and_main_never_answered_errors(planted):
    X, J, Y, G, _ = planted
    Y2 = Y.copy()
    Y2[:, 1] = np.nan
    with pytest.warns(UserWarning, match="never answered"):
        cal = Calibrator(**FAST).fit(X, J, Y2, scales=SCALES)
    assert cal.unanswered_questions_ == ["Q1"]
    np.testing.assert_allclose(cal.predict_proba(X[:3], question=1).sum(axis=1), 1.0, atol=1e-6)
    Y3 = Y.copy()
    Y3[:, 0] = 0.0
    with pytest.raises(DataError, match="main question"):
        Calibrator(**FAST).fit(X, J, Y3, scales=SCALES)
    with pytest.raises(DataError, match="scales"):
        Calibrator(**FAST).fit(X, J, Y2)  # a never-answered question needs an explicit scale


def test_text_with_every_question_not_applicable_and_all_zero_inputs(planted):
    X, J, Y, G, _ = planted
    Xz = X.copy()
    Xz[0] = 0.0  # every LLM answer missing
    Yz = Y.copy()
    Yz[1] = 0.0  # every human answer not applicable
    cal = Calibrator(**FAST).fit(Xz, J, Yz, scales=SCALES, groups=G)
    assert cal.n_rows_ignored_ == 1
    p = cal.predict_proba(np.zeros((2, 3, 4)), judge_ids=["j0", "j1"])
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)


def test_probabilities_not_summing_to_one():
    X = np.full((4, 2, 4), 0.2)  # sums to 0.8: kept as the raw mass, not renormalised
    assert check_features(X).shape == (4, 2, 4)
    X[1, 1] = [0.5, 0.5, 0.3, 0.0]
    with pytest.raises(DataError, match="sums to 1.3"):
        check_features(X)


@pytest.mark.parametrize("bad,match", [(np.nan, "NaN"), (-0.1, "negative"), (1.5, "above 1"), (np.inf, "NaN/inf")])
def test_bad_inputs_raise_clear_errors(planted, bad, match):
    X, J, Y, G, _ = planted
    Xb = X[:50].copy()
    Xb[3, 1, 2] = bad
    with pytest.raises(DataError, match=match):
        Calibrator(**FAST).fit(Xb, J[:50], Y[:50], scales=SCALES)


def test_shape_and_label_errors(fitted, planted):
    cal, (X, J, Y, G) = fitted
    with pytest.raises(DataError, match="feature shape"):
        cal.predict(X[:, :2])
    with pytest.raises(DataError, match="judge_ids"):
        cal.predict(X, judge_ids=J[:3])
    Xa, Ja, Ya, Ga, _ = planted
    Yb = Ya.copy()
    Yb[0, 0] = 7
    with pytest.raises(DataError, match="not on question 0's scale"):
        Calibrator(**FAST).fit(Xa, Ja, Yb, scales=SCALES)
    with pytest.raises(DataError, match="rows"):
        Calibrator(**FAST).fit(Xa, Ja[:-1], Ya, scales=SCALES)
    with pytest.raises(DataError, match="main question"):
        Calibrator(**FAST, main_question="Q9").fit(Xa, Ja, Ya, scales=SCALES)


def test_not_fitted_and_bad_params():
    with pytest.raises(NotFittedError, match="not fitted"):
        Calibrator().predict(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="head"):
        Calibrator(head="probit").fit(np.zeros((2, 1, 2)), ["a", "b"], [[1], [2]])
    with pytest.raises(ValueError, match="unknown Calibrator parameter"):
        Calibrator().set_params(hiden=(3, 3))
    assert "learning_rate=0.5" in repr(Calibrator(learning_rate=0.5))


def test_head_only_personalization_keeps_hidden_layers_shared(planted):
    X, J, Y, G, _ = planted
    cal = Calibrator(**FAST, personalized="head").fit(X[:150], J[:150], Y[:150], scales=SCALES)
    net = cal.networks_[0]
    assert float(net.W1a.abs().sum()) == 0.0 and float(net.W2a.abs().sum()) == 0.0
    assert float(net.Va.detach().abs().sum()) > 0.0
    with pytest.raises(ValueError, match="personalized"):
        Calibrator(personalized="hidden").fit(X[:10], J[:10], Y[:10], scales=SCALES)


def test_released_code_normal_init_option(planted):
    """``init="normal"``: every weight, judge-specific ones included, from N(0, 1) (released code)."""
    torch.manual_seed(0)
    net = CalibrationNetwork(12, 3, [4, 4, 3], (10, 10), init="normal")
    for p in (net.W1, net.W1a, net.W2a, net.Va):
        assert float(p.detach().abs().mean()) > 0.5  # N(0, 1): mean |w| is about 0.8
        assert 0.7 < float(p.detach().std()) < 1.3
    default = CalibrationNetwork(12, 3, [4, 4, 3], (10, 10))
    assert float(default.W1a.detach().abs().sum()) == 0.0
    with pytest.raises(ValueError, match="init"):
        CalibrationNetwork(12, 3, [4, 4, 3], init="uniform")
    (X, J, Y, G), _ = split(planted)
    cal = Calibrator(**{**FAST, "pretrain_epochs": 2, "finetune_epochs": 2}, init="normal").fit(X, J, Y, scales=SCALES)
    assert cal.get_params()["init"] == "normal" and cal.clone().init == "normal"
    assert float(cal.networks_[0].W1a.detach().abs().mean()) > 0.5
    np.testing.assert_allclose(cal.predict_proba(X[:5], judge_ids=J[:5]).sum(axis=1), 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="init"):
        Calibrator(init="xavier").fit(X, J, Y, scales=SCALES)
