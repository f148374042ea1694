"""A probe job's plan, before any call: how many calls, how many the cache holds, tokens, cost.

Probing is one LLM call per (text, rubric) and the whole cost of a run. :func:`plan_probes` lists
the job's calls (:func:`~rubric_induce.probing.calls.probe_calls`: exactly those
:func:`~rubric_induce.probing.api.probe` makes), looks each key up in the call cache, counts the
prompt tokens of the calls still to make with the backend's tokenizer
(:meth:`~rubric_induce.backends.base.Backend.count_prompt_tokens`) and splits them into

* the **shared prefix** of each text: the longest start common to all its probes' prompts
  (the instructions and the text itself; counted once per text), and
* the **unique suffix** of each probe (the rubric, its scale; everything after the prefix),

then prices them three ways from :mod:`~rubric_induce.backends.pricing`: plain calls, with prompt
caching (each text's first call pays the prefix in full, the others at the cached-input rate;
OpenAI caches only prompts of 1,024 tokens or more, in 128-token steps, and the plan follows
that rule for kind ``openai``) and through a batch API.

Completion tokens: 1 per answer-logprobs call on a served API (``max_tokens=1``), 0 on the
embedded model (it reads the answer row); generated replies (the sampling estimator, the
analyze-rate style, packed calls) count their ``max_tokens``, an upper bound. A plan of a score-only
logprobs job also prices the job the other way (``probe.packing`` independent or packed) side by
side (``ProbePlan.alternative``; not for a job with the pairwise probe, which is never packed; its
order texts, two per pair, are priced like any other text). The plan refuses, before any
call, a logprobs estimator on a model known to return none (:func:`check_logprobs_support`).
"""
from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

from rubric_induce.backends.base import Backend
from rubric_induce.backends.pricing import ModelPrice, cost, load_prices, price_of
from rubric_induce.backends.redact import redact_obj
from rubric_induce.core.errors import DataError
from rubric_induce.core.task import TaskParams
from rubric_induce.data.jsonl import write_json
from rubric_induce.data.model import Example, Rubric
from rubric_induce.probing.calls import ProbeCall, probe_calls, probe_params, unwrap_backend
from rubric_induce.probing.pairwise import is_order_example

__all__ = ["ProbePlan", "plan_probes", "plan_from_calls", "check_logprobs_support", "NO_LOGPROBS_MODELS",
           "openai_cached_tokens"]

#: Models known to return no logprobs (OpenAI's reasoning models and others that refuse them):
#: patterns on the model name without provider prefix or date.
NO_LOGPROBS_MODELS: tuple[str, ...] = (
    r"gpt-5(\.\d+)?(-(mini|nano|pro|codex))?",  # the gpt-5 family (gpt-5-chat-latest is not a reasoning model)
    r"o1(-(mini|preview|pro))?",
    r"o3(-(mini|pro|deep-research))?",
    r"o4-mini(-deep-research)?",
    r"codex-mini(-latest)?",
    r"deepseek-reasoner",
)
_NO_LOGPROBS = re.compile(r"(?:" + "|".join(NO_LOGPROBS_MODELS) + r")(-20\d\d-\d\d-\d\d)?", re.I)


def check_logprobs_support(backend_or_model: Backend | str, estimator: str, *, source: str | None = None,
                           field_name: str = "probe.estimator") -> None:
    """Refuse the logprobs estimator on a backend or model known to return no logprobs.

    Raises :class:`~rubric_induce.core.errors.DataError` naming the sampling estimator (``--estimator
    sampling`` / ``probe.estimator = "sampling"``); does nothing for the sampling estimator.
    """
    if estimator != "logprobs":
        return
    if isinstance(backend_or_model, Backend):
        inner = unwrap_backend(backend_or_model)
        model, label = inner.model, f"{inner.kind}/{inner.model}"
        if not inner.supports_logprobs:
            raise DataError(f"backend {label} gives no logprobs; use the sampling estimator "
                            "(--estimator sampling --samples N, or probe.estimator = \"sampling\")",
                            path=source, field=field_name)
    else:
        model = label = str(backend_or_model)
    base = model.split("/")[-1].split("@")[0].strip()
    if _NO_LOGPROBS.fullmatch(base):
        raise DataError(f"model {base!r} is a reasoning model that returns no logprobs, so the logprobs "
                        "estimator cannot read its answer distribution; use the sampling estimator "
                        "(--estimator sampling --samples N, or probe.estimator = \"sampling\"), or a model "
                        "with logprobs (e.g. gpt-4.1-mini)", path=source, field=field_name)


def openai_cached_tokens(prefix_tokens: int) -> int:
    """Prompt tokens OpenAI's automatic prompt caching can serve from a shared prefix: none below
    1,024 tokens, then 1,024 plus whole 128-token steps."""
    if prefix_tokens < 1024:
        return 0
    return 1024 + ((prefix_tokens - 1024) // 128) * 128


@dataclass
class ProbePlan:
    """What a probe job will cost, computed without a call. Token counts are of the calls still to make."""

    backend: dict[str, Any]
    model: str
    n_examples: int
    n_rubrics: int
    calls: int
    cached: int  # calls the cache answers: rows already there, and repeats of an identical call
    dependent: int
    prompt_tokens: int
    shared_prefix_tokens: int
    unique_suffix_tokens: int
    cacheable_tokens: int
    completion_tokens: int
    cost_usd: dict[str, float | None]
    price: dict[str, float | None] | None
    token_count: str
    params: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    #: The same job probed the other way (``probe.packing`` independent <-> packed), priced alike:
    #: ``packing``, ``calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``; None when not computed.
    alternative: dict[str, Any] | None = None
    #: The measured wall-time estimate (:meth:`rubric_induce.probing.timing.TimePlan.to_dict`), when one was made.
    time: dict[str, Any] | None = None
    #: The calls still to make, each once, in the probe stage's order (not saved: the time estimate of
    #: :mod:`rubric_induce.probing.timing` times a few of them and sizes the rest).
    pending: list[ProbeCall] = field(default_factory=list, repr=False, compare=False)
    #: Prompt tokens of each pending call, by text in the stage's order (not saved).
    text_sizes: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def to_make(self) -> int:
        return self.calls - self.cached

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dc_fields(self) if f.name not in _NOT_SAVED}
        return {"format": "rubric-induce-probe-plan", "format_version": 1, **copy.deepcopy(data),
                "to_make": self.to_make}

    def save(self, path: str | Path) -> Path:
        """The plan as JSON (credentials in the backend's URL redacted)."""
        return write_json(Path(path), redact_obj(self.to_dict()))

    def format(self) -> str:
        """The plan as a short text table, for a terminal."""
        def usd(v: float | None) -> str:
            return "unknown (no price for this model: add it under [prices] or --prices FILE)" if v is None \
                else f"${v:,.4f}"

        lines = [
            f"probe plan: {self.n_examples} texts x {self.n_rubrics} rubrics on {self.backend.get('kind')}/{self.model}"
            f" ({self.params.get('style')}, {self.params.get('estimator')})",
            f"  calls:              {self.calls:>12,}  ({self.cached:,} in the cache, {self.to_make:,} to make"
            + (f"; {self.dependent:,} depend on earlier replies" if self.dependent else "") + ")",
            f"  prompt tokens:      {self.prompt_tokens:>12,}  (tokens counted by: {self.token_count})",
            f"    shared prefix:    {self.shared_prefix_tokens:>12,}  (each text's prefix common to its probes, "
            "counted once; every probe's prompt repeats it)",
            f"    unique suffix:    {self.unique_suffix_tokens:>12,}  (the rest of every probe's prompt)",
            f"    cacheable:        {self.cacheable_tokens:>12,}  (prefix tokens a provider's prompt cache can serve)",
            f"  completion tokens:  {self.completion_tokens:>12,}  (estimate; generated replies at their max_tokens)",
            f"  cost, plain calls:  {usd(self.cost_usd.get('plain'))}",
            f"  cost, with caching: {usd(self.cost_usd.get('prompt_caching'))}",
            f"  cost, batch API:    {usd(self.cost_usd.get('batch'))}",
        ]
        pw = self.params.get("pairwise")
        if isinstance(pw, dict):
            lines.append(f"  pairwise probe:     {pw.get('order_texts', 0):>12,}  order texts (two per pair: A shown "
                         "first, B shown first), among the texts above")
        if self.alternative:
            alt = self.alternative
            c = alt.get("cost_usd") or {}
            lines.append(f"  {alt['packing']} instead: {alt['calls']:,} calls, {alt['prompt_tokens']:,} prompt + "
                         f"{alt['completion_tokens']:,} completion tokens; plain {usd(c.get('plain'))}, "
                         f"with caching {usd(c.get('prompt_caching'))}, batch {usd(c.get('batch'))}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  not in this plan: {e}" for e in self.excluded]
        return "\n".join(lines)


_NOT_SAVED = ("pending", "text_sizes")


def _flat(messages: Sequence[Mapping[str, str]]) -> str:
    return "".join(f"\x00{m['role']}\x01{m['content']}" for m in messages)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two strings, by halving (slices compare in C: a text's prompts
    share thousands of characters)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _prefix_messages(messages: Sequence[Mapping[str, str]], n_chars: int) -> list[dict[str, str]]:
    """The messages cut after ``n_chars`` characters of their :func:`_flat` text."""
    out, used = [], 0
    for m in messages:
        head = len(f"\x00{m['role']}\x01")
        if used + head > n_chars:
            break
        keep = min(len(m["content"]), n_chars - used - head)
        out.append({"role": m["role"], "content": m["content"][:keep]})
        used += head + len(m["content"])
        if keep < len(m["content"]):
            break
    return out


def _shared_tokens(backend: Backend, prefix: list[dict[str, str]]) -> int:
    """Tokens of a prompt prefix: its complete messages in full, the cut one by its content."""
    if not prefix:
        return 0
    whole, cut = prefix[:-1], prefix[-1]
    n = sum(backend.count_tokens(m["content"]) + 4 for m in whole)
    return n + (backend.count_tokens(cut["content"]) if cut["content"] else 0)


def plan_from_calls(calls: Sequence[ProbeCall], backend: Backend, *, cache: Any = None,
                    prices: Mapping[str, Any] | str | Path | None = None, params: Mapping[str, Any] | None = None,
                    n_examples: int | None = None, n_rubrics: int | None = None,
                    max_analysis_tokens: int = 200) -> ProbePlan:
    """The plan of an already listed job (see :func:`plan_probes`)."""
    inner = unwrap_backend(backend)
    table = load_prices(prices)
    own = getattr(inner, "price_per_mtok", None)
    price: ModelPrice | None = ModelPrice(*own) if own else price_of(inner.model, table)
    cached_keys = _cached_keys(cache, [c.key for c in calls])
    seen: set[str] = set()
    todo = []  # each key once: a repeated call (two identical texts) is a cache hit when it runs
    for c in calls:
        if c.key not in cached_keys and c.key not in seen:
            seen.add(c.key)
            todo.append(c)
    by_text: dict[str, list[ProbeCall]] = {}
    for c in todo:
        by_text.setdefault(c.example_id, []).append(c)
    count_memo: dict[str, int] = {}
    text_sizes: dict[str, list[int]] = {}
    prompt = completion = shared_total = suffix = cached_tokens = cacheable_total = 0
    for calls_of_text in by_text.values():
        flats = [_flat(c.messages) for c in calls_of_text]
        sizes = []
        for c, f in zip(calls_of_text, flats):
            if f not in count_memo:
                count_memo[f] = inner.count_prompt_tokens(c.messages)
            n = count_memo[f]
            if c.dependent:  # the prompt holds the generated analysis too (at most max_tokens of it)
                n += max_analysis_tokens
            sizes.append(n)
            completion += c.max_completion_tokens
        text_sizes[calls_of_text[0].example_id] = sizes
        common = flats[0]
        for f in flats[1:]:
            common = common[:_common_prefix(common, f)]
        shared = _shared_tokens(inner, _prefix_messages(calls_of_text[0].messages, len(common)))
        shared = min(shared, *sizes)
        prompt += sum(sizes)
        shared_total += shared
        suffix += sum(sizes) - shared * len(sizes)
        cacheable = openai_cached_tokens(shared) if inner.kind == "openai" else shared
        if len(sizes) > 1:
            cacheable_total += cacheable
            cached_tokens += cacheable * (len(sizes) - 1)
    costs = {"plain": None, "prompt_caching": None, "batch": None}
    if price is not None:
        tbl = {inner.model: price}
        costs = {"plain": cost(inner.model, prompt, completion, table=tbl),
                 "prompt_caching": cost(inner.model, prompt, completion, cached_tokens=cached_tokens, table=tbl),
                 "batch": cost(inner.model, prompt, completion, batch=True, table=tbl)}
    counting = getattr(inner, "count_method", None) or {"local": "exact (the model's tokenizer and chat template)",
                                                       "fake": "exact (the fake backend's word count)"}.get(
        inner.kind, "estimate (len/4 or tiktoken, plus chat-format overhead)")
    notes = []
    if price is not None and price.cached_input is None:
        notes.append(f"{inner.model} has no prompt-caching discount in the price table: cached = plain cost")
    if price is not None and price.batch_input is None:
        notes.append(f"{inner.model} has no batch rate in the price table")
    dependent = sum(1 for c in calls if c.dependent)
    if dependent:
        notes.append(f"{dependent} call(s) read the answer after a generated analysis: their prompts count the "
                     f"analysis at its max ({max_analysis_tokens} tokens), and they cannot go into a batch file")
    if cached_tokens and inner.kind == "openai":
        notes.append("OpenAI caches prompts of 1,024+ tokens only, in 128-token steps; caching assumes each "
                     "text's probes run close together (rubric-induce probes text by text)")
    ident = inner.identity()
    return ProbePlan(
        backend=redact_obj({k: v for k, v in ident.items() if k in ("kind", "model", "base_url", "top_logprobs")}),
        model=inner.model, n_examples=n_examples if n_examples is not None else len({c.example_id for c in calls}),
        n_rubrics=n_rubrics if n_rubrics is not None else len({c.rubric_id for c in calls}),
        calls=len(calls), cached=len(calls) - len(todo), dependent=dependent, prompt_tokens=prompt,
        shared_prefix_tokens=shared_total, unique_suffix_tokens=suffix, cacheable_tokens=cacheable_total,
        completion_tokens=completion, cost_usd=costs, price=None if price is None else price.to_dict(),
        token_count=counting, params=dict(params or {}), notes=notes, pending=todo, text_sizes=text_sizes)


def _cached_keys(cache: Any, keys: list[str]) -> set[str]:
    if cache is None:
        return set()
    return cache.contains(keys)


def plan_probes(  # noqa: PLR0913 (probe's arguments, as it plans what probe asks; cache, prices)
    examples: Iterable[Example],
    rubrics: Iterable[Rubric],
    backend: Backend,
    params: Any = None,
    *,
    seed: int = 0,
    fields: Sequence[str] | None = None,
    task: TaskParams | None = None,
    cache: Any = None,
    prices: Mapping[str, Any] | str | Path | None = None,
    compare: bool = True,
    **options: Any,
) -> ProbePlan:
    """The plan of ``probe(examples, rubrics, backend, params, ...)``, made without any LLM call.

    ``cache``: a :class:`~rubric_induce.backends.cache.CallCache` (or the backend's, when it is a
    :class:`~rubric_induce.backends.cache.CachedBackend`) whose rows count as done. ``prices``: user rates
    over the built-in table (mapping or file). Refuses (DataError) a logprobs estimator on a model
    known to return none. ``plan.save(path)`` writes it as JSON; ``plan.format()`` as text.
    ``compare`` (score-only logprobs jobs): also price the job the other way (``probe.packing``
    independent <-> packed), from scratch, in ``plan.alternative``.
    """
    p = probe_params(params, **options)
    check_logprobs_support(backend, p.estimator)
    examples, rubrics = list(examples), list(rubrics)
    calls = probe_calls(examples, rubrics, backend, p, seed=seed, fields=fields, task=task)
    if cache is None:
        cache = getattr(backend, "cache", None)
    shown = {"style": p.style, "estimator": p.estimator}
    if p.estimator == "sampling":
        shown.update(samples=p.samples, temperature=p.temperature)
    if p.max_example_tokens is not None:
        shown["max_example_tokens"] = p.max_example_tokens
    if p.packing == "packed":
        shown["packing"] = "packed"
        if p.pack_size is not None:
            shown["pack_size"] = p.pack_size

    n_orders = sum(1 for e in examples if is_order_example(e))
    if n_orders:  # the pairwise probe's calls: two per (pair, rubric), one per presentation order
        shown["pairwise"] = {"order_texts": n_orders, "ties": p.pairwise_ties}
    plan = plan_from_calls(calls, backend, cache=cache, prices=prices, params=shown,
                           n_examples=len({e.id for e in examples}), n_rubrics=len({r.id for r in rubrics}),
                           max_analysis_tokens=p.max_analysis_tokens)
    if compare and p.estimator == "logprobs" and p.style == "score-only" and not n_orders:
        # the same job the other way, priced alike (no cache: what it would cost from scratch)
        other = p.replace(packing="independent" if p.packing == "packed" else "packed")
        alt = plan_from_calls(probe_calls(examples, rubrics, backend, other, seed=seed, fields=fields, task=task),
                              backend, prices=prices, max_analysis_tokens=p.max_analysis_tokens)
        plan.alternative = {"packing": other.packing, "calls": alt.calls, "prompt_tokens": alt.prompt_tokens,
                            "completion_tokens": alt.completion_tokens, "cost_usd": alt.cost_usd}
    return plan
