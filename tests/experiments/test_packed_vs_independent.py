"""experiments/bench/packed_vs_independent.py on the fake backend: the fidelity comparison and the reply-shape
check run end to end and report what they claim (counts bounded by the positions asked)."""
from __future__ import annotations

import json

from experiment_loader import load_experiment

pvi = load_experiment("packed_vs_independent")


def test_format_reports_each_reply_shape(tmp_path):
    assert pvi.main(["format", "--backend", "fake", "--texts", "2", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "format.json").read_text())
    assert res["backend"] == "fake" and res["texts"] == 2 and res["rubrics"] == 8
    shapes = res["shapes"]
    assert list(shapes)[0].startswith("default") and len(shapes) == 4
    for name, row in shapes.items():
        assert row["positions"] == 16 and 0 <= row["answered_over_half"] <= row["answer_positions_found"] <= 16
        assert isinstance(row["first_reply"], str) and row["first_reply"]
        if "example answer" in name:
            assert 0 <= row["copied_example_answer"] <= row["answer_positions_found"]
        else:
            assert row["copied_example_answer"] is None  # nothing to copy: no answer value shown


def test_fidelity_compares_both_ways_on_the_demo(tmp_path):
    assert pvi.main(["fidelity", "--backend", "fake", "--texts", "4", "--datasets", "demo_uss",
                     "--out", str(tmp_path)]) == 0
    row = json.loads((tmp_path / "fidelity.json").read_text())["demo_uss"]
    assert row["texts"] == 4 and row["rubrics"] == 8 and row["independent_failed"] == 0
    assert row["pairs"] + row["packed_failed"] == 32  # every (text, rubric) is read both ways or failed packed
    assert all(v == "0/4" for v in row["packed_failed_by_position"].values()) == (row["packed_failed"] == 0)
    assert 0.0 <= row["tv_median"] <= row["tv_p90"] <= 1.0
    assert sum(row["pairs_by_position"].values()) == row["pairs"]
