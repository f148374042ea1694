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
    # Two passes (xdist workers, then one process for llama.cpp): their -m expressions split every tier
    # between them, each test in exactly one pass, and the llama.cpp tiers run in one process.
    llama = re.search(r'^LLAMA="([^"]+)"$', test_sh, re.M).group(1)
    passes = re.findall(r'^"\$PY" -m pytest -m "([^"]+)" (-n \S+)', test_sh, re.M)
    assert [(e.replace("$LLAMA", llama), n) for e, n in passes] == [(f"not ({llama})", "-n auto"), (llama, "-n 0")]
    from _pytest.mark.expression import Expression

    first, second = (Expression.compile(e.replace("$LLAMA", llama)) for e, _ in passes)
    for marks in ({"slow"}, {"local_model"}, {"server", "slow"}, {"browser"}, {"ray"}, {"tools"}, set()):
        has = marks.__contains__
        assert first.evaluate(has) != second.evaluate(has), marks
    assert not second.evaluate((heavy - {"local_model", "server"}).__contains__)
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
