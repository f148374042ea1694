"""experiments/guaranteed_agreement.py: runs on a folder of the LLMBar layout and writes the rows BENCHMARKS reads."""
from __future__ import annotations

import json

from experiment_loader import load_experiment


def test_writes_results_per_setting_and_target(shared_data_root, tmp_path):
    exp = load_experiment("guaranteed_agreement")
    out = tmp_path / "out"
    assert exp.main(["--data-root", str(shared_data_root), "--subsets", "GPTOut", "--out", str(out),
                     "--splits", "5", "--targets", "0.8", "--skip", "llm_rubric", "--planted-n", "200"]) == 0
    doc = json.loads((out / "results.json").read_text())
    rows = doc["results"]
    assert not doc["errors"]
    for r in rows:
        assert {"target", "delta", "violation_rate", "coverage", "strong_share", "n_splits", "naive"} <= set(r)
    naive = [r for r in rows if r["naive"]]
    assert naive and all(r["method"] == "naive" for r in naive)
    settings = {r["setting"] for r in rows}
    assert "llmbar/GPTOut: ChatGPT -> GPT-4" in settings and "planted/cascade" in settings
    assert all(r["n_splits"] == 5 for r in rows if r["setting"].startswith("planted"))
