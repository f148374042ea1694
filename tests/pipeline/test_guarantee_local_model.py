"""`calibrate-guarantee`, `score --guarantee` and `score --cascade` on the real embedded model.

The labels file holds the run's 12 texts (left out: the calibrator may have trained on them) and the
next 8 shortest demo dialogues, the calibration texts: 8 x 4 new probes, not the 36 x 4 of the whole
demo file. The target is 0.6: 8 texts support at most 0.1 ** (1 / 8) = 0.75 at delta 0.1, and each of
the cascade's two stages at delta / 2 at most 0.69 (0.8 needs 11 and 14 texts: with fewer,
calibrate-guarantee refuses it)."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.local_model

N_FRESH = 8
TARGET = "0.6"


def test_guarantee_and_cascade_on_the_embedded_model(tmp_path, embedded_run, demo_rows_shortest_first):
    from rubric_induce.backends.cache import CallCache
    from rubric_induce.cli import cli
    from rubric_induce.data import RubricSet

    _, finished, res = embedded_run
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    shutil.copytree(finished, run)  # the shared run stays as it was
    runner = CliRunner()
    labels = tmp_path / "labels.jsonl"  # the run's 12 texts (the shortest) and the next N_FRESH
    labels.write_text("".join(json.dumps(r) + "\n" for r in demo_rows_shortest_first[:12 + N_FRESH]))
    calls = len(CallCache(run / "llm_calls.sqlite"))
    res = runner.invoke(cli, ["calibrate-guarantee", str(run), "--labels", str(labels), "--target", TARGET])
    assert res.exit_code == 0, res.output
    assert "left out 12 labelled text(s)" in res.output and "guarantee:" in res.output
    assert f"calibration texts: {N_FRESH}," in res.output
    n_selected = len(RubricSet.load(run / "selected.jsonl"))
    probed = len(CallCache(run / "llm_calls.sqlite")) - calls
    assert 0 < probed <= N_FRESH * n_selected  # the calibration texts' probes went into the run's cache
    shutil.copytree(run, tmp_path / "run2")  # its call cache already holds the labelled texts' probes
    res = runner.invoke(cli, ["calibrate-guarantee", str(run), str(tmp_path / "run2"), "--labels", str(labels),
                              "--target", TARGET])
    assert res.exit_code == 0, res.output
    new = tmp_path / "new.jsonl"
    rows = [json.loads(line) for line in labels.read_text().splitlines()][:3]
    new.write_text("".join(json.dumps({"text": r["fields"]["text"]}) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    res = runner.invoke(cli, ["score", str(run), "--input", str(new), "--guarantee", TARGET, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert all(isinstance(json.loads(line)["answered"], bool) for line in out.read_text().splitlines())
    res = runner.invoke(cli, ["score", "--cascade", str(run), str(tmp_path / "run2"), "--input", str(new),
                              "--guarantee", TARGET, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"cascade: agreement >= {TARGET}" in res.output
