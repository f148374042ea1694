"""The llama.cpp pass of scripts/test.sh on pytest-xdist workers pinned one to a core (``--pin-workers``,
wired in tests/conftest.py): llama.cpp, embedded or served, then takes one thread on its worker's core
instead of spinning on every core, and the tests' own Python runs beside it on the other worker."""
from __future__ import annotations

import contextlib
import os

#: Test files whose session fixture costs tens of seconds of llama.cpp, mapped to the file that shares it:
#: a worker runs them together, so that the fixture is built once, not once per worker.
SHARED_FIXTURE_FILES = {
    "tests/probing/test_plan_timing_server.py": "tests/backends/test_served_probing.py",  # served_demo
    "tests/pipeline/test_guarantee_local_model.py": "tests/pipeline/test_run_local_model.py",  # embedded_run
    "tests/backends/test_batch_round_trip.py": "tests/backends/test_batch_llama_server.py",  # ray_local
}
#: Session fixtures worth a place in SHARED_FIXTURE_FILES (tests/test_templates_and_packaging.py checks it).
SHARED_FIXTURES = ("served_demo", "embedded_run", "ray_local")


def pin_to_one_core(worker: str) -> None:
    """Every thread of this process on core ``worker``'s index (``gw1`` -> 1) modulo the usable cores;
    threads and processes started later inherit it (``usable_cores()`` then says 1)."""
    cores = sorted(os.sched_getaffinity(0))
    core = {cores[int(worker.removeprefix("gw")) % len(cores)]}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), core)


def shared_fixture_scheduling(config, log):
    """xdist's whole-file scheduling, with the files of SHARED_FIXTURE_FILES scheduled as their partner."""
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return SHARED_FIXTURE_FILES.get(path, path)

    return SharedFixtureScheduling(config, log)
