"""``rubric-induce suggest`` end to end on the fake run and from a judgements file, and
``estimate --scores`` on a run's score output with the labels gathered that way."""
from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.cli import EXIT_INPUT, cli

pytestmark = pytest.mark.slow  # builds the session's fake run and imports ppi-python

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    lines = (RES / "demo_uss_dialogues.jsonl").read_text().splitlines()  # 48 dialogues
    path = tmp_path_factory.mktemp("pool") / "pool.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def scored(fake_run, pool, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scored") / "scored.jsonl"
    res = CliRunner().invoke(cli, ["score", str(fake_run), "--input", str(pool), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_suggest_from_a_run_then_estimate_from_its_scores(fake_run, pool, scored, tmp_path) -> None:
    out, ls = tmp_path / "next.csv", tmp_path / "ls"
    res = CliRunner().invoke(cli, ["suggest", str(fake_run), "--input", str(pool), "-n", "10", "--for",
                                   "estimate,calibration", "--embedder", "hash", "--out", str(out),
                                   "--label-studio", str(ls)])
    assert res.exit_code == 0, res.output
    rows = _read_csv(out)
    est = [r for r in rows if r["purpose"] == "estimate"]
    cal = [r for r in rows if r["purpose"] == "calibration"]
    assert len(cal) == 10 and est and all(0 < float(r["sampling_probability"]) <= 1 for r in est)
    assert all(r["sampling_probability"] == "" for r in cal) and all(r["text"] for r in rows)
    tasks = json.loads((ls / "tasks.json").read_text())
    assert len(tasks) == len(rows) and tasks[0]["data"]["rubric_induce_id"] == rows[0]["id"]
    root = ET.fromstring((ls / "config.xml").read_text())
    assert [c.get("value") for c in root.iter("Choice")]  # the run's scale

    # the rater fills the label column of the drawn rows; estimate weights them by 1 / probability
    rng = np.random.default_rng(0)
    for r in est:
        r["label"] = str(int(rng.integers(1, 6)))  # 1..5: wider than the calibrated scale, which widens
    labels = _write_csv(tmp_path / "labelled.csv", est)
    res = CliRunner().invoke(cli, ["estimate", "--scores", str(scored), "--labels", str(labels),
                                   "--out", str(tmp_path / "est.json")])
    assert res.exit_code == 0, res.output
    assert "active PPI" in res.output and "1 / its sampling_probability" in res.output
    row = json.loads((tmp_path / "est.json").read_text())["rows"][0]
    assert row["weighted"] and row["n_labelled"] == len(est) and row["n_labelled"] + row["n_unlabelled"] == 48

    # calibration labels are not a random sample: mixing them in is refused, naming the line
    for r in cal:
        r["label"] = "3"
    mixed = _write_csv(tmp_path / "mixed.csv", est + cal)
    res = CliRunner().invoke(cli, ["estimate", "--scores", str(scored), "--labels", str(mixed)])
    assert res.exit_code == EXIT_INPUT and "cannot be mixed" in res.output and "sampling_probability" in res.output


def test_estimate_from_scores_with_uniform_labels(scored, tmp_path) -> None:
    ids = [json.loads(line)["id"] for line in scored.read_text().splitlines()]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": i, "label": 2 + k % 3}) + "\n" for k, i in enumerate(ids[:20])))
    res = CliRunner().invoke(cli, ["estimate", "--scores", str(scored), "--labels", str(labels)])
    assert res.exit_code == 0, res.output
    assert "PPI++" in res.output and "all texts" in res.output


@pytest.mark.parametrize("text,field", [
    ('{"id": "uss-sgd/50", "label": "good"}\n', "field 'label'"),
    ('{"id": "nope", "label": 3}\n', "field 'id'"),
    ('{"id": "uss-sgd/50", "label": 3, "sampling_probability": 2}\n', "field 'sampling_probability'"),
])
def test_bad_labels_exit_2(scored, tmp_path, text, field) -> None:
    ids = [json.loads(line)["id"] for line in scored.read_text().splitlines()]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": ids[0], "label": 3}) + "\n" + text.replace("uss-sgd/50", ids[1]))
    res = CliRunner().invoke(cli, ["estimate", "--scores", str(scored), "--labels", str(bad)])
    assert res.exit_code == EXIT_INPUT, res.output
    assert str(bad) in res.output and "line 2" in res.output and field in res.output


def test_bad_score_file_exit_2(tmp_path) -> None:
    bad = tmp_path / "scored.jsonl"
    bad.write_text('{"id": "a", "proba": [0.5, 0.5], "scale": [1, 2]}\n{"id": "b", "proba": [0.5], "scale": [1, 2]}\n')
    res = CliRunner().invoke(cli, ["estimate", "--scores", str(bad), "--labels", str(bad)])
    assert res.exit_code == EXIT_INPUT and "line 2" in res.output and "'proba'" in res.output


def test_suggest_from_a_judgements_file(tmp_path) -> None:
    rng = np.random.default_rng(2)
    lines = []
    for i in range(80):
        p = float(rng.uniform(0.05, 0.95))
        row = {"id": f"t{i}", "text": f"answer number {i % 7} about topic {i % 5}", "judges": {"j": {"probs": [1 - p, p]}}}
        if i < 10:
            row["label"] = int(rng.random() < p)
        lines.append(json.dumps(row))
    path = tmp_path / "judged.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "next.jsonl"
    res = CliRunner().invoke(cli, ["suggest", "--judgements", str(path), "--judge", "j", "-n", "5", "--for",
                                   "calibration,threshold", "--threshold", "0.8", "--embedder", "hash",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["purpose"] for r in rows] == ["calibration"] * 5 + ["threshold"] * 5
    assert all(int(r["id"][1:]) >= 10 for r in rows)  # labelled texts are not suggested again
    assert all(r["text"].startswith("answer") for r in rows)
    res = CliRunner().invoke(cli, ["suggest", "--judgements", str(path), "--for", "threshold"])
    assert res.exit_code == EXIT_INPUT and "--threshold" in res.output


def test_suggest_from_a_score_file_with_texts(scored, pool, tmp_path) -> None:
    out = tmp_path / "next.jsonl"
    res = CliRunner().invoke(cli, ["suggest", "--scores", str(scored), "--input", str(pool), "-n", "12", "--for",
                                   "estimate", "--seed", "4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["purpose"] == "estimate" and 0 < r["sampling_probability"] <= 1 for r in rows)
    assert all(r["weight"] == pytest.approx(1 / r["sampling_probability"]) for r in rows)
    assert all(r["text"].startswith("USER:") for r in rows)  # the pool's texts ride along


@pytest.fixture(scope="module")
def guaranteed_run(fake_run, tmp_path_factory) -> Path:
    """A copy of the fake run with a guarantee fitted into its artifact (calibrate-guarantee, target 0.8)."""
    import shutil

    tmp = tmp_path_factory.mktemp("guaranteed")
    shutil.copytree(fake_run, tmp / "run")
    res = CliRunner().invoke(cli, ["calibrate-guarantee", str(tmp / "run"), "--labels",
                                   str(RES / "demo_uss_dialogues.jsonl"), "--target", "0.8"])
    assert res.exit_code == 0, res.output
    g = json.loads((tmp / "run" / "artifact.json").read_text())["guarantees"]
    assert len(g) == 1 and g[0]["threshold"] is not None
    return tmp / "run"


def test_threshold_purpose_reads_the_runs_fitted_guarantee(guaranteed_run, pool, tmp_path) -> None:
    """No --threshold needed: the run's guarantee gives the threshold and the confidence it is on."""
    out = tmp_path / "next.jsonl"
    res = CliRunner().invoke(cli, ["suggest", str(guaranteed_run), "--input", str(pool), "--for", "threshold",
                                   "-n", "6", "--out", str(out)])
    assert res.exit_code == 0, res.output  # was: exit 2, "needs the guarantee's threshold (--threshold)"
    g = json.loads((guaranteed_run / "artifact.json").read_text())["guarantees"][0]
    assert f"threshold {g['threshold']:.4g} from the run's guarantee" in res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6 and all(r["purpose"] == "threshold" for r in rows)
    # the confidences are the guarantee's own (what `score --guarantee` gives), nearest its threshold first
    scored = tmp_path / "scored.jsonl"
    res = CliRunner().invoke(cli, ["score", str(guaranteed_run), "--input", str(pool), "--guarantee", "0.8",
                                   "--out", str(scored)])
    assert res.exit_code == 0, res.output
    conf = {d["id"]: d["confidence"] for d in map(json.loads, scored.read_text().splitlines())}
    assert all(r["confidence"] == pytest.approx(conf[r["id"]]) for r in rows)
    gaps = sorted(abs(c - g["threshold"]) for c in conf.values() if c is not None)
    assert [abs(r["confidence"] - g["threshold"]) for r in rows] == pytest.approx(gaps[:6])

    # an explicit --threshold still wins (the judge's top probability, as without a guarantee)
    res = CliRunner().invoke(cli, ["suggest", str(guaranteed_run), "--input", str(pool), "--for", "threshold",
                                   "-n", "3", "--threshold", "0.5", "--out", str(out)])
    assert res.exit_code == 0 and "from the run's guarantee" not in res.output, res.output


def test_threshold_purpose_without_guarantee_or_threshold_is_exit_2(fake_run, pool) -> None:
    res = CliRunner().invoke(cli, ["suggest", str(fake_run), "--input", str(pool), "--for", "estimate,threshold"])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "calibrate-guarantee" in res.output and "--threshold" in res.output and "field 'threshold'" in res.output
