#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite, every tier: fast, slow, local_model (the
# embedded model) and server (a local llama.cpp server). This is what CI runs (.ci/run).
# Extra arguments go to pytest; a -m among them replaces the -m "" below.
# The fast tier alone (plain pytest's default, see pyproject.toml): .venv/bin/python -m pytest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test  # the demo layer (kept if there) plus the test tooling
exec "${RUBRIC_INDUCE_VENV:-.venv}/bin/python" -m pytest -m "" "$@"
