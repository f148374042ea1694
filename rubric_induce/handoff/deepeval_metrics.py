"""deepeval: ``GEval`` metrics with ``Rubric`` score ranges, and a ``DAGMetric`` of binary judgements.

* :func:`deepeval_geval`: one ``GEval`` per rubric. Its answers (worst first: see
  :mod:`rubric_induce.handoff.common`) become deepeval ``Rubric`` entries whose ``score_range`` s
  split 0-10 into contiguous, non-overlapping integer ranges (:func:`score_ranges`), each with the
  answer's descriptor as ``expected_outcome``; ``evaluation_steps`` are given, so deepeval makes
  no extra call to write them. Scales of more than 11 answers cannot be split so and are refused.
* :func:`deepeval_dag`: a ``DAGMetric`` for a SAT/DSAT set: each rubric is a
  ``BinaryJudgementNode`` ("Is it true that ...?") and the verdicts lead to the next rubric, so a
  text walks one path of ``len(rubrics)`` judgements; the leaf's score is the binary NetSAT
  (+1 per SAT rubric met, -1 per DSAT rubric met) on 0-10, and the metric's threshold is where
  NetSAT passes the selected threshold. A tree has ``2**n - 1`` judgement nodes (deepeval runs
  a node once all its parents are done, so paths cannot merge), and 0-10 holds 11 NetSAT values:
  at most 10 rubrics.
* :func:`deepeval_model`: any rubric-induce backend (the embedded model, a llama.cpp or vLLM
  server, the fake backend in tests) as a deepeval ``DeepEvalBaseLLM``, with JSON-schema
  constrained replies where the backend can.
* :func:`deepeval_spec` / :func:`export_deepeval`: the same metrics as JSON (the CLI's
  ``--format deepeval``); :func:`deepeval_geval` and :func:`deepeval_dag` also build from it,
  and :func:`import_deepeval` reads its rubrics back.

What deepeval loses: GEval asks for one score per rubric (logprob weighting only with deepeval's
native OpenAI models), there is no calibration network, and the DAG sees each rubric as yes/no.
deepeval is imported lazily; :class:`~rubric_induce.core.errors.MissingDependencyError` says how to
install it.
"""
from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rubric_induce.backends import get_backend
from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.structured import parse_json_reply
from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.data import YES_NO, AnswerScale, Rubric, RubricSet
from rubric_induce.data.jsonl import atomic_write_text, read_json
from rubric_induce.handoff.common import (
    SHAPES_KEY,
    ladder,
    parse_rubric_line,
    rebuild_rubric,
    restore_shape,
    rubric_line,
    rubric_shapes,
)
from rubric_induce.handoff.llm_rubric_layout import rubric_question
from rubric_induce.handoff.registry import FORMATS, HandoffFormat, refuse_pairwise
from rubric_induce.handoff.source import SourceLike, check_ladder, level_texts, load_source

__all__ = ["FORMAT", "SPEC_FORMAT", "MAX_DAG_RUBRICS", "score_ranges", "deepeval_spec", "export_deepeval",
           "deepeval_geval", "deepeval_dag", "deepeval_model", "deepeval_spec_to_rubrics", "import_deepeval",
           "require_deepeval"]

FORMAT = "deepeval"
SPEC_FORMAT = "rubric-induce.deepeval"
MAX_DAG_RUBRICS = 10
_MAX_LEVELS = 11
_OUTCOME = re.compile(r"^(.*) \[answer (.+)\]$", re.S)


def require_deepeval():
    """The ``deepeval`` module, or a :class:`MissingDependencyError` saying how to install it."""
    try:
        import deepeval
    except ImportError as exc:
        raise MissingDependencyError("deepeval", "the deepeval hand-off", extra="deepeval") from exc
    return deepeval


def score_ranges(n: int) -> list[tuple[int, int]]:
    """``n`` contiguous, non-overlapping integer ranges covering 0-10, as even as integers allow."""
    if not 2 <= n <= _MAX_LEVELS:
        raise DataError(f"deepeval's 0-10 score ranges hold 2 to {_MAX_LEVELS} answers, not {n}")
    bounds = [round(k * 11 / n) for k in range(n + 1)]
    return [(bounds[k], bounds[k + 1] - 1) for k in range(n)]


def _default_params(fields: Sequence[str] | None) -> list[str]:
    if not fields or len(fields) == 1:
        return ["actual_output"]
    if len(fields) == 2:
        return ["input", "actual_output"]
    raise DataError(f"the rubrics judge {len(fields)} fields ({', '.join(fields)}); pass evaluation_params= "
                    "(deepeval test-case fields, e.g. ['input', 'context', 'actual_output'])")


def deepeval_spec(source: SourceLike, *, threshold: float = 0.5,
                  evaluation_params: Sequence[str] | None = None, dag: bool | None = None) -> dict[str, Any]:
    """The metrics as JSON: ``{"format", "geval": [GEval kwargs], "dag": {...} | None}``.

    ``threshold``: each GEval metric's pass mark on deepeval's 0-1 score. ``dag``: add the DAG
    (default: when every rubric is SAT or DSAT and there are at most :data:`MAX_DAG_RUBRICS`).
    """
    src = load_source(source)
    refuse_pairwise(src, FORMAT, "GEval and the DAG score one test case; deepeval's ArenaGEval picks a winner "
                                 "with deepeval's own LLM and criteria, not the Bradley-Terry head")
    check_ladder(src.rubrics, FORMAT, max_size=_MAX_LEVELS)
    params = list(evaluation_params) if evaluation_params else _default_params(src.fields)
    geval = []
    for r in src.rubrics:
        order = ladder(r, FORMAT)
        texts = level_texts(r)
        ranges = score_ranges(len(order))
        criteria = rubric_line(r) + "\n" + rubric_question(r)
        if r.polarity == "DSAT":
            criteria += "\nThis describes a flaw: the more it holds, the lower the score."
        geval.append({
            "name": r.id, "criteria": criteria, "threshold": float(threshold), "evaluation_params": params,
            "evaluation_steps": [f"Read the {' and '.join(p.replace('_', ' ') for p in params)}.",
                                 f"Decide: {rubric_question(r)}",
                                 "Pick the rubric range whose expected outcome fits best and give a score in it."],
            "rubric": [{"score_range": list(rng), "expected_outcome": f"{texts[i]} [answer {r.scale.labels[i]}]"}
                       for rng, i in zip(ranges, order)]})
    signed = all(r.polarity in ("SAT", "DSAT") for r in src.rubrics)
    if dag is None:
        dag = signed and len(src.rubrics) <= MAX_DAG_RUBRICS
    dag_doc = _dag_doc(src.rubrics, src.threshold, params) if dag else None
    return {"format": SPEC_FORMAT, "version": 1, "name": src.name, "geval": geval, "dag": dag_doc,
            SHAPES_KEY: rubric_shapes(src.rubrics)}


def _dag_doc(rubrics: Sequence[Rubric], threshold: float | None, params: list[str]) -> dict[str, Any]:
    unsigned = [r.id for r in rubrics if r.polarity not in ("SAT", "DSAT")]
    if unsigned:
        raise DataError(f"a deepeval DAG scores SAT/DSAT sets; rubric {unsigned[0]} has no polarity "
                        "(use the GEval metrics)", field=unsigned[0])
    if len(rubrics) > MAX_DAG_RUBRICS:
        raise DataError(f"a deepeval DAG holds at most {MAX_DAG_RUBRICS} rubrics (0-10 holds 11 NetSAT values "
                        f"and the tree has 2**n - 1 nodes); this set has {len(rubrics)}: use the GEval metrics")
    n_sat = sum(1 for r in rubrics if r.polarity == "SAT")
    n_dsat = len(rubrics) - n_sat
    lo, span = -n_dsat, max(1, len(rubrics))
    leaf = {s: round(10 * (s - lo) / span) for s in range(-n_dsat, n_sat + 1)}
    if threshold is None:
        metric_threshold = 0.5
    else:
        import math

        first_pass = math.floor(float(threshold) / 10.0) + 1  # smallest binary NetSAT with 10*s > threshold
        metric_threshold = 0.0 if first_pass < lo else 1.0 if first_pass > n_sat else leaf[first_pass] / 10
    return {"rubrics": [{"id": r.id, "polarity": r.polarity,
                         "criteria": rubric_question(replace(r, scale=YES_NO, levels=None)), "text": r.text} for r in rubrics],
            "leaf_scores": {str(s): v for s, v in leaf.items()}, "threshold": metric_threshold,
            "netsat_threshold": threshold, "evaluation_params": params}


def export_deepeval(source: SourceLike, path: str | Path, **options: Any) -> Path:
    """Write :func:`deepeval_spec` as JSON."""
    return atomic_write_text(path, json.dumps(deepeval_spec(source, **options), indent=2, ensure_ascii=False) + "\n")


def _spec(source: Any, **options: Any) -> dict[str, Any]:
    if isinstance(source, Mapping) and source.get("format") == SPEC_FORMAT:
        return dict(source)
    if isinstance(source, (str, Path)) and Path(source).suffix == ".json" and Path(source).is_file():
        doc = read_json(source)
        if isinstance(doc, Mapping) and doc.get("format") == SPEC_FORMAT:
            return dict(doc)
    return deepeval_spec(source, **options)


def _params(names: Sequence[str]) -> list[Any]:
    from deepeval.test_case import SingleTurnParams

    out = []
    for name in names:
        try:
            out.append(SingleTurnParams(name))
        except ValueError:
            allowed = ", ".join(p.value for p in SingleTurnParams)
            raise DataError(f"unknown deepeval test-case field {name!r}; choose from {allowed}") from None
    return out


def deepeval_geval(source: Any, *, model: Any = None, threshold: float = 0.5,
                   evaluation_params: Sequence[str] | None = None, **geval_options: Any) -> list[Any]:
    """One deepeval ``GEval`` per rubric (``source``: a run, rubric file, set, or a :func:`deepeval_spec`).

    ``model``: a deepeval model name or ``DeepEvalBaseLLM`` (e.g. :func:`deepeval_model`);
    ``geval_options`` go to ``GEval`` (``async_mode``, ``strict_mode``, ...).
    """
    require_deepeval()
    from deepeval.metrics import GEval
    from deepeval.metrics.g_eval import Rubric as DeepRubric

    spec = _spec(source, threshold=threshold, evaluation_params=evaluation_params, dag=False)
    return [GEval(name=g["name"], criteria=g["criteria"], evaluation_steps=list(g["evaluation_steps"]),
                  evaluation_params=_params(g["evaluation_params"]),
                  rubric=[DeepRubric(score_range=tuple(x["score_range"]), expected_outcome=x["expected_outcome"])
                          for x in g["rubric"]],
                  threshold=g["threshold"], model=model, **geval_options)
            for g in spec["geval"]]


def deepeval_dag(source: Any, *, model: Any = None, name: str = "rubric-induce NetSAT",
                 evaluation_params: Sequence[str] | None = None, **dag_options: Any) -> Any:
    """A deepeval ``DAGMetric`` walking the SAT/DSAT rubrics as yes/no judgements (see the module docstring)."""
    require_deepeval()
    from deepeval.metrics import DAGMetric
    from deepeval.metrics.dag import BinaryJudgementNode, DeepAcyclicGraph

    spec = _spec(source, evaluation_params=evaluation_params, dag=True)
    doc = spec.get("dag")
    if not doc:
        raise DataError("this deepeval spec has no DAG (its rubrics are not all SAT/DSAT, or too many)")
    params = _params(doc["evaluation_params"])
    rubrics = doc["rubrics"]
    leaf = {int(s): v for s, v in doc["leaf_scores"].items()}

    def node(depth: int, netsat: int) -> Any:
        r = rubrics[depth]
        judge = BinaryJudgementNode(criteria=r["criteria"], evaluation_params=params, label=r["id"])
        step = 1 if r["polarity"] == "SAT" else -1
        for verdict, s in ((True, netsat + step), (False, netsat)):
            if depth + 1 == len(rubrics):
                judge.add_verdict(verdict, score=leaf[s])
            else:
                judge.add_verdict(verdict, then=node(depth + 1, s))
        return judge

    dag = DeepAcyclicGraph(root_nodes=[node(0, 0)])
    return DAGMetric(name=name, dag=dag, model=model, threshold=doc["threshold"], **dag_options)


def deepeval_spec_to_rubrics(doc: Any, *, path: str | Path | None = None) -> RubricSet:
    """The rubrics of a :func:`deepeval_spec` (id, text, polarity, answer labels and descriptors)."""
    if not isinstance(doc, Mapping) or doc.get("format") != SPEC_FORMAT or not isinstance(doc.get("geval"), list):
        raise DataError(f"not a {SPEC_FORMAT} document", path=path, field="format")
    rubrics = []
    for i, g in enumerate(doc["geval"]):
        field = f"geval[{i}]"
        if not isinstance(g, Mapping) or not isinstance(g.get("criteria"), str):
            raise DataError("must be an object with a criteria string", path=path, field=field)
        parsed = parse_rubric_line((g["criteria"].splitlines() or [""])[0])
        if parsed is None:
            raise DataError("criteria does not start with 'Rubric <id> (<polarity>): <text>'", path=path,
                            field=f"{field}.criteria")
        rid, polarity, text = parsed
        if not isinstance(g.get("rubric") or [], list):
            raise DataError("must be a list of score ranges", path=path, field=f"{field}.rubric")
        if g.get("name") is not None and not isinstance(g["name"], str):
            raise DataError("must be a string (the rubric id)", path=path, field=f"{field}.name")
        outcomes = [str(x.get("expected_outcome", "")) for x in g.get("rubric") or [] if isinstance(x, Mapping)]
        if polarity == "DSAT":
            outcomes = outcomes[::-1]
        parts = [_OUTCOME.match(o) for o in outcomes]
        labels = [m.group(2) if m else "" for m in parts]
        rid = str(g.get("name") or rid)
        if len(labels) >= 2 and len(set(labels)) == len(labels) and all(labels):
            numeric = all(lab.lstrip("-").isdigit() for lab in labels)
            values = tuple(float(lab) for lab in labels) if numeric else tuple(float(k + 1) for k in range(len(labels)))
            rubrics.append(rebuild_rubric(rid, text, polarity, scale=AnswerScale(tuple(labels), values),
                                          levels=[m.group(1) for m in parts], source_format=FORMAT))
        else:
            rubrics.append(rebuild_rubric(rid, text, polarity, source_format=FORMAT))
    shapes = doc.get(SHAPES_KEY)
    rubrics = [restore_shape(r, shapes, path=path, field=SHAPES_KEY) for r in rubrics]
    return RubricSet(rubrics, {"source_format": FORMAT})


def import_deepeval(path: str | Path) -> RubricSet:
    """Read the rubrics of a deepeval spec file written by :func:`export_deepeval`."""
    return deepeval_spec_to_rubrics(read_json(path), path=path)


# ----------------------------------------------------------------------------- model adapter
@functools.lru_cache(maxsize=1)
def _model_class() -> type:
    require_deepeval()
    from deepeval.models import DeepEvalBaseLLM

    class RubricInduceLLM(DeepEvalBaseLLM):
        """A rubric-induce backend as a deepeval model: ``generate(prompt, schema=None)``."""

        def __init__(self, backend: Any, *, max_tokens: int = 512, temperature: float = 0.0) -> None:
            self.backend, self.max_tokens, self.temperature = backend, int(max_tokens), float(temperature)
            super().__init__(model=f"rubric-induce/{getattr(backend, 'kind', 'backend')}/{getattr(backend, 'model', '')}")

        def load_model(self, *args: Any, **kwargs: Any) -> Any:
            return self.backend

        def generate(self, prompt: str, schema: Any = None, **kwargs: Any) -> Any:
            json_schema = schema.model_json_schema() if schema is not None else None
            reply = self.backend.chat([{"role": "user", "content": str(prompt)}],
                                      CallOptions(temperature=self.temperature, max_tokens=self.max_tokens,
                                                  json_schema=json_schema, seed=0))
            if schema is None:
                return reply.text
            return schema.model_validate(parse_json_reply(reply.text))

        async def a_generate(self, prompt: str, schema: Any = None, **kwargs: Any) -> Any:
            return await asyncio.to_thread(self.generate, prompt, schema)

        def get_model_name(self, *args: Any, **kwargs: Any) -> str:
            return self.name

    return RubricInduceLLM


def deepeval_model(backend: Any, **options: Any) -> Any:
    """A ``DeepEvalBaseLLM`` that answers with a rubric-induce backend (an object or a spec such as
    ``"local"``); ``options``: ``max_tokens``, ``temperature``."""
    if isinstance(backend, str):
        backend = get_backend(backend)
    return _model_class()(backend, **options)


def _export(source: Any, out: Path, **_: Any) -> str:
    export_deepeval(source, out)
    return (f"wrote {len(source.rubrics)} rubrics as deepeval GEval metrics (and a DAG where the set allows one) "
            f"to {out}")


def _detect(doc: Any) -> bool:
    return isinstance(doc, Mapping) and doc.get("format") == SPEC_FORMAT


FORMATS.register("deepeval", HandoffFormat("deepeval", _export, from_doc=deepeval_spec_to_rubrics, detect=_detect))
