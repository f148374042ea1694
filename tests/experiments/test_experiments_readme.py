"""experiments/ is filed: every script sits in bench/, papers/ or tools/, says what it measures in a module
docstring, has its row in experiments/README.md, and runs as ``python experiments/<folder>/<name>.py``
from the repository root without ``PYTHONPATH``."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest
from experiment_loader import FOLDERS, ROOT

EXPERIMENTS = ROOT / "experiments"
SCRIPTS = sorted(p for folder in FOLDERS for p in (EXPERIMENTS / folder).glob("*.py") if not p.stem.startswith("_"))


def readme_rows() -> list[str]:
    """The first cell of each row of the README's script table (``folder/name.py``)."""
    text = (EXPERIMENTS / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^\| `((?:bench|papers|tools)/[^`]+\.py)` \|", text, flags=re.MULTILINE)


def test_every_script_is_filed_in_a_folder():
    assert len(SCRIPTS) >= 30
    assert sorted(p.name for p in EXPERIMENTS.glob("*.py")) == ["_harness.py", "_openai_stub.py"]


def test_every_script_has_a_readme_row_and_every_row_a_script():
    rows = readme_rows()
    assert len(rows) == len(set(rows))  # one row each
    filed = [str(p.relative_to(EXPERIMENTS)) for p in SCRIPTS]
    assert sorted(set(filed) - set(rows)) == []  # a script without a row
    assert sorted(set(rows) - set(filed)) == []  # a row for a script that is gone


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_script_says_what_it_measures(path):
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert doc and len(doc.split()) >= 5


# One child process runs every script's --help in turn (sys.path and the shared modules reset before each,
# so a script without its own bootstrap fails): the imports are paid once, not once per script.
HELP_ALL = """
import io, runpy, sys, contextlib
base = list(sys.path)
bad = []
for path in sys.argv[1:]:
    sys.path[:] = [p for p in base if p not in ("", ".")]
    for name in [m for m in sys.modules if m.split(".")[0] in ("_harness", "_openai_stub", "bench", "papers", "tools")]:
        del sys.modules[name]
    sys.argv = [path, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        bad.append(f"{path}: --help did not exit")
    except SystemExit as exc:
        if exc.code not in (0, None) or "usage:" not in out.getvalue():
            bad.append(f"{path}: exit {exc.code}")
    except BaseException as exc:
        bad.append(f"{path}: {type(exc).__name__}: {exc}")
print("\\n".join(bad) or "ALL OK")
"""


@pytest.mark.slow  # imports every script's dependencies once (torch, sentence-transformers): about 20 s
def test_every_script_answers_help_from_the_root_without_pythonpath():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    paths = [str(p.relative_to(ROOT)) for p in SCRIPTS]
    res = subprocess.run([sys.executable, "-c", HELP_ALL, *paths], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "ALL OK", res.stdout[-3000:]
