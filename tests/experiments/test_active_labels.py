"""experiments/bench/active_labels.py on a tiny judgements file: learning-curve rows per strategy
and budget, and exit 2 on bad input."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("active_labels", ROOT / "experiments" / "bench" / "active_labels.py")
al = importlib.util.module_from_spec(_spec)
sys.modules["active_labels"] = al
_spec.loader.exec_module(al)


def _file(path: Path, n: int = 150) -> Path:
    rng = np.random.default_rng(0)
    with path.open("w") as fh:
        for i in range(n):
            y = int(rng.random() < 0.5)
            judges = {}
            for j, noise in (("a", 0.15), ("b", 0.3)):
                p = float(np.clip(0.2 + 0.6 * y + rng.normal(0, noise), 0.01, 0.99))
                judges[j] = {"probs": [1 - p, p]}
            fh.write(json.dumps({"id": f"t{i}", "label": y, "text": f"text {i % 9} about {i % 4}",
                                 "judges": judges}) + "\n")
    return path


@pytest.mark.slow  # fits about 50 small logistic regressions (a few seconds)
def test_rows_per_strategy_and_budget(tmp_path: Path) -> None:
    path = _file(tmp_path / "j.jsonl")
    out = tmp_path / "o"
    assert al.main(["--judgements", str(path), "--budgets", "30", "60", "--strategies", "random,uncertainty,diverse",
                    "--reps", "3", "--out", str(out)]) == 0
    rec = json.loads((out / "results.json").read_text())["results"]
    rows = rec["rows"]
    assert {(r["strategy"], r["budget"]) for r in rows} == {(s, b) for s in al.STRATEGIES for b in (30, 60)}
    for r in rows:
        assert 0.5 < r["accuracy"] <= 1 and 0 <= r["coverage"] <= 1 and 0 <= r["issued"] <= 1 and r["reps"] == 3
    assert (out / "results.md").read_text().startswith("# Active labels")


def test_bad_input_exits_2(tmp_path: Path, capsys) -> None:
    path = _file(tmp_path / "j.jsonl", n=10)
    assert al.main(["--judgements", str(path), "--reps", "2", "--out", str(tmp_path / "o")]) == 2
    assert "too few" in capsys.readouterr().err
    assert al.main(["--judgements", str(path), "--strategies", "random,clever", "--out", str(tmp_path / "o")]) == 2
