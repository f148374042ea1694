"""Fixtures for the tool hand-offs: one fake run (calibrated) shared by the module tests, and the
environment that keeps the tools' own packages offline (no telemetry, no tokenizer downloads)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from rubric_induce.data import RubricSet

# deepeval and ragas send usage telemetry unless told not to; the test machine has no network.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

GOOD = "Booked for 7 pm, confirmation sent."
BAD = "Sorry, I cannot help with that."


@pytest.fixture(scope="session")
def handoff_run(tmp_path_factory, fake_run_config) -> Path:
    """A calibrated fake run stopped after its scorer artifact (4 rubrics, SAT and DSAT)."""
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("handoff")
    cfg = tmp / "cfg.toml"
    cfg.write_text(fake_run_config, encoding="utf-8")
    run_pipeline(cfg, out=tmp / "run", echo=lambda m: None, stop_after="artifact")
    return tmp / "run"


@pytest.fixture(scope="session")
def handoff_rubrics(handoff_run) -> list:
    return list(RubricSet.load(handoff_run / "selected.jsonl"))


def answer_probs(rubric, good: bool) -> dict[str, float]:
    """The test judge's answer distribution: a SAT rubric holds on the good text, a DSAT one on the
    bad text (high answer 0.7 / low 0.1), and the reverse otherwise; every answer gets some mass."""
    labels = list(rubric.scale.labels)
    order = sorted(range(len(labels)), key=lambda i: rubric.scale.values[i])
    holds = (rubric.polarity != "DSAT") == good
    probs = dict.fromkeys(labels, 0.2 / (len(labels) - 2) if len(labels) > 2 else 0.0)
    hi, lo = labels[order[-1]], labels[order[0]]
    probs[hi], probs[lo] = (0.7, 0.1) if holds else (0.1, 0.7)
    if len(labels) == 2:
        probs[hi], probs[lo] = (0.8, 0.2) if holds else (0.2, 0.8)
    return probs


def rubric_in(text: str, rubrics) -> object:
    """The rubric whose text appears in a prompt (case-insensitive, without its final period: the
    question templates lower-case a leading article), longest first."""
    low = text.lower()
    for r in sorted(rubrics, key=lambda r: -len(r.text)):
        if r.text.rstrip(" .").lower() in low:
            return r
    raise AssertionError(f"no rubric text in prompt: {text[:200]!r}")
