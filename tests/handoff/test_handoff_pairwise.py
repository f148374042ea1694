"""Hand-offs of a pairwise set (issue 33, item 6): the exports that can hold one carry it (json and jsonl:
the rubrics with the Bradley-Terry weights; promptfoo: a python assertion scoring each output's strength
and max-score picking the strongest, which is the side `RubricScorer.compare` prefers); the others exit 2
with one line saying so and where to go instead. Never a pointwise export of a pairwise set."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from rubric_induce.calibration.pairwise import BradleyTerryHead
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError
from rubric_induce.handoff import load_source
from rubric_induce.handoff.rubric_files import PAIRWISE_HEAD_KEY, import_rubrics
from rubric_induce.scoring.scorer import RubricScorer

PROMPTS = ["Give 3 tips on sleep.", "Say hi.", "Name a prime number."]
PAIRS = [("Here are 3 tips: keep a schedule, avoid screens, keep the room cool.", "I like turtles."),
         ("Hi there!", "No."),
         ("Seven is prime.", "Numbers are boring and I will not answer that question.")]


def _export(run, fmt, out):
    return CliRunner().invoke(cli, ["export", str(run), "--format", fmt, "--out", str(out)])


def test_json_export_carries_the_set_and_its_weights(pairwise_artifact, tmp_path):
    res = _export(pairwise_artifact, "json", tmp_path / "set.json")
    assert res.exit_code == 0, res.output
    assert "pairwise set" in res.output
    doc = json.loads((tmp_path / "set.json").read_text(encoding="utf-8"))
    head = BradleyTerryHead.load(pairwise_artifact / "calibration" / "bradley_terry.json")
    assert doc["manifest"]["pairwise"] is True
    assert doc["manifest"][PAIRWISE_HEAD_KEY]["coef"] == head.coef_.tolist()
    back = import_rubrics(tmp_path / "set.json")
    assert back.ids == [r.id for r in RubricScorer.load(pairwise_artifact).rubrics]
    assert BradleyTerryHead.from_dict(back.manifest[PAIRWISE_HEAD_KEY]).coef_.tolist() == head.coef_.tolist()
    assert load_source(tmp_path / "set.json").pairwise  # and it stays pairwise for the next export
    res = _export(tmp_path / "set.json", "openai-graders", tmp_path / "graders.json")
    assert res.exit_code == 2 and "cannot hold a pairwise rubric set" in res.output
    assert not (tmp_path / "graders.json").exists()


def test_jsonl_export_carries_the_set(pairwise_artifact, tmp_path):
    res = _export(pairwise_artifact, "jsonl", tmp_path / "set.jsonl")
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "set.manifest.json").read_text(encoding="utf-8"))
    assert manifest["pairwise"] is True and PAIRWISE_HEAD_KEY in manifest
    assert load_source(tmp_path / "set.jsonl").pairwise


@pytest.mark.parametrize("fmt", ["llm-rubric", "inspect", "deepeval", "prometheus", "openai-graders"])
def test_formats_that_cannot_hold_a_pairwise_set_say_so(pairwise_artifact, tmp_path, fmt):
    out = tmp_path / "out.file"
    res = _export(pairwise_artifact, fmt, out)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "cannot hold a pairwise rubric set" in lines[0] and "rubric-induce compare" in lines[0]
    assert str(pairwise_artifact / "artifact.json") in lines[0] and "field 'kind'" in lines[0]
    assert not out.exists() and not out.with_suffix(".md").exists()


def test_the_selected_file_of_a_pairwise_run_is_pairwise_too(pairwise_artifact, tmp_path):
    """`export --rubrics selected.jsonl` (no artifact): the set's manifest says pairwise; refused where it
    cannot go, and promptfoo, which needs the run's head, says to export from the run."""
    selected = pairwise_artifact / "selected.jsonl"
    assert load_source(selected).pairwise
    res = CliRunner().invoke(cli, ["export", "--rubrics", str(selected), "--format", "prometheus",
                                   "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2 and "cannot hold a pairwise rubric set" in res.output
    with pytest.raises(DataError, match="export from the run folder"):
        from rubric_induce.handoff.promptfoo import promptfoo_config

        promptfoo_config(selected)


def test_pointwise_sets_are_not_pairwise(handoff_run):
    assert not load_source(handoff_run).pairwise


def test_promptfoo_pairwise_block(pairwise_artifact, tmp_path, require_module):
    """The block merged into a config validates against promptfoo's own schema; max-score decides on the
    python assertion alone; the llm-rubric assertions are informational; import gives back a pairwise set."""
    jsonschema = require_module("jsonschema")
    yaml = require_module("yaml")
    from test_handoff_formats import SCHEMA

    res = _export(pairwise_artifact, "promptfoo", tmp_path / "pf.yaml")
    assert res.exit_code == 0, res.output
    block = yaml.safe_load((tmp_path / "pf.yaml").read_text(encoding="utf-8"))
    asserts = block["defaultTest"]["assert"]
    assert "threshold" not in block["defaultTest"]
    assert {a["weight"] for a in asserts if a["type"] == "llm-rubric"} == {0}
    (python,) = [a for a in asserts if a["type"] == "python"]
    assert python["weight"] == 1 and str(pairwise_artifact.resolve()) in python["value"]
    (best,) = [a for a in asserts if a["type"] == "max-score"]
    assert best["value"] == {"method": "average", "weights": {"python": 1, "llm-rubric": 0}}
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate({"prompts": ["{{prompt}}"], "providers": ["echo"], **block})
    back = import_rubrics(tmp_path / "pf.yaml")
    assert back.manifest.get("pairwise") is True and len(back) == 3
    res = _export(tmp_path / "pf.yaml", "deepeval", tmp_path / "d.json")
    assert res.exit_code == 2 and "cannot hold a pairwise rubric set" in res.output


def _p_from_strengths(head: BradleyTerryHead, sa: float, sb: float) -> float:
    """Davidson's P(A > B) for the gap strength(A) - strength(B) + intercept."""
    s = sa - sb + head.intercept_
    nu = 0.0 if math.isinf(head.log_nu_) else math.exp(head.log_nu_)
    return math.exp(s / 2) / (math.exp(s / 2) + nu + math.exp(-s / 2))


def test_promptfoo_python_assertion_reproduces_compare(pairwise_artifact):
    """Each output's assertion carries its strength; from two strengths the head's P(A > B) equals
    `RubricScorer.compare` to 1e-9, and max-score's pick (the higher score) is compare's pick."""
    from rubric_induce.handoff.promptfoo import promptfoo_assert

    scorer = RubricScorer.load(pairwise_artifact)
    want = scorer.compare_pairs(PROMPTS, [a for a, _ in PAIRS], [b for _, b in PAIRS])
    for prompt, (a, b), p in zip(PROMPTS, PAIRS, want, strict=True):
        ga = promptfoo_assert(a, {"vars": {"prompt": prompt}}, run=pairwise_artifact)
        gb = promptfoo_assert(b, {"vars": {"prompt": prompt}}, run=pairwise_artifact)
        sa, sb = ga["namedScores"]["strength"], gb["namedScores"]["strength"]
        assert math.isclose(_p_from_strengths(scorer.pairwise_head, sa, sb), p, abs_tol=1e-9)
        assert (ga["score"] >= gb["score"]) == (p >= 0.5)  # max-score keeps the first of equal scores
        assert ga["pass"] and gb["pass"]  # pass/fail is max-score's


def test_score_strength_equals_the_python_assertion(pairwise_artifact, tmp_path):
    """`rubric-induce score` on a pairwise run gives each response its strength (the reward), the same
    number the promptfoo assertion reports."""
    from rubric_induce.handoff.promptfoo import promptfoo_assert

    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"prompt": p, "response": a}) + "\n" for p, (a, _) in zip(PROMPTS, PAIRS)),
                     encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["score", str(pairwise_artifact), "--input", str(texts), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "Bradley-Terry strength" in res.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for row, p, (a, _) in zip(rows, PROMPTS, PAIRS, strict=True):
        got = promptfoo_assert(a, {"vars": {"prompt": p}}, run=pairwise_artifact)["namedScores"]["strength"]
        assert math.isclose(row["strength"], got, abs_tol=1e-9)


def test_pointwise_scores_have_no_strength(handoff_run):
    scorer = RubricScorer.load(handoff_run)
    assert scorer.pairwise_head is None
    assert scorer.score(["USER: hi\nSYSTEM: Booked for 7 pm."])[0].strength is None


# -- the pointwise calibrated score as a reward (TRL, DSPy) ------------------------------------------------
def test_trl_reward_of_a_pairwise_run_is_the_strength(pairwise_artifact):
    """`trl_reward` on a pairwise run rewards each completion with its Bradley-Terry strength (logistic-mapped),
    the number `score` gives; of two completions it rewards more the one compare prefers."""
    from rubric_induce.handoff.trl import trl_reward

    reward = trl_reward(pairwise_artifact)
    assert reward.target == "strength"
    firsts, seconds = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    raw = trl_reward(pairwise_artifact, normalise=False)(prompts=PROMPTS, completions=firsts)
    scorer = RubricScorer.load(pairwise_artifact)
    want = [r.strength for r in scorer.score([{"prompt": p, "response": a} for p, a in zip(PROMPTS, firsts)])]
    assert raw == pytest.approx(want, abs=1e-12)
    ra, rb = reward(PROMPTS, firsts), reward(PROMPTS, seconds)
    assert all(0.0 < v < 1.0 for v in ra + rb)
    assert ra == pytest.approx([1 / (1 + math.exp(-s)) for s in raw], abs=1e-12)
    probs = scorer.compare_pairs(PROMPTS, firsts, seconds)
    assert [x >= y for x, y in zip(ra, rb)] == [p >= 0.5 for p in probs]


def test_dspy_metric_strength_target(pairwise_artifact, handoff_run):
    from rubric_induce.core.errors import RubricInduceError
    from rubric_induce.handoff.dspy import rubric_metric

    metric = rubric_metric(pairwise_artifact, render=lambda ex, pred: {"prompt": ex, "response": pred},
                           target="strength")
    strong = metric(PROMPTS[0], PAIRS[0][0])
    assert 0.0 < strong < 1.0 and metric(PROMPTS[0], PAIRS[0][0], trace=object()) == (strong >= 0.5)
    with pytest.raises(RubricInduceError, match="target='strength'"):
        rubric_metric(pairwise_artifact, target="prediction")
    with pytest.raises(RubricInduceError, match="pairwise run"):
        rubric_metric(handoff_run, target="strength")


@pytest.mark.tools
def test_pairwise_reward_through_grpo_trainers_own_call(pairwise_artifact):
    """GRPOTrainer._calculate_rewards on a stand-in trainer (as in test_handoff_trl.py) with a pairwise run's reward."""
    from types import SimpleNamespace

    pytest.importorskip("trl")
    import torch
    from trl import GRPOTrainer

    from rubric_induce.handoff.trl import trl_reward

    reward = trl_reward(pairwise_artifact)
    fake = SimpleNamespace(
        accelerator=SimpleNamespace(device="cpu", is_main_process=True), args=SimpleNamespace(report_to=[]),
        state=SimpleNamespace(global_step=0), reward_funcs=[reward], reward_processing_classes=[None],
        reward_func_names=[reward.__name__], environments=None,
        _log_completion_extra=lambda *a, **k: None, _log_metric=lambda *a, **k: None)
    completions = [a for a, _ in PAIRS]
    rewards = GRPOTrainer._calculate_rewards(fake, [{"prompt": p} for p in PROMPTS], PROMPTS, completions,
                                             [[1, 2]] * len(PROMPTS))
    assert tuple(rewards.shape) == (3, 1) and not torch.isnan(rewards).any()
    assert rewards[:, 0].tolist() == pytest.approx(reward(PROMPTS, completions), abs=1e-6)


def test_a_scorer_object_exports_like_its_run(pairwise_artifact, tmp_path):
    from rubric_induce.handoff.registry import FORMATS

    src = load_source(RubricScorer.load(pairwise_artifact))
    assert src.pairwise and src.head() is not None
    FORMATS.get("json").export(src, tmp_path / "s.json")
    doc = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert doc["manifest"][PAIRWISE_HEAD_KEY]["coef"] == src.head().coef_.tolist()
    with pytest.raises(DataError, match="cannot hold a pairwise"):
        FORMATS.get("prometheus").export(src, tmp_path / "p.json")


def test_a_pairwise_run_without_a_head(pairwise_artifact, tmp_path):
    """calibrate disabled: json says the set is pairwise without weights; promptfoo has nothing to pick by."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(pairwise_artifact, run)
    doc = json.loads((run / "artifact.json").read_text(encoding="utf-8"))
    doc["pairwise_head"] = None
    (run / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    res = _export(run, "json", tmp_path / "s.json")
    assert res.exit_code == 0 and "pairwise set" in res.output and "Bradley-Terry" not in res.output
    assert PAIRWISE_HEAD_KEY not in json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))["manifest"]
    res = _export(run, "promptfoo", tmp_path / "pf.yaml")
    assert res.exit_code == 2 and "no Bradley-Terry head" in res.output and "field 'pairwise_head'" in res.output


def test_a_head_over_the_pairwise_probe_gives_no_single_response_strength(pairwise_artifact, tmp_path):
    """select.pair_feature = 'preference': the head's weights read the pairwise probe's margins, which need
    both responses, so a lone response has no strength: score leaves it unset, the TRL reward falls back to
    NetSAT, target='strength' is an error, promptfoo refuses and json records what the weights read."""
    import shutil

    from rubric_induce.core.errors import RubricInduceError
    from rubric_induce.handoff.dspy import rubric_metric
    from rubric_induce.handoff.trl import trl_reward

    run = tmp_path / "run"
    shutil.copytree(pairwise_artifact, run)
    doc = json.loads((run / "artifact.json").read_text(encoding="utf-8"))
    doc["pair_feature"] = "preference"  # three rubrics, three margins: the head file still fits
    (run / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    scorer = RubricScorer.load(run)
    assert scorer.pairwise_head is not None and not scorer.has_strength
    assert RubricScorer.load(pairwise_artifact).has_strength
    res = scorer.score([{"prompt": PROMPTS[0], "response": PAIRS[0][0]}])[0]
    assert res.netsat is not None and res.strength is None
    assert trl_reward(run).target == "score"
    with pytest.raises(RubricInduceError, match="pair_feature"):
        rubric_metric(run, render=lambda ex, pred: {"prompt": ex, "response": pred}, target="strength")
    out = _export(run, "promptfoo", tmp_path / "pf.yaml")
    assert out.exit_code == 2 and "field 'pair_feature'" in out.output and "compare" in out.output
    assert _export(run, "json", tmp_path / "s.json").exit_code == 0
    manifest = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))["manifest"]
    assert manifest["pair_feature"] == "preference" and PAIRWISE_HEAD_KEY in manifest


# -- one empty completion is that completion's failure, never its batch's (issue 40, A3) ----------------------
def test_trl_reward_of_a_pairwise_run_gives_none_for_an_empty_completion(pairwise_artifact):
    """A GRPO group with an empty (or blank) completion: that completion's reward is None (GRPOTrainer
    leaves it out of the group's mean), the others are scored exactly as alone. It used to raise
    `DataError ... text is empty` for the whole batch."""
    from rubric_induce.handoff.trl import trl_reward

    reward = trl_reward(pairwise_artifact)
    got = reward(PROMPTS, [PAIRS[0][0], "", " \n "])
    assert got[1] is None and got[2] is None
    assert got[0] == pytest.approx(reward(PROMPTS[:1], [PAIRS[0][0]])[0], abs=1e-12)
    assert reward(PROMPTS[:2], ["", ""]) == [None, None]  # a group of nothing but empty completions


def test_dspy_metric_batch_and_promptfoo_assertion_with_an_empty_output(pairwise_artifact):
    """The same failure in the other hand-offs that score many outputs: a DSPy metric's batch scores the
    rest and gives the empty one a failed result (its metric call raises, which DSPy counts as one failed
    example); promptfoo's assertion fails that one test instead of raising."""
    from rubric_induce.core.errors import RubricInduceError
    from rubric_induce.handoff.dspy import rubric_metric
    from rubric_induce.handoff.promptfoo import promptfoo_assert

    metric = rubric_metric(pairwise_artifact, render=lambda ex, pred: {"prompt": ex, "response": pred},
                           target="strength")
    results = metric.results(PROMPTS[:2], [PAIRS[0][0], ""])
    assert not results[0].errors and results[0].strength is not None
    assert results[1].errors and "empty" in results[1].errors[0] and "'response'" in results[1].errors[0]
    with pytest.raises(RubricInduceError, match="empty"):
        metric(PROMPTS[1], "")
    graded = promptfoo_assert("", {"vars": {"prompt": PROMPTS[0]}}, run=pairwise_artifact)
    assert graded["pass"] is False and graded["score"] == 0.0 and "empty" in graded["reason"]


@pytest.mark.tools
def test_trl_pairwise_judge_of_a_pairwise_run_with_an_empty_completion(pairwise_artifact):
    """A pair with an empty completion is -1 (not judged); the other pairs are judged as alone."""
    pytest.importorskip("trl")
    from rubric_induce.handoff.trl import trl_pairwise_judge

    judge = trl_pairwise_judge(pairwise_artifact, seed=3)
    pairs = [list(PAIRS[0]), ["", PAIRS[1][1]], list(PAIRS[2])]
    got = judge.judge(PROMPTS, pairs, shuffle_order=False)
    assert got[1] == -1
    alone = trl_pairwise_judge(pairwise_artifact, seed=3).judge([PROMPTS[0], PROMPTS[2]], [pairs[0], pairs[2]],
                                                                shuffle_order=False)
    assert [got[0], got[2]] == alone and set(alone) <= {0, 1}
