"""The evaluate stage's table per calibrated aspect (a run with several ``[calibrate] questions``)."""
from __future__ import annotations

import numpy as np

from rubric_induce.data import Example
from rubric_induce.data.results import ScoreResult
from rubric_induce.evaluation.heldout import ScoredColumns, evaluate


def _examples(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, n).astype(float)
    b = rng.integers(1, 6, n).astype(float)
    exs = [Example(id=f"t{i}", fields={"text": f"text {i}"}, labels={"main": a[i], "other": b[i]}, group=f"g{i}")
           for i in range(n)]
    return exs, a, b


def _result(i: int, main: float, other: float | None) -> ScoreResult:
    res = ScoreResult(id=f"t{i}", distributions={}, expected={}, netsat=float(i % 7) - 3.0, prediction=main,
                      uncertainty=0.5, proba=[0.2] * 5, scale=[1.0, 2.0, 3.0, 4.0, 5.0], question="main")
    if other is not None:
        res.aspects = {"main": {"prediction": main, "uncertainty": 0.5, "proba": [0.2] * 5, "scale": res.scale},
                       "other": {"prediction": other, "uncertainty": 0.4, "proba": [0.2] * 5, "scale": res.scale}}
    return res


def test_each_other_aspect_gets_its_table_rows_and_warnings():
    exs, a, b = _examples(30)
    train, ta, tb = _examples(40, seed=1)
    results = [_result(i, a[i] + 0.1, b[i] * 0.5 + 1.5) for i in range(30)]
    ev = evaluate(results, exs, a, label="main", threshold=None, binary=False, question="main", train=train,
                  aspects=["other"], bootstrap=20)
    assert ev.summary["questions"] == ["main", "other"]
    other = ev.summary["aspects"]["other"]
    assert other["calibrated"]["calibrated"]["n"] == 30
    assert other["calibrated"]["calibrated"]["pearson"] > 0.99  # a linear map of the ratings
    assert other["baselines"]["constant"]["mean"] == np.mean(tb)
    assert "## Aspect 'other'" in ev.markdown
    rows = [r for r in ev.rows if r.aspect == "other"]
    assert {r.system for r in rows} == {"calibrated", "netsat"}
    assert [r.score for r in rows if r.system == "calibrated"] == [b[i] * 0.5 + 1.5 for i in range(30)]
    # the same tables from the per-text arrays the evaluate stage streams
    streamed = evaluate(ScoredColumns.from_results(results), exs, a, label="main", threshold=None, binary=False,
                        question="main", train=train, aspects=["other"], bootstrap=20)
    assert streamed.summary["aspects"] == ev.summary["aspects"]
    assert len(list(streamed.rows)) == len(streamed.rows) == len(ev.rows)


def test_a_constant_aspect_is_flagged_and_one_question_is_unchanged():
    exs, a, b = _examples(20)
    flat = [_result(i, a[i], 3.0) for i in range(20)]
    ev = evaluate(flat, exs, a, label="main", threshold=None, binary=False, question="main", aspects=["other"],
                  bootstrap=0)
    assert ev.summary["aspects"]["other"].get("calibrated_constant") is True
    assert any(w.startswith("Aspect 'other'") for w in ev.summary["warnings"])
    one = evaluate([_result(i, a[i], None) for i in range(20)], exs, a, label="main", threshold=None, binary=False,
                   question="main", bootstrap=0)
    assert "aspects" not in one.summary and "questions" not in one.summary and "Aspect" not in one.markdown
