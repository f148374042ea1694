"""Several aspects in one run, end to end on the fake backend: a SummEval slice with its four
expert-rated aspects mapped in ``[data.mapping]`` (no ``[calibrate] questions``: every mapped label
is calibrated by default); ``run`` calibrates a head per aspect (one shared pre-training), writes a
held-out table per aspect (evaluation.md / .json, report, viewer), and ``score`` returns every
aspect's prediction."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli

MAPPED = ["coherence", "consistency", "fluency", "relevance"]
#: The aspects the slice can calibrate: every training summary of the slice has consistency 5.
ASPECTS = ["coherence", "fluency", "relevance"]

CONFIG = """
[run]
seed = 0
test_size = 0.3

[data]
examples = "summeval_slice.jsonl"
label = "coherence"
label_threshold = 4

[data.mapping]
id = "id"
group = "doc_id"
text = { source = "source", summary = "summary" }
labels = { coherence = "coherence", consistency = "consistency", fluency = "fluency", relevance = "relevance" }

[task]
description = "Summaries of news articles, rated by experts from 1 (poor) to 5 (excellent)."

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
cv_folds = 2
options = { hidden = [4, 4], pretrain_epochs = 5, finetune_epochs = 5 }
adaptive_options = { epochs = 3 }

[evaluate]
bootstrap = 50

[report]
figures = false
"""

RUBRICS = {"format": "rubric-induce.rubric-set", "version": 1, "rubrics": [
    {"text": "The summary states the article's main event.", "polarity": "SAT"},
    {"text": "The summary reads as fluent, grammatical English.", "polarity": "SAT"},
    {"text": "The summary only says what the article supports.", "polarity": "SAT"},
    {"text": "The summary repeats itself or breaks off mid-sentence.", "polarity": "DSAT"},
    {"text": "The summary adds facts the article does not contain.", "polarity": "DSAT"},
]}


def write_slice(shared_data_root, path, *, articles: int = 12, per_article: int = 4) -> list[dict]:
    """The first ``articles`` SummEval articles, ``per_article`` systems each, the expert means
    rounded to whole points (a small, attributed subset: SummEval, MIT licence)."""
    rows, seen = [], {}
    with (shared_data_root / "summeval" / "summeval_merged.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            n = seen.get(r["doc_id"], 0)
            if n >= per_article or (r["doc_id"] not in seen and len(seen) >= articles):
                continue
            seen[r["doc_id"]] = n + 1
            rows.append({"id": f"{r['doc_id'][-8:]}-{r['system_id']}", "doc_id": r["doc_id"],
                         "source": r["source"][:600], "summary": r["summary"],
                         **{a: float(round(r["expert_avg"][a])) for a in MAPPED}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


@pytest.fixture(scope="module")
def aspect_run(tmp_path_factory, shared_data_root):
    tmp = tmp_path_factory.mktemp("aspects")
    rows = write_slice(shared_data_root, tmp / "summeval_slice.jsonl")
    (tmp / "rubrics.json").write_text(json.dumps(RUBRICS), encoding="utf-8")
    (tmp / "cfg.toml").write_text(CONFIG, encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(tmp / "cfg.toml"), "--out", str(tmp / "run")])
    assert res.exit_code == 0, res.output
    return tmp, tmp / "run", rows, res.output


@pytest.mark.slow
def test_a_run_calibrates_every_mapped_aspect_and_writes_a_table_each(aspect_run):
    tmp, run, _, output = aspect_run
    assert "calibrated 3 aspects" in output
    # a mapped aspect the training split cannot calibrate (one answer) is left out, and the run says so
    assert "aspect 'consistency' (mapped in [data.mapping]) is left out of calibration" in output
    cal = json.loads((run / "calibration" / "calibrator.json").read_text(encoding="utf-8"))
    assert cal["question_names"] == ASPECTS  # one multi-task pre-training on every aspect
    assert [a["question"] for a in cal["extra"]["aspects"]] == ASPECTS[1:]
    for a in cal["extra"]["aspects"]:
        head = json.loads((run / "calibration" / a["folder"] / "calibrator.json").read_text(encoding="utf-8"))
        assert head["question_names"][head["main_question_index"]] == a["question"]
    ev = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    assert ev["question"] == "coherence" and ev["questions"] == ASPECTS
    assert list(ev["aspects"]) == ASPECTS[1:]
    md = (run / "evaluation.md").read_text(encoding="utf-8")
    assert "Calibrated prediction of 'coherence'" in md
    for a in ASPECTS[1:]:
        entry = ev["aspects"][a]
        assert entry["calibrated"]["calibrated"]["n"] == ev["n_test"]
        assert entry["baselines"]["constant"]["question"] == a
        assert f"## Aspect '{a}'" in md
    scores = [json.loads(line) for line in (run / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["aspect"] for r in scores if r["system"] == "calibrated"} == set(ASPECTS)
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "## Held-out evaluation per aspect" in report
    for a in ASPECTS:
        assert f"### Aspect `{a}`" in report

    from rubric_induce.reporting.viewer.data import build_view_data

    view = build_view_data(run)
    assert [a["question"] for a in view["headline"]["aspects"]] == ASPECTS
    assert view["summary"]["questions"] == ASPECTS
    assert "hd.aspects" in (run / "view.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_score_returns_every_aspect(aspect_run):
    tmp, run, rows, _ = aspect_run
    texts = tmp / "new.jsonl"
    texts.write_text("".join(json.dumps({"id": f"n{i}", "source": r["source"], "summary": r["summary"]}) + "\n"
                             for i, r in enumerate(rows[:3])), encoding="utf-8")
    out = tmp / "scored.jsonl"
    res = CliRunner().invoke(cli, ["score", str(run), "--input", str(texts), "--out", str(out)])
    assert res.exit_code == 0, res.output
    scored = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(scored) == 3
    for row in scored:
        assert list(row["aspects"]) == ASPECTS
        assert row["prediction"] == row["aspects"]["coherence"]["prediction"]  # the main aspect's, as before
        for a in ASPECTS:
            numbers = row["aspects"][a]
            assert 1.0 <= numbers["prediction"] <= 5.0 and numbers["scale"][0] >= 1.0
            assert abs(sum(numbers["proba"]) - 1.0) < 1e-6

    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(run)
    assert scorer.questions == ASPECTS
    results = scorer.score([{"source": rows[0]["source"], "summary": rows[0]["summary"]}])
    assert list(results[0].predictions) == ASPECTS
    assert results[0].predictions["fluency"] == pytest.approx(scored[0]["aspects"]["fluency"]["prediction"])


@pytest.mark.parametrize("extra, field, words", [
    ('questions = ["coherence", "coherense"]', "calibrate.questions", "coherence"),
    ('question = "coherence"\nquestions = ["fluency"]', "calibrate.questions", "not both"),
])
def test_check_refuses_bad_aspects_before_any_call(tmp_path, shared_data_root, extra, field, words):
    write_slice(shared_data_root, tmp_path / "summeval_slice.jsonl", articles=6)
    (tmp_path / "rubrics.json").write_text(json.dumps(RUBRICS), encoding="utf-8")
    (tmp_path / "cfg.toml").write_text(CONFIG.replace("[calibrate]\n", f"[calibrate]\n{extra}\n"), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(tmp_path / "cfg.toml"), "--check"])
    assert res.exit_code == 2, res.output
    assert field in res.output and words in res.output and "Traceback" not in res.output


def test_one_mapped_label_or_a_named_question_calibrates_one_question():
    """The default is what a run always did unless the mapping names several labels."""
    from rubric_induce.calibration.api import CalibrateParams, run_questions
    from rubric_induce.data.params import DataParams

    one = DataParams(label="coherence", mapping={"labels": {"coherence": "c"}})
    several = DataParams(label="fluency", mapping={"labels": {"coherence": "c", "fluency": "f"}})
    assert run_questions(CalibrateParams(), one) == (["coherence"], False)
    assert run_questions(CalibrateParams(), DataParams(label="sat")) == (["sat"], False)
    assert run_questions(CalibrateParams(question="coherence"), several) == (["coherence"], True)
    assert run_questions(CalibrateParams(), several) == (["fluency", "coherence"], False)
    assert run_questions(CalibrateParams(questions=("coherence", "fluency")), one) == (["coherence", "fluency"], True)
