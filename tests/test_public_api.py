"""The public API: a small top level, one entry point per stage, one way to pass its params."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import subprocess
import sys

import pytest

import rubric_induce
from rubric_induce.core.params import resolve_params

STAGES = {
    "generation": {"generate", "GenerateParams", "GenerateContext", "GenerateResult", "RubiconParams", "AutoCalibrateParams"},
    "dedup": {"dedup", "DedupParams", "DedupResult"},
    "probing": {"probe", "ProbeParams"},
    "selection": {"select", "SelectParams", "SelectContext", "SelectResult"},
    "calibration": {"calibrate", "CalibrateParams", "CalibrateResult"},
    "evaluation": {"evaluate", "EvaluateParams", "HeldoutOptions", "EvaluationResult"},
    "feedback": {"feedback", "FeedbackParams", "FeedbackContext", "FeedbackSummary"},
    "reporting": {"report", "ReportParams"},
}


def test_top_level_holds_the_names_a_user_needs():
    assert set(rubric_induce.__all__) == {
        "__version__", "RubricScorer", "ScoreResult", "run_pipeline", "load_config", "RunResult",
        "Example", "Rubric", "RubricPool", "RubricSet", "AnswerScale", "LabelScale", "Judgment",
        "get_backend", "Backend", "RubricInduceError", "DataError", "BackendError"}
    for gone in ("CallCache", "UsageTally", "CachedBackend", "ProbeTable", "probe", "inspect_scorer"):
        with pytest.raises(AttributeError):
            getattr(rubric_induce, gone)


def test_import_stays_light():
    code = ("import sys, rubric_induce as ri\n"
            "heavy = [m for m in ('rubric_induce.scoring.scorer', 'rubric_induce.pipeline', 'rubric_induce.handoff',"
            " 'rubric_induce.calibration', 'torch', 'sklearn') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "assert ri.ScoreResult.__module__ == 'rubric_induce.data.results'\n"
            "assert ri.RubricScorer.__module__ == 'rubric_induce.scoring.scorer'\n"
            "missing = [n for n in ri.__all__ if not hasattr(ri, n)]\n"
            "assert not missing, missing\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_each_stage_exports_its_entry_point_params_and_result_only(stage):
    """...and, where the stage needs the run's facts beside its settings, the one object that holds
    them (GenerateContext, SelectContext, FeedbackContext, HeldoutOptions)."""
    module = importlib.import_module(f"rubric_induce.{stage}")
    assert set(module.__all__) == STAGES[stage]
    # names a package holds besides its __all__ may only be its own submodules (imported by its modules)
    extra = {n for n, v in vars(module).items() if not n.startswith("_") and n != "annotations"} - set(module.__all__)
    foreign = {n for n in extra if not (inspect.ismodule(getattr(module, n))
                                        and getattr(module, n).__name__.startswith(f"rubric_induce.{stage}."))}
    assert not foreign, foreign


def test_removed_duplicates_are_gone():
    from rubric_induce.dedup import api as dedup_api
    from rubric_induce.feedback import api as feedback_api

    assert not hasattr(dedup_api, "deduplicate")
    assert "summarize_feedback" not in feedback_api.__all__
    from rubric_induce import generation
    for name in ("generate_rubicon", "generate_spur", "generate_autocalibrate"):
        assert name not in generation.__all__ and not hasattr(generation, name)


def test_entry_points_take_params_then_keyword_overrides():
    """Every stage entry point: (..., params=None, ..., **overrides), overrides checked by its Params."""
    import inspect

    for stage, names in STAGES.items():
        module = importlib.import_module(f"rubric_induce.{stage}")
        entry = next(getattr(module, n) for n in names if n[0].islower())
        sig = inspect.signature(entry)
        assert sig.parameters["params"].default is None, stage
        assert any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()), stage


def test_resolve_params_applies_and_checks_overrides():
    from rubric_induce.core.errors import DataError
    from rubric_induce.probing import ProbeParams

    assert resolve_params(ProbeParams, None, {}) == ProbeParams()
    base = ProbeParams(style="rate-explain")
    got = resolve_params(ProbeParams, base, {"samples": 3})
    assert (got.style, got.samples) == ("rate-explain", 3) and base.samples == 10
    with pytest.raises(TypeError, match="no field 'sample'.*did you mean 'samples'"):
        resolve_params(ProbeParams, None, {"sample": 3})
    with pytest.raises(DataError, match="probe.samples"):
        resolve_params(ProbeParams, None, {"samples": 0})
    with pytest.raises(TypeError, match="must be a ProbeParams"):
        resolve_params(ProbeParams, {"style": "score-only"}, {})


def test_probe_takes_params_or_overrides_the_same_way():
    from rubric_induce.backends.fake import FakeBackend
    from rubric_induce.data import Example, Rubric
    from rubric_induce.probing import ProbeParams, probe

    ex, rb = [Example(id="a", fields={"text": "Hello there."})], [Rubric.create("The reply is polite.")]
    a = probe(ex, rb, FakeBackend(), ProbeParams(estimator="sampling", samples=3))
    b = probe(ex, rb, FakeBackend(), estimator="sampling", samples=3)
    assert a.records[0].to_dict() == b.records[0].to_dict() and a.records[0].estimator == "sampling"
    with pytest.raises(TypeError, match="n_samples"):
        probe(ex, rb, FakeBackend(), estimator="sampling", n_samples=3)


def test_every_selector_and_calibrator_clones_with_sklearn():
    clone = pytest.importorskip("sklearn.base").clone
    from rubric_induce.calibration.adaptive import AdaptiveModel
    from rubric_induce.calibration.calibrator import Calibrator
    from rubric_induce.calibration.pairwise import BradleyTerryHead
    from rubric_induce.selection.baselines import SELECTORS
    from rubric_induce.selection.pairwise import PairwiseSelector

    estimators = [cls() for cls in SELECTORS.values()] + [PairwiseSelector(), Calibrator(), BradleyTerryHead(),
                                                          AdaptiveModel()]
    for est in estimators:
        est.set_params(**est.get_params(deep=True))
        twin = clone(est)
        assert type(twin) is type(est) and twin is not est
        assert twin.get_params(deep=False) == est.get_params(deep=False), type(est).__name__


def test_scorer_passes_the_artifacts_sample_count_to_probe():
    """artifact.json names the sample count n_samples; probe's field is samples."""
    from rubric_induce.backends.fake import FakeBackend
    from rubric_induce.data import Rubric
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer([Rubric.create("The reply is polite.")], backend=FakeBackend(),
                          probe_options={"estimator": "sampling", "n_samples": 3, "style": "score-only"})
    table = scorer.probe(["Hello there."])
    assert table.records[0].estimator == "sampling" and table.records[0].n_samples == 3


# ----------------------------------------------------------------------------- docstrings of the public API
#: The stage entry points, by stage package (besides the top-level names of ``rubric_induce.__all__``).
ENTRY_POINTS = {"generation": "generate", "dedup": "dedup", "probing": "probe", "selection": "select",
                "calibration": "calibrate", "evaluation": "evaluate", "feedback": "feedback",
                "reporting": "report"}


def _public_objects() -> dict[str, object]:
    out = {name: getattr(rubric_induce, name) for name in rubric_induce.__all__ if name != "__version__"}
    for stage, name in ENTRY_POINTS.items():
        out[f"{stage}.{name}"] = getattr(importlib.import_module(f"rubric_induce.{stage}"), name)
    return out


def _section(doc: str, head: str) -> list[str]:
    """The names a Google-style section (``Args:``, ``Attributes:``) documents, in order."""
    lines = inspect.cleandoc(doc).splitlines()
    if f"{head}:" not in lines:
        return []
    names = []
    for line in lines[lines.index(f"{head}:") + 1:]:
        if line and not line.startswith(" "):
            break
        if line.startswith("    ") and not line.startswith("     ") and ":" in line:
            names.append(line.split(":", 1)[0].split(" (", 1)[0].strip().lstrip("*"))
    return names


def _stub(key: str, obj) -> str:
    """A function with ``obj``'s parameter names and docstring (what ruff's D rules read)."""
    sig = inspect.signature(obj)
    params, star = [], False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                params.append("*")
                star = True
            params.append(p.name if p.default is p.empty else f"{p.name}=None")
    name = key.replace(".", "_")
    body = obj.__doc__.replace('"""', "'''")
    return f'def {name}({", ".join(params)}):\n    """{body}"""\n'


def test_public_api_docstrings_are_google_style(tmp_path):
    """The top-level names and each stage's entry point have Google-style docstrings (the style
    mkdocs.yml renders into parameter tables), checked by ruff's D rules (google convention) on a
    stub of each function and by the sections each class must have: a dataclass documents every
    field under ``Attributes:``, another class its constructor's parameters under ``Args:``."""
    stubs, problems = ['"""Stubs of the public API\'s functions: their docstrings, for ruff."""\n'], []
    for key, obj in _public_objects().items():
        doc = inspect.getdoc(obj) if inspect.isclass(obj) else obj.__doc__
        if not doc:
            problems.append(f"{key}: no docstring")
            continue
        if not inspect.isclass(obj):
            if inspect.signature(obj).parameters and "Args:" not in doc:
                problems.append(f"{key}: no Args section")
            if inspect.signature(obj).return_annotation not in (None, "None") and "Returns:" not in doc:
                problems.append(f"{key}: no Returns section")
            stubs.append(_stub(key, obj))
            continue
        if "\n\n" not in obj.__doc__.strip() and len(obj.__doc__.strip().splitlines()) > 1:
            problems.append(f"{key}: the summary is not one line followed by a blank line")
        if dataclasses.is_dataclass(obj):
            want = [f.name for f in dataclasses.fields(obj) if f.init and not f.name.startswith("_")]
            missing = [n for n in want if n not in _section(obj.__doc__, "Attributes")]
            if missing:
                problems.append(f"{key}: Attributes section lacks {missing}")
        else:
            init = [n for n, p in inspect.signature(obj).parameters.items()
                    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)] if "__init__" in vars(obj) else []
            missing = [n for n in init if n not in _section(obj.__doc__, "Args")]
            if missing:
                problems.append(f"{key}: Args section lacks {missing}")
    stub = tmp_path / "public_api_stubs.py"
    stub.write_text("\n\n".join(stubs), encoding="utf-8")
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "D", "--config",
                           'lint.pydocstyle.convention = "google"', "--output-format", "concise", str(stub)],
                          capture_output=True, text=True)
    if ruff.returncode:
        problems.append(ruff.stdout)
    assert not problems, "\n".join(problems)
