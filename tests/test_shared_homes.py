"""Shared code lives in one place: JSON conversion, label checks, example rendering, progress bars,
structured replies, probe results and NotFittedError; and no stage imports another stage."""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import rubric_induce
from rubric_induce.core.errors import DataError, NotFittedError, RubricInduceError
from rubric_induce.data import Example
from rubric_induce.data.jsonl import jsonable
from rubric_induce.data.labels import BINARY_FIX, check_binary, is_binary, labels_from_examples
from rubric_induce.data.render import excerpt, render_example, truncate

# ----------------------------------------------------------------------------- jsonable

@dataclass
class _Point:
    x: float
    tags: tuple[str, ...]


class _HasToDict:
    def to_dict(self):
        return {"a": np.int64(1)}


def test_jsonable_numpy_to_plain_python():
    obj = {"i": np.int64(3), "f": np.float32(0.5), "d": np.float64(0.25), "b": np.bool_(True),
           "arr": np.arange(3), "m": np.array([[1.5, 2.5]]), 7: "int key"}
    out = jsonable(obj)
    assert out == {"i": 3, "f": 0.5, "d": 0.25, "b": True, "arr": [0, 1, 2], "m": [[1.5, 2.5]], "7": "int key"}
    assert type(out["i"]) is int and type(out["f"]) is float and type(out["d"]) is float
    assert type(out["b"]) is bool and all(type(v) is int for v in out["arr"])
    assert json.loads(json.dumps(out, allow_nan=False)) == out


def test_jsonable_non_finite_become_none_everywhere():
    out = jsonable({"nan": float("nan"), "inf": np.inf, "ninf": np.float32(-np.inf),
                    "arr": np.array([1.0, np.nan]), "ok": 1.5})
    assert out == {"nan": None, "inf": None, "ninf": None, "arr": [1.0, None], "ok": 1.5}
    json.dumps(out, allow_nan=False)  # writers refuse NaN; jsonable output always passes


def test_jsonable_containers_paths_dataclasses():
    out = jsonable({"t": (1, (2, 3)), "s": {"b", "a"}, "p": Path("runs") / "x.json",
                    "dc": _Point(np.float64(1.0), ("u",)), "td": _HasToDict(), "none": None, "str": "s"})
    assert out == {"t": [1, [2, 3]], "s": ["a", "b"], "p": str(Path("runs") / "x.json"),
                   "dc": {"x": 1.0, "tags": ["u"]}, "td": {"a": 1}, "none": None, "str": "s"}


def test_jsonable_leaves_unknown_objects_for_json_to_refuse():
    thing = object()
    assert jsonable(thing) is thing
    with pytest.raises(TypeError):
        json.dumps(jsonable({"x": thing}))


# ----------------------------------------------------------------------------- labels

def _ex(i: int, **labels) -> Example:
    return Example(id=f"e{i}", fields={"text": f"text {i}"}, labels=labels)


def test_labels_from_examples_and_threshold():
    exs = [_ex(0, sat=1), _ex(1, sat=0), _ex(2, sat=3.5)]
    assert labels_from_examples(exs, "sat").tolist() == [1.0, 0.0, 3.5]
    assert labels_from_examples(exs, "sat", threshold=1).tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(DataError, match="no label 'dsat'") as err:
        labels_from_examples(exs, "dsat")
    assert err.value.field == "labels.dsat"


@pytest.mark.parametrize("y, binary, both", [
    ([0, 1, 1], True, True), ([0.0, 1.0], True, True), ([True, False], True, True),
    ([1, 1], True, False), ([], True, False), ([0, 2], False, False), ([0.0, np.nan], False, False),
    ([0.5, 1.0], False, False),
])
def test_is_binary(y, binary, both):
    assert is_binary(np.asarray(y)) is binary
    assert is_binary(y, both_classes=True) is both


def test_check_binary_returns_ints_and_explains_the_fix():
    out = check_binary(np.array([0.0, 1.0, 1.0]))
    assert out.dtype.kind == "i" and out.tolist() == [0, 1, 1]
    assert check_binary(np.array([True, False])).tolist() == [1, 0]
    with pytest.raises(DataError, match="0/1 labels") as err:
        check_binary([1, 2, 3, 4, 5, 6, 7], label="overall")
    msg = str(err.value)
    assert "label 'overall' is not 0/1" in msg and "label_threshold" in msg and "topk" in msg
    assert "[1, 2, 3, 4, 5, 6] ..." in msg and msg.endswith(BINARY_FIX)
    assert err.value.field == "labels.overall"
    with pytest.raises(DataError, match="--method topk"):
        check_binary([0, 3], fix="use --method topk", path="cfg.toml")
    with pytest.raises(DataError, match="single class"):
        check_binary([1, 1, 1])
    assert check_binary([1, 1], both_classes=False).tolist() == [1, 1]
    with pytest.raises(DataError, match="one-dimensional"):
        check_binary(np.zeros((2, 2)))


def test_old_label_homes_still_export_the_same_functions():
    from rubric_induce.data import examples_io, labels
    from rubric_induce.selection import scores

    assert scores.labels_from_examples is labels.labels_from_examples
    assert scores.check_binary is labels.check_binary
    assert examples_io.require_two_classes is labels.require_two_classes


# ----------------------------------------------------------------------------- rendering

def test_render_example_as_before():
    one = Example(id="a", fields={"text": "Hello there."}, labels={})
    two = Example(id="b", fields={"source": "The doc.", "model_summary": "Sum."}, labels={})
    assert render_example(one) == "Hello there."
    assert render_example(two) == "Source:\nThe doc.\n\nModel summary:\nSum."
    assert render_example(two, ["model_summary"]) == "Sum."
    with pytest.raises(DataError, match=r"no field\(s\) \['context'\]") as err:
        render_example(two, ["context"])
    assert err.value.field == "context"


def test_render_truncation_keeps_each_stage_marker():
    ex = Example(id="a", fields={"text": "word " * 20}, labels={})
    assert render_example(ex, max_chars=None) == "word " * 20
    assert render_example(ex, max_chars=12) == "word word wo\n[... truncated]"  # RUBICON's marker
    assert render_example(ex, max_chars=10, marker=" [... truncated]") == "word word [... truncated]"
    assert truncate("short", 10) == "short"
    assert excerpt("a  b\n c " * 3, 8) == "a b c a\u2026"
    assert excerpt("a b", 8) == "a b"


def test_probe_table_has_one_home():
    """ProbeTable and ProbeRecord live in rubric_induce.data.probes, ProbeArrays in
    rubric_induce.data.probe_arrays, each exported from nowhere else; render_example from rubric_induce.data.render."""
    import rubric_induce
    from rubric_induce import data
    from rubric_induce.data import probe_arrays, probes
    from rubric_induce.probing import api as probing

    for name, home in (("ProbeTable", probes), ("ProbeRecord", probes), ("ProbeArrays", probe_arrays)):
        assert getattr(home, name).__module__ == home.__name__
        assert name in home.__all__ and (home is probes or name not in probes.__all__)
        assert name not in probing.__all__ and name not in data.__all__ and name not in rubric_induce.__all__
    assert "render_example" not in probing.__all__ and probing.render_example is render_example


# ----------------------------------------------------------------------------- errors, structured

def test_one_not_fitted_error():
    from rubric_induce.calibration.calibrator import NotFittedError as FromCalibration
    from rubric_induce.selection.selector import NotFittedError as FromSelection

    assert FromCalibration is FromSelection is NotFittedError
    assert issubclass(NotFittedError, RubricInduceError)
    assert issubclass(NotFittedError, ValueError) and issubclass(NotFittedError, AttributeError)


def test_structured_replies_live_outside_generation():
    from rubric_induce import generation
    from rubric_induce.backends import structured
    for name in ("ask_json", "parse_json_reply", "derive_seed", "GenerationStats", "GenerationFailure",
                 "GenerationError"):
        assert name in structured.__all__ and name not in generation.__all__


# ----------------------------------------------------------------------------- layering

PACKAGE = Path(rubric_induce.__file__).parent
#: Stage packages that produce results: none may import another. Reporting presents every stage's
#: results (and the scorer's) and sits above them (tests/test_layout.py checks the floors).
STAGES = {"generation", "dedup", "probing", "selection", "calibration", "evaluation", "feedback"}
#: What stages may import besides themselves: shared, stage-neutral code.
SHARED = {"core", "data", "backends"}
#: Cross-stage imports that remain on purpose or for now, (importer module, imported module prefix).
ALLOWED_CROSS_STAGE = {
    # AutoCalibrate scores each drafted criterion by probing it on labelled examples: the algorithm
    # runs the probing stage inside generation, so this edge is the method itself, not shared code.
    ("rubric_induce.generation.criteria", "rubric_induce.probing.api"),
    # The held-out probe checks (failed and bounded probes) are probing's own diagnostics; the
    # evaluation reports them for the held-out texts with the same function the probe stage uses.
    # (the thresholds they flag at, and the checks themselves, as evaluate's steps).
    ("rubric_induce.evaluation.heldout", "rubric_induce.probing.checks"),
    ("rubric_induce.evaluation.options", "rubric_induce.probing.checks"),
    ("rubric_induce.evaluation.sections", "rubric_induce.probing.checks"),
    # Held-out evaluation reports the selector's own metrics (A/P/R/F1, YieldRate@P, ΔNetSAT)
    # through the same function the select command uses, so the two tables cannot disagree.
    ("rubric_induce.evaluation.sections", "rubric_induce.selection.metrics"),
    ("rubric_induce.evaluation.intervals", "rubric_induce.selection.metrics"),
    ("rubric_induce.evaluation.intervals", "rubric_induce.selection.precision"),
    # The direct-judge baseline asks its one question per held-out text through the probe stage (same
    # style, estimator, cache and failure handling as the rubrics it is compared with): as with
    # AutoCalibrate, running the stage is the method, not shared code.
    ("rubric_induce.evaluation.direct", "rubric_induce.probing.api"),
}


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


def _imports_of(source: str, module: str, is_pkg: bool) -> list[tuple[int, str]]:
    """Absolute names of the rubric_induce modules ``source`` imports (function-level ones too)."""
    package = module if is_pkg else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [(node.lineno, n) for n in names if n.split(".")[0] == "rubric_induce"]
    return out


def _imports(path: Path) -> list[tuple[int, str]]:
    return _imports_of(path.read_text(encoding="utf-8"), *_module_name(path))


def _stage_files() -> list[Path]:
    files = []
    for stage in sorted(STAGES):
        pkg, mod = PACKAGE / stage, PACKAGE / f"{stage}.py"
        files += sorted(pkg.rglob("*.py")) if pkg.is_dir() else [mod]
    return files


def test_stages_import_only_shared_code():
    files = _stage_files()
    assert len(files) >= 20  # every stage found
    bad, used_allowances = [], set()
    for path in files:
        importer, _ = _module_name(path)
        stage = importer.split(".")[1]
        for line, target in _imports(path):
            parts = target.split(".")
            if len(parts) < 2 or parts[1] == stage or parts[1] in SHARED or parts[1] == "__version__":
                continue
            allowance = next((a for a in ALLOWED_CROSS_STAGE
                              if a[0] == importer and (target == a[1] or target.startswith(a[1] + "."))), None)
            if allowance:
                used_allowances.add(allowance)
                continue
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not bad, "stage modules must import shared code only (move what they share):\n" + "\n".join(bad)
    assert used_allowances == ALLOWED_CROSS_STAGE, (
        f"allow-list entries no longer needed, remove them: {sorted(ALLOWED_CROSS_STAGE - used_allowances)}")


def test_layering_check_sees_relative_and_lazy_imports():
    source = ("from ..generation import rubicon\nfrom . import scores\nfrom .. import data\n"
              "def f():\n    from ..probing import probe\n    import rubric_induce.feedback.api\n")
    found = [t for _, t in _imports_of(source, "rubric_induce.selection.selector", False)]
    assert found == ["rubric_induce.generation", "rubric_induce.selection.scores", "rubric_induce.data",
                     "rubric_induce.probing", "rubric_induce.feedback.api"]
    assert [t for _, t in _imports_of("from .rubicon import x\n", "rubric_induce.generation", True)] == [
        "rubric_induce.generation.rubicon"]
