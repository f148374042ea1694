"""The check before `run` on the embedded model (pipeline.timeplan.long_run_check) plans the probe job
once: ``time_run`` takes the plan it was given instead of counting every probe prompt again, and the
check leaves out the packed alternative, which the time does not use."""
from __future__ import annotations

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.pipeline import load_config
from rubric_induce.pipeline.probejob import plan_run
from rubric_induce.pipeline.timeplan import long_run_check


class Counting(FakeBackend):
    """The fake backend, counting the prompts whose tokens are counted (planning counts every probe prompt)."""

    def __init__(self) -> None:
        super().__init__()
        self.counted = 0

    def count_prompt_tokens(self, messages) -> int:
        self.counted += 1
        return super().count_prompt_tokens(messages)


@pytest.mark.slow  # a plan and a timed check on the fake backend: over a second on 2 cores
def test_long_run_check_counts_each_probe_prompt_once(write_config, tmp_path):
    cfg = load_config(write_config())
    out = tmp_path / "run"
    backend = Counting()
    plan = plan_run(cfg, out=out, backend=backend, compare=False)
    assert plan.alternative is None and plan.calls > 50
    once = backend.counted
    backend.counted = 0
    line, timed = long_run_check(cfg, out=out, kinds=("fake",), backend=backend, minutes=1e-4)
    assert timed is not None and line is not None  # timed and warned (a tiny threshold)
    # one plan's prompts, plus the few timed calls' usage and the direct judge's plan (not a second plan)
    assert once <= backend.counted < once + 30
