"""The report's guarantee section states what the fit guarantees (issue 42): the error bound that
holds after the threshold was chosen (1 - target), said to be marginal over calibration draws,
never the Clopper-Pearson bound at the chosen threshold that older artifacts hold as upper_error."""
from __future__ import annotations

import json

from rubric_induce.reporting.guarantee import guarantee_section

OLD = {"target": 0.9, "delta": 0.1, "n": 50, "threshold": 0.7, "coverage": 0.5, "measure": "proba",
       "tolerance": 0.0, "agreement": 0.95, "upper_error": 0.0123, "answered": 25, "tested": 3}


def test_report_shows_the_valid_bound_not_an_old_artifacts_upper_error(tmp_path):
    none = {**OLD, "threshold": None, "coverage": 0.0, "agreement": None, "upper_error": None, "target": 0.95}
    cascade = {"target": 0.8, "delta": 0.1, "thresholds": [0.9, 0.6], "runs": ["a", "b"], "coverage": 0.7,
               "stage_coverage": [0.3, 0.4], "upper_error": 0.0456}
    (tmp_path / "artifact.json").write_text(json.dumps({"format": "rubric-induce-scorer", "guarantees": [OLD, none],
                                                        "cascades": [cascade]}))
    text = "\n".join(guarantee_section(tmp_path))
    assert "0.012" not in text and "0.046" not in text  # the old bounds are not shown
    assert "guaranteed error bound" in text and "marginal" in text
    rows = [line for line in text.splitlines() if line.startswith("| 0.9")]
    # the bound, then the half-split columns, empty for a record fitted before the check
    assert rows and rows[0].rstrip().endswith("| 0.100 | – | – |")
    assert any(line.startswith("| 0.95") and line.rstrip().endswith("| – | – | – |") for line in text.splitlines())
    casc = [line for line in text.splitlines() if "→" in line and line.startswith("|")]
    assert casc and casc[0].rstrip().endswith("| 0.200 | – | – |")
