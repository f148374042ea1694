#!/usr/bin/env bash
# Set up (idempotent), then run the main job on the embedded model: the whole pipeline
# (generate -> dedup -> probe -> select -> calibrate -> evaluate -> feedback -> report) on the
# 48 bundled USS dialogues, into runs/demo/. Rerunning resumes; the last line says where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo  # only what the demo needs; scripts/test.sh adds the test tooling
OUT="${1:-runs/demo}"
"${RUBRIC_INDUCE_VENV:-.venv}/bin/rubric-induce" run rubric_induce/resources/demo_uss.toml --out "$OUT"
