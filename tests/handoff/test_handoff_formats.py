"""Data hand-offs (promptfoo, Prometheus / ragas, OpenAI graders), the export / import CLI over a run
folder, the round trips that keep rubric ids, and the top-level API. No tool package is needed here
beyond the openai SDK (its grader types) and jsonschema (promptfoo's config schema)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from handoff_helpers import BAD, GOOD, answer_probs, rubric_in

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError
from rubric_induce.data import YES_NO, AnswerScale, Rubric, RubricSet
from rubric_induce.handoff import (
    export_openai_graders,
    export_prometheus,
    export_promptfoo,
    import_openai_graders,
    import_prometheus,
    import_promptfoo,
    import_rubrics,
    openai_graders,
    prometheus_rubrics,
    promptfoo_assert,
    promptfoo_config,
)
from rubric_induce.handoff.common import mean_threshold
from rubric_induce.handoff.source import HandoffSource, load_source

SCHEMA = Path(__file__).with_name("promptfoo-config-schema-0.121.20.json")


def _same(a, b):
    return [(r.id, r.text, r.polarity, r.scale, r.levels) for r in a] == \
        [(r.id, r.text, r.polarity, r.scale, r.levels) for r in b]


def _fake_scorer(run, rubrics):
    from rubric_induce.scoring.scorer import RubricScorer

    def answers(messages, labels, prefix):
        prompt = "\n".join(m["content"] for m in messages)
        return answer_probs(rubric_in(prompt, rubrics), "Booked" in prompt)

    return RubricScorer.load(run, backend=FakeBackend(answers=answers), cache=False)


# -- source --------------------------------------------------------------------------------------
def test_source_from_run_folder_artifact_and_rubric_file(handoff_run, handoff_rubrics):
    src = load_source(handoff_run)
    assert [r.id for r in src.rubrics] == [r.id for r in handoff_rubrics]
    assert src.calibrated and src.threshold is not None and src.run_dir == handoff_run
    assert load_source(handoff_run / "artifact.json").threshold == src.threshold
    from_file = load_source(handoff_run / "selected.jsonl")
    assert [r.id for r in from_file.rubrics] == [r.id for r in handoff_rubrics] and from_file.artifact is None


def test_source_errors_name_the_problem(tmp_path):
    with pytest.raises(DataError, match="no artifact.json"):
        load_source(tmp_path)
    with pytest.raises(DataError, match="no such file"):
        load_source(tmp_path / "missing.jsonl")
    with pytest.raises(DataError, match="not a Rubric"):
        load_source(["not a rubric"])


# -- promptfoo -----------------------------------------------------------------------------------
def test_promptfoo_block_validates_against_promptfoos_schema(handoff_run, handoff_rubrics, tmp_path, require_module):
    jsonschema = require_module("jsonschema")
    yaml = require_module("yaml")
    path = export_promptfoo(handoff_run, tmp_path / "promptfoo.yaml", provider="openai:gpt-4.1-mini")
    block = yaml.safe_load(path.read_text(encoding="utf-8"))
    assertions = block["defaultTest"]["assert"]
    rubric_asserts = [a for a in assertions if a["type"] == "llm-rubric"]
    assert [a["metric"] for a in rubric_asserts] == [r.id for r in handoff_rubrics]
    assert all(a["weight"] == 1 and a["threshold"] == 0.5 for a in rubric_asserts)
    python = [a for a in assertions if a["type"] == "python"]
    assert len(python) == 1 and python[0]["weight"] == 0 and "promptfoo_assert" in python[0]["value"]
    assert str(handoff_run.resolve()) in python[0]["value"]
    assert block["defaultTest"]["options"]["provider"] == "openai:gpt-4.1-mini"
    # promptfoo's own config schema (generated from promptfoo 0.121.20, scripts/promptfoo_schema.sh):
    # the block merged into a minimal config must validate, and a broken one must not.
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    config = {"prompts": ["{{text}}"], "providers": ["echo"], **block}
    jsonschema.Draft202012Validator(schema).validate(config)
    broken = json.loads(json.dumps(config))
    broken["defaultTest"]["assert"][0]["weight"] = "heavy"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(broken)
    broken["defaultTest"]["assert"][0]["weight"] = 1
    broken["defaultTest"]["threshold"] = "half"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(broken)


def test_promptfoo_threshold_reproduces_the_netsat_label(handoff_run, handoff_rubrics):
    """llm-rubric scores s (worst 0 .. best 1) averaged against defaultTest.threshold give the same
    pass/fail as NetSAT against the selected threshold, for the scorer's own unit scores."""
    scorer = _fake_scorer(handoff_run, handoff_rubrics)
    threshold = promptfoo_config(handoff_run)["defaultTest"]["threshold"]
    results = scorer.score([GOOD, BAD, "USER: hi\nSYSTEM: Booked maybe", "nothing useful"])
    for res in results:
        s = []
        for r in handoff_rubrics:
            lo, hi = r.scale.low, r.scale.high
            u = (res.expected[r.id] - lo) / (hi - lo)
            s.append(1 - u if r.polarity == "DSAT" else u)
        mean = sum(s) / len(s)
        assert 10 * (sum(s) - sum(r.polarity == "DSAT" for r in handoff_rubrics)) == pytest.approx(res.netsat)
        assert (mean > threshold) == bool(res.label)
    assert {bool(r.label) for r in results} == {True, False}


def test_promptfoo_python_assertion_is_the_scorers_exact_result(handoff_run, handoff_rubrics, monkeypatch):
    from rubric_induce.handoff import promptfoo as pf

    scorer = _fake_scorer(handoff_run, handoff_rubrics)
    monkeypatch.setattr(pf, "_scorer", lambda run, backend: scorer)  # the run's fake backend, scripted
    want = scorer.score([GOOD, BAD])
    for text, res in zip((GOOD, BAD), want):
        got = promptfoo_assert(text, {"vars": {"text": "ignored: one field"}, "prompt": "p"}, run=handoff_run)
        lo, hi = min(res.scale), max(res.scale)
        assert got["score"] == pytest.approx((res.prediction - lo) / (hi - lo))
        assert got["pass"] == bool(res.label)
        assert got["namedScores"]["netsat"] == pytest.approx(res.netsat)
        assert got["namedScores"]["prediction"] == pytest.approx(res.prediction)
        assert "NetSAT" in got["reason"]


def test_promptfoo_python_assertion_loads_the_run(handoff_run):
    """Through the real loading path: the artifact's fake backend, no monkeypatching."""
    got = promptfoo_assert(GOOD, {"vars": {}}, run=str(handoff_run))
    assert set(got) == {"pass", "score", "reason", "namedScores"} and 0.0 <= got["score"] <= 1.0


def test_promptfoo_round_trip_and_yaml_fallback(handoff_run, handoff_rubrics, tmp_path, monkeypatch):
    path = export_promptfoo(handoff_run, tmp_path / "pf.yaml")
    assert _same(import_promptfoo(path), handoff_rubrics)
    assert _same(import_rubrics(path), handoff_rubrics)  # auto: .yaml is a promptfoo config
    monkeypatch.setitem(sys.modules, "yaml", None)  # without PyYAML: JSON, which is valid YAML
    path = export_promptfoo(handoff_run, tmp_path / "pf_json.yaml")
    text = path.read_text(encoding="utf-8")
    json.loads("\n".join(ln for ln in text.splitlines() if not ln.startswith("#")))
    assert _same(import_promptfoo(path), handoff_rubrics)


def test_promptfoo_refuses_what_it_cannot_hold(handoff_rubrics):
    tied = AnswerScale(("never", "sometimes", "often"), (0.0, 1.0, 1.0))
    with pytest.raises(DataError, match="share the value"):
        promptfoo_config([Rubric.create("The system is polite.", "SAT", scale=tied)])
    with pytest.raises(DataError, match="run folder"):
        promptfoo_config(handoff_rubrics, python_assert=True)  # the python assertion needs a run
    assert all(a["type"] == "llm-rubric" for a in promptfoo_config(handoff_rubrics)["defaultTest"]["assert"])


def test_mean_threshold_edges():
    rubrics = [Rubric.create("A holds.", "SAT"), Rubric.create("B fails.", "DSAT")]
    assert mean_threshold(rubrics, None) is None
    assert mean_threshold(rubrics, 0.0) == 0.5
    assert mean_threshold(rubrics, 100.0) == 1.0 and mean_threshold(rubrics, -100.0) == 0.0


# -- Prometheus / ragas --------------------------------------------------------------------------
def test_prometheus_dictionaries(handoff_run, handoff_rubrics, tmp_path):
    entries = prometheus_rubrics(handoff_run)
    keys = {"criteria", *(f"score{k}_description" for k in range(1, 6))}
    assert all(keys <= set(e) for e in entries)
    for e, r in zip(entries, handoff_rubrics):
        assert e["id"] == r.id and e["polarity"] == r.polarity
        best = "score5_description" if r.polarity == "DSAT" else "score1_description"
        assert "Not true at all" in e[best]  # score 5 is always the good end
    path = export_prometheus(handoff_run, tmp_path / "prometheus.json")
    assert _same(import_prometheus(path), handoff_rubrics)
    assert _same(import_rubrics(path), handoff_rubrics)  # auto-detected
    bare = [{k: v for k, v in entries[0].items() if k in keys}]
    back = import_rubrics_from(bare, tmp_path)
    assert back[0].polarity is None and back[0].scale.size == 5


def import_rubrics_from(doc, tmp_path):
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return list(import_rubrics(path))


@pytest.mark.parametrize("scale", [AnswerScale.likert(1, 7), YES_NO, AnswerScale.likert(1, 4)])
def test_prometheus_refuses_other_scales(scale):
    with pytest.raises(DataError, match=r"5-level scales only; rubric rb-\w+ .* has \d+ levels"):
        prometheus_rubrics([Rubric.create("The system is polite.", "SAT", scale=scale)])


def test_prometheus_import_errors_name_the_field(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"criteria": "x", "score1_description": "a"}]), encoding="utf-8")
    with pytest.raises(DataError, match=r"\[0\]\.score2_description"):
        import_prometheus(path)


# -- OpenAI graders ------------------------------------------------------------------------------
def test_openai_graders_validate_with_the_sdk_types(handoff_run, handoff_rubrics, require_module):
    require_module("openai")
    from openai.types.graders import LabelModelGrader, ScoreModelGrader

    for kind, model_cls in (("score_model", ScoreModelGrader), ("label_model", LabelModelGrader)):
        graders = openai_graders(handoff_run, kind=kind, model="o4-mini")
        assert [g["name"] for g in graders] == [r.id for r in handoff_rubrics]
        for g, r in zip(graders, handoff_rubrics):
            parsed = model_cls.model_validate(g)
            assert set(g) <= set(model_cls.model_fields)  # nothing the API does not know
            assert parsed.type == kind and parsed.model == "o4-mini"
            assert parsed.input[0].role == "system" and r.text in parsed.input[0].content
            assert parsed.input[1].content == "{{sample.output_text}}"
            if kind == "score_model":
                assert parsed.range == [r.scale.low, r.scale.high]
            else:
                assert parsed.labels == list(r.scale.labels)
                assert parsed.passing_labels == (["1", "2"] if r.polarity == "DSAT" else ["4", "5"])


def test_openai_graders_round_trip_and_templates(handoff_run, handoff_rubrics, tmp_path):
    for kind in ("score_model", "label_model"):
        path = export_openai_graders(handoff_run, tmp_path / f"{kind}.json", kind=kind)
        assert _same(import_openai_graders(path), handoff_rubrics)
        assert _same(import_rubrics(path), handoff_rubrics)
    words = AnswerScale(("No", "Partly", "Yes"), (0.0, 0.5, 1.0))
    src = HandoffSource([Rubric.create("The summary is faithful to the source.", "SAT", scale=words)],
                        fields=["source", "summary"])
    (grader,) = openai_graders(src, kind="label_model")
    assert grader["input"][1]["content"] == "source:\n{{item.source}}\n\nsummary:\n{{sample.output_text}}"
    assert grader["labels"] == ["No", "Partly", "Yes"] and grader["passing_labels"] == ["Yes"]
    path = tmp_path / "g.json"
    path.write_text(json.dumps([grader]), encoding="utf-8")
    (back,) = import_openai_graders(path)
    assert back.scale.labels == ("No", "Partly", "Yes")


def test_openai_graders_refuse_what_they_cannot_hold():
    tied = AnswerScale(("low", "mid", "high"), (0.0, 1.0, 1.0))
    with pytest.raises(DataError, match="share the value"):
        openai_graders([Rubric.create("The system is polite.", "SAT", scale=tied)])
    with pytest.raises(DataError, match="unknown OpenAI grader kind"):
        openai_graders([Rubric.create("The system is polite.", "SAT")], kind="python")


# -- CLI -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt,suffix", [("json", ".json"), ("llm-rubric", ".json"), ("deepeval", ".json"),
                                        ("promptfoo", ".yaml"), ("prometheus", ".json"),
                                        ("openai-graders", ".json"), ("inspect", ".py")])
def test_cli_export_run_folder_and_import_keeps_ids(fmt, suffix, handoff_run, handoff_rubrics, tmp_path):
    out = tmp_path / f"out{suffix}"
    res = CliRunner().invoke(cli, ["export", str(handoff_run), "--format", fmt, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.exists()
    if fmt == "inspect":
        assert f"SOURCE = {str(handoff_run.resolve())!r}" in out.read_text(encoding="utf-8")
        return
    pool = tmp_path / "pool.jsonl"
    res = CliRunner().invoke(cli, ["import", str(out), "--out", str(pool)])
    assert res.exit_code == 0, res.output
    assert _same(RubricSet.load(pool), handoff_rubrics)


def test_cli_export_keeps_the_rubrics_form_and_checks_arguments(handoff_run, tmp_path):
    runner = CliRunner()
    out = tmp_path / "r.json"
    res = runner.invoke(cli, ["export", "--rubrics", str(handoff_run / "selected.jsonl"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["format"] == "rubric-induce.rubric-set" and doc["threshold"] is not None
    res = runner.invoke(cli, ["export", str(handoff_run), "--rubrics", str(handoff_run / "selected.jsonl"),
                              "--out", str(out)])
    assert res.exit_code == 2 and "not both" in res.output
    res = runner.invoke(cli, ["export", "--out", str(out)])
    assert res.exit_code == 2 and "RUN" in res.output
    res = runner.invoke(cli, ["export", str(tmp_path), "--format", "promptfoo", "--out", str(out)])
    assert res.exit_code == 2 and "no artifact.json" in res.output
    seven = RubricSet([Rubric.create("The system is polite.", "SAT", scale=AnswerScale.likert(1, 7))])
    seven.save(tmp_path / "seven.jsonl")
    res = runner.invoke(cli, ["export", "--rubrics", str(tmp_path / "seven.jsonl"), "--format", "prometheus",
                              "--out", str(out)])
    assert res.exit_code == 2 and "5-level scales only" in res.output
    res = runner.invoke(cli, ["export", str(handoff_run), "--format", "openai-graders", "--grader", "label_model",
                              "--model", "o4-mini", "--out", str(out)])
    assert res.exit_code == 0 and json.loads(out.read_text(encoding="utf-8"))[0]["model"] == "o4-mini"


# -- top level -----------------------------------------------------------------------------------
def test_top_level_names_are_lazy():
    code = ("import sys, rubric_induce as ri\n"
            "heavy = ['rubric_induce.scoring.scorer', 'rubric_induce.pipeline', 'rubric_induce.handoff', 'torch']\n"
            "assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]\n"
            "from rubric_induce import RubricScorer, run_pipeline, load_config, RunResult\n"
            "assert RubricScorer.__module__ == 'rubric_induce.scoring.scorer'\n"
            "from rubric_induce.handoff import inspect_scorer, openai_graders, deepeval_geval, export_json\n"
            "assert 'inspect_ai' not in sys.modules and 'deepeval' not in sys.modules\n"
            "missing = [n for n in ri.__all__ if not hasattr(ri, n)]\n"
            "assert not missing, missing\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    import rubric_induce

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rubric_induce.nope  # noqa: B018


def test_promptfoo_decide_scorer_weights_the_python_assertion(handoff_run, handoff_rubrics):
    block = promptfoo_config(handoff_run, decide="scorer")
    weights = {a["type"]: a["weight"] for a in block["defaultTest"]["assert"]}
    assert weights == {"llm-rubric": 0, "python": 1} and "threshold" not in block["defaultTest"]
    block = promptfoo_config(handoff_run)
    assert {a["type"]: a["weight"] for a in block["defaultTest"]["assert"]} == {"llm-rubric": 1, "python": 0}
    with pytest.raises(DataError, match="decide"):
        promptfoo_config(handoff_run, decide="both")
    with pytest.raises(DataError, match="run folder"):
        promptfoo_config(handoff_rubrics, decide="scorer")


# -- bring-your-own-data: rubrics on other scales come back exactly -------------------------------
def _odd_rubrics():
    return [
        Rubric.create("The summary states facts not in the article.", "DSAT",
                      scale=AnswerScale(("No", "Yes"), (0.0, 1.0))),
        Rubric.create("Rate the overall coherence of the summary.", "SAT",
                      scale=AnswerScale(tuple(str(v) for v in range(11)), tuple(float(v) for v in range(11)))),
        Rubric.create("The summary is fluent — naïve “quotes” 🙂.", "SAT", aspect="fluency",
                      scale=AnswerScale(("1", "2", "3", "4", "5"), (1.0, 2.0, 3.0, 4.0, 5.0),
                                        ("awful", "poor", "ok", "good", "great"))),
        Rubric.create("How relevant is it?", "SAT", scale=AnswerScale(("1", "1.5", "2", "2.5", "3"),
                                                                       (1.0, 1.5, 2.0, 2.5, 3.0))),
        Rubric.create("Does it hedge?", "DSAT", aspect="style",
                      scale=AnswerScale(("never", "sometimes", "always"), (0.0, 0.5, 1.0)),
                      levels=["Never hedges.", "Hedges now and then.", "Hedges every claim."]),
    ]


def _full(rubrics):
    return [(r.id, r.text, r.polarity, r.aspect, r.scale, r.levels) for r in rubrics]


@pytest.mark.parametrize("fmt,suffix", [("deepeval", ".json"), ("promptfoo", ".yaml")])
def test_tool_formats_round_trip_scales_values_descriptions_and_aspects(fmt, suffix, tmp_path):
    """0/1, 0-10, half-point and word scales, scale descriptions and aspects used to come back as
    a 1..n Likert scale without aspect from deepeval / promptfoo (ids kept, so a merge with the
    original pool then failed: 'two different rubrics with one id'); and a rubric with level
    descriptors on a scale other than yes/no crashed the deepeval export (its DAG node)."""
    from rubric_induce.handoff import merge_pools

    rubrics = _odd_rubrics()
    src, out = tmp_path / "set.json", tmp_path / f"out{suffix}"
    from rubric_induce.handoff import export_json

    export_json(rubrics, src)
    res = CliRunner().invoke(cli, ["export", "--rubrics", str(src), "--format", fmt, "--out", str(out)])
    assert res.exit_code == 0, res.output
    back = import_rubrics(out)
    assert _full(back) == _full(rubrics)
    assert len(merge_pools(rubrics, back)) == len(rubrics)


def test_promptfoo_block_with_recorded_scales_validates_against_promptfoos_schema(require_module):
    jsonschema = require_module("jsonschema")
    config = promptfoo_config(_odd_rubrics())
    assert set(config["defaultTest"]["metadata"]["rubric-induce"]) == {r.id for r in _odd_rubrics()}
    doc = {"prompts": ["{{text}}"], "providers": ["echo"], **config}
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(doc)


def test_tool_import_without_recorded_scales_still_reads_the_text():
    """A config without the record (hand-edited, or an older export) is read from its text; a
    damaged record names its field."""
    from rubric_induce.handoff.promptfoo import promptfoo_to_rubrics

    config = promptfoo_config(_odd_rubrics())
    shapes = config["defaultTest"].pop("metadata")["rubric-induce"]
    back = promptfoo_to_rubrics(config)
    assert [r.id for r in back] == [r.id for r in _odd_rubrics()]
    assert back[0].scale.labels == ("1", "2")  # the text alone: a 1..n scale
    rid = _odd_rubrics()[0].id
    shapes[rid]["scale"] = {"labels": ["No", "Yes"], "values": [0]}
    config["defaultTest"]["metadata"] = {"rubric-induce": shapes}
    with pytest.raises(DataError) as err:
        promptfoo_to_rubrics(config)
    assert err.value.field.startswith(f"defaultTest.metadata.rubric-induce.{rid}.scale")


def test_import_of_an_export_without_rubrics_says_what_to_import(handoff_run, tmp_path):
    """Importing the inspect module or the llm-rubric Markdown said "malformed JSON (Extra data)"."""
    runner = CliRunner()
    module = tmp_path / "scorer.py"
    assert runner.invoke(cli, ["export", str(handoff_run), "--format", "inspect", "--out", str(module)]).exit_code == 0
    res = runner.invoke(cli, ["import", str(module), "--out", str(tmp_path / "p.jsonl")])
    assert res.exit_code == 2 and "inspect scorer module" in res.output and str(handoff_run.resolve()) in res.output
    questions = tmp_path / "q.json"
    assert runner.invoke(cli, ["export", str(handoff_run), "--format", "llm-rubric", "--out",
                               str(questions)]).exit_code == 0
    res = runner.invoke(cli, ["import", str(tmp_path / "q.md"), "--out", str(tmp_path / "p.jsonl")])
    assert res.exit_code == 2 and "import the .json written next to it (q.json)" in res.output
    spec = tmp_path / "spec.py"  # JSON under a .py name is still read as JSON
    assert runner.invoke(cli, ["export", str(handoff_run), "--format", "deepeval", "--out", str(spec)]).exit_code == 0
    assert runner.invoke(cli, ["import", str(spec), "--out", str(tmp_path / "p.jsonl")]).exit_code == 0
