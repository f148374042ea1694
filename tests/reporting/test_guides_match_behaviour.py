"""Guides that contradicted behaviour (issue 40, defect 6): each claim checked against the code.

- data.md said a run on pairs "is not available yet": the shipped pairwise config runs as one.
- the inspect scorer's docstring said ``max_example_tokens`` is not applied, handoffs.md that it is:
  the scorer cuts each text with the run's backend tokenizer (``InspectProbe._render``; the cut is
  what makes ``tests/handoff/test_handoff_equality.py::test_inspect_scorer_equals_score`` equal).
- guarantee.md recommended ``rubric-induce view RUN``, which leaves the texts of the user's own data
  (outside the run folder) off the page: the command it gives now shows them.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from click.testing import CliRunner

import rubric_induce
from rubric_induce.cli import cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "guides"


def _prose(name: str) -> str:
    return re.sub(r"\s+", " ", (DOCS / name).read_text(encoding="utf-8"))


def test_the_data_guide_gives_the_pairwise_run_that_exists():
    from rubric_induce.pipeline.config import load_config

    text = _prose("data.md")
    assert "not available yet" not in text
    assert '`[data] kind = "pairwise"`' in text and "rubric-induce compare RUN --pairs FILE" in text
    shipped = re.search(r"`rubric-induce run (rubric_induce/resources/\S+\.toml)`", text).group(1)
    cfg = load_config(Path(rubric_induce.__file__).resolve().parents[1] / shipped)
    assert cfg.data.kind == "pairwise"


def test_the_inspect_scorer_and_the_handoffs_guide_agree_on_max_example_tokens():
    import importlib

    mod = importlib.import_module("rubric_induce.handoff.inspect_scorer")  # the module, not the function

    doc = re.sub(r"\s+", " ", mod.__doc__)
    assert "``max_example_tokens`` is not applied" not in doc
    assert "``max_example_tokens`` is applied as ``score`` applies it" in doc and "backend tokenizer" in doc
    assert "its `max_example_tokens` cut by the run's backend tokenizer" in _prose("handoffs.md")
    assert "self.options.probe.max_example_tokens" in Path(mod.__file__).read_text(encoding="utf-8")  # the code cuts


def test_the_guarantee_guides_view_command_shows_the_users_texts(fake_full_run, tmp_path):
    """The fake run's examples lie outside its run folder, as a user's own data does."""
    m = re.search(r"`(rubric-induce view RUN[^`]*)`[^`]*marks each text answered or abstained", _prose("guarantee.md"))
    assert m, "guarantee.md names the view command"
    args = shlex.split(m.group(1))[1:]
    args = [str(fake_full_run.out) if a == "RUN" else a for a in args] + ["--out", str(tmp_path / "page.html")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script id="view-data" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert data["texts"] and all(t["text"] for t in data["texts"])
