"""A run that calibrated several aspects, through the scorer and the hand-offs: every aspect's
prediction where the format has room for it, and the main one where it has room for one."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError

pytestmark = pytest.mark.slow  # over about 1 s per file on 2 cores: CI runs it, plain pytest does not

pytest.importorskip("torch")

CONFIG = """
[run]
seed = 0
test_size = 0.25

[data]
examples = "texts.jsonl"
label = "overall"
label_threshold = 3

[data.mapping]
id = "id"
text = { text = "text" }
labels = { overall = "overall", clarity = "clarity", accuracy = "accuracy" }

[backend]
spec = "fake"

[generate]
method = "none"
include = ["rubrics.json"]

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 1

[calibrate]
cv_folds = 0
adaptive = false
options = { hidden = [4, 4], pretrain_epochs = 3, finetune_epochs = 3 }
"""

RUBRICS = {"format": "rubric-induce.rubric-set", "version": 1, "rubrics": [
    {"text": "The answer is clear.", "polarity": "SAT"},
    {"text": "The answer is correct.", "polarity": "SAT"},
    {"text": "The answer is short.", "polarity": "SAT"},
    {"text": "The answer rambles.", "polarity": "DSAT"},
]}
ASPECTS = ["overall", "clarity", "accuracy"]


@pytest.fixture(scope="module")
def aspect_artifact(tmp_path_factory):
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("aspect-artifact")
    rng = random.Random(0)
    words = "the answer is right wrong clear vague short long helpful rambling".split()
    rows = [{"id": f"t{i}", "text": " ".join(rng.choice(words) for _ in range(8 + i % 5)),
             **{a: rng.choice([1, 2, 3, 4, 5]) for a in ASPECTS}} for i in range(32)]
    (tmp / "texts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp / "rubrics.json").write_text(json.dumps(RUBRICS), encoding="utf-8")
    (tmp / "cfg.toml").write_text(CONFIG, encoding="utf-8")
    run_pipeline(tmp / "cfg.toml", out=tmp / "run", echo=lambda m: None, stop_after="artifact")
    return tmp / "run"


def test_scorer_predicts_each_aspect_and_names_unknown_ones(aspect_artifact):
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(aspect_artifact)
    assert scorer.questions == ASPECTS and list(scorer.heads) == ASPECTS[1:]
    table = ProbeTable.load(aspect_artifact / "probes.jsonl")
    ids = ["t0", "t1", "t2"]
    results = scorer.score_probes(table, ids)
    arr = table.arrays(example_ids=ids, rubric_ids=[r.id for r in scorer.rubrics])
    for a in ASPECTS:
        got = scorer.predict_probes(arr, ids, aspect=a)
        np.testing.assert_allclose(got, [r.aspects[a]["prediction"] for r in results], rtol=1e-12)
    assert [r.prediction for r in results] == [r.predictions["overall"] for r in results]
    assert all(r.to_dict()["aspects"]["clarity"]["scale"] == [1.0, 2.0, 3.0, 4.0, 5.0] for r in results)
    with pytest.raises(DataError) as err:
        scorer.predict_probes(arr, ids, aspect="clarty")
    assert "clarity" in str(err.value) and err.value.field == "aspect"


def test_dspy_metric_reads_the_aspect_it_is_given(aspect_artifact):
    from rubric_induce.data.results import ScoreResult
    from rubric_induce.handoff.dspy import RubricMetric

    metric = RubricMetric(str(aspect_artifact), target="prediction", aspect="accuracy")
    res = ScoreResult(id="x", distributions={}, expected={}, netsat=1.0, prediction=2.0, uncertainty=0.5,
                      scale=[1.0, 2.0, 3.0, 4.0, 5.0], question="overall",
                      aspects={"overall": {"prediction": 2.0, "scale": [1.0, 5.0]},
                               "accuracy": {"prediction": 4.0, "scale": [1.0, 2.0, 3.0, 4.0, 5.0]}})
    assert metric.raw(res) == 4.0 and metric.value(res) == pytest.approx(0.75)
    assert RubricMetric(str(aspect_artifact), target="prediction").raw(res) == 2.0  # the main aspect
    with pytest.raises(DataError):
        RubricMetric(str(aspect_artifact), target="prediction", aspect="fluency")
    with pytest.raises(Exception, match="target='prediction'"):
        RubricMetric(str(aspect_artifact), target="score", aspect="accuracy")


def test_json_export_lists_the_aspects_and_promptfoo_names_each(aspect_artifact, tmp_path):
    res = CliRunner().invoke(cli, ["export", str(aspect_artifact), "--format", "json", "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "calibrated aspects overall, clarity, accuracy" in res.output
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert doc["manifest"]["calibrated_aspects"] == ASPECTS

    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.handoff.promptfoo import grading_result
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(aspect_artifact)
    r = scorer.score_probes(ProbeTable.load(aspect_artifact / "probes.jsonl"), ["t3"])[0]
    graded = grading_result(r, scorer.rubrics, scorer.threshold)
    assert graded["namedScores"]["prediction"] == pytest.approx(r.prediction)
    assert graded["namedScores"]["prediction_clarity"] == pytest.approx(r.aspects["clarity"]["prediction"])
    assert graded["namedScores"]["prediction_accuracy"] == pytest.approx(r.aspects["accuracy"]["prediction"])


def test_a_one_question_run_scores_and_saves_as_before(fake_run):
    """The shared fake run calibrates one question (calibrate.question): no aspect folder, no
    ``aspects`` key in a scored row, the stage summary and artifact fields of before."""
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(fake_run)
    assert scorer.heads == {} and scorer.questions == ["satisfaction"]
    ids = [json.loads(line)["example_id"] for line in (fake_run / "probes.jsonl").read_text().splitlines()[:1]]
    row = scorer.score_probes(ProbeTable.load(fake_run / "probes.jsonl"), ids)[0].to_dict()
    assert "aspects" not in row and row["question"] == "satisfaction"
    assert not (fake_run / "calibration" / "aspects").exists()
    summary = json.loads((fake_run / "stages" / "calibrate.json").read_text(encoding="utf-8"))["summary"]
    assert "questions" not in summary and "aspects" not in summary
    config = json.loads((fake_run / "calibration" / "calibrator.json").read_text(encoding="utf-8"))
    assert "aspects" not in config["extra"]


def test_a_trl_reward_per_aspect(aspect_artifact):
    from rubric_induce.handoff.trl import render_turn, trl_reward
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(aspect_artifact)
    prompts, completions = ["What is 2 + 2?"] * 2, ["four, clearly", "it is 5 and then it rambles on"]
    main = trl_reward(scorer, normalise=False)(prompts, completions)
    clarity = trl_reward(scorer, aspect="clarity", normalise=False, name="clarity_reward")
    assert clarity.__name__ == "clarity_reward"
    got = clarity(prompts, completions)
    results = scorer.score([render_turn(p, c, scorer.fields or ["text"]) for p, c in zip(prompts, completions)])
    assert got == [r.aspects["clarity"]["prediction"] for r in results]
    assert main == [r.prediction for r in results]
    with pytest.raises(DataError):
        trl_reward(scorer, aspect="tone")
