"""experiments/bench/estimate_coverage.py on tiny planted runs and a tiny judgements file."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("estimate_coverage", ROOT / "experiments" / "bench" / "estimate_coverage.py")
ec = importlib.util.module_from_spec(_spec)
sys.modules["estimate_coverage"] = ec  # dataclasses look their module up
_spec.loader.exec_module(ec)

KEYS = {"method", "budget", "coverage", "mean_width", "nominal", "mc_se", "reps", "mean_labels", "guarantee", "passes"}


@pytest.mark.slow
def test_planted_run_writes_rows_per_method_and_budget(tmp_path: Path) -> None:
    assert ec.main(["--planted", "--planted-n", "200", "--budgets", "20", "40", "--reps", "8", "--no-cje",
                    "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "results.json").read_text())
    rows = rec["rows"]
    assert all(KEYS <= set(r) for r in rows)
    got = {(r["method"], r["budget"]) for r in rows}
    for m in ("classical", "ppi", "ppi++", "naive-judge", "active", "uniform"):
        assert {(m, 20), (m, 40)} <= got
    assert ("active", 14) in got and ("active", 28) in got  # the 0.7-label runs
    naive = [r for r in rows if r["method"] == "naive-judge"]
    assert all(r["coverage"] == 0.0 and not r["guarantee"] and r["passes"] is None for r in naive)  # judge mean 0.5
    assert all(r["nominal"] == pytest.approx(0.9) and r["reps"] == 8 for r in rows)
    assert rec["cje"] == "--no-cje" and {e["budget"] for e in rec["active_ratio"]} == {20, 40}
    assert rec["small_sample"] is True and rec["shrink"] is True
    assert all(isinstance(e["ratio_vs_ppi_is_upper_bound"], bool) for e in rec["active_ratio"])
    assert rec["checks"]["coverage_ok"] in (True, False) and "active_0.7_reached_vs_ppi" in rec["checks"]


def _file(path: Path, n: int = 120) -> Path:
    rng = np.random.default_rng(0)
    with path.open("w") as fh:
        for i in range(n):
            p = float(rng.random())
            y = int(rng.random() < 0.2 + 0.6 * p)
            fh.write(json.dumps({"id": f"t{i}", "label": y, "judges": {"j": {"probs": [1 - p, p]}}}) + "\n")
    return path


@pytest.mark.slow  # the first estimate pays ppi-python's import (several seconds)
def test_judgements_file_truth_is_the_mean_label_and_big_budgets_are_skipped(tmp_path: Path) -> None:
    path = _file(tmp_path / "j.jsonl")
    assert ec.main(["--judgements", str(path), "--budgets", "20", "500", "--reps", "20", "--no-cje",
                    "--out", str(tmp_path / "o")]) == 0
    rec = json.loads((tmp_path / "o" / "results.json").read_text())
    labels = [json.loads(line)["label"] for line in path.read_text().splitlines()]
    assert rec["truth"] == pytest.approx(np.mean(labels)) and rec["n"] == 120 and rec["judge"] == "j"
    assert rec["budgets"] == [20] and rec["skipped_budgets"] == [500]


def test_bad_judgements_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "label": 0, "judges": {"j": {"probs": [0.5, 0.7]}}}\n')
    assert ec.main(["--judgements", str(path), "--reps", "5", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and "line 1" in err and "judges.j.probs" in err


@pytest.mark.slow
def test_cje_runs_side_by_side_where_installed(tmp_path: Path) -> None:
    pytest.importorskip("cje")
    assert ec.main(["--planted", "--planted-n", "300", "--budgets", "40", "--reps", "4", "--cje-reps", "2",
                    "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "results.json").read_text())
    cje = [r for r in rec["rows"] if r["method"] == "cje"]
    assert rec["cje"] == "ran" and len(cje) == 1 and cje[0]["reps"] == 2 and cje[0]["guarantee"]


@pytest.mark.slow
def test_gaussian_run_has_truth_0_and_no_cje(tmp_path: Path) -> None:
    """``--gaussian RHO``: fresh normal populations (truth 0, no scale ends), never cje."""
    assert ec.main(["--gaussian", "0.3", "--planted-n", "150", "--budgets", "20", "--reps", "6",
                    "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "results.json").read_text())
    assert rec["judge"] == "gaussian" and rec["truth"] is None and rec["cje"] == "not run (--gaussian: no scale ends)"
    methods = {r["method"] for r in rec["rows"]}
    assert {"classical", "ppi", "ppi++", "active", "uniform"} <= methods and "cje" not in methods
    with pytest.raises(SystemExit):
        ec.parse_args(["--gaussian", "1.5", "--out", str(tmp_path / "x")])
