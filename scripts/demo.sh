#!/usr/bin/env bash
# Set up (idempotent), then run the main job on the embedded model: probe the bundled
# USS dialogues with the bundled rubric set and write the probes and a report under runs/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT="${1:-runs/demo}"
mkdir -p "$OUT"
.venv/bin/rubric-induce probe \
  --examples rubric_induce/resources/demo_uss_dialogues.jsonl \
  --rubrics rubric_pools/demo/uss_handwritten.jsonl \
  --backend local --style score-only \
  --cache "$OUT/llm_calls.sqlite" \
  --out "$OUT/probes.jsonl" --report "$OUT/report.md" --label sat
echo "report: $OUT/report.md"
