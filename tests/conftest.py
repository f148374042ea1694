"""Shared fixtures: small synthetic examples and rubrics, and a throwaway cache."""
from __future__ import annotations

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
