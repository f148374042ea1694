"""scripts/experiment.sh: the one command that runs an experiment from a fresh clone."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "experiment.sh"


def sh(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_lists_every_experiment_script_and_no_helper():
    res = sh("--list")
    assert res.returncode == 0, res.stderr
    listed = res.stdout.split()
    expected = sorted(p.stem for p in (ROOT / "experiments").glob("*/*.py") if not p.stem.startswith("_"))
    assert sorted(listed) == expected
    assert "closer_look" in listed and "end_to_end_summeval" in listed


@pytest.mark.parametrize("name", ["no_such_experiment", "_harness"])
def test_unknown_name_is_a_clear_error_before_any_setup(name):
    res = sh(name)
    assert res.returncode == 2
    assert f"no experiment '{name}'" in res.stderr
    assert "closer_look" in res.stderr  # the choices are listed
    assert "setup:" not in res.stderr  # nothing was installed for a typo


def test_no_arguments_prints_usage_and_fails():
    res = sh()
    assert res.returncode == 2
    assert "scripts/experiment.sh closer_look" in res.stdout and "experiments:" in res.stdout


# Running one goes through scripts/setup.sh, which must find .venv current: only when these tests
# run in the project's own .venv (as `bash scripts/test.sh` does), never building one from here.
in_project_venv = Path(sys.prefix).resolve() == (ROOT / ".venv").resolve() and (ROOT / ".venv" / ".setup-stamp").is_file()


@pytest.mark.slow  # scripts/setup.sh's check plus a whole experiment in a fresh interpreter
@pytest.mark.skipif(not in_project_venv, reason="needs the project's set-up .venv (bash scripts/test.sh)")
def test_runs_the_experiment_with_its_arguments_and_passes_its_exit_code(tmp_path):
    out = tmp_path / "e2e"
    res = sh("end_to_end_summeval", "--backend", "fake", "--limit", "2", "--out", str(out),
             "--set", "progress=false", "--set", 'aspects=["fluency"]', "--set", "n_boot=20",
             "--set", "cal_seeds=1", "--set", "cal_pretrain_epochs=2", "--set", "cal_finetune_epochs=2",
             "--set", "n_drafts=2", "--set", "top_k=1", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "setup: .venv is up to date" in res.stdout
    assert "experiments/papers/end_to_end_summeval.py exited 0" in res.stderr
    manifest = json.loads((out / "manifest.json").read_text())  # the experiment ran with the given --out
    assert manifest["command"].startswith("bash scripts/experiment.sh end_to_end_summeval --backend fake --limit 2")
    assert manifest["config"]["limit"] == 2 and manifest["config"]["aspects"] == ["fluency"]
    bad = sh("end_to_end_summeval", "--backend", "fake", "--set", "n_draft=1", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2
    assert "did you mean 'n_drafts'?" in bad.stderr
    assert "experiments/papers/end_to_end_summeval.py exited 2" in bad.stderr
