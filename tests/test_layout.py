"""The package's layout rules, checked on the source (no import needed): each stage has a folder,
imports only run down the floors, no import circle, no import of another module's private names,
at most a few modules loose at the package root.

Floors, lowest first: core -> data -> backends -> probing (the measuring instrument every later
stage reads; AutoCalibrate's refinement probes its drafts) -> the other stages in pipeline order
(generation, dedup, selection, calibration, evaluation, feedback) -> scoring, batch -> reporting
(the report and viewer show the scorer's output) -> handoff -> pipeline -> cli. A module may import
from its own floor's package and from any floor below.
"""
from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

PKG = "rubric_induce"
ROOT = Path(__file__).resolve().parents[1] / PKG

FLOORS = ["core", "data", "backends", "probing", "generation", "dedup", "selection", "calibration",
          "evaluation", "feedback", ("scoring", "batch"), "reporting", "handoff", "pipeline", "cli"]
RANK = {name: i for i, f in enumerate(FLOORS) for name in ((f,) if isinstance(f, str) else f)}
LOOSE_ROOT_LIMIT = 4


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


MODULES = _modules()


def _target(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def _imports() -> list[tuple[str, str, str | None, int]]:
    """(importer, imported module, imported name or None, line) for every import of our package,
    at module level or inside functions. Parsed when a test first asks, not at collection: every
    pytest worker collects this module, and parsing the package takes seconds."""
    out = []
    for mod, (path, is_pkg) in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                tgt = _target(mod, is_pkg, node)
                if not tgt or not (tgt == PKG or tgt.startswith(PKG + ".")):
                    continue
                for alias in node.names:
                    sub = f"{tgt}.{alias.name}"
                    if sub in MODULES:
                        out.append((mod, sub, None, node.lineno))
                    else:
                        out.append((mod, tgt, alias.name, node.lineno))
            elif isinstance(node, ast.Import):
                out.extend((mod, a.name, None, node.lineno) for a in node.names if a.name.startswith(PKG + "."))
    return out



def _floor(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_floor_is_a_folder():
    for name in RANK:
        assert (ROOT / name / "__init__.py").is_file(), f"{PKG}/{name}/ is missing"


def test_at_most_a_few_loose_root_modules():
    loose = sorted(p.name for p in ROOT.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= LOOSE_ROOT_LIMIT, loose
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    unknown = [f for f in folders if f not in RANK and f not in ("resources",)]
    assert not unknown, f"packages outside the floors (add them to FLOORS): {unknown}"


def upward(imports) -> list[str]:
    """Imports that run from a floor up to a higher one."""
    bad = []
    for src, dst, _name, line in imports:
        a, b = _floor(src), _floor(dst)
        if a is None or b is None or a == b or a not in RANK or b not in RANK:
            continue  # the root __init__ is the public facade over every floor
        if RANK[b] > RANK[a]:
            bad.append(f"{src}:{line} imports {dst} ({a} sits below {b})")
    return bad


def circles(imports, modules) -> list[list[str]]:
    """Strongly connected components (Tarjan) of more than one module."""
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _name, _line in imports:
        # a package importing its own modules (re-exports in __init__) is not a circle
        if dst in modules and dst != src and not dst.startswith(src + "."):
            graph[src].add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(modules):
        if v not in index:
            visit(v)
    return found


def private(imports) -> list[str]:
    return [f"{src}:{line} imports {name} from {dst}" for src, dst, name, line in imports
            if name and name.startswith("_") and not name.startswith("__") and dst != src]


def test_imports_run_down_the_floors():
    bad = upward(_imports())
    assert not bad, "\n".join(bad)


def test_no_import_circle():
    found = circles(_imports(), MODULES)
    assert not found, found


def test_no_private_name_crosses_a_module():
    bad = private(_imports())
    assert not bad, "\n".join(bad)


def test_the_checks_catch_planted_violations():
    """Each check flags a violation planted in a copy of the real import list, and only that one."""
    up = ("rubric_induce.core.params", "rubric_induce.pipeline.runner", None, 1)
    assert upward([*_imports(), up])[-1:] == upward([up]) != []
    mods = dict.fromkeys(["rubric_induce.data.a", "rubric_induce.data.b", "rubric_induce.data.c"])
    loop = [("rubric_induce.data.a", "rubric_induce.data.b", None, 1), ("rubric_induce.data.b", "rubric_induce.data.c", None, 1),
            ("rubric_induce.data.c", "rubric_induce.data.a", None, 1)]
    assert circles(loop, mods) == [sorted(mods)]
    assert circles(loop[:2], mods) == []
    leak = ("rubric_induce.data.a", "rubric_induce.data.b", "_hidden", 3)
    assert private([leak, ("rubric_induce.data.a", "rubric_induce.data.b", "__version__", 4)]) == [
        "rubric_induce.data.a:3 imports _hidden from rubric_induce.data.b"]


def test_every_import_of_the_package_names_a_module_that_exists():
    """Function-level imports run only when their branch does: a moved or misspelt module name there
    passes every other test until a user reaches that branch."""
    missing = [f"{src}:{line} imports {dst}" for src, dst, name, line in _imports()
               if dst not in MODULES and not (name is None and dst.rpartition(".")[0] in MODULES)]
    assert not missing, "\n".join(missing)


# --------------------------------------------------------------------------- room sizes (DESIGN.md)
MAX_MODULE_LINES = 600
MAX_LONG_FUNCTIONS = 5  # functions over FUNCTION_LINES lines, package-wide
FUNCTION_LINES = 80
MAX_DEFERRED_IMPORTS = 150  # imports of the package's own modules inside functions


def _is_own_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == PKG
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == PKG for a in node.names)


def _room_sizes(sources: dict[str, str]) -> tuple[list[tuple[int, str]], list[tuple[int, str]], int]:
    """(modules over the line limit, functions over FUNCTION_LINES, own imports inside functions)."""
    big, long_functions, deferred = [], [], 0
    for name, text in sources.items():
        if len(text.splitlines()) > MAX_MODULE_LINES:
            big.append((len(text.splitlines()), name))
        tree = ast.parse(text)
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
            if fn.end_lineno - fn.lineno + 1 > FUNCTION_LINES:
                long_functions.append((fn.end_lineno - fn.lineno + 1, f"{name}::{fn.name}"))
        deferred += _deferred_imports(tree, inside=False)
    return big, long_functions, deferred


def _deferred_imports(node: ast.AST, inside: bool) -> int:
    count = 0
    for child in ast.iter_child_nodes(node):
        count += inside and _is_own_import(child)
        count += _deferred_imports(child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))
    return count


def test_rooms_stay_livable():
    """DESIGN.md "Room sizes": a module under 600 lines, a function under 80 (a handful of exceptions),
    imports at the top (deferred only for torch and optional tools)."""
    sources = {name: path.read_text(encoding="utf-8") for name, (path, _) in MODULES.items()}
    big, long_functions, deferred = _room_sizes(sources)
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {sorted(big, reverse=True)}"
    assert len(long_functions) <= MAX_LONG_FUNCTIONS, f"functions over {FUNCTION_LINES} lines: {sorted(long_functions)}"
    assert deferred <= MAX_DEFERRED_IMPORTS, f"{deferred} imports of the package inside functions"


def test_room_size_check_sees_planted_violations():
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES + 1))
    planted = {
        "big": "x = 1\n" * (MAX_MODULE_LINES + 1),
        "long": f"def f():\n{body}\n",
        "lazy": "def g():\n    from rubric_induce.core import errors\n    def h():\n        from . import data\n",
    }
    big, long_functions, deferred = _room_sizes(planted)
    assert [n for _, n in big] == ["big"]
    assert [n for _, n in long_functions] == ["long::f"]
    assert deferred == 2
