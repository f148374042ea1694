"""Building calibration data from probe tables; the optional-dependency error."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from rubric_induce.calibration.data import from_probes
from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.data import Example
from rubric_induce.data.model import Judgment
from rubric_induce.data.probes import ProbeRecord, ProbeTable


def _rec(ex, rid, raw, error=None):
    return ProbeRecord(example_id=ex, rubric_id=rid, answers=["1", "2", "3"], values=[1.0, 2.0, 3.0], raw=raw,
                       style="score-only", estimator="logprobs", prompt_hash="h", error=error)


def test_from_probes_zero_blocks_and_rows():
    table = ProbeTable([_rec("a", "r1", [0.2, 0.3, 0.4]), _rec("a", "r2", [0.0, 0.0, 0.0], error="no rating"),
                        _rec("b", "r1", [0.1, 0.1, 0.7])])  # b has no r2 probe at all
    exs = [Example.create({"text": "x"}, {"q": 2.0}, id="a",
                          judgments=[Judgment("u", {"q": 1.0}), Judgment("v", {"q": 3.0})]),
           Example.create({"text": "y"}, {"q": 2.0}, id="b")]
    d = from_probes(table, exs, questions=["q"])
    assert d.X.shape == (2, 2, 3) and d.input_names == ["r1", "r2"]
    np.testing.assert_allclose(d.X[0, 0], [0.2, 0.3, 0.4])  # raw, not renormalised
    assert (d.X[0, 1] == 0).all() and (d.X[1, 1] == 0).all()  # failed / missing -> all-zero block
    assert d.row_judge.tolist() == ["u", "v", "default"] and d.scales == [(1.0, 2.0, 3.0)]
    with pytest.raises(DataError, match="distinct answer"):
        from_probes(table, exs[1:], questions=["q"])
    with pytest.raises(DataError, match="no probe matches"):
        from_probes(ProbeTable([_rec("zz", "r1", [1, 0, 0])]), exs, questions=["q"])


def test_missing_torch_names_the_extra(monkeypatch):
    from rubric_induce.calibration._torch import require_torch

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingDependencyError, match=r"rubric-induce\[calibrate\]"):
        require_torch()


def test_declared_range_fills_the_answer_classes():
    """A run's `[data] scales` range gives the calibrator every answer of the scale, not only the
    ones the training texts happen to hold (a 0-10 set without a 3 or a 10 could never predict them)."""
    from rubric_induce.calibration.data import scale_points

    assert scale_points([0, 1, 2, 4, 9], 0, 10) == [float(v) for v in range(11)]
    assert scale_points([1.5, 3.5, 4.0], 1, 5) == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
    assert scale_points([1.25, 2.0], 1, 3) == [1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0]
    thirds = [1.0, 3.6666666666666665, 4.333333333333333]  # means of three raters: no grid holds them
    assert scale_points(thirds, 1, 5) == [1.0, 3.6666666666666665, 4.333333333333333, 5.0]
    assert scale_points([1, 2], 0, 4, not_applicable=[0]) == [1.0, 2.0, 3.0, 4.0]
    assert scale_points([0, 1], 0, 1) == [0.0, 1.0]
    assert scale_points([3, 700], 0, 1000) == [0.0, 3.0, 700.0, 1000.0]  # too many points for a grid: seen + ends

    table = ProbeTable([_rec("a", "r1", [0.2, 0.3, 0.4]), _rec("b", "r1", [0.1, 0.1, 0.7])])
    exs = [Example.create({"text": "x"}, {"q": 2.0}, id="a"), Example.create({"text": "y"}, {"q": 6.0}, id="b")]
    assert from_probes(table, exs, questions=["q"]).scales == [(2.0, 6.0)]
    d = from_probes(table, exs, questions=["q"], ranges={"q": [0, 10]})
    assert d.scales == [tuple(float(v) for v in range(11))]


@pytest.mark.slow
def test_reliability_figures_of_a_label_with_a_slash_stay_in_the_folder(tmp_path):
    """A label named `score/10` wrote its reliability plots to `calibration/reliability_score/10_*.png`,
    a folder that removing the calibration's files did not clear."""
    pytest.importorskip("torch")
    from rubric_induce.calibration.api import CalibrateParams, calibrate, remove_saved

    rng = np.random.default_rng(0)
    exs, recs = [], []
    for i in range(24):
        y = float(rng.integers(1, 4))
        exs.append(Example.create({"text": f"t{i}"}, {"score/10": y}, id=f"e{i}"))
        for r in ("r1", "r2"):
            raw = rng.dirichlet(np.ones(3)) * 0.9
            raw[int(y) - 1] += 0.1
            recs.append(_rec(f"e{i}", r, raw.tolist()))
    data = from_probes(ProbeTable(recs), exs, questions=["score/10"])
    res = calibrate(data, CalibrateParams(question="score/10", cv_folds=2, adaptive=False,
                                          options={"hidden": [4, 4], "pretrain": False, "finetune_epochs": 2}))
    res.save(tmp_path / "cal")
    pngs = sorted(p.name for p in (tmp_path / "cal").rglob("*.png"))
    assert pngs and all(p.startswith("reliability_score-10_") for p in pngs)
    assert not [p for p in (tmp_path / "cal").iterdir() if p.is_dir()]
    remove_saved(tmp_path / "cal")
    assert not (tmp_path / "cal").exists()
