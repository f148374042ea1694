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


@pytest.fixture(scope="session")
def handoff_run(fake_run) -> Path:
    """A calibrated fake run stopped after its scorer artifact (4 rubrics, SAT and DSAT): the
    session's shared ``fake_run`` (tests/conftest.py), which the hand-off tests only read."""
    return fake_run


@pytest.fixture(scope="session")
def handoff_rubrics(handoff_run) -> list:
    return list(RubricSet.load(handoff_run / "selected.jsonl"))
