"""experiments/bench/guaranteed_agreement.py: runs on a folder of the LLMBar layout and writes the rows BENCHMARKS reads."""
from __future__ import annotations

import json

import numpy as np
from experiment_loader import load_experiment

KEYS = {"target", "delta", "coverage", "violation_rate", "test_violation_rate", "issued_share",
        "conditional_violation", "conditional_test_violation", "strong_share", "n_splits", "naive"}


def test_writes_results_per_setting_and_target(shared_data_root, tmp_path):
    exp = load_experiment("guaranteed_agreement")
    out = tmp_path / "out"
    assert exp.main(["--data-root", str(shared_data_root), "--subsets", "GPTOut", "--out", str(out),
                     "--splits", "5", "--targets", "0.8", "0.9", "--skip", "llm_rubric", "--planted-n", "200"]) == 0
    doc = json.loads((out / "results.json").read_text())
    rows = doc["results"]
    assert not doc["errors"]
    for r in rows:
        assert KEYS <= set(r), r["method"]
        assert r["n_splits"] == 5, (r["setting"], r["method"])  # a draw too small to fit is a draw, not skipped
    # every baseline that carries no guarantee is marked naive, and only those
    assert {r["method"] for r in rows if r["naive"]} == {"naive", "strong-alone"}
    for r in rows:
        if r["naive"]:
            assert r["issued_share"] is None and r["conditional_violation"] is None
            continue
        # a draw that issues nothing never violates: the marginal rate is the issued share times the conditional
        cond = r["conditional_violation"] or 0.0
        assert abs(r["violation_rate"] - r["issued_share"] * cond) < 1e-9
        assert (r["conditional_violation"] is None) == (r["issued_share"] == 0)
    # GPTOut at 0.9: 24 calibration texts, 29 needed at delta / 2: no draw issues a cascade guarantee
    bonf = next(r for r in rows
                if r["method"] == "cascade" and r["target"] == 0.9 and r["setting"].startswith("llmbar"))
    assert bonf["fit_failures"] == 5 and bonf["issued_share"] == 0.0 and bonf["violation_rate"] == 0.0
    settings = {r["setting"] for r in rows}
    assert "llmbar/GPTOut: ChatGPT -> GPT-4" in settings and "planted/cascade" in settings
    assert all(r["test_violation_rate"] is None for r in rows if r["setting"].startswith("planted"))
    table = (out / "results.md").read_text()
    assert "issued share" in table and "violation when issued" in table and "test-half violation" in table


def test_violation_counts_the_whole_labelled_set_and_only_issued_guarantees():
    """A split's violation is judged on every labelled text answered at its thresholds; one that
    issues nothing does not violate, but it also does not count towards the issued guarantees."""
    exp = load_experiment("guaranteed_agreement")
    test = np.array([0, 1])
    answered = np.array([True, True, True, True])
    correct = np.array([True, True, False, False])  # test half all agree, the whole set only at 0.5
    rec = exp._record(True, answered, correct, test, 0.8)
    assert rec["viol"] and not rec["test_viol"]
    recs = [rec, dict(exp._NOT_ISSUED), dict(exp._NOT_ISSUED), exp._record(True, answered, ~correct | True, test, 0.8)]
    row = exp._summary("s", "m", 0.8, 0.1, recs, 2, 2)
    assert row["violation_rate"] == 0.25 and row["issued_share"] == 0.5 and row["conditional_violation"] == 0.5
    assert row["test_violation_rate"] == 0.0
