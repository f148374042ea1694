"""The jury experiment on a synthetic folder of LLMBar's layout, and (slow) on the real data."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from experiment_loader import load_experiment

jury = load_experiment("pairwise_jury")
LLMBAR = Path("/work/shared/data/llmbar")
if not LLMBAR.is_dir():
    LLMBAR = Path(__file__).resolve().parents[3] / "shared" / "data" / "llmbar"


def _write_folder(root: Path, subset: str, n: int, seed: int, judges: dict[str, float]) -> list[int]:
    """dataset.json + evaluators/<judge>/Swap/result.json; a judge is right in each order with its rate.
    Judge "Rater" also gets a Rating strategy with scores."""
    rng = np.random.default_rng(seed)
    labels = rng.choice([1, 2], size=n).tolist()
    data = [{"input": f"{subset} q{i}", "output_1": f"a{i}", "output_2": f"b{i}", "label": lab}
            for i, lab in enumerate(labels)]
    folder = root / subset
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(data))
    for judge, rate in judges.items():
        results = []
        for row in data:
            def pick(r=rate, lab=row["label"]):
                return str(lab) if rng.random() < r else str(3 - lab)
            entry = {"swap = False": {"completion": ["x", "stop"], "winner": pick()},
                     "swap = True": {"completion": ["y", "stop"], "winner": pick()}}
            results.append({**row, "results": [entry]})
        (folder / "evaluators" / judge / "Swap").mkdir(parents=True)
        (folder / "evaluators" / judge / "Swap" / "result.json").write_text(json.dumps(results))
    rated = []
    for row in data:
        good, bad = int(rng.integers(6, 11)), int(rng.integers(1, 6))
        s1, s2 = (good, bad) if row["label"] == 1 else (bad, good)
        w = "1" if s1 > s2 else "2"
        rated.append({**row, "results": [{"score_1": [str(s1), "stop"], "score_2": [str(s2), "stop"],
                                           "swap = False": {"winner": w}, "swap = True": {"winner": w}}]})
    (folder / "evaluators" / "Rater" / "Rating").mkdir(parents=True)
    (folder / "evaluators" / "Rater" / "Rating" / "result.json").write_text(json.dumps(rated))
    return labels


def test_synthetic_folder_picks_the_good_judge(tmp_path, capsys):
    judges = {"GPT-4": 0.8, "Coin1": 0.5, "Coin2": 0.5, "Coin3": 0.5}
    _write_folder(tmp_path / "data", "S1", 80, 0, judges)
    _write_folder(tmp_path / "data", "S2", 60, 1, judges)
    out = tmp_path / "out"
    rc = jury.main(["--data-root", str(tmp_path / "data"), "--subsets", "S1", "S2", "--out", str(out),
                    "--n-boot", "200", "--folds", "3"])
    assert rc == 0
    record = json.loads((out / "results.json").read_text())
    assert set(record["summary"]) == {"S1", "S2", "pooled"}
    assert "Rater/Rating:scores" in record["rubrics"] and "GPT-4/Swap" in record["rubrics"]
    for s in record["summary"].values():
        assert s["selected_jury_accuracy"] > 0.9  # the perfect rater is in every jury
        assert s["reference_accuracy"] is not None and s["jury_minus_reference"]["mean"] > 0
        lo, hi = s["selected_jury_ci"]
        assert lo <= s["selected_jury_accuracy"] <= hi
    pooled = record["settings"][-1]
    assert all("Rater/Rating" in " ".join(j) for j in pooled["juries"])
    assert not any(j == ["Coin1/Swap"] for j in pooled["juries"])
    table = capsys.readouterr().out
    assert "| **GPT-4/Swap** |" in table and (out / "table.md").read_text().strip() == table.strip()


def test_both_orders_rate_matches_the_files(tmp_path):
    labels = _write_folder(tmp_path, "S", 40, 3, {"J": 0.7})
    sub = jury.load_subset(tmp_path, "S")
    data = json.loads((tmp_path / "S" / "evaluators" / "J" / "Swap" / "result.json").read_text())
    both = np.mean([all(r["results"][0][o]["winner"] == str(lab) for o in jury.ORDERS)
                    for r, lab in zip(data, labels)])
    o, t = sub.orders["J/Swap"], sub.targets
    assert ((o[:, 0] == t) & (o[:, 1] == t)).mean() == pytest.approx(both)


def test_misaligned_verdicts_exit_2(tmp_path, capsys):
    _write_folder(tmp_path, "S", 10, 4, {"J": 0.7})
    path = tmp_path / "S" / "evaluators" / "J" / "Swap" / "result.json"
    rows = json.loads(path.read_text())
    rows[3]["output_1"] = "something else"
    path.write_text(json.dumps(rows))
    rc = jury.main(["--data-root", str(tmp_path), "--subsets", "S", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "record 3" in err and "result.json" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_real_llmbar_reproduces_gpt4_both_orders(tmp_path):
    if not (LLMBAR / "Natural" / "dataset.json").exists():
        pytest.skip("shared LLMBar data not present")
    record = jury.run(jury.parse_args(["--data-root", str(LLMBAR), "--subsets", "Natural", "GPTInst", "GPTOut",
                                       "--out", str(tmp_path), "--n-boot", "1000"]))
    both = {k: round(100 * v["reference_both_orders"]) for k, v in record["summary"].items() if k != "pooled"}
    assert both == {"Natural": 89, "GPTInst": 77, "GPTOut": 68}
    assert record["summary"]["pooled"]["n"] == 239
