"""experiments/bench/pairwise_position.py on a synthetic folder of LLMBar's layout with the fake backend: the
pairwise probe in both orders, its position-consistency table and the run record."""
from __future__ import annotations

import json

from experiment_loader import check_run_record, load_experiment

position = load_experiment("pairwise_position")


def test_runs_on_any_folder_of_the_llmbar_layout(tmp_path):
    root = tmp_path / "llmbar"
    (root / "Mine").mkdir(parents=True)
    rows = [{"input": f"q{i}", "output_1": f"good answer {i}", "output_2": f"bad answer {i}", "label": 1 + i % 2}
            for i in range(6)]
    (root / "Mine" / "dataset.json").write_text(json.dumps(rows))
    out = tmp_path / "out"
    assert position.main(["--backend", "fake", "--limit", "4", "--out", str(out), "--set", f"data_root={root}",
                          "--set", "subset=Mine"]) == 0
    res = check_run_record(out, "pairwise_position", limit=4, subset="Mine")
    assert res["n_pairs"] == 4 and res["n_calls"] == 4 * 2 * 3 and res["failed"] == 0
    pc = res["position_consistency"]
    assert pc["all"]["n"] == 12 and set(pc["rubrics"]) == {r["id"] for r in res["rubrics"]}
    assert 0 <= pc["all"]["consistent"] <= 1 and set(res["accuracy"]) == {
        "A shown first only", "B shown first only", "both orders averaged"}
    table = (out / "results.md").read_text()
    assert "| all cells (accuracy: mean of the rubrics) | 12 |" in table
    orders = {json.loads(line).get("order") for line in (out / "probes.jsonl").read_text().splitlines()}
    assert orders == {"AB", "BA"}
