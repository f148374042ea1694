"""A base install (no extras) runs ``rubric-induce run`` to a report, skipping optional stages with a note.

The fast tests hide the optional packages from :mod:`rubric_induce.pipeline.optional` (they are
installed in the test environment); the slow one installs the package with plain ``pip install .``
into a fresh virtual environment and runs the fake-backend pipeline there for real.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.pipeline import optional

REPO = Path(__file__).resolve().parents[2]


def _hide(monkeypatch, *names: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(optional.importlib.util, "find_spec",
                        lambda name, *a, **k: None if name in names else real(name, *a, **k))


def test_skip_notes_name_the_missing_package_and_the_extra(write_config, monkeypatch):
    from rubric_induce.pipeline.config import load_config

    cfg = load_config(write_config())
    assert optional.skip_notes(cfg) == []  # everything installed here; dedup is off in the base config
    _hide(monkeypatch, "torch")
    (note,) = optional.skip_notes(cfg)
    assert note.startswith("calibrate skipped") and "'torch'" in note and "rubric-induce[calibrate]" in note
    _hide(monkeypatch, "torch", "safetensors", "sentence_transformers")
    (note,) = optional.skip_notes(cfg)  # dedup is disabled by the config: nothing to skip there
    assert "packages 'torch' and 'safetensors' are" in note


@pytest.mark.slow
def test_run_without_optional_packages_reaches_the_report(write_config, tmp_path, monkeypatch):
    base = write_config().read_text(encoding="utf-8").replace("[dedup]\nenabled = false", "[dedup]\nthreshold = 0.85")
    cfg = write_config(base=base)
    _hide(monkeypatch, "torch", "sentence_transformers")
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    # announced up front (preflight), before any stage ran, and again by the stage
    first_stage = res.output.index("[generate] running")
    assert res.output.index("note: dedup skipped") < first_stage
    assert res.output.index("note: calibrate skipped") < first_stage
    assert "rubric-induce[embed]" in res.output and "rubric-induce[calibrate]" in res.output
    dedup = json.loads((out / "stages" / "dedup.json").read_text())["summary"]
    calib = json.loads((out / "stages" / "calibrate.json").read_text())["summary"]
    assert dedup["skipped"].startswith("dedup skipped") and calib["skipped"].startswith("calibrate skipped")
    assert not (out / "calibration" / "calibrator.json").exists()
    pool = (out / "pool.jsonl").read_text().splitlines()
    assert (out / "pool.dedup.jsonl").read_text().splitlines() == pool  # passed through unchanged
    report = (out / "report.md").read_text()
    assert "## Skipped for want of an optional package" in report
    assert "dedup skipped" in report and "calibrate skipped" in report
    scored = CliRunner().invoke(cli, ["score", str(out), "--input", str(REPO / "rubric_induce" / "resources" /
                                                                       "demo_uss_dialogues.jsonl"),
                                      "--out", str(tmp_path / "s.jsonl")])
    assert scored.exit_code == 0, scored.output
    assert len((tmp_path / "s.jsonl").read_text().splitlines()) == 48


@pytest.mark.slow
def test_plain_pip_install_runs_the_fake_pipeline_to_a_report(tmp_path, fake_run_config):
    """``pip install .`` with no extras, in a fresh venv: ``run`` on the fake backend writes report.md."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO)],
                         capture_output=True, text=True, env=env, timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    for absent in ("torch", "sentence_transformers", "matplotlib", "openai", "llama_cpp"):
        probe = subprocess.run([str(py), "-c", f"import importlib.util as u; print(u.find_spec({absent!r}) is None)"],
                               capture_output=True, text=True, env=env)
        assert probe.stdout.strip() == "True", f"{absent} came with the base install"
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fake_run_config.replace("[dedup]\nenabled = false", "[dedup]\nthreshold = 0.85"), encoding="utf-8")
    run = subprocess.run([str(venv / "bin" / "rubric-induce"), "run", str(cfg), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "dedup skipped" in report and "calibrate skipped" in report and "Figures left out" in report
