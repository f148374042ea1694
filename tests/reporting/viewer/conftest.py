"""A finished fake-backend run (with feedback and report figures off) shared by the viewer tests."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def viewer_run(fake_full_run) -> Path:
    """The run directory of one complete fake run: held-out half, calibration, feedback (the
    session's shared ``fake_full_run``, tests/conftest.py, which the viewer tests only read)."""
    return fake_full_run.out


def _pairwise_rows(n: int = 16) -> list[dict]:
    """n pairs in LLMBar's layout (input, output_1, output_2, label 1/2): the preferred output answers."""
    rows = []
    for i in range(n):
        good = f"Here are {i + 3} short tips on topic {i}: plan ahead, rest well, drink water."
        bad = f"I like turtles. Topic {i} is not something I will discuss today."
        first = i % 2 == 0
        rows.append({"input": f"Give {i + 3} tips on topic {i}.", "output_1": good if first else bad,
                     "output_2": bad if first else good, "label": 1 if first else 2})
    return rows


@pytest.fixture(scope="session")
def pairwise_view_run(tmp_path_factory) -> Path:
    """The run folder of one finished pairwise run (the shipped llmbar_pairwise.toml on the fake backend,
    16 pairs, no dedup: about 4 s), with a Bradley-Terry head and pairwise_evaluation.json; read only."""
    import json
    import re

    import rubric_induce
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("pairwise-view")
    data = tmp / "pairs.json"
    data.write_text(json.dumps(_pairwise_rows()), encoding="utf-8")
    text = (Path(rubric_induce.__file__).parent / "resources" / "llmbar_pairwise.toml").read_text(encoding="utf-8")
    text = text.replace('spec = "local"', 'spec = "fake"').replace("bootstrap = 1000", "bootstrap = 200")
    text = text.replace("[dedup]\nthreshold = 0.85", "[dedup]\nenabled = false")
    text = re.sub(r"^examples = .*$", f'examples = "{data.as_posix()}"', text, flags=re.M)
    cfg = tmp / "cfg.toml"
    cfg.write_text(text, encoding="utf-8")
    return run_pipeline(cfg, out=tmp / "run", echo=lambda m: None).out
