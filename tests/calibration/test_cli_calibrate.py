"""`calibrate --probes --examples` then `score`, end to end on a small synthetic probe table."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from rubric_induce.cli import cli  # noqa: E402
from rubric_induce.data import Example  # noqa: E402
from rubric_induce.data.examples_io import write_examples  # noqa: E402
from rubric_induce.data.model import Judgment  # noqa: E402
from rubric_induce.data.probes import ProbeRecord, ProbeTable  # noqa: E402


def _write_inputs(tmp_path, planted, n_texts=60):
    X, J, Y, G, _ = planted
    texts = list(dict.fromkeys(G))[:n_texts]
    records, examples = [], []
    for t in texts:
        rows = np.flatnonzero(G == t)
        for k, rid in enumerate(["r-a", "r-b", "r-c"]):
            records.append(ProbeRecord(example_id=t, rubric_id=rid, answers=["1", "2", "3", "4"],
                                       values=[1.0, 2.0, 3.0, 4.0], raw=[float(v) for v in X[rows[0], k]],
                                       style="score-only", estimator="logprobs", prompt_hash="h"))
        judgments = [Judgment(str(J[r]), {"overall": float(Y[r, 0]), "detail": float(Y[r, 1])}) for r in rows]
        examples.append(Example.create({"text": f"text {t}"}, {"overall": float(Y[rows, 0].mean())}, id=t,
                                       judgments=judgments))
    probes = ProbeTable(records).save(tmp_path / "probes.jsonl")
    ex_path = write_examples(tmp_path / "examples.jsonl", examples)
    return probes, ex_path


@pytest.mark.slow
def test_calibrate_then_score(tmp_path, planted):
    probes, ex_path = _write_inputs(tmp_path, planted)
    out = tmp_path / "run"
    runner = CliRunner()
    res = runner.invoke(cli, ["calibrate", "--probes", str(probes), "--examples", str(ex_path), "--main-question",
                                    "overall", "--questions", "overall,detail", "--no-search", "--cv-folds", "3",
                                    "--threads", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "calibrator.json").exists() and (out / "report.md").exists()
    assert len(list(out.glob("reliability_overall_*.png"))) == 4
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["cv"]["n"] > 0
    res = runner.invoke(cli, ["score", str(out), "--probes", str(probes), "--trusted", "j0,j1",
                              "--out", str(tmp_path / "pred.jsonl")])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in (tmp_path / "pred.jsonl").read_text().splitlines()]
    assert len(lines) == 60 and {"prediction", "variance", "entropy", "proba"} <= set(lines[0])
    assert abs(sum(lines[0]["proba"].values()) - 1) < 1e-6 and 1 <= lines[0]["prediction"] <= 4
    res = runner.invoke(cli, ["score", str(out), "--probes", str(probes), "--judge", "nobody"])
    assert res.exit_code == 2 and "unknown judge 'nobody'" in res.output
    res = runner.invoke(cli, ["score", str(out), "--probes", str(probes), "--judge", "shared"])
    assert res.exit_code == 0 and "shared weights only" in res.output
    res = runner.invoke(cli, ["score", str(out), "--probes", str(probes), "--judge", "a", "--trusted", "b"])
    assert res.exit_code == 2 and "at most one" in res.output
    res = runner.invoke(cli, ["score", str(out), "--input", str(ex_path)])
    assert res.exit_code == 2 and "calibrator folder scores --probes" in res.output


def test_calibrate_usage_errors(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["calibrate", "--out", str(tmp_path)])
    assert res.exit_code != 0 and "either --dataset" in res.output
