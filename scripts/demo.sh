#!/usr/bin/env bash
# Set up (idempotent), then run the main job on the embedded model: the whole pipeline
# (generate -> dedup -> probe -> select -> calibrate -> evaluate -> feedback -> report) on the
# 48 bundled USS dialogues, into runs/demo/. Rerunning resumes; the last line says where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT="${1:-runs/demo}"
.venv/bin/rubric-induce run rubric_induce/resources/demo_uss.toml --out "$OUT"
