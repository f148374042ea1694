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
    assert ev.summary["aspects"]["other"]["calibrated"]["calibrated"]["pearson"] is None
    # near-constant on its 1-5 scale (a spread of 0.002): flagged too, no correlation shown
    near = [_result(i, a[i], 3.0 + 1e-4 * i) for i in range(20)]
    ev = evaluate(near, exs, a, label="main", threshold=None, binary=False, question="main", aspects=["other"],
                  bootstrap=0)
    assert any("near-constant" in w and w.startswith("Aspect 'other'") for w in ev.summary["warnings"])
    assert "| calibrated | n/a (near-constant) |" in ev.markdown
    one = evaluate([_result(i, a[i], None) for i in range(20)], exs, a, label="main", threshold=None, binary=False,
                   question="main", bootstrap=0)
    assert "aspects" not in one.summary and "questions" not in one.summary and "Aspect" not in one.markdown


def test_each_other_aspect_gets_its_per_judge_table():
    from rubric_induce.data.model import Judgment

    rng = np.random.default_rng(3)
    exs = []
    for i in range(24):
        judgments = [Judgment(j, {"main": float(rng.integers(1, 6)), "other": float(rng.integers(1, 6))})
                     for j in ("j1", "j2")]
        exs.append(Example(id=f"t{i}", fields={"text": "x"}, labels={}, judgments=judgments, group=f"g{i}"))
    main = np.array([np.mean([j.labels["main"] for j in ex.judgments]) for ex in exs])
    results = [_result(i, main[i], 3.0 + 0.01 * i) for i in range(24)]
    cols = ScoredColumns.from_results(results)
    cols.aspect_judges = {"other": {j: np.array([ex.judgments[k].labels["other"] * 0.5 + 1 for ex in exs])
                                    for k, j in enumerate(("j1", "j2"))}}
    ev = evaluate(cols, exs, main, label="main", threshold=None, binary=False, question="main", aspects=["other"],
                  bootstrap=0, min_judge_n=1)
    judges = ev.summary["aspects"]["other"]["judges"]
    assert judges["question"] == "other" and judges["n_judges"] == 2
    assert judges["pooled"]["calibrated"]["pearson"] > 0.99
    assert "## Per judge: 'other'" in ev.markdown
    assert ev.markdown.index("## Per judge: 'main'") < ev.markdown.index("## Per judge: 'other'")
