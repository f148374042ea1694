"""Adaptive scoring (issue 22) on a finished fake run: API, CLI, cache, and the errors."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError
from rubric_induce.pipeline import run_pipeline
from rubric_induce.scoring.options import AdaptiveOptions, ScoreParams
from rubric_induce.scoring.scorer import RubricScorer

TEXTS = ["USER: I need a table for two tonight.\nSYSTEM: Booked at 7 pm, confirmation sent.",
         "USER: Find me a flight to Boston.\nSYSTEM: Sorry, I cannot help with that.",
         "USER: What's the address?\nSYSTEM: Which place do you mean?",
         "USER: Cancel my order.\nSYSTEM: Done, it is cancelled and refunded."]


@pytest.fixture(scope="module")
def run_dir(fake_run):
    """The session's calibrated fake run (tests/conftest.py), read only."""
    return fake_run


def test_run_saves_the_adaptive_model_and_load_gets_it(run_dir):
    assert (run_dir / "calibration" / "adaptive" / "adaptive.json").exists()
    scorer = RubricScorer.load(run_dir)
    assert scorer.adaptive is not None
    assert scorer.adaptive.input_names_ == [r.id for r in scorer.rubrics]


def test_budget_limits_calls_and_results_report_them(run_dir):
    fake = FakeBackend()
    scorer = RubricScorer.load(run_dir, backend=fake)
    n_rubrics = len(scorer.rubrics)
    res = scorer.score(TEXTS, adaptive=AdaptiveOptions(budget=2, stop_at=-1.0))  # stop_at < 0: only the budget stops
    for r in res:
        assert len(r.asked) == 2 and r.calls_saved == n_rubrics - 2 and r.stop_reason == "budget"
        assert set(r.distributions) == set(r.asked)
        assert r.netsat is None and r.label is None  # NetSAT needs every rubric
        assert r.scale[0] <= r.prediction <= r.scale[-1] and sum(r.proba) == pytest.approx(1.0)
        assert len(r.expected_gains) == 2 and not r.errors
    # exactly the (text, rubric) pairs asked were probed: one probe call each
    assert len(fake.calls) == 2 * len(TEXTS)


def test_budget_all_equals_the_full_adaptive_model(run_dir):
    scorer = RubricScorer.load(run_dir, backend=FakeBackend())
    full = scorer.score(TEXTS, adaptive=AdaptiveOptions(budget=len(scorer.rubrics), stop_at=-np.inf))
    for r in full:
        assert sorted(r.asked) == sorted(rb.id for rb in scorer.rubrics) and r.calls_saved == 0
        assert r.netsat is not None and r.label == int(r.netsat > r.threshold)
    plain = scorer.score(TEXTS)  # every probe, NetSAT as usual
    assert [r.netsat for r in full] == pytest.approx([r.netsat for r in plain])
    
    table = scorer.probe(TEXTS)
    ids = [r.id for r in full]
    X = table.arrays(example_ids=ids, rubric_ids=scorer.adaptive.input_names_).features()
    expect = scorer.adaptive.predict(X, np.ones(X.shape[:2], dtype=bool), scorer.judges or None)  # the judges mean
    assert [r.prediction for r in full] == pytest.approx(expect)


def test_adaptive_uses_the_probe_cache(run_dir, tmp_path):
    cache = tmp_path / "calls.sqlite"
    first = FakeBackend()
    scorer = RubricScorer.load(run_dir, backend=CachedBackend(first, CallCache(cache)))
    a = scorer.score(TEXTS, adaptive=AdaptiveOptions(budget=3, stop_at=-1.0))
    assert len(first.calls) == 3 * len(TEXTS)
    second = FakeBackend()
    again = RubricScorer.load(run_dir, backend=CachedBackend(second, CallCache(cache)))
    b = again.score(TEXTS, adaptive=AdaptiveOptions(budget=3, stop_at=-1.0))
    assert second.calls == []  # every (text, rubric) pair came from the cache
    assert [r.asked for r in a] == [r.asked for r in b]
    assert [r.prediction for r in a] == pytest.approx([r.prediction for r in b])
    # a full (non-adaptive) score of the same texts needs only the pairs not asked yet
    third = FakeBackend()
    RubricScorer.load(run_dir, backend=CachedBackend(third, CallCache(cache))).score(TEXTS)
    assert len(third.calls) == sum(r.calls_saved for r in a)


def test_stop_at_stops_early_and_replay_matches_live(run_dir):
    scorer = RubricScorer.load(run_dir, backend=FakeBackend())
    never = scorer.score(TEXTS, adaptive=AdaptiveOptions(stop_at=1e9))  # nothing is worth that much: no call at all
    assert all(r.asked == [] and r.stop_reason == "stop_at" for r in never)
    live = scorer.score(TEXTS, adaptive=AdaptiveOptions(stop_at=0.0))
    table = scorer.probe(TEXTS)
    replay = RubricScorer.load(run_dir).score_probes(table, [r.id for r in live], adaptive=AdaptiveOptions(stop_at=0.0))
    assert [r.asked for r in replay] == [r.asked for r in live]
    assert [r.prediction for r in replay] == pytest.approx([r.prediction for r in live])


def test_cli_score_adaptive(run_dir, tmp_path):
    src = tmp_path / "texts.jsonl"
    src.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)),
                   encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    r = CliRunner().invoke(cli, ["score", str(run_dir), "--input", str(src), "--backend", "fake", "--cache",
                                 str(tmp_path / "c.sqlite"), "--adaptive", "--budget", "2", "--stop-at", "-1",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(TEXTS)
    n = len(RubricScorer.load(run_dir).rubrics)
    assert all(len(row["asked"]) == 2 and row["calls_saved"] == n - 2 for row in rows)
    assert f"asked {2 * len(TEXTS)} of {n * len(TEXTS)}" in r.output
    # replay on existing probes (no LLM call)
    r2 = CliRunner().invoke(cli, ["score", str(run_dir), "--probes", str(run_dir / "probes.jsonl"), "--adaptive",
                                  "--budget", "1"])
    assert r2.exit_code == 0, r2.output
    assert all(len(json.loads(line)["asked"]) <= 1 for line in r2.output.splitlines() if line.startswith("{"))
    bad = CliRunner().invoke(cli, ["score", str(run_dir), "--probes", str(run_dir / "probes.jsonl"), "--budget", "1"])
    assert bad.exit_code == 2 and "--adaptive" in bad.output
    bad = CliRunner().invoke(cli, ["score", str(run_dir), "--probes", str(run_dir / "probes.jsonl"),
                                   "--outcomes", "gaussian"])
    assert bad.exit_code == 2 and "--adaptive" in bad.output


def test_outcomes_reach_the_policy(run_dir):
    """``outcomes`` goes from the scorer (and ``score --outcomes``) to the policy: each choice's
    expected gains are the policy's own for that choice; an unknown one is a clear error."""
    from rubric_induce.data.probes import ProbeTable

    scorer = RubricScorer.load(run_dir)
    table = ProbeTable.load(run_dir / "probes.jsonl")
    ids = sorted({r.example_id for r in table.records})[:6]
    gains = {o: [r.expected_gains for r in scorer.score_probes(table, ids, adaptive=AdaptiveOptions(budget=1, stop_at=-1.0, outcomes=o))]
             for o in ("both", "answers", "gaussian")}
    assert gains["both"] != gains["answers"] and gains["both"] != gains["gaussian"]
    with pytest.raises(DataError, match="outcomes"):
        scorer.score_probes(table, ids, adaptive=AdaptiveOptions(budget=1, outcomes="dice"))
    r = CliRunner().invoke(cli, ["score", str(run_dir), "--probes", str(run_dir / "probes.jsonl"), "--adaptive",
                                 "--budget", "1", "--stop-at", "-1", "--outcomes", "gaussian"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.output.splitlines() if line.startswith("{")]
    by_id = {row["id"]: row["expected_gains"] for row in rows}
    assert [by_id[i] for i in ids] == gains["gaussian"]


def test_clear_error_without_an_adaptive_model(run_dir, tmp_path):
    old = tmp_path / "old_run"
    shutil.copytree(run_dir, old)
    shutil.rmtree(old / "calibration" / "adaptive")
    scorer = RubricScorer.load(old, backend=FakeBackend())
    assert scorer.adaptive is None
    with pytest.raises(DataError, match="calibrate.adaptive = true"):
        scorer.score(TEXTS, adaptive=AdaptiveOptions(budget=2))
    assert len(scorer.score(TEXTS)) == len(TEXTS)  # plain scoring still works
    with pytest.raises(DataError, match="aggregate"):
        RubricScorer.load(run_dir, backend=FakeBackend()).score(TEXTS, adaptive=AdaptiveOptions(budget=1), aggregate="max")
    r = CliRunner().invoke(cli, ["score", str(old), "--probes", str(old / "probes.jsonl"), "--adaptive"])
    assert r.exit_code == 2 and "rerun the calibrate stage" in r.output


def test_clear_error_for_a_run_without_calibration(run_dir, tmp_path):
    plain = tmp_path / "nocal"
    shutil.copytree(run_dir, plain)
    doc = json.loads((plain / "artifact.json").read_text(encoding="utf-8"))
    doc["calibration"] = None
    (plain / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    scorer = RubricScorer.load(plain, backend=FakeBackend())
    with pytest.raises(DataError, match="no calibration network"):
        scorer.score(TEXTS, adaptive=AdaptiveOptions(stop_at=0.01))


def test_results_carry_the_answer_surprise_and_the_batch_check(run_dir, tmp_path):
    """Every result of a run with an adaptive model says how surprising the LLM's answers were
    (adaptive: the rubrics asked; full scoring: all of them, same as the model computes it), and
    the scorer and ``score`` sum it up for the batch."""
    
    scorer = RubricScorer.load(run_dir, backend=FakeBackend())
    model = scorer.adaptive
    full = scorer.score(TEXTS)
    table = scorer.probe(TEXTS)
    X = table.arrays(example_ids=[r.id for r in full], rubric_ids=model.input_names_).features()
    nb = X.shape[1]
    expect = model.answer_surprise(X, [list(range(nb))] * len(X), np.ones(X.shape[:2], dtype=bool))
    assert [r.answer_surprise for r in full] == pytest.approx(list(expect))
    few = scorer.score(TEXTS, adaptive=AdaptiveOptions(budget=2, stop_at=-1.0))
    blocks = [[model.input_names_.index(rid) for rid in r.asked] for r in few]
    assert [r.answer_surprise for r in few] == pytest.approx(list(model.answer_surprise(X, blocks)))
    none = scorer.score(TEXTS, adaptive=AdaptiveOptions(stop_at=1e9))  # nothing asked: nothing to be surprised by
    assert all(r.answer_surprise is None for r in none) and scorer.answer_shift(none) is None
    shift = scorer.answer_shift(full)
    assert shift.n_texts == len(TEXTS) and shift.reference == (model.answer_surprise_reference_ or 0.0)
    assert json.loads(json.dumps(full[0].to_dict()))["answer_surprise"] == pytest.approx(full[0].answer_surprise)
    src = tmp_path / "texts.jsonl"
    src.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)),
                   encoding="utf-8")
    r = CliRunner().invoke(cli, ["score", str(run_dir), "--input", str(src), "--backend", "fake", "--cache",
                                 str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "s.jsonl")])
    assert r.exit_code == 0, r.output
    assert f"answer check on {len(TEXTS)} text(s)" in r.output
    off = CliRunner().invoke(cli, ["score", str(run_dir), "--input", str(src), "--backend", "fake", "--cache",
                                   str(tmp_path / "c.sqlite"), "--no-answer-check", "--out", str(tmp_path / "o.jsonl")])
    assert off.exit_code == 0 and "answer check" not in off.output
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(row["answer_surprise"] is None for row in rows)
    assert all(r.answer_surprise is None for r in scorer.score(TEXTS, answer_check=False))
    assert all(r.answer_surprise is None for r in scorer.score(TEXTS, adaptive=AdaptiveOptions(budget=2), answer_check=False))
    # adaptive scoring that asks nothing: the check says it did not run instead of staying silent
    quiet = CliRunner().invoke(cli, ["score", str(run_dir), "--input", str(src), "--backend", "fake", "--cache",
                                     str(tmp_path / "c.sqlite"), "--adaptive", "--stop-at", "1e9",
                                     "--out", str(tmp_path / "q.jsonl")])
    assert quiet.exit_code == 0, quiet.output
    assert "answer check: not run, 0 text(s) had rubric answers read" in quiet.output


def test_evaluate_reports_the_answer_check(run_dir, tmp_path):
    """The evaluate stage puts the held-out texts' answer check in evaluation.md / .json (the
    figure new texts are compared with), and warns when the held-out texts are flagged."""
    from rubric_induce.data import Example
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.evaluation.heldout import evaluate

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text((run_dir.parent / "cfg.toml").read_text(encoding="utf-8") + "\n[evaluate]\nbootstrap = 20\n",
                   encoding="utf-8")
    run_pipeline(cfg, out=copy, echo=lambda m: None, stop_after="evaluate")
    summary = json.loads((copy / "evaluation.json").read_text(encoding="utf-8"))
    check = summary["answer_check"]
    assert check["n_texts"] >= 2 and check["reference"] == (RubricScorer.load(copy).adaptive.answer_surprise_reference_ or 0.0)
    assert "## Answer check" in (copy / "evaluation.md").read_text(encoding="utf-8")
    # the same held-out results, made very surprising: flagged, with a warning
    scorer = RubricScorer.load(copy)
    table = ProbeTable.load(copy / "probes.jsonl")
    ids = sorted({r.example_id for r in table.records})
    results = scorer.score_probes(table, ids)
    for i, r in enumerate(results):
        r.answer_surprise = 2.0 + 0.01 * i
    res = evaluate(results, [Example(id=i, fields={"text": "x"}) for i in ids],
                   np.zeros(len(ids)), label="sat", threshold=None, binary=False, answer_reference=0.0)
    assert res.summary["answer_check"]["shifted"]
    assert any(w.startswith("Answer check") for w in res.summary["warnings"])


def test_budget_and_stop_at_need_the_adaptive_switch(run_dir):
    """One switch, as on the CLI: budget / stop_at are AdaptiveOptions' fields, so without adaptive
    scoring they cannot be given (a TypeError, not a silent switch to adaptive scoring); adaptive
    scoring with a guarantee or a max aggregate is refused when the options are made."""
    from rubric_induce.data.probes import ProbeTable

    scorer = RubricScorer.load(run_dir, backend=FakeBackend())
    table = ProbeTable.load(run_dir / "probes.jsonl")
    ids = [r.example_id for r in table.records][:2]
    for call in (lambda **kw: scorer.score(TEXTS, **kw), lambda **kw: scorer.score_probes(table, ids, **kw)):
        with pytest.raises(TypeError, match="budget"):
            call(budget=2)
        with pytest.raises(TypeError, match="stop_at"):
            call(stop_at=0.0)
        with pytest.raises(TypeError, match="AdaptiveOptions"):
            call(adaptive=True)
    with pytest.raises(DataError, match="does not hold for adaptive scoring"):
        ScoreParams(adaptive=AdaptiveOptions(budget=2), guarantee=0.9)
    with pytest.raises(DataError, match="aggregate"):
        ScoreParams(adaptive=AdaptiveOptions(), aggregate="max")
    r = CliRunner().invoke(cli, ["score", str(run_dir), "--probes", str(run_dir / "probes.jsonl"), "--budget", "2"])
    assert r.exit_code == 2 and "--adaptive" in r.output
