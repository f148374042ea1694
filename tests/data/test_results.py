"""ScoreResult.to_dict: the JSONL row of a scored text."""
from __future__ import annotations

import dataclasses
import json

from rubric_induce.data.results import ScoreResult


def _full() -> ScoreResult:
    """A result with every field set, nested lists and dicts included."""
    return ScoreResult(
        id="t1", distributions={"rb-a": [0.1, 0.9], "rb-b": [0.5, 0.5]}, expected={"rb-a": 1.9, "rb-b": 1.5},
        netsat=0.25, label=1, threshold=0.1, prediction=3.5, uncertainty=0.4, proba=[0.2, 0.8], scale=[1.0, 2.0],
        judge=["j1", "j2"], question="overall", drivers=[{"rubric": "rb-a", "effect": 0.3, "why": ["x"]}],
        errors=["rb-c: timeout"], asked=["rb-a"], calls_saved=1, stop_reason="budget", expected_gains=[0.5],
        answer_surprise=0.1, confidence=0.9, answered=True, stage="small", strength=0.7,
        aspects={"overall": {"prediction": 3.5, "proba": [0.2, 0.8]}, "fluency": {"prediction": 4.0}})


def test_to_dict_is_the_deep_copys_row():
    """The one-level copy writes the same JSON as dataclasses.asdict, key order included."""
    for res in (_full(), ScoreResult(id="t2", distributions={}, expected={})):
        ref = dataclasses.asdict(res)
        if ref["aspects"] is None:
            del ref["aspects"]
        row = res.to_dict()
        assert row == ref and list(row) == list(ref)
        assert json.dumps(row) == json.dumps(ref)


def test_editing_the_row_leaves_the_result_alone():
    res = _full()
    row = res.to_dict()
    row["errors"].append("more")
    row["distributions"]["rb-new"] = [1.0]
    row["aspects"].pop("fluency")
    assert res.errors == ["rb-c: timeout"] and "rb-new" not in res.distributions and "fluency" in res.aspects
