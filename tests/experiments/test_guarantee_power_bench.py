"""experiments/bench/guarantee_power.py on a planted judgements file: every row carries the fields the
issue names, guaranteed rows keep the whole-set violation rate near delta, the naive rows are marked,
and the oracle is the largest coverage whose agreement reaches the target."""
from __future__ import annotations

import json

import numpy as np
import pytest
from experiment_loader import load_experiment

from rubric_induce.data.judgements import judgement_row, judgements_from_arrays, write_judgements
from rubric_induce.scoring.planted import planted_judges

FIELDS = {"method", "target", "delta", "n_splits", "coverage", "violation_rate", "test_violation_rate", "issued_share",
          "conditional_violation", "oracle_coverage", "strong_share", "cost_per_text"}


def _file(tmp_path, n=300):
    y, probs = planted_judges(n, np.random.default_rng(0), [1.2, 0.7, 0.4], overconfidence=[1.0, 2.0, 3.0])
    rows = [judgement_row(f"t{i}", {name: {"probs": p[i].round(5).tolist()} for name, p in
                                    zip(("strong", "mid", "cheap"), probs)}, label=int(y[i]), group=f"g{i // 2}")
            for i in range(n)]
    return write_judgements(tmp_path / "planted.jsonl", rows)


@pytest.mark.slow
def test_rows_fields_and_violation(tmp_path):
    gp = load_experiment("guarantee_power")
    path = _file(tmp_path)
    assert gp.main(["--judgements", str(path), "--stages", "strong,mid,cheap", "--cost", "strong=10", "--cost",
                    "mid=2", "--cost", "cheap=1", "--targets", "0.8", "--splits", "30", "--out",
                    str(tmp_path / "out")]) == 0
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert {r["method"] for r in rows} == {*gp.GUARANTEED, *gp.NAIVE}
    for r in rows:
        assert FIELDS <= set(r)
        assert r["naive"] == (r["method"] in gp.NAIVE)
        if not r["naive"]:
            assert r["violation_rate"] <= 0.1 + 2 * np.sqrt(0.09 / 30)
    cost = next(r for r in rows if r["method"] == "cascade-cost")
    assert 1 <= cost["cost_per_text"] <= 13 and 1 <= cost["calls_per_text"] <= 3
    assert next(r for r in rows if r["method"] == "strong-alone")["cost_per_text"] == 10


def test_oracle_is_the_largest_coverage_reaching_the_target():
    gp = load_experiment("guarantee_power")
    # one judge, confidences 0.9 (4 texts, 3 right), 0.8 (2 texts, both right), 0.6 (4 texts, 1 right)
    conf = np.array([0.9] * 4 + [0.8] * 2 + [0.6] * 4)
    right = np.array([1, 1, 1, 0, 1, 1, 1, 0, 0, 0], bool)
    y = np.zeros(10)
    answer = np.where(right, 0, 1)
    probs = np.stack([np.where(answer == 0, conf, 1 - conf), np.where(answer == 0, 1 - conf, conf)], axis=1)
    pop = judgements_from_arrays(y, {"j": probs})
    assert gp.oracle_coverage(pop, ["j"], 0.8, 0.0) == pytest.approx(0.6)   # 5 of 6 right; ties not split
    assert gp.oracle_coverage(pop, ["j"], 0.6, 0.0) == pytest.approx(1.0)   # 6 of 10
    assert gp.oracle_coverage(pop, ["j"], 0.9, 0.0) == 0.0


@pytest.mark.parametrize("flag, value", [("--cal-fraction", "1.5"), ("--splits", "-1")])
def test_a_bad_split_setting_is_exit_2_before_any_fit(tmp_path, capsys, flag, value):
    gp = load_experiment("guarantee_power")
    path = _file(tmp_path, n=20)
    assert gp.main(["--judgements", str(path), "--stages", "strong", flag, value, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert flag in err and value in err and not (tmp_path / "out" / "results.json").exists()
