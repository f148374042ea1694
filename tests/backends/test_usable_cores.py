"""The embedded model's default thread count follows the cores the process may run on (its CPU affinity),
not the machine's: a pinned process (``taskset``, a container's cpuset) would otherwise run more llama.cpp
threads than cores, and a decode's threads wait for each other at every step."""
from __future__ import annotations

import os

import pytest

from rubric_induce.backends.local import usable_cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")


def test_usable_cores_is_the_affinity_not_the_machine():
    allowed = os.sched_getaffinity(0)
    assert usable_cores() == len(allowed)
    try:
        os.sched_setaffinity(0, {min(allowed)})  # this thread only; restored below
        assert usable_cores() == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert usable_cores() == len(allowed)
