#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, every tier: fast, slow, browser, ray, tools,
# local_model (the embedded model) and server (a local llama.cpp server). This is what CI runs (.ci/run).
# Extra arguments go to pytest. The fast tier alone (plain pytest's default, see pyproject.toml):
# .venv/bin/python -m pytest
#
# Two passes. The tiers that do not run llama.cpp go on pytest-xdist workers (one per core, at most
# four), a whole file to a worker (--dist loadfile), so that a module fixture (a fitted model, a whole
# pipeline run, a local Ray runtime) is built once, not once per worker. The local_model and server
# tiers then run on workers pinned one to a core (--pin-workers, tests/pinned_workers.py): llama.cpp (embedded
# and served) takes one thread on its worker's core, and files that share a costly session fixture run
# on one worker. Unpinned, llama.cpp's threads spin on every core, and two of its tests at once ran many
# times slower than one after the other (2026-11-28); pinned, the pass took 387 s instead of 477 s in
# one process (2026-11-29): the tests' own Python (pipeline stages, training, Ray) runs beside the model.
# (xdist_group marks cannot do the grouping: with pytest 9.2, xdist 3.8's loadgroup leaves the test ids,
# and so the groups, as they were; two workers each built the same module fixtures.)
# A -m among the arguments replaces both passes with one run of that selection in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test  # the demo layer (kept if there) plus the test tooling
PY="${RUBRIC_INDUCE_VENV:-.venv}/bin/python"
# llama.cpp (embedded and served) and torch wait at their barriers in libgomp, which by default spins 300,000
# rounds before it sleeps: on 2 cores the spinning threads take the core the other process (the test's client,
# a training network) needs. 4 probes through the test server under load 15: 180 s spinning, 44 s with 10,000.
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-10000}"
for arg in "$@"; do
  case "$arg" in -m|-m*) exec "$PY" -m pytest -n 0 "$@" ;; esac
done
LLAMA="local_model or server"
rc=0
"$PY" -m pytest -m "not ($LLAMA)" -n auto --maxprocesses 4 --dist loadfile "$@" || rc=$?
rc2=0
"$PY" -m pytest -m "$LLAMA" -n auto --maxprocesses 4 --pin-workers "$@" || rc2=$?
# 5 is pytest's "nothing collected" (arguments that pick tests of one pass only): fine unless both say so.
if [ "$rc" -eq 5 ] && [ "$rc2" -ne 5 ]; then rc=0; fi
if [ "$rc2" -eq 5 ] && [ "$rc" -ne 5 ]; then rc2=0; fi
if [ "$rc" -ne 0 ]; then exit "$rc"; fi
exit "$rc2"
