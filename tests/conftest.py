"""Shared fixtures: small synthetic examples and rubrics, and a throwaway cache."""
from __future__ import annotations

from pathlib import Path

import pytest

from rubric_induce.data import Example, Rubric


@pytest.fixture
def examples() -> list[Example]:
    return [Example.create({"text": f"USER: book a table for {i} people\nSYSTEM: done, table for {i}."},
                           {"sat": i % 2}, id=f"ex{i}") for i in range(6)]


@pytest.fixture
def rubrics() -> list[Rubric]:
    return [
        Rubric.create("The system does what the user asked.", "SAT"),
        Rubric.create("The user has to repeat a request.", "DSAT"),
        Rubric.create("The system confirms the details.", "SAT"),
    ]


# A small `rubric-induce run` config over the bundled demo dialogues, for the fake backend
# (pipeline, scoring and DSPy tests).
_RES = Path(__file__).resolve().parents[1] / "rubric_induce" / "resources"

_FAKE_RUN_CONFIG = f"""
[run]
seed = 0
limit = 24

[data]
examples = "{_RES / 'demo_uss_dialogues.jsonl'}"
label = "sat"

[backend]
spec = "fake"

[generate]
method = "rubicon"
domain = "@{_RES / 'demo_uss_domain.txt'}"
per_class = 3
include = ["{_RES / 'demo_uss_rubrics.json'}"]
options = {{ top_k = 2, batch_size = 3, max_new = 2 }}

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 2

[calibrate]
question = "satisfaction"
options = {{ hidden = [4, 4], finetune_epochs = 5, pretrain = false }}
"""



@pytest.fixture(scope="session")
def fake_run_config() -> str:
    return _FAKE_RUN_CONFIG
