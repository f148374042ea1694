"""The direct-judge baseline ([evaluate] direct_baseline): its score is G-Eval's expected answer read from
the logprobs, its intervals resample the split's groups, a fake-backend run shows it in evaluation.md,
evaluation.json, scores.jsonl, the report and the viewer data, `plan` counts its calls, and
`direct_baseline = false` removes it and its calls."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import DataError
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.data import Example, Judgment
from rubric_induce.evaluation.direct import (
    DIRECT_FILE,
    MIN_TEXTS,
    compare_direct,
    direct_question,
    probe_direct,
    target_scale,
)
from rubric_induce.evaluation.score_table import read_scores
from rubric_induce.pipeline import load_config, run_pipeline
from rubric_induce.pipeline.probejob import plan_run
from rubric_induce.pipeline.timeplan import NO_LLM_SECONDS, time_run
from rubric_induce.reporting.viewer import build_view_data

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


def _examples(labels, *, key="q"):
    return [Example(id=f"t{i}", fields={"text": f"text number {i} " * 3}, labels={key: v}) for i, v in enumerate(labels)]


# --------------------------------------------------------------------------- the question and its scale

def test_scale_is_the_labels_own_binary_or_integer_range():
    binary = target_scale(_examples([0, 1, 1, 0]), "q", task=TaskParams(positive="good", negative="bad"))
    assert binary.labels == ("0", "1") and binary.descriptions == ("bad", "good")
    assert target_scale(_examples([2, 4, 3]), "q").labels == ("2", "3", "4")
    # a mean of ratings (3.67) widens to the integers around it; a declared range wins over the data
    assert target_scale(_examples([1.5, 3.67]), "q").labels == ("1", "2", "3", "4")
    assert target_scale(_examples([2, 3]), "q", declared=(1, 5)).labels == ("1", "2", "3", "4", "5")
    # raters' judgments count as the label's values too
    ex = [Example(id="a", fields={"text": "x"}, judgments=[Judgment("r1", {"q": 1.0}), Judgment("r2", {"q": 6.0})])]
    assert target_scale(ex, "q").labels == tuple(str(i) for i in range(1, 7))
    assert target_scale(_examples([3, 3]), "q") is None  # one value: nothing to rate on
    assert target_scale(_examples([0, 100]), "q") is None  # no answer scale of a few tokens


def test_question_is_worded_from_the_task_and_names_its_template():
    task = TaskParams(kind="summary", scale="1 = incoherent ... 5 = coherent")
    q = direct_question(task, "coherence", target_scale(_examples([1, 5]), "q"))
    tpl = load_prompt("direct_rating")
    assert "coherence of this summary" in q.text and "1 = incoherent ... 5 = coherent" in q.text
    assert q.provenance["prompt"] == {"name": "direct_rating", "hash": tpl.hash}
    verdict = direct_question(TaskParams(positive="satisfied", negative="dissatisfied"), "sat",
                              target_scale(_examples([0, 1]), "q"))
    assert '"satisfied" (1)' in verdict.text and verdict.provenance["prompt"]["name"] == "direct_verdict"


# --------------------------------------------------------------------------- the score: from logprobs

def test_direct_score_is_the_expected_answer_over_the_scale_from_planted_logprobs():
    """Planted answer probabilities (not summing to 1): the score is sum p_k v_k / sum p_k over the scale's
    answer tokens; a text whose answers got no probability has no score."""
    planted = {"t0": {"1": 0.1, "2": 0.2, "3": 0.3, "4": 0.2, "5": 0.1, "maybe": 0.1},
               "t1": {"5": 0.45, "4": 0.45},
               "t2": {"x": 0.9}}

    def answers(messages, allowed, prefix):
        text = messages[-1]["content"]
        return next(v for k, v in planted.items() if f"number {k[1:]} " in text)

    examples = _examples([1, 5, 3])
    q = direct_question(None, "q", target_scale(examples, "q", declared=(1, 5)))
    judge = probe_direct(examples, FakeBackend(answers=answers), q)
    got = judge.scores(["t0", "t1", "t2"])
    assert got[0] == pytest.approx((0.1 * 1 + 0.2 * 2 + 0.3 * 3 + 0.2 * 4 + 0.1 * 5) / 0.9)  # 3.0
    assert got[1] == pytest.approx(4.5)
    assert np.isnan(got[2])
    assert judge.table.meta["prompt"]["name"] == "probe_score_only"  # asked inside the run's probe template


# --------------------------------------------------------------------------- the comparison

def test_intervals_resample_groups_not_texts():
    """Each group holds three copies of one text: the clustered bootstrap must give exactly the intervals
    of the de-duplicated texts (one per group); resampling texts would narrow them."""
    rng = np.random.default_rng(0)
    human = rng.normal(size=12)
    systems = {"netsat": human + rng.normal(size=12), "direct": rng.normal(size=12)}
    ids = [f"g{i}" for i in range(12)]
    once = compare_direct(systems, human, ids, n_boot=200, seed=3)
    thrice = compare_direct({k: np.repeat(v, 3) for k, v in systems.items()}, np.repeat(human, 3), np.repeat(ids, 3),
                            n_boot=200, seed=3)
    for s in ("netsat", "direct"):
        assert thrice["systems"][s]["pearson"]["ci"] == pytest.approx(once["systems"][s]["pearson"]["ci"])
    assert thrice["differences"][0]["ci"] == pytest.approx(once["differences"][0]["ci"])
    assert thrice["n_groups"] == 12 and thrice["n"] == 36


def test_paired_difference_and_floor():
    rng = np.random.default_rng(1)
    human = rng.normal(size=40)
    out = compare_direct({"calibrated": human + 0.3 * rng.normal(size=40), "direct": rng.normal(size=40)}, human,
                         [f"g{i // 2}" for i in range(40)], n_boot=300)
    d = out["differences"][0]
    assert d["system"] == "calibrated" and d["minus"] == "direct"
    assert d["value"] == pytest.approx(out["systems"]["calibrated"]["pearson"]["value"]
                                       - out["systems"]["direct"]["pearson"]["value"])
    assert d["ci"][0] > 0  # the rubrics' prediction clearly beats noise, on paired resamples
    few = compare_direct({"netsat": human[:4], "direct": human[:4] + 1}, human[:4], list("abcd"), n_boot=100)
    assert few["n"] == 4 < MIN_TEXTS and few["systems"]["direct"]["pearson"]["ci"] == [None, None]


def test_ceiling_is_one_rater_against_the_others():
    human = np.array([1.0, 2, 3, 4, 5, 3])
    ratings = np.array([[1, 1, np.nan], [2, 3, 2], [3, 3, 4], [4, 5, 4], [5, 5, 5], [3, np.nan, np.nan]])
    out = compare_direct({"direct": human}, human, list("abcdef"), ratings=ratings, n_boot=50)
    assert out["ceiling"]["n"] == 5 and out["ceiling"]["raters"] == 3  # the one-rater text is left out
    assert 0.8 < out["ceiling"]["value"] <= 1.0


# --------------------------------------------------------------------------- a fake-backend run

_RUN = f"""
[run]
seed = 0
limit = 20
test_size = 0.5
[task]
preset = "uss"
[data]
examples = "{RES / 'demo_uss_dialogues.jsonl'}"
label = "sat"
[backend]
spec = "fake"
[generate]
method = "none"
include = ["{RES / 'demo_uss_rubrics.json'}"]
[dedup]
enabled = false
[select]
n_sat = 2
n_dsat = 2
[calibrate]
enabled = false
[evaluate]
bootstrap = 50
{{extra}}
[report]
figures = false
"""


def _run(tmp_path: Path, extra: str = "", name: str = "run"):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(_RUN.replace("{extra}", extra), encoding="utf-8")
    return cfg, run_pipeline(cfg, out=tmp_path / name, echo=lambda m: None)


@pytest.mark.slow  # two fake runs and a plan, about 6 s
def test_run_shows_the_direct_row_and_the_switch_removes_it_and_its_calls(tmp_path):
    cfg, res = _run(tmp_path)
    out = res.out
    ev = json.loads((out / "evaluation.json").read_text())
    n_test = ev["n_test"]
    d = ev["direct"]
    assert d["target"] == "sat" and d["prompt"]["name"] == "direct_verdict" and d["asked"] == n_test
    assert set(d["systems"]) == {"netsat", "direct"} and d["differences"][0]["system"] == "netsat"
    assert "auc" in d["systems"]["direct"]  # a 0/1 label: AUC beside Pearson
    md = (out / "evaluation.md").read_text()
    assert "## Against asking the LLM directly" in md and "| direct judge |" in md
    assert md.index("Against asking the LLM directly") < md.index("## NetSAT and the selected threshold")
    rows = [r for r in read_scores(out / "scores.jsonl") if r.system == "direct"]
    assert len(rows) == n_test and all(r.probs and r.scale == (0.0, 1.0) for r in rows)
    assert "| direct judge |" in (out / "report.md").read_text()
    view = build_view_data(out)
    assert view["headline"]["direct"]["systems"]["direct"]["pearson"]["n"] == d["n"]
    manifest = json.loads((out / "manifest.json").read_text())
    # the probe stage asked the direct question of each held-out text after its rubrics (its prefix then
    # cached); the evaluate stage's identical calls are answered by the run's call cache
    n_probes = json.loads((out / "stages" / "probe.json").read_text())["summary"]["probes"]
    assert manifest["stages"]["probe"]["usage"]["calls"] == n_probes + n_test
    assert manifest["stages"]["evaluate"]["usage"].get("calls", 0) == 0
    assert manifest["stages"]["evaluate"]["usage"]["cache_hits"] == n_test
    assert manifest["stages"]["evaluate"]["direct"]["file"] == DIRECT_FILE and (out / DIRECT_FILE).exists()

    # plan counts the same calls (before the run, in a fresh folder; and none to make after it)
    fresh = plan_run(load_config(cfg), out=tmp_path / "fresh").params["direct_baseline"]
    assert fresh["calls"] == n_test and fresh["to_make"] == n_test and fresh["prompt_tokens"] > 0
    assert plan_run(load_config(cfg), out=out).params["direct_baseline"]["to_make"] == 0

    # a rerun of the stage costs nothing: the call cache answers
    again = run_pipeline(cfg, out=out, echo=lambda m: None, force=("evaluate",))
    assert again.summaries["evaluate"]["direct"]["n"] == d["n"]
    assert json.loads((out / "manifest.json").read_text())["stages"]["evaluate"]["usage"]["calls"] == 0

    cfg_off, off = _run(tmp_path, "direct_baseline = false", name="off")
    ev_off = json.loads((off.out / "evaluation.json").read_text())
    assert "direct" not in ev_off and "directly" not in (off.out / "evaluation.md").read_text()
    assert not (off.out / DIRECT_FILE).exists()
    assert not [r for r in read_scores(off.out / "scores.jsonl") if r.system == "direct"]
    off_stages = json.loads((off.out / "manifest.json").read_text())["stages"]
    assert off_stages["evaluate"]["usage"].get("calls", 0) == 0
    assert off_stages["probe"]["usage"]["calls"] == json.loads((off.out / "stages" / "probe.json").read_text())[
        "summary"]["probes"]  # no direct question asked in the probe stage either
    assert "direct_baseline" not in plan_run(load_config(cfg_off), out=tmp_path / "fresh-off").params
    assert "direct" not in build_view_data(off.out)["headline"]


@pytest.mark.slow  # three plans with timing calls on the fake backend, about 4 s
def test_plan_timing_sizes_the_direct_judge_in_the_probe_stage(tmp_path):
    """Independent probes: the probe stage asks the direct question (a later call of each held-out text);
    packed ones: the evaluate stage does (the packed prompt opens otherwise); off: neither."""
    cfg = tmp_path / "t.toml"
    cfg.write_text(_RUN.replace("{extra}", ""), encoding="utf-8")
    _, timed = time_run(load_config(cfg), out=tmp_path / "t", backend=FakeBackend())
    stage = {s.name: s for s in timed.stages}
    assert "and 10 direct-judge call(s)" in stage["probe"].basis
    assert not stage["evaluate"].llm and stage["evaluate"].seconds == NO_LLM_SECONDS["evaluate"]
    cfg.write_text(_RUN.replace("{extra}", '[probe]\npacking = "packed"'), encoding="utf-8")
    _, timed = time_run(load_config(cfg), out=tmp_path / "t-packed", backend=FakeBackend())
    stage = {s.name: s for s in timed.stages}
    assert "direct-judge" not in stage["probe"].basis
    assert stage["evaluate"].llm and "10 direct-judge probe call(s) on the held-out texts" in stage["evaluate"].basis
    cfg.write_text(_RUN.replace("{extra}", "direct_baseline = false"), encoding="utf-8")
    _, timed = time_run(load_config(cfg), out=tmp_path / "t-off", backend=FakeBackend())
    stage = {s.name: s for s in timed.stages}
    assert "direct-judge" not in stage["probe"].basis
    assert not stage["evaluate"].llm and stage["evaluate"].seconds == NO_LLM_SECONDS["evaluate"]


@pytest.mark.parametrize(("line", "field"), [("direct_baselin = false", "direct_baselin"),
                                             ('direct_baseline = "no"', "direct_baseline")])
def test_config_errors_name_the_setting(tmp_path, line, field):
    cfg = tmp_path / "c.toml"
    cfg.write_text(_RUN.replace("{extra}", line), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_config(cfg)
    assert field in str(err.value)
