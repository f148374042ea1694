"""What the evaluate stage holds per held-out text at a million texts (issue 44): the probe checks'
values reduced once the table is read, examples without a ``__dict__`` or a fresh empty mapping each,
and a judge's texts predicted a chunk at a time."""
from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import numpy as np
import pytest

import rubric_induce.evaluation.heldout_stream as heldout_stream
from rubric_induce.data import Example, Judgment
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.probing.checks import ProbeStats, probe_checks
from rubric_induce.scoring.scorer import RubricScorer


def _records(n: int, seed: int = 3) -> list[ProbeRecord]:
    """Three rubrics on ``n`` texts: one that varies, one near-constant, one with little answer mass,
    an even count of masses (the median is a mean of two), a failed and a score-only record."""
    rng = np.random.default_rng(seed)
    out = []
    answers, values = ["1", "2", "3", "4", "5"], [1.0, 2.0, 3.0, 4.0, 5.0]
    for i in range(n):
        for rid, raw in (("varies", rng.dirichlet(np.ones(5))),
                         ("flat", np.array([0.0, 0.0, 1.0, 0.0, 0.0]) + rng.uniform(0, 1e-4, 5)),
                         ("low", rng.dirichlet(np.ones(5)) * rng.uniform(0.001, 0.02))):
            out.append(ProbeRecord(f"t{i}", rid, answers, values, [float(x) for x in raw], "score-only", "logprobs",
                                   "h"))
    out.append(ProbeRecord("t0", "varies", answers, values, [0.0] * 5, "score-only", "logprobs", "h",
                           error="synthetic failure"))
    out.append(ProbeRecord("t1", "sampled", answers, values, [0.2] * 5, "score-only", "sampling", "h"))
    return out


def _reference(records: list[ProbeRecord]) -> dict[str, object]:
    """The checks' numbers computed from the values themselves (what the checks did before they were
    reduced): each rubric's sd, every mass's median and each rubric's median mass."""
    ok = [r for r in records if r.ok]
    vals: dict[str, list[float]] = {}
    masses: dict[str, list[float]] = {}
    for r in ok:
        vals.setdefault(r.rubric_id, []).append(r.expected)
        if r.estimator == "logprobs":
            masses.setdefault(r.rubric_id, []).append(r.mass)
    every = np.concatenate([np.array(m) for m in masses.values()])
    return {"sd": {k: float(np.std(np.array(v), ddof=1)) for k, v in vals.items() if len(v) >= 2},
            "median_mass": float(np.median(every)), "n_mass": len(every),
            "per_rubric": {k: float(np.median(np.array(m))) for k, m in masses.items()}}


def test_reduced_probe_checks_equal_the_checks_of_the_values():
    """finish() keeps each rubric's sd and the masses' medians, to the last bit, and frees the values."""
    records = _records(40)
    ref = _reference(records)
    stats = ProbeStats()
    for rec in records:
        stats.add(rec)
    assert sum(len(c) for c in stats.by_rubric.values()) == 40 * 3 + 1
    checks = stats.finish().checks(min_mass=0.05)
    assert stats.by_rubric == {} and stats.mass_by_rubric == {}  # the per-probe values are freed
    near = {d["rubric_id"]: d["sd"] for d in checks["near_constant"]}
    assert set(near) == {"flat"} and near["flat"] == ref["sd"]["flat"]
    assert checks["median_mass"] == ref["median_mass"] and checks["n_mass"] == ref["n_mass"] == 120
    assert {d["rubric_id"]: d["median_mass"] for d in checks["low_mass_rubrics"]} == {"low": ref["per_rubric"]["low"]}
    assert checks["n_rubrics"] == 4
    # the same checks from the table, and again from the reduced stats (other thresholds)
    assert probe_checks(ProbeTable(records, {}), min_mass=0.05) == checks
    loose = {d["rubric_id"]: d["sd"] for d in stats.checks(min_sd=0.5)["near_constant"]}
    assert "flat" in loose and all(sd == ref["sd"][rid] for rid, sd in loose.items())
    with pytest.raises(RuntimeError, match="after finish"):
        stats.add(records[0])


def test_examples_have_slots_and_share_one_read_only_empty_mapping():
    """A run holds an example per text: no ``__dict__``, no fresh empty ``meta`` (or ``labels``) each."""
    a = Example.create({"text": "a"})
    b = Example.from_dict({"id": "b", "fields": {"text": "b"}, "labels": {"sat": 1.0},
                           "judgments": [{"judge": "j1", "labels": {"sat": 1.0}}]})
    assert not hasattr(a, "__dict__") and not hasattr(b.judgments[0], "__dict__")
    assert a.meta is b.meta is a.labels and a.meta == {} and isinstance(a.meta, dict)
    with pytest.raises(TypeError, match="read-only"):
        a.meta["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        a.labels.update(sat=1.0)  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.group = "g"  # type: ignore[misc]
    # the shared empty mapping survives copies and pickles as itself; JSON and equality as {}
    for again in (pickle.loads(pickle.dumps(b)), copy.deepcopy(b), Example.from_dict(json.loads(json.dumps(b.to_dict())))):
        assert again == b and again.meta is a.meta
    assert Example("c", {"text": "c"}) == Example("c", {"text": "c"}, labels={}, meta={})
    assert dataclasses.replace(b, group="g").group == "g" and json.dumps(a.meta) == "{}"
    # question names and judges read from JSON are one string each, however many examples hold them
    c = Example.from_dict(json.loads(json.dumps(b.to_dict())))
    assert next(iter(c.labels)) is next(iter(b.labels)) and c.judgments[0].judge is b.judgments[0].judge
    assert b == Example("b", {"text": "b"}, {"sat": 1.0}, (Judgment("j1", {"sat": 1.0}),))


class _Rows:
    """The calibration inputs of some texts, as ``scorer.predict_probes`` reads them (``take``, ``features``)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def take(self, *args: object) -> _Rows:
        return self

    def features(self) -> np.ndarray:
        return self.x


def test_a_judges_predictions_do_not_depend_on_the_chunk_of_texts(fake_run, monkeypatch):
    """The evaluate stage predicts a judge's texts JUDGE_ROWS at a time (one batch of a judge's 250,000
    texts held 800 MB in the network's judge-specific layers): the network is row by row, so chunks of
    whole blocks of the matrix kernels' rows give the numbers of one batch, bit for bit, for trained
    judges and for one the calibrator never saw. (Chunks of 97 rows do not: a chunk's odd last row takes
    another kernel path, with other last bits; so JUDGE_ROWS is a power of two, as the scorer's blocks.)"""
    scorer = RubricScorer.load(fake_run)
    table = ProbeTable.load(fake_run / "probes.jsonl")
    base = table.arrays(None, [r.id for r in scorer.rubrics]).features()
    rng = np.random.default_rng(0)
    x = base[rng.integers(0, len(base), 2500)] * rng.uniform(0.5, 1.0, (2500, 1, 1))  # distinct rows
    judges = [*scorer.judges, "never-seen"]
    examples = [Example(f"t{i}", {"text": "t"}, judgments=(Judgment(judges[i % len(judges)], {scorer.question: 1.0}),
                                                           Judgment(judges[(i * 7) % len(judges)], {scorer.question: 0.0})))
                for i in range(len(x))]
    ids = [ex.id for ex in examples]

    def inputs(rated: np.ndarray) -> _Rows:
        return _Rows(x[rated])

    assert heldout_stream.JUDGE_ROWS % 1024 == 0
    monkeypatch.setattr(heldout_stream, "JUDGE_ROWS", 1 << 30)
    whole = heldout_stream.judge_predictions(scorer, inputs, examples, ids, scorer.question)
    assert set(whole) == set(judges) and all(np.isfinite(p).sum() > 400 for p in whole.values())
    for rows in (1024, 256):
        monkeypatch.setattr(heldout_stream, "JUDGE_ROWS", rows)
        chunked = heldout_stream.judge_predictions(scorer, inputs, examples, ids, scorer.question)
        assert all(chunked[j].tobytes() == whole[j].tobytes() for j in judges), rows
