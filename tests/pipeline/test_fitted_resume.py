"""Work fitted on top of a run survives a rerun of `run` (issue 40, item 1), end to end through the CLI on
the fake backend: `run`, `calibrate-guarantee`, then `run` again on the same config.

* an unchanged config: every stage is skipped, the guarantees stay and `score --guarantee` uses them;
* a change that reruns a stage before `artifact`: exit 2 before anything is written, naming what would
  be discarded and the `--force` that allows it; with that `--force`, they are discarded and the
  manifest says so; a forced rerun that rewrites the same artifact keeps them;
* a change after `artifact` (evaluate): they stay, and each rerun stage says why;
* artifact.json's own keys edited after the fit: the rerun artifact would differ, so the file is put back
  and the run stops (exit 2) unless `--force artifact`.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli

DEMO = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources" / "demo_uss_dialogues.jsonl"

pytestmark = pytest.mark.slow  # a fake run (about 5 s on 2 cores), then copies of it


def _cli(*args) -> tuple[int, str]:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        raise AssertionError("".join(traceback.format_exception(res.exception)))
    assert "Traceback" not in res.output
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, fake_run_config):
    """A finished fake run (every stage) with two guarantees fitted by calibrate-guarantee."""
    tmp = tmp_path_factory.mktemp("fitted")
    (tmp / "cfg.toml").write_text(fake_run_config + "\n[evaluate]\nbootstrap = 20\n[report]\nfigures = false\n",
                                  encoding="utf-8")
    code, out = _cli("run", tmp / "cfg.toml", "--out", tmp / "run")
    assert code == 0, out
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if 2 <= r["labels"]["satisfaction"] <= 4]  # on the calibrated scale
    (tmp / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp / "new.jsonl").write_text("".join(json.dumps({"text": r["fields"]["text"]}) + "\n" for r in rows[:6]),
                                   encoding="utf-8")
    code, out = _cli("calibrate-guarantee", tmp / "run", "--labels", tmp / "labels.jsonl", "--target", "0.8",
                     "--target", "0.9", "--delta", "0.1")
    assert code == 0, out
    return tmp


@pytest.fixture
def run(fitted, tmp_path):
    """A copy of the fitted run (its config and input files beside it)."""
    for name in ("cfg.toml", "labels.jsonl", "new.jsonl"):
        shutil.copy(fitted / name, tmp_path / name)
    shutil.copytree(fitted / "run", tmp_path / "run")
    return tmp_path


def _guarantees(run: Path) -> list[dict]:
    return json.loads((run / "run" / "artifact.json").read_text(encoding="utf-8")).get("guarantees") or []


def _edit(cfg: Path, old: str, new: str) -> None:
    text = cfg.read_text(encoding="utf-8")
    assert old in text
    cfg.write_text(text.replace(old, new), encoding="utf-8")


def test_a_rerun_on_the_same_config_keeps_the_guarantees(run):
    """The issue's sequence: calibrate-guarantee, then run: nothing reruns and score --guarantee works."""
    before = (run / "run" / "artifact.json").read_bytes()
    code, out = _cli("run", run / "cfg.toml", "--out", run / "run")
    assert code == 0, out
    assert out.count("already done, skipped") == 9 and "ran 0 stage(s), 8 already done, feedback disabled" in out
    assert (run / "run" / "artifact.json").read_bytes() == before
    assert sorted(g["target"] for g in _guarantees(run)) == [0.8, 0.9]
    code, out = _cli("score", run / "run", "--input", run / "new.jsonl", "--guarantee", "0.9",
                     "--out", run / "s.jsonl")
    assert code == 0, out
    rows = [json.loads(line) for line in (run / "s.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["answered"] is not None for r in rows)


def test_a_rerun_before_the_artifact_refuses_and_leaves_the_folder_as_it_was(run):
    _edit(run / "cfg.toml", "n_sat = 2", "n_sat = 1")
    folder = run / "run"
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"}
    code, out = _cli("run", run / "cfg.toml", "--out", folder)
    assert code == 2, out
    last = out.strip().splitlines()[-1]
    assert "artifact.json" in last and "would discard 2 guarantee(s) (target 0.8, 0.9)" in last
    assert "the select stage would rerun (config [select] changed)" in last and "--force select" in last
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"} == files

    code, out = _cli("run", run / "cfg.toml", "--out", folder, "--force", "select")
    assert code == 0, out
    assert "[select] --force select; config [select] changed; rerunning" in out
    assert "[artifact] discarded 2 guarantee(s) (target 0.8, 0.9) in artifact.json" in out
    assert _guarantees(run) == []
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["fitted"]["discarded"] == "2 guarantee(s) (target 0.8, 0.9) in artifact.json"
    assert manifest["stages"]["select"]["reason"] == "--force select; config [select] changed"
    code, out = _cli("score", folder, "--input", run / "new.jsonl", "--guarantee", "0.9")
    assert code == 2 and "no guarantee fitted" in out


def test_a_forced_rerun_that_rewrites_the_same_artifact_keeps_them(run):
    """--force calibrate with the config unchanged: the same seed fits the same network, so the artifact
    and the files it names come out unchanged and the guarantees are written back."""
    code, out = _cli("run", run / "cfg.toml", "--out", run / "run", "--force", "calibrate")
    assert code == 0, out
    assert "[calibrate] --force calibrate; rerunning" in out
    assert "[artifact] calibrate reran before it; rerunning" in out
    assert "[artifact] kept 2 guarantee(s) (target 0.8, 0.9) in artifact.json" in out
    assert sorted(g["target"] for g in _guarantees(run)) == [0.8, 0.9]
    manifest = json.loads((run / "run" / "manifest.json").read_text())
    assert manifest["fitted"] == {"kept": "2 guarantee(s) (target 0.8, 0.9) in artifact.json"}
    code, out = _cli("run", run / "cfg.toml", "--out", run / "run")  # and trusted again afterwards
    assert code == 0 and "ran 0 stage(s), 8 already done, feedback disabled" in out


def test_a_rerun_after_the_artifact_keeps_them_and_says_why_each_stage_reran(run):
    _edit(run / "cfg.toml", "bootstrap = 20", "bootstrap = 30")
    code, out = _cli("run", run / "cfg.toml", "--out", run / "run")
    assert code == 0, out
    assert "[artifact] already done, skipped" in out
    assert "[evaluate] config [evaluate] changed; rerunning" in out
    assert "[feedback] evaluate reran before it; rerunning" not in out  # disabled: said as such
    assert "[feedback] disabled (feedback.enabled = false); skipped" in out
    assert "[report] evaluate reran before it; rerunning" in out
    assert "ran 2 stage(s), 6 already done, feedback disabled" in out
    assert sorted(g["target"] for g in _guarantees(run)) == [0.8, 0.9]
    stages = json.loads((run / "run" / "manifest.json").read_text())["stages"]
    assert stages["evaluate"]["reason"] == "config [evaluate] changed"
    assert stages["feedback"]["status"] == "disabled"


def test_an_edited_artifact_is_put_back_rather_than_rewritten_under_the_guarantees(run):
    path = run / "run" / "artifact.json"
    doc = json.loads(path.read_text())
    doc["threshold"] = 0.123  # the user's own threshold: the guarantees were fitted with the scorer using it
    path.write_text(json.dumps(doc, indent=2) + "\n")
    edited = path.read_bytes()
    marker = (run / "run" / "stages" / "artifact.json").read_bytes()
    code, out = _cli("run", run / "cfg.toml", "--out", run / "run")
    assert code == 2, out
    assert "[artifact] output artifact.json changed or damaged since the stage finished; rerunning" in out
    assert "--force artifact" in out.strip().splitlines()[-1]
    assert path.read_bytes() == edited and (run / "run" / "stages" / "artifact.json").read_bytes() == marker
    code, out = _cli("run", run / "cfg.toml", "--out", run / "run", "--force", "artifact")
    assert code == 0, out
    assert "[artifact] discarded 2 guarantee(s)" in out and _guarantees(run) == []
    assert json.loads(path.read_text())["threshold"] != 0.123
