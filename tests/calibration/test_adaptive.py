"""AdaptiveModel and AskPolicy (issue 22): planted follow-up data, stop rules, save/load, numpy forward."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from rubric_induce.calibration.adaptive import AdaptiveModel, load_adaptive, save_adaptive  # noqa: E402
from rubric_induce.calibration.adaptive_numpy import np_forward, random_masks  # noqa: E402
from rubric_induce.calibration.calibrator import Calibrator  # noqa: E402
from rubric_induce.calibration.completion import GaussianCompletion  # noqa: E402
from rubric_induce.calibration.planted import planted_adaptive, planted_redundant  # noqa: E402
from rubric_induce.calibration.policy import AskPolicy  # noqa: E402
from rubric_induce.core.errors import DataError, NotFittedError  # noqa: E402
from rubric_induce.core.stats import pearson  # noqa: E402


@pytest.fixture(scope="module")
def planted():
    train, test = planted_adaptive(400, seed=0), planted_adaptive(300, seed=1)
    X, J, Y, kw = train.fit_args()
    model = AdaptiveModel(not_applicable=(), n_threads=1, random_state=0, n_members=2).fit(X, J, Y, **kw)
    return train, test, model


@pytest.mark.slow
def test_fit_is_sklearn_shaped_and_seeded(planted):
    train, test, model = planted
    assert model.get_params()["epochs"] == 200 and repr(model).startswith("AdaptiveModel(")
    assert model.input_names_ == train.input_names and model.judges_ == ["j0", "j1", "j2", "j3"]
    assert model.prototypes_.shape == (5, 5, 4) and model.input_widths_ == [4] * 5
    X, J, Y, kw = train.subset_texts(np.arange(60)).fit_args()
    a = AdaptiveModel(not_applicable=(), epochs=5, random_state=3).fit(X, J, Y, **kw)
    b = AdaptiveModel(not_applicable=(), epochs=5, random_state=3).fit(X, J, Y, **kw)
    assert np.allclose(a.predict(test.X[:20]), b.predict(test.X[:20]))
    with pytest.raises(NotFittedError):
        AdaptiveModel().predict(test.X)


@pytest.mark.slow
def test_numpy_forward_matches_torch(planted):
    _, test, model = planted
    xin = model._inputs(test.X.astype(np.float32), random_masks(len(test.X), 5, np.random.default_rng(0)))
    judges = np.array([-1, 0, 1, 2, 3] * 60)
    with torch.no_grad():
        ref = model.target_nets_[0](torch.from_numpy(xin), torch.from_numpy(judges)).exp().numpy()
    assert np.abs(np_forward(model._np_targets[0], xin.astype(np.float64), judges) - ref).max() < 1e-5
    # one question per row: the same numbers as the full forward, for the answer and target networks
    q = np.arange(len(xin)) % 5
    shared = np.full(len(xin), -1)
    full = np_forward(model._np_answers[0], xin.astype(np.float64), shared)
    np.testing.assert_allclose(np_forward(model._np_answers[0], xin.astype(np.float64), shared, q),
                               full[np.arange(len(xin)), q], atol=1e-12)
    one = np_forward(model._np_targets[0], xin.astype(np.float64), judges, np.zeros(len(xin), dtype=int))
    np.testing.assert_allclose(one, np_forward(model._np_targets[0], xin.astype(np.float64), judges)[:, 0])


def test_ordinal_numpy_forward_matches_torch():
    from rubric_induce.calibration.adaptive_numpy import np_state as _np_state
    from rubric_induce.calibration.network import CalibrationNetwork

    torch.manual_seed(0)
    net = CalibrationNetwork(10, 3, [4, 3, 2], (6, 5), head="ordinal", init="normal").eval()
    x = np.random.default_rng(0).random((30, 10))
    j = np.random.default_rng(1).integers(-1, 3, 30)
    with torch.no_grad():
        ref = net(torch.from_numpy(x).float(), torch.from_numpy(j)).exp().numpy()
    ref = np.where(net.answer_mask.numpy(), ref, 0.0)
    assert np.abs(np_forward(_np_state(net), x, j) - ref).max() < 1e-5


@pytest.mark.slow
def test_masking_model_learns_the_follow_up_structure(planted):
    _, test, model = planted
    types, z = test.meta["types"], test.meta["latent"]
    obs = np.zeros(test.X.shape[:2], dtype=bool)
    obs[:, [0, 1]] = True  # the screen and type 0's follow-up
    pred = model.predict(test.X, obs)
    assert pearson(pred[types == 0], z[types == 0]) > 0.7  # informative where it should be
    assert abs(pearson(pred[types == 1], z[types == 1])) < 0.3  # noise where it should be
    # the unasked answers: given the screen, type 0's follow-up is predicted sharper on type-0 texts
    obs[:, 1] = False
    pa = model.predict_answers(test.X, obs)
    assert pa.shape == (len(test.X), 5, 5) and np.allclose(pa.sum(axis=2), 1.0)


@pytest.mark.slow
def test_policy_asks_each_text_its_own_follow_up(planted):
    _, test, model = planted
    trace = AskPolicy(model, budget=2, stop_at=-np.inf).simulate(test.X)
    first = np.array([o[0] for o in trace.order])
    second = np.array([o[1] for o in trace.order])
    assert (first == 0).mean() > 0.9  # the screen first: the largest immediate gain
    assert (second == test.meta["informative"]).mean() > 0.85  # then the text's own follow-up
    # the static order asks everyone the same follow-up, so adaptive wins at equal budget
    y = test.targets[:, 0]

    def r(order, budget):
        tr = AskPolicy(model, budget=budget, stop_at=-np.inf, order=order).simulate(test.row_X,
                                                                                   judge_ids=test.row_judge)
        return pearson(model.predict(test.row_X, tr.observed, judge_ids=test.row_judge), y)

    assert r("adaptive", 2) > r("given", 2) + 0.03
    assert r("adaptive", 2) > r("random", 2) + 0.05


@pytest.mark.slow
def test_budget_all_equals_the_full_model_and_is_close_to_the_calibrator(planted):
    train, test, model = planted
    trace = AskPolicy(model, budget=None, stop_at=-np.inf).simulate(test.row_X, judge_ids=test.row_judge)
    assert (trace.n_asked == 5).all() and all(s == "all asked" for s in trace.stop)
    full = np.ones(test.row_X.shape[:2], dtype=bool)
    assert np.allclose(model.predict(test.row_X, trace.observed, judge_ids=test.row_judge),
                       model.predict(test.row_X, full, judge_ids=test.row_judge))
    X, J, Y, kw = train.fit_args()
    cal = Calibrator(not_applicable=(), n_threads=1, random_state=0, finetune_epochs=60).fit(X, J, Y, **kw)
    a = model.predict(test.row_X, full, judge_ids=test.row_judge)
    c = cal.predict(test.row_X, judge_ids=test.row_judge)
    assert pearson(a, c) > 0.9 and np.mean(np.abs(a - c)) < 0.25


@pytest.mark.slow
@pytest.mark.parametrize("budget", [0, 1, 3])
def test_stop_rule_respects_budget_and_stop_at(planted, budget):
    _, test, model = planted
    trace = AskPolicy(model, budget=budget, stop_at=-np.inf).simulate(test.X[:50])
    assert (trace.n_asked == budget).all()
    loose = AskPolicy(model, stop_at=0.02).simulate(test.X[:50])
    for _order, gains, stop in zip(loose.order, loose.gains, loose.stop):
        assert all(g > 0.02 for g in gains)  # nothing asked at or below stop_at
        assert stop in ("stop_at", "all asked")
    assert 0 < loose.n_asked.mean() < 5
    assert (AskPolicy(model, stop_at=1e9).simulate(test.X[:10]).n_asked == 0).all()
    # unavailable blocks are never asked
    avail = np.ones((50, 5), dtype=bool)
    avail[:, 0] = False
    assert all(0 not in o for o in AskPolicy(model, stop_at=-np.inf).simulate(test.X[:50], available=avail).order)


@pytest.mark.slow
def test_static_orders(planted):
    _, test, model = planted
    given = AskPolicy(model, budget=3, order="given").simulate(test.X[:10])
    assert all(o == [0, 1, 2] for o in given.order) and all(np.isnan(g).all() for g in given.gains)
    custom = AskPolicy(model, budget=2, order=[4, 2]).simulate(test.X[:10])
    assert all(o == [4, 2] for o in custom.order)
    rnd = AskPolicy(model, budget=5, order="random", seed=1).simulate(test.X[:20])
    assert all(sorted(o) == [0, 1, 2, 3, 4] for o in rnd.order) and len({tuple(o) for o in rnd.order}) > 1
    with pytest.raises(DataError):
        AskPolicy(model, order=[0, 0])
    with pytest.raises(DataError):
        AskPolicy(model, budget=-1)
    with pytest.raises(DataError):
        AskPolicy(model, criterion="kl")


@pytest.mark.slow
def test_decision_criterion_for_a_binary_label():
    data = planted_adaptive(300, seed=2)
    y = (data.targets[:, 0] >= 3).astype(float)[:, None]
    X, J, _, kw = data.fit_args()
    kw["scales"] = [(0.0, 1.0)]
    model = AdaptiveModel(not_applicable=(), n_threads=1, epochs=120, n_members=2).fit(X, J, y, **kw)
    pol = AskPolicy(model, stop_at=-np.inf, budget=1)
    assert pol.criterion == "decision" and pol.threshold == 0.5
    trace = pol.simulate(data.X[:50])
    assert all(len(o) == 1 for o in trace.order) and all(0 <= g[0] <= 1 for g in trace.gains)


@pytest.mark.slow
def test_save_load_round_trip_without_pickle(planted, tmp_path):
    _, test, model = planted
    save_adaptive(model, tmp_path / "a")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["adaptive.json", "adaptive.safetensors"]
    back = load_adaptive(tmp_path / "a")
    obs = random_masks(len(test.X), 5, np.random.default_rng(2))
    assert np.allclose(back.predict(test.X, obs), model.predict(test.X, obs))
    assert np.allclose(back.predict_answers(test.X, obs), model.predict_answers(test.X, obs))
    cfg = json.loads((tmp_path / "a" / "adaptive.json").read_text())
    cfg["format"] = "something else"
    (tmp_path / "a" / "adaptive.json").write_text(json.dumps(cfg))
    with pytest.raises(DataError, match="adaptive-model config"):
        load_adaptive(tmp_path / "a")
    with pytest.raises(DataError, match="no adaptive model"):
        load_adaptive(tmp_path / "missing")


@pytest.mark.slow
def test_bad_input_is_a_clear_error(planted):
    _, test, model = planted
    with pytest.raises(DataError, match="fitted on"):
        model.predict(test.X[:, :3])
    with pytest.raises(DataError, match="observed has shape"):
        model.predict(test.X, np.ones((2, 2), dtype=bool))
    with pytest.raises(DataError, match="question blocks"):
        AdaptiveModel().fit(test.X.reshape(len(test.X), -1), ["a"] * len(test.X), np.ones(len(test.X)))
    with pytest.raises(ValueError, match="epochs"):
        AdaptiveModel(epochs=0).fit(test.X, ["a"] * len(test.X), np.ones(len(test.X)))


def test_random_masks_cover_every_size():
    m = random_masks(4000, 5, np.random.default_rng(0))
    sizes = np.bincount(m.sum(axis=1), minlength=6)
    assert (sizes > 500).all()  # 0..5 observed blocks, about uniformly


def test_gaussian_completion_is_the_conditional_mean():
    """On Gaussian-like data the fill equals the textbook conditional mean; asked blocks are kept,
    filled blocks stay sub-probability vectors."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=2000)
    base = np.stack([0.25 + 0.05 * (z + 0.3 * rng.normal(size=2000)) for _ in range(3)], axis=1)  # [n, 3]
    V = np.stack([np.stack([b, 1 - b - 0.2, np.full_like(b, 0.1), np.full_like(b, 0.1)], axis=1)
                  for b in base.T], axis=1)  # [n, 3 blocks, 4 answers], each block sums to 1
    comp = GaussianCompletion().fit(V)
    obs = np.zeros((2000, 3), dtype=bool)
    obs[:, 0] = True
    out = comp.complete(V, obs)
    assert np.array_equal(out[:, 0], V[:, 0])
    assert (out >= 0).all() and (out.sum(axis=2) <= 1 + 1e-9).all()
    # the filled block 1 tracks the asked block 0 (same latent): r about 0.9 in the data
    assert np.corrcoef(out[:, 1, 0], V[:, 1, 0])[0, 1] > 0.8
    flat = V.reshape(2000, -1)
    mu, cov = comp.mean_, comp.covariance_
    o, u = np.arange(4), np.arange(4, 8)
    expect = mu[u] + (flat[:, o] - mu[o]) @ np.linalg.pinv(cov[np.ix_(o, o)]) @ cov[np.ix_(o, u)]
    assert np.abs(np.clip(expect, 0, 1) - out[:, 1]).max() < 1e-6
    # nothing asked: the training mean
    assert np.allclose(comp.complete(V[:5], np.zeros((5, 3), dtype=bool))[:, 2], mu[8:].clip(0, 1))


@pytest.mark.slow
def test_one_redundant_question_carries_the_whole_set():
    """Questions that read one quality (as on the LLM-RUBRIC release): one asked question keeps at
    least 90 % of the all-questions Pearson gain over the judge baseline, with either fill (on this
    clean data the zero fill learns it too; on the LLM-RUBRIC release it does not: BENCHMARKS.md)."""
    train, test = planted_redundant(300, seed=0), planted_redundant(300, seed=1)
    X, J, Y, kw = train.fit_args()
    y, tX, tJ = test.targets[:, 0], test.row_X, test.row_judge
    shares = {}
    for completion in ("gaussian", "zeros"):
        m = AdaptiveModel(not_applicable=(), n_threads=1, epochs=80, n_members=2, completion=completion,
                          random_state=0).fit(X, J, Y, **kw)
        none = pearson(m.predict(tX, np.zeros(tX.shape[:2], bool), judge_ids=tJ), y)
        full = pearson(m.predict(tX, np.ones(tX.shape[:2], bool), judge_ids=tJ), y)
        one = AskPolicy(m, budget=1, stop_at=-np.inf).simulate(tX, judge_ids=tJ)
        shares[completion] = (pearson(m.predict(tX, one.observed, judge_ids=tJ), y) - none) / (full - none)
    assert shares["gaussian"] >= 0.9 and shares["zeros"] >= 0.9


@pytest.mark.slow
def test_gains_are_the_spread_over_outcomes_and_zero_for_a_dead_question(planted):
    """The mixture form: gains are never negative, and a question whose answer is the same for
    every text (it cannot move the prediction) gets no gain and is never asked before a live one."""
    train, test, _ = planted
    Xd = train.X.copy()
    Xd[:, 4] = np.array([0.1, 0.2, 0.3, 0.4])  # noise1 becomes a constant block
    dead = replace(train, X=Xd)
    X, J, Y, kw = dead.fit_args()
    m = AdaptiveModel(not_applicable=(), n_threads=1, epochs=60, n_members=1, random_state=0).fit(X, J, Y, **kw)
    pol = AskPolicy(m, stop_at=-np.inf)
    Xt = test.X.copy()
    Xt[:, 4] = np.array([0.1, 0.2, 0.3, 0.4])
    obs = np.zeros(Xt.shape[:2], dtype=bool)
    g = pol.gains(Xt[:40], obs[:40], m.judge_rows(None, 40))
    assert (g >= 0).all()
    # ~1e-6 rather than 0: the unseen no-mass class weighs ~1e-6, and the covariance shrinkage gives
    # the constant block a little variance; a live question gains > 0.01
    assert (g[:, 4] < 1e-4).all() and (g[:, 0] > 0.01).all()
    trace = AskPolicy(m, budget=4, stop_at=0.0).simulate(Xt[:40])
    assert all(4 not in o for o in trace.order)


@pytest.mark.slow
def test_members_average_and_seeds(planted):
    train, test, _ = planted
    X, J, Y, kw = train.subset_texts(np.arange(120)).fit_args()
    opts = dict(not_applicable=(), n_threads=1, epochs=15)
    both = AdaptiveModel(n_members=2, random_state=4, **opts).fit(X, J, Y, **kw)
    a = AdaptiveModel(n_members=1, random_state=4, **opts).fit(X, J, Y, **kw)
    b = AdaptiveModel(n_members=1, random_state=4 + 1009, **opts).fit(X, J, Y, **kw)
    obs = random_masks(len(test.X), 5, np.random.default_rng(3))
    assert np.allclose(both.predict_proba(test.X, obs), (a.predict_proba(test.X, obs) + b.predict_proba(test.X, obs)) / 2)
    assert len(both.target_nets_) == len(both.answer_nets_) == 2 and len(both.history_["members"]) == 2
    with pytest.raises(ValueError, match="completion"):
        AdaptiveModel(completion="mice").fit(X, J, Y, **kw)
    with pytest.raises(ValueError, match="n_members"):
        AdaptiveModel(n_members=0).fit(X, J, Y, **kw)


@pytest.mark.slow
def test_a_version_1_artifact_still_loads(planted, tmp_path):
    """Models saved before the Gaussian fill (one network pair, unasked blocks zeroed) load as such."""
    from safetensors.numpy import load_file, save_file

    train, test, _ = planted
    X, J, Y, kw = train.subset_texts(np.arange(120)).fit_args()
    m = AdaptiveModel(not_applicable=(), n_threads=1, epochs=10, n_members=1, completion="zeros").fit(X, J, Y, **kw)
    d = save_adaptive(m, tmp_path / "v1")
    cfg = json.loads((d / "adaptive.json").read_text())
    cfg["format_version"] = 1
    for key in ("completion", "n_members"):
        cfg["params"].pop(key)
    (d / "adaptive.json").write_text(json.dumps(cfg))
    tensors = load_file(str(d / "adaptive.safetensors"))
    save_file({k.replace(".0.", ".", 1): v for k, v in tensors.items()}, str(d / "adaptive.safetensors"))
    back = load_adaptive(d)
    assert back.completion == "zeros" and back.n_members == 1
    obs = random_masks(len(test.X), 5, np.random.default_rng(5))
    assert np.allclose(back.predict_proba(test.X, obs), m.predict_proba(test.X, obs))


@pytest.mark.slow
def test_many_rubrics_train_on_a_pool_of_mask_patterns():
    """With 12 rubrics (4096 subsets) each epoch's masks come from a fixed pool per member, so the
    Gaussian fill solves a bounded number of patterns however long training runs."""
    from rubric_induce.calibration.adaptive_training import MASK_POOL as _MASK_POOL

    data = planted_redundant(80, n_questions=12, seed=3)
    X, J, Y, kw = data.fit_args()
    m = AdaptiveModel(not_applicable=(), n_threads=1, epochs=6, n_members=2).fit(X, J, Y, **kw)
    assert 0 < len(m.completion_._maps) <= 2 * _MASK_POOL  # (no validation rows: early stopping off)
    assert np.isfinite(m.predict(data.X[:5], random_masks(5, 12, np.random.default_rng(0)))).all()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), nb=st.integers(1, 6), k=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_gaussian_fill_keeps_asked_blocks_and_sub_probabilities(n, nb, k, seed):
    """Any data shape (one text, one block, degenerate covariances): asked blocks come back
    unchanged, filled blocks are sub-probability vectors, nothing is NaN."""
    rng = np.random.default_rng(seed)
    V = rng.dirichlet(np.ones(k + 1), size=(n, nb))[..., :k] * rng.integers(0, 2, (n, nb, 1))
    comp = GaussianCompletion().fit(V)
    obs = rng.random((n, nb)) < 0.5
    out = comp.complete(V, obs)
    assert out.shape == V.shape and np.isfinite(out).all()
    assert np.array_equal(out[obs], V[obs])
    assert (out >= 0).all() and (out.sum(axis=2) <= 1 + 1e-9).all()


def test_spread_points_carry_the_conditional_covariance():
    """Sigma points: with nothing asked their second moment is the block's covariance; once an
    exact duplicate of the block is asked they collapse (asking it again could not move anything)."""
    rng = np.random.default_rng(1)
    a = rng.dirichlet(np.ones(4), size=500)[:, :3]
    V = np.stack([a, a, rng.dirichlet(np.ones(4), size=500)[:, :3]], axis=1)  # block 1 duplicates block 0
    comp = GaussianCompletion().fit(V)
    none = comp.spread_points(np.array([False, False, False]), 0)
    assert none.shape == (6, 3)
    cov0 = comp.covariance_[:3, :3]
    assert np.allclose(none.T @ none / 6, cov0, atol=1e-9)
    pinned = comp.spread_points(np.array([True, False, False]), 1)
    free = comp.spread_points(np.array([True, False, False]), 2)
    assert np.abs(pinned).max() < 0.2 * np.abs(free).max()


@pytest.mark.slow
def test_outcomes_option(planted):
    train, test, model = planted
    X, J, Y, kw = train.subset_texts(np.arange(100)).fit_args()
    zero = AdaptiveModel(not_applicable=(), n_threads=1, epochs=5, n_members=1, completion="zeros").fit(X, J, Y, **kw)
    assert AskPolicy(zero).outcomes == "answers"  # no Gaussian to imagine answers with
    with pytest.raises(DataError, match="completion='gaussian'"):
        AskPolicy(zero, outcomes="gaussian")
    with pytest.raises(DataError, match="outcomes"):
        AskPolicy(model, outcomes="dice")
    obs = np.zeros((20, 5), dtype=bool)
    obs[:, 0] = True
    jr = model.judge_rows(None, 20)
    g = {o: AskPolicy(model, outcomes=o).gains(test.X[:20], obs, jr) for o in ("both", "answers", "gaussian")}
    assert np.allclose(g["both"][:, 1:], (g["answers"][:, 1:] + g["gaussian"][:, 1:]) / 2)
    assert np.isneginf(g["both"][:, 0]).all() and (g["gaussian"][:, 1:] >= 0).all()


@pytest.fixture(scope="module")
def redundant_model():
    train = planted_redundant(300, seed=0)
    X, J, Y, kw = train.fit_args()
    model = AdaptiveModel(not_applicable=(), n_threads=1, random_state=0, n_members=2, epochs=120,
                          early_stopping=True).fit(X, J, Y, **kw)
    return model


@pytest.mark.slow
def test_answer_surprise_is_cross_entropy_minus_entropy(redundant_model):
    model = redundant_model
    X = planted_redundant(20, seed=5).X
    order = [[2, 0, 5], [1], [], [4, 3, 2, 1, 0, 5]] * 5
    got = model.answer_surprise(X, order)
    soft = model._soft_targets(X, np.asarray(model.input_widths_))
    for i, o in enumerate(order):
        if not o:
            assert np.isnan(got[i])
            continue
        seen = np.zeros((1, X.shape[1]), dtype=bool)
        vals = []
        for b in o:  # by hand: each answer under the prediction made from the answers before it
            p = np.clip(model.predict_answers(X[i:i + 1], seen)[0, b], 1e-12, None)
            vals.append(-(soft[i, b] * np.log(p)).sum() + (p * np.log(p)).sum())
            seen[0, b] = True
        assert got[i] == pytest.approx(np.mean(vals), abs=1e-9)
    # a failed probe (not observed) is skipped, and the next answer is predicted without it
    obs = np.ones(X.shape[:2], dtype=bool)
    obs[0, 2] = False
    skipped = model.answer_surprise(X[:1], [[2, 0, 5]], obs[:1])
    assert skipped[0] == pytest.approx(model.answer_surprise(X[:1], [[0, 5]])[0], abs=1e-12)
    with pytest.raises(DataError, match="order has"):
        model.answer_surprise(X, order[:3])
    with pytest.raises(DataError, match="outside"):
        model.answer_surprise(X[:1], [[9]])
    with pytest.raises(DataError, match="outside"):
        model.answer_surprise(X[:1], [[0, -1]])
    with pytest.raises(DataError, match="repeats a block"):
        model.answer_surprise(X[:1], [[1, 1]])


@pytest.mark.slow
def test_answer_check_flags_answers_that_stop_agreeing(redundant_model, tmp_path):
    """Training texts: every rubric reads one quality, so the answers agree. New texts of the same
    kind pass the check; texts whose answers no longer agree (each rubric's answers shuffled across
    texts: every rubric's own answer frequencies unchanged) are flagged, from 3 answers or all 6."""
    from rubric_induce.core.stats import check_answer_shift

    model = redundant_model
    ref = model.answer_surprise_reference_
    assert ref is not None and abs(ref) < 0.2
    like = planted_redundant(300, seed=1).X
    rng = np.random.default_rng(0)
    unlike = np.stack([like[rng.permutation(len(like)), b] for b in range(like.shape[1])], axis=1)
    nb = like.shape[1]
    for order in ([list(range(nb))] * len(like), [list(rng.permutation(nb)[:3]) for _ in like]):
        same = check_answer_shift(model.answer_surprise(like, order), ref)
        other = check_answer_shift(model.answer_surprise(unlike, order), ref)
        assert not same.shifted and same.low < ref + 0.1
        assert other.shifted and other.mean > same.mean + 0.2
    # the reference survives save / load
    back = load_adaptive(save_adaptive(model, tmp_path / "m"))
    assert back.answer_surprise_reference_ == pytest.approx(ref)


def test_check_answer_shift_edge_cases():
    from rubric_induce.core.stats import check_answer_shift

    assert check_answer_shift([]) is None and check_answer_shift([0.3, None, float("nan")]) is None
    flat = check_answer_shift([0.5] * 10, 0.0)
    assert flat.shifted and flat.low == flat.high == 0.5
    assert not check_answer_shift([0.05] * 10, 0.0).shifted
    mixed = check_answer_shift([0.0, 0.1, None, 0.05, float("nan")], None)
    assert mixed.n_texts == 3 and mixed.reference == 0.0 and not mixed.shifted
    assert not mixed.reference_known and "no held-out figure" in mixed.message()
    assert check_answer_shift([0.0, 0.1], -0.02).reference_known


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-2, 2, allow_nan=False), min_size=2, max_size=40), st.floats(-1, 1))
def test_check_answer_shift_depends_only_on_the_distance_to_the_reference(vals, shift):
    from rubric_induce.core.stats import check_answer_shift

    a = check_answer_shift(vals, 0.0)
    b = check_answer_shift([v + shift for v in vals], shift)
    assert a.shifted == b.shifted and a.p_value == pytest.approx(b.p_value, abs=1e-6)
    assert a.low <= a.mean <= a.high


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2 ** 31 - 1), st.floats(0.0, 1.0))
def test_answer_surprise_is_finite_for_any_answers_and_orders(redundant_model, n, seed, zero_share):
    """Any answers (blocks with no mass, sub-probabilities, one-hot) in any order, failed probes
    included: finite where something was read, NaN where nothing was."""
    model = redundant_model
    rng = np.random.default_rng(seed)
    nb, k = model.n_features_in_shape_
    X = rng.dirichlet(np.ones(k), size=(n, nb)) * rng.uniform(0.0, 1.0, size=(n, nb, 1))
    X[rng.random((n, nb)) < zero_share] = 0.0
    order = [list(rng.permutation(nb)[: rng.integers(0, nb + 1)]) for _ in range(n)]
    observed = rng.random((n, nb)) < 0.8
    got = model.answer_surprise(X, order, observed)
    read = np.array([any(observed[i, b] for b in o) for i, o in enumerate(order)], dtype=bool)
    assert np.isfinite(got[read]).all() and np.isnan(got[~read]).all()
