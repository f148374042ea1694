"""``rubric-induce view RUN``: writes the page, prints its path and size, refuses a non-run folder."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from rubric_induce.cli import EXIT_INPUT, cli

ROOT = Path(__file__).resolve().parents[3]


def test_view_writes_the_page_and_prints_path_and_size(viewer_run, tmp_path):
    out = tmp_path / "page.html"
    res = CliRunner().invoke(cli, ["view", str(viewer_run), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert str(out) in res.output and "kB" in res.output
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_view_open_uses_the_web_browser(viewer_run, tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    res = CliRunner().invoke(cli, ["view", str(viewer_run), "--out", str(tmp_path / "p.html"), "--open"])
    assert res.exit_code == 0, res.output
    assert opened == [(tmp_path / "p.html").resolve().as_uri()]


def test_view_of_a_folder_that_is_not_a_run_exits_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-m", "rubric_induce.cli", "view", str(tmp_path)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == EXIT_INPUT
    assert res.stderr.startswith("error: ") and "not a rubric-induce run directory" in res.stderr
    assert "Traceback" not in res.stderr and not list(tmp_path.iterdir())
