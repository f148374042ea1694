"""The evaluate stage's numbers on a seeded fixture equal those the code gave before it kept compact
per-text columns (``golden/heldout_before.json``, written by the old code): point values, bootstrap
intervals (the draws behind them) and every score row."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from heldout_fixture import build, pinned

from rubric_induce.data.jsonl import jsonable
from rubric_induce.evaluation.heldout import EvaluateParams, evaluate

GOLDEN = json.loads((Path(__file__).parent / "golden" / "heldout_before.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("mode", ["binary", "graded"])
def test_outputs_equal_the_old_code(mode):
    f = build()
    binary = mode == "binary"
    y = f["y"] if binary else np.array([np.mean([j.labels["satisfaction"] for j in ex.judgments])
                                        for ex in f["examples"]])
    res = evaluate(f["results"], f["examples"], y, EvaluateParams(bootstrap=200), label="sat", threshold=0.5,
                   binary=binary, question="satisfaction", seed=5, train=f["train"], train_y=f["train_y"],
                   judge_results=f["judge_results"], trained_judges=["j0", "j1"])
    got = json.loads(json.dumps(jsonable({"summary": pinned(res.summary), "rows": [r.to_dict() for r in res.rows]}),
                                allow_nan=True))
    want = GOLDEN[mode]
    assert got["rows"] == want["rows"]
    _assert_within(want["summary"], got["summary"], "summary")


def _assert_within(want, got, where):
    """Every value the old code wrote is there and equal (new keys may be added beside them)."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        for k, v in want.items():
            assert k in got, f"{where}.{k} missing"
            _assert_within(v, got[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for k, (a, b) in enumerate(zip(want, got)):
            _assert_within(a, b, f"{where}[{k}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"
