"""The measured time estimate against a real llama.cpp server (OpenAI-compatible, on 127.0.0.1): the
session's ``served_demo`` (conftest) times its config, with feedback on, just before it runs, and the
estimate of the probe stage is compared with that run's own probe stage (no run of its own: the `plan`
command's wiring is checked on the fake backend in tests/cli/test_plan_time.py)."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.server


def test_plan_times_a_llama_cpp_server(served_demo):
    assert served_demo.time_text.startswith("time estimate on openai-compatible/smollm2")
    stages = {s["name"]: s for s in served_demo.time_plan["stages"]}
    assert stages["probe"]["seconds"] > 0 and "24 call(s)" in stages["probe"]["basis"]  # 6 texts x 4 rubrics
    assert stages["feedback"]["seconds"] > 0  # timed from one short chat call (no generation here)
    actual = json.loads((served_demo.result.out / "manifest.json").read_text())["stages"]["probe"]["seconds"]
    assert actual / 3 < stages["probe"]["seconds"] < actual * 3, (stages["probe"]["seconds"], actual)
