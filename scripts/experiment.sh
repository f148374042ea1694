#!/usr/bin/env bash
# Run one experiment from a fresh clone: set up .venv (idempotent: 2-11 minutes the first time,
# depending on pip's cache; a second when current), then run experiments/<folder>/<name>.py with the rest.
#   bash scripts/experiment.sh closer_look                 # its --limit default, see experiments/configs/
#   bash scripts/experiment.sh end_to_end_summeval --limit 4
#   bash scripts/experiment.sh --list
# The experiment prints its own runtime; set-up time is reported separately on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

list() { for f in experiments/{bench,papers,tools}/[!_]*.py; do basename "$f" .py; done | sort; }

if [ $# -eq 0 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  echo "experiments:"; list | sed 's/^/  /'
  [ $# -eq 0 ] && exit 2 || exit 0
fi
if [ "$1" = "--list" ]; then list; exit 0; fi

name="${1%.py}"; name="${name##*/}"; shift  # a bare name, or a path such as experiments/papers/closer_look.py
script=""
for folder in bench papers tools; do
  [ -f "experiments/$folder/$name.py" ] && script="experiments/$folder/$name.py"
done
if [ -z "$script" ] || [ "${name#_}" != "$name" ]; then
  echo "experiment.sh: no experiment '$name' under experiments/; one of:" >&2
  list | sed 's/^/  /' >&2
  exit 2
fi

start=$SECONDS
bash scripts/setup.sh
echo "experiment.sh: set-up took $((SECONDS - start)) s; running $script" >&2
start=$SECONDS
set +e
.venv/bin/python "$script" "$@"
rc=$?
set -e
echo "experiment.sh: $script exited $rc after $((SECONDS - start)) s wall" >&2
exit "$rc"
