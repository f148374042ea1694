"""Cross-validation by text, optuna search, save/load round trip."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rubric_induce.calibration.artifacts import load_calibrator, save_calibrator
from rubric_induce.calibration.baselines import PersonalizedIsotonic
from rubric_induce.calibration.calibrator import Calibrator
from rubric_induce.calibration.data import CalibrationData
from rubric_induce.calibration.search import cross_val_predict, group_kfold, search_hyperparameters
from rubric_induce.core.errors import DataError  # noqa: E402

FAST = dict(hidden=(8, 8), learning_rate=1e-2, batch_size=64, pretrain_epochs=5, finetune_epochs=5)


def to_data(planted, scales, n_texts=90):
    X, J, Y, G, _ = planted
    texts = list(dict.fromkeys(G))[:n_texts]
    index = {t: i for i, t in enumerate(texts)}
    keep = np.array([g in index for g in G])
    row_text = np.array([index[g] for g in G[keep]])
    Xt = np.zeros((len(texts), 3, 4))
    Xt[row_text] = X[keep]
    return CalibrationData(X=Xt, text_ids=texts, input_names=["A", "B", "C"], row_text=row_text,
                           row_judge=J[keep], targets=Y[keep], question_names=["Q0", "Q1", "Q2"],
                           scales=[tuple(map(float, s)) for s in scales])


def test_group_kfold_partitions_texts():
    folds = group_kfold(23, 5, seed=1)
    allx = np.sort(np.concatenate(folds))
    assert allx.tolist() == list(range(23)) and {len(f) for f in folds} <= {4, 5}
    with pytest.raises(ValueError):
        group_kfold(3, 5)


def test_cross_val_predict_never_splits_a_text(planted, scales):
    data = to_data(planted, scales)
    cv = cross_val_predict(Calibrator(**FAST), data, n_splits=3, seed=0)
    assert np.isfinite(cv["pred"]).all() and cv["proba"].shape == (data.n_rows, 4)
    for t in range(len(data.text_ids)):
        assert len(set(cv["fold"][data.row_text == t])) == 1
    iso = cross_val_predict(Calibrator(**FAST), data, n_splits=3, seed=0,
                            make_model=lambda tr: PersonalizedIsotonic(Calibrator(**FAST), min_rows=3).fit(
                                *tr.fit_args()[:3], **tr.fit_args()[3]),
                            predict=lambda m, te: m.predict(te.row_X, judge_ids=te.row_judge))
    assert np.isfinite(iso["pred"]).all()


def test_search_and_nested_cv(planted, scales):
    pytest.importorskip("optuna")
    data = to_data(planted, scales, n_texts=60)
    space = {"learning_rate": (1e-3, 1e-2), "hidden1": (4, 8), "hidden2": (8,)}
    res = search_hyperparameters(Calibrator(**FAST), data, n_trials=2, n_splits=3, seed=0, space=space)
    assert set(res["best_params"]) == {"learning_rate", "hidden"} and len(res["trials"]) == 2
    assert np.isfinite(res["best_value"]) and res["best_value"] < 0


def test_save_load_round_trip_identical(planted, scales, tmp_path):
    X, J, Y, G, _ = planted
    cal = Calibrator(**FAST, n_ensemble=2, head="ordinal").fit(X, J, Y, scales=scales, groups=G,
                                                               input_names=["A", "B", "C"])
    for fmt in ("safetensors", "npz"):
        if fmt == "safetensors":
            pytest.importorskip("safetensors")
        d = save_calibrator(cal, tmp_path / fmt, fmt=fmt, extra={"note": "x"})
        files = {p.name for p in d.iterdir()}
        assert "calibrator.json" in files and not any(f.endswith((".pkl", ".pt")) for f in files)
        cfg = json.loads((d / "calibrator.json").read_text())
        assert cfg["judges"] == cal.judges_ and cfg["scales"][2] == [1.0, 2.0, 3.0] and "torch" in cfg["versions"]
        back = load_calibrator(d)
        for who in (None, "j1", ["j0", "j2"]):
            np.testing.assert_array_equal(back.predict_proba(X[:30], who), cal.predict_proba(X[:30], who))
        np.testing.assert_array_equal(back.predict(X[:30], judge_ids=J[:30], question="Q2"),
                                      cal.predict(X[:30], judge_ids=J[:30], question="Q2"))
    with pytest.raises(DataError, match="calibrator.json"):
        load_calibrator(tmp_path)
    cfg_path = tmp_path / "npz" / "calibrator.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["judges"].append("extra")  # vocabulary no longer matches the weights
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(DataError, match="shape"):
        load_calibrator(tmp_path / "npz")
