"""inspect_ai: the induced rubric set as an inspect ``@scorer`` that probes through inspect's own model API.

:func:`inspect_scorer` returns a scorer for an inspect ``Task``. For each sample it probes every
selected rubric with the prompts the rubrics were selected with (:func:`~rubric_induce.probing.api.build_messages`),
sends them through inspect's model API (``get_model(...).generate`` with ``logprobs`` and
``top_logprobs``), reads the answer distribution from the logprobs exactly as rubric-induce's
OpenAI-compatible backend does (first-token alternatives matched to the answer labels and summed;
answers missing from the top k are bounded, not failed), and scores the probes with the run's
:class:`~rubric_induce.scoring.scorer.RubricScorer`: NetSAT, the label at the selected threshold and,
when the run was calibrated, the calibrated prediction. The calls are inspect's, so its cache
(``cache=True``), batch mode (``--batch``), connection limits, retries and logs all apply; a
``mockllm/model`` with custom outputs runs it offline.

The :class:`Score` value is a dict: one entry per rubric id (its expected answer value on its own
scale), ``netsat``, ``label`` (0/1, with a threshold) and ``prediction`` (calibrated runs; a run
that calibrated several questions adds ``prediction_<aspect>`` for each of them); the
metrics are ``mean`` and ``stderr`` of every entry. ``metadata`` holds the answer distributions,
the drivers and the calibrated distribution (and every aspect's numbers under ``aspects``).

Which text is judged: with one probed field, the sample's output (``state.output.completion``);
with several, each field from the sample's ``metadata`` when present, the last missing one from
the output and another missing one from the input (see :func:`~rubric_induce.handoff.common.fill_fields`),
or whatever ``render(state)`` returns.

The grader: ``model`` (a name or an inspect ``Model``) when given, else the ``grader`` model role
when the eval binds one, else the model under evaluation. The artifact's probe settings are kept: estimator ``logprobs`` with the
score-only / rate-explain styles asks for one token; analyze-rate generates the analysis with
token logprobs and reads the answer after ``Rating:``; estimator ``sampling`` draws ``samples``
replies (for models without logprobs). ``max_example_tokens`` is applied as ``score`` applies it: each
text is cut to that many tokens of the run's own backend tokenizer (not inspect's), so the grader sees
the prompt the rubrics were selected with.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric_induce.backends.base import AnswerLogprobs, ChatResult, TokenLogprob
from rubric_induce.core.errors import MissingDependencyError, RubricInduceError
from rubric_induce.handoff.common import fill_fields
from rubric_induce.handoff.registry import FORMATS, HandoffFormat, refuse_pairwise
from rubric_induce.handoff.source import HandoffSource, SourceLike, load_source

__all__ = ["inspect_scorer", "export_inspect", "require_inspect", "InspectProbe"]

_SCORER_NAME = "rubric_induce"
#: Alternatives asked for at the answer position when the run set no ``[backend] top_logprobs``.
DEFAULT_TOP_LOGPROBS = 20
_SOURCES: dict[str, HandoffSource] = {}
_PAIRWISE_WHY = "an inspect scorer judges one sample's output, and a pairwise set compares two responses"


def require_inspect():
    """The ``inspect_ai`` module, or a :class:`MissingDependencyError` saying how to install it."""
    try:
        import inspect_ai
    except ImportError as exc:
        raise MissingDependencyError("inspect-ai", "the inspect_ai scorer", extra="inspect") from exc
    return inspect_ai


class _Replay:
    """A rubric-induce backend that answers from inspect outputs already generated.

    :func:`rubric_induce.probing.api.read_probe` reads a probe from a backend; replaying inspect's
    outputs through it keeps one reading of logprobs, analyses and samples for every backend.
    """

    kind = "inspect"
    supports_logprobs = True
    supports_assistant_prefix = False

    def __init__(self, model: str, outputs: Sequence[Any]) -> None:
        self.model = model
        self._outputs = list(outputs)

    def _next(self) -> Any:
        if not self._outputs:
            raise RubricInduceError("internal: more probe calls than inspect outputs")
        return self._outputs.pop(0)

    def answer_logprobs(self, messages, answers, options=None, *, assistant_prefix: str = "") -> AnswerLogprobs:
        from rubric_induce.backends.openai_compat import answer_keys

        output = self._next()
        first = _first_logprob(output, self.model)
        keys = answer_keys(answers)
        candidates = [(t.token, float(t.logprob)) for t in (first.top_logprobs or [])]
        if first.token not in {tok for tok, _ in candidates}:
            candidates.append((first.token, float(first.logprob)))
        out = dict.fromkeys(answers, -math.inf)
        for token, lp in candidates:
            answer = keys.get(token.strip())
            if answer is not None:
                out[answer] = _logaddexp(out[answer], min(lp, 0.0))
        finite = [lp for _, lp in candidates if lp > -math.inf]
        return AnswerLogprobs(out, bound=min(finite) if finite else None)  # unlisted answers lie below it

    def chat(self, messages, options=None) -> ChatResult:
        output = self._next()
        content = getattr(output.choices[0].logprobs, "content", None) if output.choices and output.choices[0].logprobs else None
        tokens = None
        if content:
            tokens = [TokenLogprob(t.token, float(t.logprob),
                                   {a.token: float(a.logprob) for a in (t.top_logprobs or [])}) for t in content]
        return ChatResult(output.completion, tokens=tokens)


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi = max(a, b)
    return hi + math.log(math.exp(a - hi) + math.exp(b - hi))


def _first_logprob(output: Any, model: str):
    choice = output.choices[0] if output.choices else None
    content = choice.logprobs.content if choice is not None and choice.logprobs is not None else None
    if not content:
        from rubric_induce.core.errors import LogprobsUnavailableError

        raise LogprobsUnavailableError(
            f"inspect model {model} returned no logprobs; use a provider that gives them (OpenAI, vLLM, "
            "llama.cpp, ...) or a run probed with the sampling estimator")
    return content[0]


class InspectProbe:
    """Probe one text with every rubric through an inspect ``Model`` and score it (async).

    Used by the scorer; public so it can score texts outside an inspect task too
    (``await InspectProbe(run, model).score(text)``). The probe options (style, estimator, samples,
    ``max_example_tokens``, the ``[backend] top_logprobs`` the run probed with, task, fields) are the
    run's, through :func:`~rubric_induce.scoring.options.resolve_scoring_options`; ``top_logprobs``
    overrides the run's value (a run without one asks for 20). The calls are those of
    :func:`~rubric_induce.probing.api.probe_call_plan`, as ``score`` makes them.
    """

    def __init__(self, source: SourceLike, model: Any = None, *, role: str | None = "grader",
                 judge: str | Sequence[str] | None = None, cache: Any = False,
                 top_logprobs: int | None = None) -> None:
        from rubric_induce.scoring.options import resolve_scoring_options

        self.source = load_source(source)
        self.scorer = self.source.load_scorer()
        self.model_spec, self.role = model, role
        self.cache = cache
        self.options = resolve_scoring_options(self.scorer, top_logprobs=top_logprobs, judge=judge)
        if self.options.probe.packing != "independent":
            raise RubricInduceError("this run probed its rubrics packed (probe.packing = \"packed\"); the inspect "
                                    "scorer asks one rubric a call, so its scores would differ from `score`: "
                                    "export a run probed independently, or score with rubric-induce itself")
        self.judge = self.options.judge

    @property
    def style(self) -> str:
        return self.options.probe.style

    @property
    def estimator(self) -> str:
        return self.options.probe.estimator

    @property
    def top_logprobs(self) -> int:
        """Alternatives asked for at the answer position: the run's ``[backend] top_logprobs``, else 20."""
        return self.options.top_logprobs or DEFAULT_TOP_LOGPROBS

    def _model(self):
        from inspect_ai.model import get_model

        if self.model_spec is not None:  # named by the user: it wins over any role binding
            return get_model(self.model_spec)
        return get_model(role=self.role)  # the role's model when the eval binds one, else the evaluated model

    def _configs(self) -> list[Any]:
        """The GenerateConfig of each call one probe makes (probing's own plan of calls)."""
        from inspect_ai.model import GenerateConfig

        # score-only / rate-explain with logprobs: one answer call, asking top_logprobs alternatives
        answer_call = self.estimator == "logprobs" and self.style != "analyze-rate"
        configs = []
        for call in self.options.calls(assistant_prefix=False):
            k = self.top_logprobs if answer_call else call.top_logprobs
            extra: dict[str, Any] = {"logprobs": True, "top_logprobs": k} if k else {}
            configs.append(GenerateConfig(temperature=call.temperature, max_tokens=call.max_tokens, seed=call.seed,
                                          **extra))
        return configs

    def _render(self, example: Any) -> tuple[str | None, int | None]:
        """The example's text as the probe prompts show it: cut to the run's ``max_example_tokens`` by the
        run's backend tokenizer (as ``score`` cuts it), else whole (None: build_messages renders it)."""
        limit = self.options.probe.max_example_tokens
        if limit is None:
            return None, None
        from rubric_induce.data.render import render_example_tokens

        backend = self.scorer.backend
        if backend is None:
            raise RubricInduceError(f"the run cuts each text to max_example_tokens = {limit} tokens of its backend, "
                                    "and this scorer has no backend to count them with")
        return render_example_tokens(example, self.scorer.fields, limit, backend.count_tokens,
                                     backend.truncate_tokens)

    async def probe(self, text: str | Mapping[str, str], example_id: str = "text"):
        """The :class:`~rubric_induce.data.probes.ProbeTable` of one text (every rubric)."""
        from dataclasses import replace

        from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser
        from inspect_ai.util import collect

        from rubric_induce.data.probes import ProbeTable
        from rubric_induce.probing.api import blank_record, build_messages, read_probe

        scorer, opts = self.scorer, self.options.probe
        example = replace(scorer.to_examples([text])[0], id=example_id)
        task = (scorer.task.resolved() if scorer.task is not None else None)
        model = self._model()
        kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
        configs = self._configs()
        shown, n_tokens = self._render(example)

        async def one(rubric):
            try:
                return await probe_one(rubric)
            except Exception as exc:  # returned, so the first failure is raised as itself, not as a group
                return exc

        async def probe_one(rubric):
            messages, template = build_messages(example, rubric, opts.style, fields=scorer.fields, task=task,
                                                text=shown)
            chat = [kinds[m["role"]](content=m["content"]) for m in messages]
            outputs = []
            for config in configs:
                outputs.append(await model.generate(chat, config=config, cache=self.cache))
            replay = _Replay(str(model), outputs)
            rec = blank_record(example, rubric, opts.style, opts.estimator, template.hash, n_tokens)
            return read_probe(replay, rec, messages, rubric.scale, opts, seed=0)

        records = await collect(*(one(r) for r in scorer.rubrics))
        for rec in records:
            if isinstance(rec, Exception):
                raise rec
        meta = {"style": opts.style, "estimator": opts.estimator, "backend": {"kind": "inspect", "model": str(model)}}
        return ProbeTable(list(records), meta), example

    async def score(self, text: str | Mapping[str, str], example_id: str = "text"):
        """Probe ``text`` and score it: a :class:`~rubric_induce.scoring.scorer.ScoreResult`."""
        table, example = await self.probe(text, example_id)
        failed = [r for r in table.records if r.error]
        if failed:
            raise RubricInduceError(f"probe of rubric {failed[0].rubric_id} failed on {example_id!r}: "
                                    f"{failed[0].error} ({len(failed)} of {len(table.records)} rubrics failed)")
        return self.scorer.score_probes(table, [example], judge=self.judge)[0]


@functools.lru_cache(maxsize=1)
def _registered() -> Callable[..., Any]:
    """The registered inspect scorer factory (created on first use, so inspect is imported lazily)."""
    require_inspect()
    from inspect_ai.scorer import Score, mean, scorer, stderr

    @scorer(metrics={"*": [mean(), stderr()]}, name=_SCORER_NAME)
    def rubric_induce(source: str, model: str | None = None, role: str | None = "grader",
                      judge: str | list[str] | None = None, cache: bool = False, top_logprobs: int | None = None):
        """Score with induced rubrics (rubric-induce): per-rubric expected answers, NetSAT, label, prediction."""
        src = _SOURCES.get(source) or load_source(source)
        render = _RENDERS.get(source)
        prober = InspectProbe(src, _MODELS.get(source, model), role=role, judge=judge, cache=cache,
                              top_logprobs=top_logprobs)

        async def score(state, target) -> Score:
            if render is not None:
                text = render(state)
            else:
                metadata = state.metadata if isinstance(state.metadata, Mapping) else {}
                text = fill_fields(prober.scorer.fields, state.output.completion, dict(metadata),
                                   input_text=state.input_text, where="the sample's metadata")
            res = await prober.score(text, example_id=f"{state.sample_id}/{state.epoch}")
            value: dict[str, float] = dict(res.expected)
            value["netsat"] = float(res.netsat)
            if res.label is not None:
                value["label"] = int(res.label)
            if res.prediction is not None:
                value["prediction"] = float(res.prediction)
            for q, numbers in (res.aspects or {}).items():  # several calibrated aspects: one entry each
                value[f"prediction_{q}"] = float(numbers["prediction"])
            from rubric_induce.handoff.promptfoo import grading_result

            explanation = grading_result(res, prober.scorer.rubrics, prober.scorer.threshold)["reason"]
            metadata = {"distributions": res.distributions, "drivers": res.drivers, "threshold": res.threshold,
                        "proba": res.proba, "scale": res.scale, "uncertainty": res.uncertainty,
                        "question": res.question, **({"aspects": res.aspects} if res.aspects else {})}
            return Score(value=value, answer=None if res.label is None else str(res.label),
                         explanation=explanation, metadata=metadata)

        return score

    return rubric_induce


_RENDERS: dict[str, Callable[[Any], Any]] = {}
_MODELS: dict[str, Any] = {}


def inspect_scorer(source: SourceLike, *, model: Any = None, role: str | None = "grader",
                   judge: str | Sequence[str] | None = None, cache: bool = False, top_logprobs: int | None = None,
                   render: Callable[[Any], str | Mapping[str, str]] | None = None):
    """An inspect_ai ``Scorer`` for a run folder, artifact, rubric file, scorer or rubric set.

    ``model``: the grader (a model name such as ``"openai/gpt-4.1-mini"`` or an inspect ``Model``);
    default: the ``role`` model (``grader``) when the eval binds one, else the model under
    evaluation. ``judge``: the calibrated judge(s) to predict (default: the mean over the run's
    judges). ``cache``: inspect's generate cache for the probes. ``top_logprobs``: alternatives asked for
    at the answer position; default: the run's ``[backend] top_logprobs`` (else 20), as ``score`` asks. ``render``:
    ``state -> text or {field: text}``, the text to judge (default: see the module docstring).
    """
    require_inspect()
    if isinstance(source, (str,)) or hasattr(source, "__fspath__"):
        key = str(source)
        src = load_source(source)
    else:
        src = load_source(source)
        key = f"<in-memory rubric set {id(src):x}>"
    refuse_pairwise(src, "inspect", _PAIRWISE_WHY)
    _SOURCES[key] = src
    if render is not None:
        _RENDERS[key] = render
    else:
        _RENDERS.pop(key, None)
    if model is not None and not isinstance(model, str):
        _MODELS[key] = model  # an inspect Model object: kept out of the logged scorer arguments
        model = None
    else:
        _MODELS.pop(key, None)
    judge_arg = list(judge) if isinstance(judge, (list, tuple)) else judge
    return _registered()(key, model=model, role=role, judge=judge_arg, cache=cache, top_logprobs=top_logprobs)


# Every value taken from the run (its path, the module's name) enters the module as a Python
# literal (repr), never raw into the docstring or a comment: a folder named ``x"""`` + newline +
# code must not become code.
_MODULE = '''"""inspect_ai scorer for the induced rubrics at SOURCE, below.

Written by `rubric-induce export --format inspect`.

Use it in a task (the grader: model=..., else the eval's "grader" model role, else the evaluated model):

    from {module} import rubric_scorer
    Task(dataset=..., solver=generate(), scorer=rubric_scorer(model="openai/gpt-4.1-mini"))

Each sample gets one Score: the expected answer of every rubric (keyed by rubric id), netsat,
label (NetSAT above the selected threshold THRESHOLD) and, for a calibrated run, prediction.
Needs rubric-induce with the inspect extra: pip install 'rubric-induce[inspect]'.
"""
from rubric_induce.handoff import inspect_scorer

SOURCE = {source!r}
THRESHOLD = {threshold!r}


def rubric_scorer(model=None, judge=None, cache=False, role="grader"):
    """The rubric-induce scorer ({n} rubrics{calibrated})."""
    return inspect_scorer(SOURCE, model=model, judge=judge, cache=cache, role=role)
'''


def export_inspect(source: SourceLike, path: str | Path) -> Path:
    """Write a small Python module whose ``rubric_scorer()`` returns :func:`inspect_scorer` for ``source``.

    The module points at the run folder (or rubric file) by absolute path: the scorer loads the
    rubrics, threshold and calibrator from there when the eval runs.
    """
    from rubric_induce.core.errors import DataError
    from rubric_induce.data.jsonl import atomic_write_text

    src = load_source(source)
    refuse_pairwise(src, "inspect", _PAIRWISE_WHY)
    if str((src.probe or {}).get("packing") or "independent") != "independent":
        raise DataError("this run probed its rubrics packed (probe.packing = \"packed\") and an inspect scorer asks "
                        "one rubric a call, so its scores would differ from the run's: use `rubric-induce score` "
                        "(or another --format), or export a run probed with packing = \"independent\"",
                        path=src.artifact, field="probe.packing")
    if src.artifact is not None:
        where = src.run_dir
    elif isinstance(source, (str, Path)):
        where = Path(source)
    else:
        raise DataError("an inspect scorer module points at its rubrics: export from a run folder, an artifact "
                        "or a rubric file (in Python, call inspect_scorer(...) directly)")
    where = where.resolve()
    path = Path(path)
    if path.suffix != ".py":
        raise DataError("the inspect scorer is a Python module: name the output file *.py", path=path)
    module = path.stem if path.stem.isidentifier() and path.stem.isascii() else "<this module>"
    threshold = None if src.threshold is None else round(float(src.threshold), 6)
    text = _MODULE.format(module=module, threshold=threshold, source=str(where), n=len(src.rubrics),
                          calibrated=", calibrated" if src.calibrated else "")
    return atomic_write_text(path, text)


def _export(source: Any, out: Path, **_: Any) -> str:
    export_inspect(source, out)
    return f"wrote {len(source.rubrics)} rubrics as an inspect_ai scorer module to {out}"


FORMATS.register("inspect", HandoffFormat("inspect", _export))
