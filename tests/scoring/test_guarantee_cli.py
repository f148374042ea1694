"""`calibrate-guarantee` and `score --guarantee` / `--cascade` as a new user meets them (issue 40): labels
read in the run's own layout (a dotted path, as `run` read them), the tolerance said and saved, what the
calibration texts can support, texts without evidence abstained, and cascade records that survive a
moved folder."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.data.probes import ProbeTable
from rubric_induce.scoring.scorer import RubricScorer

pytestmark = pytest.mark.slow  # over about 1 s per file on 2 cores: CI runs it, plain pytest does not

DEMO = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources" / "demo_uss_dialogues.jsonl"


def _invoke(*args) -> tuple[int, str]:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.output


def _demo() -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text().splitlines()]


def _flat(rows: list[dict]) -> list[dict]:
    """The demo dialogues in a hotel-like layout: a JSON array, the label in a nested object, rated in
    half points (a graded scale whose step is 0.5)."""
    return [{"uid": r["id"], "dialogue": r["fields"]["text"],
             "scores": {"overall": round(r["labels"]["satisfaction"] * 2) / 2, "sat": r["labels"]["sat"]}}
            for r in rows]


@pytest.fixture(scope="module")
def flat_run(tmp_path_factory, fake_run_config) -> Path:
    """A calibrated fake run of a JSON array whose labels sit at dotted paths (``scores.overall``)."""
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("flat-guarantee")
    (tmp / "data.json").write_text(json.dumps(_flat(_demo())), encoding="utf-8")
    cfg = fake_run_config.replace(f'examples = "{DEMO}"', f'examples = "{tmp / "data.json"}"')
    assert cfg != fake_run_config
    cfg += ('\n[data.mapping]\nid = "uid"\ntext = { text = "dialogue" }\n'
            'labels = { sat = "scores.sat", satisfaction = "scores.overall" }\n')
    (tmp / "cfg.toml").write_text(cfg, encoding="utf-8")
    run_pipeline(tmp / "cfg.toml", out=tmp / "run", echo=lambda m: None, stop_after="artifact")
    return tmp


@pytest.fixture
def nested_run(fake_run, tmp_path) -> Path:
    """A private copy of the session's calibrated fake run (nested rubric-induce rows) and its labels."""
    shutil.copytree(fake_run, tmp_path / "run")
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _demo()), encoding="utf-8")
    return tmp_path


def test_labels_in_the_runs_own_layout_need_no_label_field(flat_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(flat_run / "run", run)
    rc, out = _invoke("calibrate-guarantee", run, "--labels", flat_run / "data.json", "--target", "0.8")
    assert rc == 0, out  # was: text '...' has no label 'satisfaction'
    assert "label 'satisfaction' read from" in out
    mine = json.loads((run / "artifact.json").read_text())["guarantees"]
    # the same as naming the column by hand
    rc, out2 = _invoke("calibrate-guarantee", run, "--labels", flat_run / "data.json", "--target", "0.8",
                       "--label-field", "scores.overall")
    assert rc == 0, out2
    by_hand = json.loads((run / "artifact.json").read_text())["guarantees"]
    assert by_hand == mine


def test_tolerance_and_what_the_texts_support_are_said(flat_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(flat_run / "run", run)
    rc, out = _invoke("calibrate-guarantee", run, "--labels", flat_run / "data.json", "--target", "0.8")
    assert rc == 0, out
    # a scale rated in half points: the default tolerance is half a point, and the output says so
    assert "tolerance 0.5 (default: one step of the run's scale" in out
    assert "agreement on the 24 calibration text(s), every one answered: " in out
    # 24 texts at delta 0.1: 0.1 ** (1 / 24)
    assert f"the largest target 24 text(s) could support at delta 0.1 is {0.1 ** (1 / 24):.3f}" in out
    g = json.loads((run / "artifact.json").read_text())["guarantees"][0]
    assert g["tolerance"] == 0.5
    # the half-split check: printed on the guarantee's line and saved with it
    assert "half-split check, 200 refits on 12 of the 24 texts" in out
    assert g["resample"]["draws"] == 200 and g["resample"]["n"] == 24 and g["resample"]["half"] == 12
    assert g["resample"]["groups"] is None  # a flat file without a group column: every text its own
    # --group-field: the check's halves keep a group's texts together (two texts per topic here)
    rows = json.loads((flat_run / "data.json").read_text())
    (tmp_path / "grouped.json").write_text(json.dumps([{**r, "topic": f"t{i // 2}"} for i, r in enumerate(rows)]))
    rc, out = _invoke("calibrate-guarantee", run, "--labels", tmp_path / "grouped.json", "--target", "0.8",
                      "--group-field", "topic", "--check-draws", "20")
    assert rc == 0, out
    g = json.loads((run / "artifact.json").read_text())["guarantees"][0]
    assert g["resample"]["groups"] == 12 and g["resample"]["half"] == 12 and g["resample"]["draws"] == 20
    rc, out = _invoke("score", run, "--input", flat_run / "data.json", "--guarantee", "0.95")
    assert rc == 2 and "(fitted: target 0.8, delta 0.1, measure proba, tolerance 0.5)" in out, out


def test_a_label_field_naming_no_column_is_exit_2_not_the_question(nested_run):
    """The nested layout used to fall back to the run's question when --label-field named no label."""
    rc, out = _invoke("calibrate-guarantee", nested_run / "run", "--labels", nested_run / "labels.jsonl",
                      "--label-field", "overall_rating")
    assert rc == 2, out
    assert "line 1" in out and "overall_rating" in out and "Traceback" not in out


@pytest.mark.parametrize("bad", [99, -5])
def test_labels_off_the_runs_scale_are_exit_2_naming_the_line(nested_run, bad):
    rows = _demo()
    rows[30]["labels"]["satisfaction"] = bad  # a text the run did not probe (it probed the first 24)
    (nested_run / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    rc, out = _invoke("calibrate-guarantee", nested_run / "run", "--labels", nested_run / "labels.jsonl")
    assert rc == 2, out
    assert "line 31" in out and "satisfaction" in out and "outside" in out


def _all_failed(table: ProbeTable) -> ProbeTable:
    return ProbeTable([dataclasses.replace(r, raw=[0.0] * len(r.raw), error="no Rating line") for r in table.records])


def test_texts_whose_every_probe_failed_are_abstained(nested_run, tmp_path):
    run = nested_run / "run"
    rc, out = _invoke("calibrate-guarantee", run, "--labels", nested_run / "labels.jsonl", "--target", "0.8")
    assert rc == 0, out
    scorer = RubricScorer.load(run)
    texts = [r["fields"]["text"] for r in _demo()[24:34]]
    examples = scorer.to_examples(texts)
    table = scorer.probe(examples)
    ok = scorer.score_probes(table, examples, guarantee=0.8)
    assert all(r.confidence is not None for r in ok)
    failed = _all_failed(table)
    failed.save(tmp_path / "failed.jsonl")
    rc, out = _invoke("score", run, "--probes", tmp_path / "failed.jsonl", "--guarantee", "0.8",
                      "--out", tmp_path / "s.jsonl")
    assert rc == 0, out
    assert "answered 0 of 10 texts, abstained 10" in out  # was: answered 10 of 10
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert all(r["answered"] is False and r["confidence"] is None for r in rows)
    # one text with a single answered probe has evidence again
    recs = list(failed.records)
    i = next(k for k, r in enumerate(recs) if r.example_id == examples[0].id)
    recs[i] = table.get(examples[0].id, recs[i].rubric_id)
    mixed = scorer.score_probes(ProbeTable(recs), examples, guarantee=0.8)
    assert mixed[0].confidence is not None and all(r.confidence is None for r in mixed[1:])


def test_fitting_with_no_evidence_is_refused_in_the_library(nested_run):
    from rubric_induce.core.errors import DataError
    from rubric_induce.scoring.selective import FitRequest, fit_from_results, score_with_arrays

    scorer = RubricScorer.load(nested_run / "run")
    examples = scorer.to_examples([r["fields"]["text"] for r in _demo()[24:]])
    failed = _all_failed(scorer.probe(examples))
    results, arr = score_with_arrays(scorer, examples, failed)
    with pytest.raises(DataError) as exc:
        fit_from_results(scorer, results, arr, np.full(len(examples), 3.0), FitRequest(targets=[0.8]))
    assert exc.value.field == "probes" and "no evidence" in str(exc.value)


def test_cascade_records_name_runs_relative_so_a_moved_folder_keeps_them(fake_run, tmp_path):
    home = tmp_path / "home"
    for name in ("cheap", "strong"):
        shutil.copytree(fake_run, home / name)
    (home / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _demo()), encoding="utf-8")
    (home / "new.jsonl").write_text("".join(json.dumps({"text": r["fields"]["text"]}) + "\n" for r in _demo()[:4]))
    rc, out = _invoke("calibrate-guarantee", home / "cheap", home / "strong", "--labels", home / "labels.jsonl",
                      "--target", "0.8")
    assert rc == 0, out
    record = json.loads((home / "cheap" / "artifact.json").read_text())["cascades"][0]
    assert record["runs"] == [".", "../strong"]  # was: absolute paths
    assert record["resample"]["draws"] == 200 and record["resample"]["n"] == 24
    assert "half-split check, 200 refits on 12 of the 24 texts" in out
    assert "tolerance 1 (default: one step of the run's scale" in out
    assert "agreement on the 24 calibration text(s), every one answered: cheap " in out
    assert f"is {0.1 ** (1 / 24):.3f} (each of 2 stages at delta/2: {0.05 ** (1 / 24):.3f})" in out
    moved = shutil.move(str(home), str(tmp_path / "elsewhere"))
    moved = Path(moved)
    rc, out = _invoke("score", "--cascade", moved / "cheap", moved / "strong", "--input", moved / "new.jsonl",
                      "--guarantee", "0.8", "--out", tmp_path / "c.jsonl")
    assert rc == 0, out
    assert "cascade: agreement >= 0.8" in out
    # fitting again replaces the record (the same runs, however written down), never adds a second one
    rc, out = _invoke("calibrate-guarantee", moved / "cheap", moved / "strong", "--labels", moved / "labels.jsonl",
                      "--target", "0.8")
    assert rc == 0, out
    assert len(json.loads((moved / "cheap" / "artifact.json").read_text())["cascades"]) == 1
    # a record written before runs were relative (absolute paths) still reads
    doc = json.loads((moved / "cheap" / "artifact.json").read_text())
    doc["cascades"][0]["runs"] = [str((moved / "cheap").resolve()), str((moved / "strong").resolve())]
    (moved / "cheap" / "artifact.json").write_text(json.dumps(doc))
    rc, out = _invoke("score", "--cascade", moved / "cheap", moved / "strong", "--input", moved / "new.jsonl",
                      "--guarantee", "0.8", "--out", tmp_path / "c2.jsonl")
    assert rc == 0, out


def test_report_names_the_cascades_runs_from_relative_paths(fake_run, tmp_path):
    from rubric_induce.reporting.guarantee import guarantee_section

    run = tmp_path / "cheap"
    shutil.copytree(fake_run, run)
    doc = json.loads((run / "artifact.json").read_text())
    doc["cascades"] = [{"runs": [".", "../strong"], "target": 0.8, "delta": 0.1, "n": 24, "thresholds": [0.9, None],
                        "method": "bonferroni", "coverage": 0.5, "stage_coverage": [0.5, 0.0], "measure": "proba",
                        "tolerance": 1.0}]
    (run / "artifact.json").write_text(json.dumps(doc))
    lines = "\n".join(guarantee_section(run))
    assert "| cheap → strong | 0.8 | 0.1 | bonferroni | 1 |" in lines
