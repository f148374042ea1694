"""A group-resampled interval need not contain its estimate (the estimate is on all texts, the interval's
ends are quantiles of group resamples): the correlation figure must still draw, whisker stopped at the bar."""
from __future__ import annotations

import pytest

from rubric_induce.reporting.figures import Figures, plot_correlations


def test_an_interval_that_excludes_its_estimate_still_plots(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    row = {"aspect": "fluency", "system": "calibrated", "n_groups": 0,
           "dataset_pearson": 0.30, "dataset_pearson_low": 0.35, "dataset_pearson_high": 0.60}
    figures = Figures(tmp_path / "figures", tmp_path)
    (tmp_path / "figures").mkdir()
    path = plot_correlations(plt, [row], ["pearson"], figures.path("correlations"), figures)
    assert path.is_file() and path.stat().st_size > 0
