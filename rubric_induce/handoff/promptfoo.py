"""promptfoo: the rubric set as ``llm-rubric`` assertions, plus a ``python`` assertion for the exact score.

:func:`promptfoo_config` builds a config block (``description`` + ``defaultTest``) to merge into a
``promptfooconfig.yaml``; :func:`export_promptfoo` writes it as YAML. Each rubric becomes one
``llm-rubric`` assertion: ``value`` is the rubric as a grading instruction with one line per
answer, scored 0.0 (worst) to 1.0 (best, i.e. the flaw absent for a DSAT rubric), ``metric`` is
the rubric id (promptfoo reports it as a named score), ``weight`` 1 and ``threshold`` the
per-assertion pass mark. promptfoo renders every assertion value with Nunjucks: a ``{{``, ``{%``
or ``{#`` in a rubric text is written as an expression that prints it (``{{ "{{" }}``), so the
grader sees the text itself. ``defaultTest.threshold`` is the selected NetSAT threshold carried onto
promptfoo's weighted mean (see :mod:`rubric_induce.handoff.common`), so a test passes when the
graded rubrics would put NetSAT above it.

What ``llm-rubric`` loses: promptfoo's grader writes one score, so there are no logprobs (no
answer distribution, no expected value), no calibration network and no judge; its grading
prompt is promptfoo's, not the one the rubrics were selected with. A run folder therefore also
gets a ``python`` assertion (``metric: rubric-induce``; weight 0, which promptfoo treats as
informational, unless ``decide="scorer"`` makes it the one that decides) that calls
:func:`promptfoo_assert`: the run's :class:`~rubric_induce.scoring.scorer.RubricScorer` with
logprob probes, NetSAT, the label and the calibrated prediction, exactly as ``rubric-induce
score`` gives them. promptfoo runs it with the Python that has rubric-induce installed
(``PROMPTFOO_PYTHON``).

:func:`import_promptfoo` reads the ``llm-rubric`` assertions back (ids from ``metric``, text and
polarity from the first line of ``value``, the answer descriptors from its score lines).
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.textfiles import parse_json, parse_yaml
from rubric_induce.data import AnswerScale, Rubric, RubricSet
from rubric_induce.data.jsonl import atomic_write_text, read_text
from rubric_induce.handoff.checks import check_text
from rubric_induce.handoff.common import (
    SHAPES_KEY,
    fill_fields,
    from_one_line,
    graded_prompt,
    mean_threshold,
    nunjucks_escape,
    nunjucks_unescape,
    parse_rubric_line,
    rebuild_rubric,
    restore_shape,
    rubric_shapes,
)
from rubric_induce.handoff.registry import FORMATS, HandoffFormat
from rubric_induce.handoff.source import SourceLike, check_ladder, load_source

__all__ = ["FORMAT", "PYTHON_METRIC", "PAIRWISE_KEY", "promptfoo_config", "promptfoo_yaml", "export_promptfoo",
           "promptfoo_to_rubrics", "import_promptfoo", "promptfoo_assert", "pairwise_grading_result"]

FORMAT = "promptfoo"
PYTHON_METRIC = "rubric-induce"
#: ``defaultTest.metadata`` key marking a pairwise set's block (import gives back a set marked pairwise).
PAIRWISE_KEY = "rubric-induce-pairwise"
_SCORE_LINE = re.compile(r"^Score ([01]\.\d+): (.*)$")


def promptfoo_config(source: SourceLike, *, assertion_threshold: float = 0.5, python_assert: bool | None = None,
                     provider: str | None = None, backend: str | None = None,
                     decide: str = "rubrics") -> dict[str, Any]:
    """The config block: ``{"description", "defaultTest": {"threshold", "assert": [...]}}``.

    ``python_assert``: add the exact-score ``python`` assertion (default: when ``source`` is a run
    or artifact, which it needs). ``provider``: promptfoo grader for the ``llm-rubric`` assertions
    (``defaultTest.options.provider``; default: promptfoo's own). ``backend``: the rubric-induce
    backend spec the python assertion probes with (default: the run's). ``decide``: what passes a
    test. ``"rubrics"``: the ``llm-rubric`` assertions (weight 1) against ``defaultTest.threshold``;
    the python assertion has weight 0, which promptfoo treats as informational (its score, NetSAT
    and prediction show in the component result). ``"scorer"``: the python assertion (weight 1,
    pass = NetSAT above the selected threshold) and the ``llm-rubric`` assertions informational.
    """
    if decide not in ("rubrics", "scorer"):
        raise DataError(f"decide must be 'rubrics' or 'scorer', got {decide!r}")
    src = load_source(source)
    check_ladder(src.rubrics, FORMAT)
    if src.pairwise:
        return _pairwise_config(src, assertion_threshold, provider, backend)
    if not 0.0 <= assertion_threshold <= 1.0:
        raise DataError(f"assertion_threshold must lie in [0, 1], got {assertion_threshold}")
    rubric_weight = 1 if decide == "rubrics" else 0
    asserts: list[dict[str, Any]] = [
        {"type": "llm-rubric", "metric": r.id, "weight": rubric_weight, "threshold": assertion_threshold,
         "value": nunjucks_escape(graded_prompt(r, FORMAT))} for r in src.rubrics]
    if python_assert is None:
        python_assert = src.run_dir is not None or decide == "scorer"
    if decide == "scorer" and not python_assert:
        raise DataError("decide='scorer' needs the python assertion")
    if python_assert:
        if src.run_dir is None:
            raise DataError("the python assertion calls the run's scorer: export from a run folder or an "
                            "artifact (or pass python_assert=False)")
        call = f"run={str(src.run_dir.resolve())!r}" + (f", backend={backend!r}" if backend else "")
        asserts.append({"type": "python", "metric": PYTHON_METRIC, "weight": 1 - rubric_weight,
                        "value": nunjucks_escape("from rubric_induce.handoff.promptfoo import promptfoo_assert\n"
                                                 f"return promptfoo_assert(output, context, {call})\n")})
    default_test: dict[str, Any] = {}
    if provider:
        default_test["options"] = {"provider": provider}
    threshold = mean_threshold(src.rubrics, src.threshold) if decide == "rubrics" else None
    if threshold is not None:
        default_test["threshold"] = round(threshold, 6)
    default_test["assert"] = asserts
    # what the llm-rubric text cannot carry (scale values, descriptions, aspect), for import
    default_test["metadata"] = {SHAPES_KEY: rubric_shapes(src.rubrics)}
    name = src.name or "rubric set"
    return {"description": f"{name}: {len(src.rubrics)} induced rubrics (rubric-induce)",
            "defaultTest": default_test}


def _pairwise_config(src: Any, assertion_threshold: float, provider: str | None,
                     backend: str | None) -> dict[str, Any]:
    """A pairwise set's block: promptfoo's ``max-score`` picks, among a test's outputs (one per prompt or
    provider), the one whose python assertion scores highest; that assertion scores each output with
    the run's Bradley-Terry strength (through :func:`promptfoo_assert`, as ``rubric-induce score``), so
    of two outputs it picks the one :meth:`RubricScorer.compare
    <rubric_induce.scoring.scorer.RubricScorer.compare>` prefers (a tie: the first). The ``llm-rubric``
    assertions are informational (weight 0, and weight 0 in ``max-score``)."""
    if src.run_dir is None:
        raise DataError("a pairwise set goes to promptfoo with its run: the python assertion scores with the "
                        "run's Bradley-Terry head; export from the run folder (or its artifact.json)")
    if src.head() is None:
        raise DataError("this pairwise run has no Bradley-Terry head (calibrate disabled), so promptfoo has no "
                        "strength to pick the better output by; calibrate the run, or use rubric-induce compare",
                        path=src.artifact, field="pairwise_head")
    if src.pair_feature != "difference":
        raise DataError(f"this pairwise run's Bradley-Terry head reads the pairwise probe (select.pair_feature = "
                        f"{src.pair_feature!r}), which asks both responses together, so no output has a strength of "
                        "its own for promptfoo's max-score; use rubric-induce compare",
                        path=src.artifact, field="pair_feature")
    if not 0.0 <= assertion_threshold <= 1.0:
        raise DataError(f"assertion_threshold must lie in [0, 1], got {assertion_threshold}")
    call = f"run={str(src.run_dir.resolve())!r}" + (f", backend={backend!r}" if backend else "")
    asserts: list[dict[str, Any]] = [
        {"type": "llm-rubric", "metric": r.id, "weight": 0, "threshold": assertion_threshold,
         "value": nunjucks_escape(graded_prompt(r, FORMAT))} for r in src.rubrics]
    asserts.append({"type": "python", "metric": PYTHON_METRIC, "weight": 1,
                    "value": nunjucks_escape("from rubric_induce.handoff.promptfoo import promptfoo_assert\n"
                                             f"return promptfoo_assert(output, context, {call})\n")})
    asserts.append({"type": "max-score", "value": {"method": "average", "weights": {"python": 1, "llm-rubric": 0}}})
    default_test: dict[str, Any] = {"options": {"provider": provider}} if provider else {}
    default_test["assert"] = asserts
    default_test["metadata"] = {SHAPES_KEY: rubric_shapes(src.rubrics), PAIRWISE_KEY: True}
    name = src.name or "rubric set"
    return {"description": f"{name}: {len(src.rubrics)} induced rubrics, a pairwise set (rubric-induce): "
                           "max-score picks the output with the highest Bradley-Terry strength",
            "defaultTest": default_test}


def promptfoo_yaml(config: Mapping[str, Any]) -> str:
    """YAML text of a config block (JSON, which is valid YAML, when PyYAML is not installed)."""
    header = ("# Generated by `rubric-induce export --format promptfoo`: merge into promptfooconfig.yaml\n"
              "# (add your prompts, providers and tests). Scores run worst 0.0 -> best 1.0 per rubric.\n")
    try:
        import yaml
    except ImportError:
        return header + json.dumps(dict(config), indent=2, ensure_ascii=False) + "\n"

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, value: str):
        # YAML reads NEL / LS / PS (and CR) in a block or plain scalar as a line break: quote those
        # (double-quoted scalars escape them), so every string reads back as written
        style = '"' if any(c in value for c in "\r\x85\u2028\u2029") else "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return header + yaml.dump(dict(config), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def export_promptfoo(source: SourceLike, path: str | Path, **options: Any) -> Path:
    """Write :func:`promptfoo_config` as YAML to ``path``."""
    return atomic_write_text(path, promptfoo_yaml(promptfoo_config(source, **options)))


def _load_yaml_or_json(path: Path) -> Any:
    text = read_text(path)  # not UTF-8: an error naming the line, not a traceback
    try:
        import yaml  # noqa: F401 (parse_yaml needs it)
    except ImportError:
        # what promptfoo_yaml writes without PyYAML: comment lines (blanked, so lines keep their numbers), then JSON
        body = "\n".join("" if ln.lstrip().startswith("#") else ln for ln in text.splitlines())
        try:
            json.loads(body)
        except json.JSONDecodeError:
            raise DataError("reading a YAML promptfoo config needs PyYAML (pip install pyyaml)", path=path) from None
        except ValueError:
            pass  # an integer too long to read: parse_json names its line and field

        return parse_json(body, path=path)

    return parse_yaml(text, path=path)  # aliases bounded before they expand; bad scalars named


def promptfoo_to_rubrics(doc: Any, *, path: str | Path | None = None) -> RubricSet:
    """The rubrics of the ``llm-rubric`` assertions in a promptfoo config (``defaultTest`` and ``tests``).

    An assertion written by :func:`export_promptfoo` gives back its rubric's id, text, polarity
    and answer descriptors (on a 1..n scale); a hand-written one becomes a polarity-free rubric
    with its ``value`` as the text and ``metric`` (when given) as the id.
    """
    if not isinstance(doc, Mapping):
        raise DataError("a promptfoo config must be a mapping", path=path)
    found: list[tuple[str, Mapping[str, Any]]] = []
    blocks = [("defaultTest", doc.get("defaultTest"))]
    tests = doc.get("tests")
    if isinstance(tests, list):
        blocks += [(f"tests[{i}]", t) for i, t in enumerate(tests)]
    for where, block in blocks:
        if isinstance(block, Mapping) and isinstance(block.get("assert"), list):
            for j, a in enumerate(block["assert"]):
                if isinstance(a, Mapping) and a.get("type") == "llm-rubric":
                    found.append((f"{where}.assert[{j}]", a))
    if not found:
        raise DataError("no llm-rubric assertions in this promptfoo config", path=path)
    rubrics: list[Rubric] = []
    seen: dict[str, str] = {}
    for field, a in found:
        value = a.get("value")
        if not isinstance(value, str) or not value.strip():
            raise DataError("an llm-rubric value must be a non-empty string", path=path, field=f"{field}.value")
        rubric = _rubric_from_value(nunjucks_unescape(value), a.get("metric"))
        if rubric.id in seen:
            raise DataError(f"rubric id {rubric.id!r} is already used by {seen[rubric.id]}", path=path,
                            field=f"{field}.metric")
        seen[rubric.id] = field
        rubrics.append(rubric)
    default = doc.get("defaultTest")
    meta = default.get("metadata") if isinstance(default, Mapping) else None
    shapes = meta.get(SHAPES_KEY) if isinstance(meta, Mapping) else None
    rubrics = [restore_shape(r, shapes, path=path, field=f"defaultTest.metadata.{SHAPES_KEY}") for r in rubrics]
    manifest: dict[str, Any] = {"source_format": FORMAT}
    if isinstance(meta, Mapping) and meta.get(PAIRWISE_KEY) is True:
        manifest["pairwise"] = True  # a pairwise set stays one: formats that cannot hold it refuse it
    return RubricSet(rubrics, manifest)


def _rubric_from_value(value: str, metric: Any) -> Rubric:
    lines = value.strip().splitlines()
    parsed = parse_rubric_line(lines[0].strip())
    given = metric if isinstance(metric, str) and metric else None
    if parsed is None:
        rubric = Rubric.create(" ".join(value.split()), None, provenance={"method": "manual", "source_format": FORMAT})
        return rubric if given is None else replace(rubric, id=given)
    rid, polarity, text = parsed
    levels = [from_one_line(m.group(2)) for m in (_SCORE_LINE.match(ln.strip()) for ln in lines[1:]) if m]
    if polarity == "DSAT":
        levels = levels[::-1]  # written worst (fully true) first
    if len(levels) < 2:
        return rebuild_rubric(given or rid, text, polarity, source_format=FORMAT)
    return rebuild_rubric(given or rid, text, polarity, scale=AnswerScale.likert(1, len(levels)), levels=levels,
                          source_format=FORMAT)


def import_promptfoo(path: str | Path) -> RubricSet:
    """Read the rubrics of a promptfoo config file (YAML or JSON)."""
    path = Path(path)
    return promptfoo_to_rubrics(check_text(_load_yaml_or_json(path), path=path), path=path)


# ----------------------------------------------------------------------------- python assertion
_SCORERS: dict[tuple[str, str | None], Any] = {}
_LOCK = threading.Lock()


def _scorer(run: str, backend: str | None):
    from rubric_induce.scoring.scorer import RubricScorer

    key = (str(Path(run).resolve()), backend)
    with _LOCK:
        if key not in _SCORERS:
            _SCORERS[key] = RubricScorer.load(run, backend=backend)
        return _SCORERS[key]


def promptfoo_assert(output: Any, context: Mapping[str, Any] | None, *, run: str | Path,
                     backend: str | None = None, judge: str | None = None) -> dict[str, Any]:
    """promptfoo's ``python`` assertion: score ``output`` with the run's scorer; a GradingResult dict.

    ``score``: the calibrated prediction mapped onto [0, 1] by its answer scale when the run has a
    calibrator, else the mean oriented rubric score (NetSAT's place between its ends).
    ``pass``: NetSAT above the selected threshold (``score >= 0.5`` without one).
    ``namedScores``: ``netsat`` and, when calibrated, ``prediction`` (on the judges' scale), and
    ``prediction_<aspect>`` for each other aspect of a run that calibrated several questions.
    Multi-field rubric sets read their other fields from the test's ``vars`` (see
    :func:`~rubric_induce.handoff.common.fill_fields`).
    """
    scorer = _scorer(str(run), backend)
    ctx = dict(context or {})
    variables = ctx.get("vars") if isinstance(ctx.get("vars"), Mapping) else {}
    prompt = ctx.get("prompt") if isinstance(ctx.get("prompt"), str) else None
    text = fill_fields(scorer.fields, "" if output is None else str(output), dict(variables),
                       input_text=prompt, where="the test's vars")
    empty = [f for f, v in text.items() if not v.strip()] if isinstance(text, dict) else [] if text.strip() else ["output"]
    if empty:  # ordinary model output that cannot be scored: this test fails, the others are scored
        return {"pass": False, "score": 0.0, "reason": f"rubric-induce: cannot score an empty {empty[0]!r}"}
    res = scorer.score([text], judge=judge)[0]
    if scorer.pairwise_head is not None:
        return pairwise_grading_result(res)
    return grading_result(res, scorer.rubrics, scorer.threshold)


def pairwise_grading_result(res: Any) -> dict[str, Any]:
    """A pairwise run's result for one output: ``score`` = logistic(strength), which orders outputs as
    the Bradley-Terry head does (``max-score`` picks the strongest); ``pass`` is left to ``max-score``."""
    import math

    if res.strength is None:
        return {"pass": False, "score": 0.0, "reason": "rubric-induce: " + ("; ".join(res.errors) or "no strength")}
    s = float(res.strength)
    score = 1.0 / (1.0 + math.exp(-s)) if s >= 0 else math.exp(s) / (1.0 + math.exp(s))
    return {"pass": True, "score": score,
            "reason": f"Bradley-Terry strength {s:.3f} (P(this > other) grows with the strength difference)",
            "namedScores": {"strength": s, "netsat": float(res.netsat)}}


def grading_result(res: Any, rubrics: Any, threshold: float | None) -> dict[str, Any]:
    """A :class:`~rubric_induce.scoring.scorer.ScoreResult` as promptfoo's GradingResult dict."""
    if res.errors and res.netsat is None:
        return {"pass": False, "score": 0.0, "reason": "rubric-induce: " + "; ".join(res.errors)}
    n = len(rubrics)
    n_dsat = sum(1 for r in rubrics if r.polarity == "DSAT")
    mean = (res.netsat / 10.0 + n_dsat) / n
    named = {"netsat": res.netsat}
    score = mean
    reason = f"NetSAT {res.netsat:.2f}"
    if threshold is not None:
        reason += f" {'>' if res.label else '<='} threshold {threshold:.2f}"
    if res.prediction is not None and res.scale:
        lo, hi = min(res.scale), max(res.scale)
        score = (res.prediction - lo) / (hi - lo) if hi > lo else 0.0
        named["prediction"] = res.prediction
        reason += f"; calibrated {res.question or 'prediction'} {res.prediction:.2f} ± {res.uncertainty:.2f}"
    for q, numbers in list((res.aspects or {}).items())[1:]:  # the other calibrated aspects, one named score each
        named[f"prediction_{q}"] = numbers["prediction"]
        reason += f"; {q} {numbers['prediction']:.2f}"
    passed = bool(res.label) if res.label is not None else score >= 0.5
    top = [d for d in res.drivers[:3]]
    if top:
        reason += "; strongest: " + "; ".join(f"{d['polarity'] or ''} {d['text'][:60]!r}" for d in top)
    return {"pass": passed, "score": float(min(1.0, max(0.0, score))), "reason": reason,
            "namedScores": {k: float(v) for k, v in named.items()}}


def _export(source: Any, out: Path, *, model: str | None = None, decide: str = "rubrics", **_: Any) -> str:
    export_promptfoo(source, out, provider=model, decide=decide)
    if source.pairwise:
        return (f"wrote {len(source.rubrics)} rubrics of a pairwise set to {out}: a python assertion scoring each "
                "output's Bradley-Terry strength and max-score picking the strongest (llm-rubric informational)")
    what = "promptfoo llm-rubric assertions" + (" and a python assertion" if source.run_dir else "")
    return f"wrote {len(source.rubrics)} rubrics as {what} to {out}"


FORMATS.register("promptfoo", HandoffFormat("promptfoo", _export, read=import_promptfoo, suffixes=(".yaml", ".yml")))
