#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, every tier: fast, slow, local_model (the
# embedded model) and server (a local llama.cpp server). This is what CI runs (.ci/run).
# Extra arguments go to pytest; a -m among them replaces the -m "" below.
# The fast tier alone (plain pytest's default, see pyproject.toml): .venv/bin/python -m pytest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test  # the demo layer (kept if there) plus the test tooling
# -n 0: one process. The heavy tiers run llama.cpp (a model or a server), whose threads spin on every core:
# two at once on two xdist workers ran many times slower (2026-11-28), so CI runs them one after another.
exec "${RUBRIC_INDUCE_VENV:-.venv}/bin/python" -m pytest -m "" -n 0 "$@"
