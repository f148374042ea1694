"""Prompt templates load, hash and render; the package lists every subpackage it ships."""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.templates import load_prompt, prompts_dir

ROOT = Path(__file__).resolve().parents[1]


def test_every_template_parses_and_has_a_content_hash():
    names = sorted(p.stem for p in prompts_dir().glob("*.txt"))
    assert {"probe_score_only", "probe_rate_explain", "probe_analyze_rate"} <= set(names)
    hashes = {load_prompt(n).hash for n in names}
    assert len(hashes) == len(names) and all(re.fullmatch(r"[0-9a-f]{12}", h) for h in hashes)


def test_render_requires_every_placeholder():
    tpl = load_prompt("probe_score_only")
    assert tpl.placeholders == {"example", "rubric", "levels", "scale", "kind", "a_kind", "task_block",
                                "fields_note"}
    with pytest.raises(RubricInduceError, match="needs values"):
        tpl.render(example="x")
    with pytest.raises(RubricInduceError, match="kind"):
        tpl.render(example="T", rubric="R", levels="", scale="1-5", a_kind="a text", task_block="",
                   fields_note="")
    msgs = tpl.render(example="T", rubric="R", levels="", scale="1-5", kind="text", a_kind="a text",
                      task_block="", fields_note="")
    assert [m["role"] for m in msgs] == ["system", "user"]


def test_hash_changes_with_content(tmp_path):
    (tmp_path / "a.txt").write_text("[user]\nhello ${x}\n")
    h1 = load_prompt("a", tmp_path).hash
    (tmp_path / "b.txt").write_text("[user]\nhello  ${x}\n")
    assert load_prompt("b", tmp_path).hash != h1
    with pytest.raises(RubricInduceError, match="no prompt template"):
        load_prompt("missing", tmp_path)


def test_pyproject_lists_every_subpackage():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(conf["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "rubric_induce").rglob("__init__.py")}
    assert found - {"rubric_induce.prompts"} <= listed
    assert "rubric_induce.prompts" in listed


def test_price_lookup():
    from rubric_induce.backends.base import price_for

    assert price_for("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert price_for("gpt-4o-mini-2024-07-18", 0, 1_000_000) == pytest.approx(0.60)
    assert price_for("my-local-llama", 10, 10) is None


# Standard-library modules that set a floor, with the release that added them (extend when one is used).
_GATED_STDLIB = {"tomllib": (3, 11)}


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_requires_python_is_the_floor_that_is_tested():
    """The declared floor is 3.11 (tomllib), the interpreter running the tests meets it, and no
    module imports a version-gated stdlib module newer than it. CI runs 3.11 only, so nothing
    older may be claimed."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r">=\s*3\.(\d+)", spec)
    assert m, f"requires-python should be a plain lower bound, got {spec!r}"
    floor = (3, int(m.group(1)))
    assert floor == (3, 11)
    assert sys.version_info[:2] >= floor
    needs = {name: _GATED_STDLIB[name] for p in (ROOT / "rubric_induce").rglob("*.py")
             for name in _imported_modules(p) if name in _GATED_STDLIB}
    assert needs.get("tomllib") == (3, 11)  # the reason for the floor; drop this line if tomllib goes
    assert all(v <= floor for v in needs.values()), needs


def test_llama_pass_files_that_share_a_session_fixture_run_on_one_worker():
    """In the pinned llama.cpp pass (``--pin-workers``) every test file that takes one of the costly
    session fixtures is scheduled with the others that take it (SHARED_FIXTURE_FILES), so that the
    fixture is built on one worker only."""
    from pinned_workers import SHARED_FIXTURE_FILES, SHARED_FIXTURES

    llama_marks = re.compile(r"pytest\.mark\.(local_model|server)\b")
    for name in SHARED_FIXTURES:
        takes = re.compile(rf"def \w+\([^)]*\b{name}\b")
        users = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                 if takes.search(p.read_text(encoding="utf-8")) and llama_marks.search(p.read_text(encoding="utf-8"))}
        assert users, name  # the fixture is still used in the llama.cpp pass
        assert len({SHARED_FIXTURE_FILES.get(u, u) for u in users}) == 1, (name, sorted(users))

@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_a_pinned_worker_and_its_threads_and_children_use_one_core():
    """``--pin-workers`` pins every thread already running (a BLAS pool started at import) and what starts
    later, so the embedded model's default threads and the test server's (``usable_cores()``) are 1."""
    import subprocess

    code = """
import os, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
from pinned_workers import pin_to_one_core
from rubric_induce.backends.local import usable_cores
done = threading.Event()
early = threading.Thread(target=done.wait); early.start()
cores = sorted(os.sched_getaffinity(0))
pin_to_one_core("gw1")
early_pinned = os.sched_getaffinity(early.native_id) == {cores[1 % len(cores)]}
done.set()
child = subprocess.run([sys.executable, "-c", "import os; print(len(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True).stdout.strip()
print(len(cores), usable_cores(), early_pinned, child)
"""
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "tests")], capture_output=True, text=True, check=True)
    n_cores, usable, early_pinned, child = out.stdout.split()
    assert (usable, early_pinned, child) == ("1", "True", "1"), out.stdout

def test_plain_pytest_is_the_fast_tier_and_ci_runs_every_tier():
    """Plain pytest deselects the heavy tiers (slow, local_model, server, browser, ray, tools); scripts/test.sh
    (which .ci/run calls) runs them all, in two passes that split the tiers between them."""
    import re

    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    heavy = {"slow", "local_model", "server", "browser", "ray", "tools"}
    expr = re.search(r"-m '([^']*)'", ini["addopts"]).group(1)
    assert set(re.findall(r"not (\w+)", expr)) == heavy and expr.count(" and ") == len(heavy) - 1
    assert {m.split(":")[0] for m in ini["markers"]} >= heavy | {"remote"}
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    # Two passes (xdist workers, then workers pinned one to a core for llama.cpp): their -m expressions split
    # every tier between them, each test in exactly one pass.
    llama = re.search(r'^LLAMA="([^"]+)"$', test_sh, re.M).group(1)
    passes = re.findall(r'^"\$PY" -m pytest -m "([^"]+)" (-n \S+)([^|]*)', test_sh, re.M)
    assert [(e.replace("$LLAMA", llama), n) for e, n, _ in passes] == [(f"not ({llama})", "-n auto"),
                                                                      (llama, "-n auto")]
    assert "--pin-workers" not in passes[0][2] and "--pin-workers" in passes[1][2]
    from _pytest.mark.expression import Expression

    first, second = (Expression.compile(e.replace("$LLAMA", llama)) for e, _, _ in passes)
    for marks in ({"slow"}, {"local_model"}, {"server", "slow"}, {"browser"}, {"ray"}, {"tools"}, set()):
        has = marks.__contains__
        assert first.evaluate(has) != second.evaluate(has), marks
    assert not second.evaluate((heavy - {"local_model", "server"}).__contains__)
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
