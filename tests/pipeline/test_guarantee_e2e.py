"""Selective scoring end to end on the fake backend: `calibrate-guarantee`, `score --guarantee`,
`score --cascade`, `RubricScorer.score(..., guarantee=...)`, and bad input exiting 2 naming the field."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.scoring.guarantee import Guarantee
from rubric_induce.scoring.scorer import RubricScorer

DEMO = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources" / "demo_uss_dialogues.jsonl"


@pytest.fixture(scope="session")
def g_runs(tmp_path_factory, fake_run):
    """A calibrated fake run (a copy of the session's, which calibrate-guarantee changes), an
    identical copy (a second cascade stage) and an uncalibrated copy."""
    tmp = tmp_path_factory.mktemp("guarantee")
    shutil.copytree(fake_run, tmp / "run")
    shutil.copytree(tmp / "run", tmp / "run2")
    shutil.copytree(tmp / "run", tmp / "bare")
    doc = json.loads((tmp / "bare" / "artifact.json").read_text())
    doc["calibration"] = None
    (tmp / "bare" / "artifact.json").write_text(json.dumps(doc))
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    (tmp / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp / "nolabels.jsonl").write_text("".join(json.dumps({"id": r["id"], "text": r["fields"]["text"]}) + "\n"
                                                for r in rows))
    (tmp / "new.jsonl").write_text("".join(json.dumps({"text": r["fields"]["text"]}) + "\n" for r in rows[:6]))
    runner = CliRunner()
    res = runner.invoke(cli, ["calibrate-guarantee", str(tmp / "run"), "--labels", str(tmp / "labels.jsonl"),
                              "--target", "0.8", "--target", "0.9", "--delta", "0.1"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["calibrate-guarantee", str(tmp / "run"), "--labels", str(tmp / "labels.jsonl"),
                              "--target", "0.85", "--tolerance", "0", "--measure", "heads"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["calibrate-guarantee", str(tmp / "run"), str(tmp / "run2"),
                              "--labels", str(tmp / "labels.jsonl"), "--target", "0.8"])
    assert res.exit_code == 0, res.output
    return tmp


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_artifact_file_name_is_the_scorers():
    from rubric_induce.scoring.artifact import ARTIFACT_NAME
    from rubric_induce.scoring.selective import ARTIFACT_FILE

    assert ARTIFACT_FILE == ARTIFACT_NAME


def test_calibrate_guarantee_writes_records_the_scorer_reads(g_runs):
    doc = json.loads((g_runs / "run" / "artifact.json").read_text())
    records = [Guarantee.from_dict(r) for r in doc["guarantees"]]
    assert {(g.target, g.measure) for g in records} == {(0.8, "proba"), (0.9, "proba"), (0.85, "heads")}
    g = next(g for g in records if g.target == 0.9)
    assert g.delta == 0.1 and g.n == 24 and g.tolerance == 1.0  # 48 labelled, 24 probed by the run: left out
    assert doc["cascades"][0]["runs"] == [".", "../run2"]  # relative to the record's folder (issue 40)
    scorer = RubricScorer.load(g_runs / "run")
    texts = [json.loads(line)["text"] for line in (g_runs / "new.jsonl").read_text().splitlines()]
    results = scorer.score(texts, guarantee=0.9)
    assert all(r.answered is not None and r.confidence is not None for r in results)
    assert all(r.answered == (r.confidence >= g.threshold) for r in results)
    strict = scorer.score(texts, guarantee={"target": 0.85, "measure": "heads"})
    assert all(0.0 <= r.confidence <= 1.0 for r in strict)
    assert scorer.score(texts)[0].answered is None  # no guarantee asked: fields stay None


def test_score_guarantee_cli_marks_answered(g_runs, tmp_path):
    out = tmp_path / "s.jsonl"
    res = CliRunner().invoke(cli, ["score", str(g_runs / "run"), "--input", str(g_runs / "new.jsonl"),
                                   "--guarantee", "0.9", "--delta", "0.1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = _rows(out)
    assert len(rows) == 6 and all(isinstance(r["answered"], bool) for r in rows)
    assert "guarantee: agreement with humans >= 0.9" in res.output and "answered" in res.output


def test_score_cascade_cli(g_runs, tmp_path):
    out = tmp_path / "c.jsonl"
    res = CliRunner().invoke(cli, ["score", "--cascade", str(g_runs / "run"), str(g_runs / "run2"),
                                   "--input", str(g_runs / "new.jsonl"), "--guarantee", "0.8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = _rows(out)
    assert len(rows) == 6
    for r in rows:
        assert r["answered"] == (r["stage"] is not None)
    assert "cascade: agreement >= 0.8" in res.output and "calls" in res.output


@pytest.mark.parametrize("args, field", [
    (["--target", "1.5"], "target"),
    (["--target", "0"], "target"),
    (["--delta", "1"], "delta"),
    (["--target", "0.95"], "labels"),  # 24 texts; 45 needed
])
def test_calibrate_guarantee_bad_input_exits_2(g_runs, args, field):
    res = CliRunner().invoke(cli, ["calibrate-guarantee", str(g_runs / "run"), "--labels",
                                   str(g_runs / "labels.jsonl"), *args])
    assert res.exit_code == 2, res.output
    assert f"field '{field}'" in res.output and "Traceback" not in res.output
    if field == "labels":
        assert "45 needed" in res.output


def test_labels_missing_and_uncalibrated_runs_exit_2(g_runs):
    runner = CliRunner()
    res = runner.invoke(cli, ["calibrate-guarantee", str(g_runs / "run"), "--labels", str(g_runs / "nolabels.jsonl")])
    assert res.exit_code == 2 and "satisfaction" in res.output, res.output
    res = runner.invoke(cli, ["calibrate-guarantee", str(g_runs / "bare"), "--labels", str(g_runs / "labels.jsonl")])
    assert res.exit_code == 2 and "field 'calibration'" in res.output, res.output


@pytest.mark.parametrize("args, field", [
    (["--guarantee", "1.2"], "guarantee"),
    (["--guarantee", "0.95"], "guarantee"),  # none fitted for it
    (["--guarantee", "0.9", "--delta", "0.05"], "guarantee"),
    (["--guarantee", "0.9", "--adaptive"], "guarantee"),
])
def test_score_guarantee_bad_input_exits_2(g_runs, args, field):
    res = CliRunner().invoke(cli, ["score", str(g_runs / "run"), "--input", str(g_runs / "new.jsonl"), *args])
    assert res.exit_code == 2, res.output
    assert f"field '{field}'" in res.output


def test_incompatible_cascades_exit_2(g_runs):
    runner = CliRunner()
    new = str(g_runs / "new.jsonl")
    res = runner.invoke(cli, ["score", "--cascade", str(g_runs / "run"), "--input", new, "--guarantee", "0.8"])
    assert res.exit_code == 2 and "field 'cascade'" in res.output, res.output
    res = runner.invoke(cli, ["score", "--cascade", str(g_runs / "run"), str(g_runs / "bare"), "--input", new,
                              "--guarantee", "0.8"])
    assert res.exit_code == 2 and "field 'calibration'" in res.output, res.output
    res = runner.invoke(cli, ["score", "--cascade", str(g_runs / "run2"), str(g_runs / "run"), "--input", new,
                              "--guarantee", "0.8"])  # not fitted in this order
    assert res.exit_code == 2 and "field 'cascade'" in res.output, res.output
    res = runner.invoke(cli, ["score", "--cascade", str(g_runs / "run"), str(g_runs / "run2"), "--input", new])
    assert res.exit_code == 2 and "field 'guarantee'" in res.output, res.output


@pytest.mark.slow  # builds the whole viewer page data (a few seconds)
def test_report_and_viewer_show_the_guarantee(g_runs, tmp_path):
    from rubric_induce.reporting.report import render_run_report
    from rubric_induce.reporting.viewer import build_view_data

    report = render_run_report(g_runs / "run", tmp_path / "report.md", figures=False).read_text()
    assert "## Guaranteed agreement" in report and "| 0.9 | 0.1 | proba |" in report
    assert "run → run2" in report
    data = build_view_data(g_runs / "run")
    assert data["guarantee"]["target"] == 0.9 and "agreement with humans >= 0.9" in data["guarantee"]["line"]
    marked = [t for t in data["texts"] if "guarantee" in t]
    assert marked and all(t["guarantee"] in ("answered", "abstained") for t in marked)
    assert data["guarantee"]["answered"] == sum(t["guarantee"] == "answered" for t in marked)
