"""``[report] figures = false`` leaves every PNG out of a run, the calibration's reliability diagrams too
(they took matplotlib's import and a drawing per rating; a run asked for no figures)."""
from __future__ import annotations

import pytest
from runconfigs import small_run_config

from rubric_induce.pipeline import load_config, run_pipeline

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("figures", [True, False])
def test_a_calibrated_run_draws_figures_only_when_asked(tmp_path, figures):
    cfg = tmp_path / "run.toml"
    cfg.write_text(small_run_config(calibrate=True, bootstrap=20, report=f"figures = {str(figures).lower()}"),
                   encoding="utf-8")
    out = tmp_path / "out"
    run_pipeline(load_config(cfg), out=out, echo=lambda *_: None)
    assert (out / "calibration" / "report.md").exists()  # the cross-validated report is written either way
    calibration_pngs = list((out / "calibration").rglob("*.png"))
    assert bool(calibration_pngs) is figures
    if not figures:
        assert not list(out.rglob("*.png"))
