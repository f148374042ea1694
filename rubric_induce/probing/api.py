"""Probing: ask the LLM every rubric about every example and keep the answer distribution.

For each (example, rubric) the result is the probability of each answer on the rubric's scale,
renormalised over the allowed answers, *and* the raw mass Z the model put on them (LLM-RUBRIC
feeds the unnormalised vector to its calibration network). Three prompt styles follow Chiang &
Lee's "Closer Look": score-only and rate-explain read the distribution at the first token of the
reply; analyze-rate lets the model write its analysis and reads the distribution at the answer
position after the ``Rating:`` marker, never at the first digit found in free text. Backends
without logprobs need the sampling estimator, chosen explicitly; nothing falls back silently.

Prompts are worded from the run's task (:class:`~rubric_induce.core.task.TaskParams`: the kind of
text, the task description, the fields' roles); the default task renders the prompts as they were
before tasks existed. Prompts put the example first and everything rubric-specific (the rubric, its
levels, its answer scale and the answer instruction) after it, and examples are probed one after the
other with all their rubrics (one warm-up call per text first, on a concurrent backend), so a backend
that keeps its KV state (the embedded model) or a server with prompt caching computes each example's
prefix once. A :class:`SideQuestion` (the evaluate stage's direct question) is asked of its texts in
the same pass, right after each one's rubrics, while that prefix is still cached.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.backends.base import Backend, prompt_cache_scope
from rubric_induce.backends.concurrency import run_window
from rubric_induce.core.errors import BackendError, ContextOverflowError, LogprobsUnavailableError, RubricInduceError
from rubric_induce.core.params import resolve_params
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.jsonl import write_json, write_jsonl
from rubric_induce.data.model import AnswerScale, Example, Rubric
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.data.render import render_example, render_example_tokens
from rubric_induce.probing.packed import PACKED_TEMPLATE, pack_groups
from rubric_induce.probing.pairwise import (
    PAIRWISE_STYLE,
    PAIRWISE_TEMPLATE,
    is_order_example,
    pairwise_scale,
    render_order,
)
from rubric_induce.probing.params import (
    ANALYSIS_TOP_LOGPROBS,
    ESTIMATORS,
    PROBE_STYLES,
    PROBES_FILE,
    RATING_MARKER,
    SAMPLE_TOKENS,
    TEMPLATE_FOR_STYLE,
    ProbeParams,
)
from rubric_induce.probing.single import (
    ProbeJob,
    backend_top_logprobs,
    blank_record,
    build_messages,
    parse_answer,
    probe_call_plan,
    probe_once,
    probe_packed_once,
    read_probe,
)

# The stage's settings (probing.params) and one probe (probing.single) are named here too: this
# module is where the probe stage's callers import from.
__all__ = [
    "PROBE_STYLES",
    "ESTIMATORS",
    "RATING_MARKER",
    "ProbeParams",
    "ProbeJob",
    "SideQuestion",
    "probe",
    "probe_once",
    "probe_packed_once",
    "probe_to_file",
    "streamed_records",
    "PROBES_FILE",
    "TEMPLATE_FOR_STYLE",
    "build_messages",
    "prompt_cache_key_for",
    "parse_answer",
    "probe_call_plan",
    "backend_top_logprobs",
    "blank_record",
    "read_probe",
    "SAMPLE_TOKENS",
    "ANALYSIS_TOP_LOGPROBS",
    "render_probe_text",
]


def prompt_cache_key_for(text: str) -> str:
    """The prefix-routing key of one text's probes: a hash of the example as rendered in the prompt.

    Every probe of a text sends the same key (with the backend's ``prompt_cache_key`` option on),
    so a provider routes them to the machine that cached the text's prefix; batch files carry the
    same key in their request bodies. Content-addressed: the same text gets the same key in any run.
    """
    return "ri-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _failure_streak_limit(max_concurrency: int) -> int:
    """Failed calls in a row (over several texts) after which probing stops: the backend is down."""
    return max(8, 2 * max_concurrency)


@dataclass
class _FailureStreak:
    """Failed calls in a row (over-long prompts aside) over several texts, after which probing stops:
    the backend is down. Keeps the first failure, for the error of a job whose every call failed."""

    limit: int
    min_texts: int
    calls: str  # what failed, as the error names it
    first: BaseException | None = None
    texts: list[str] = field(default_factory=list)

    def add(self, example_id: str, exc: BaseException | None) -> None:
        if exc is None:
            self.texts.clear()
            return
        if isinstance(exc, ContextOverflowError):
            return
        self.first = self.first or exc
        self.texts.append(example_id)
        distinct = set(self.texts)
        if len(self.texts) >= self.limit and len(distinct) >= self.min_texts:
            raise BackendError(
                f"{len(self.texts)} {self.calls} in a row failed, on {len(distinct)} texts; the backend seems "
                f"down or overloaded. Last error: {exc}. The probes finished so far are kept: fix the "
                "backend (or lower backend.concurrency) and rerun to resume") from exc


@dataclass(frozen=True)
class SideQuestion:
    """One more question asked of some texts during :func:`probe`, each time right after that text's
    rubrics: the text's prompt prefix is then still cached (the embedded model's KV cache, a server's
    prompt cache), so the call costs only its question, where asked later, alone, it would pay for
    the whole text again. The run asks the evaluate stage's direct question so during its probe
    stage; the run's call cache keeps the answers, where the evaluate stage finds them.

    ``params``: the question's own probe settings (one call per text: ``packing = "independent"``),
    whose template must open like the job's for the prefix to be shared. Its records go to
    ``on_record``, in input order, never into the probe table.
    """

    rubric: Rubric
    example_ids: frozenset[str]
    params: ProbeParams
    on_record: Callable[[ProbeRecord], None] | None = None


@dataclass
class _ProbeRun:
    """One probe job as :func:`probe` prepared it: inputs, settings, each text rendered once, the
    records kept from ``done``, and how to report."""

    examples: list[Example]
    rubrics: list[Rubric]
    backend: Backend
    job: ProbeJob
    rendered: dict[str, tuple[str, int | None]]
    kept: Mapping[tuple[str, str], ProbeRecord]
    progress: bool = False
    on_record: Callable[[ProbeRecord], None] | None = None
    warmup: bool = True
    side: SideQuestion | None = None
    side_job: ProbeJob | None = None  # the side question's settings and template

    @property
    def params(self) -> ProbeParams:
        return self.job.params

    def streak(self, calls: str) -> _FailureStreak:
        return _FailureStreak(_failure_streak_limit(max(1, int(self.backend.max_concurrency))),
                              min(3, len(self.examples)), calls)


def probe(  # noqa: PLR0913 (the stage's entry point: its Params + overrides, and how to report)
    examples: Iterable[Example],
    rubrics: Iterable[Rubric],
    backend: Backend,
    params: ProbeParams | None = None,
    *,
    seed: int = 0,
    fields: Sequence[str] | None = None,
    task: TaskParams | None = None,
    progress: bool = False,
    on_record: Callable[[ProbeRecord], None] | None = None,
    done: Iterable[ProbeRecord] | None = None,
    warmup: bool = True,
    side: SideQuestion | None = None,
    **overrides: Any,
) -> ProbeTable:
    """The probe stage: every rubric on every example.

    ``estimator="sampling"`` draws ``samples`` replies at ``temperature`` for backends without
    logprobs; with ``"logprobs"`` such a backend raises :class:`LogprobsUnavailableError` up front.

    Args:
        examples: The texts to probe.
        rubrics: The rubrics to ask about each text.
        backend: The LLM; wrap it in :class:`~rubric_induce.backends.cache.CachedBackend` to make
            the run resumable.
        params: The stage's settings (default: :class:`ProbeParams` defaults).
        seed: The seed every call's seed derives from.
        fields: The example fields shown, in order (default: all).
        task: Words the prompts (default: the generic task).
        progress: Draw a progress bar.
        on_record: Called with each record, in input order, as it is final (e.g. to stream it).
        done: Records already probed; a usable one is kept and its pair not probed again.
        warmup: Probe a text's first rubric alone first (prefix caching).
        side: A question asked of some texts right after their rubrics (:class:`SideQuestion`);
            independent probing only.
        **overrides: Fields of ``params`` (``style``, ``estimator``, ``samples``, ``temperature``,
            ``max_analysis_tokens``, ``max_example_tokens``), checked like a config; an unknown
            name is a :class:`TypeError`.

    Returns:
        The probe table: one record per (example, rubric), with its answer distribution.

    **Order.** Probes are submitted example-major (each example with all its rubrics, in the
    order given) through a sliding window of at most ``backend.max_concurrency`` calls in flight:
    a new call starts as soon as any finishes, so a slow call holds back no other. With
    ``warmup`` (default) a text's first rubric is probed alone before its other rubrics are
    submitted, so a server with prefix caching computes the text's prefix once (a serial backend
    does this by its order anyway). The table's records, and the ``on_record`` calls, come in
    that input order (example-major), whatever order the calls finish in: a record waits for
    the ones before it. ``on_record`` is called in the calling thread (e.g. to append each record
    to a file as it is final).

    **Failures.** A call that fails for good (the backend's retries exhausted, a bad reply, a
    prompt over the context window) becomes a record with ``error`` and ``call_failed`` set; it is
    not cached, so probing again retries only those. A failure of the backend as a whole stops at
    once: :class:`~rubric_induce.core.errors.BackendUnavailableError` (credentials, permission, unknown
    model), :class:`LogprobsUnavailableError`, a long run of failed calls over several texts, or
    every call failing (a :class:`~rubric_induce.core.errors.BackendError` naming the last error).
    ``KeyboardInterrupt`` stops too. Calls already running finish first (their results reach the
    call cache).

    ``done``: records already probed (e.g. read back from a run's streamed probes file after a
    crash); a usable record of this probe job (same pair, style, estimator, prompt and scale) is
    kept as it is and its pair not probed again. Failed records are probed again.

    **Pairs in both orders.** An order example of a pair (``<pair>/AB``, ``<pair>/BA``:
    :func:`~rubric_induce.data.pair_examples.order_examples`) among ``examples`` is asked the pairwise
    question on each rubric (:mod:`rubric_induce.probing.pairwise`; ``pairwise_ties`` adds the answer
    ``tie``): its records carry ``order``, and the table's meta names the template under ``pairwise``.
    """
    params = resolve_params(ProbeParams, params, overrides)
    examples, rubrics = _checked_inputs(examples, rubrics, backend, params)
    task = (task or TaskParams()).resolved()
    template = load_prompt(PACKED_TEMPLATE if params.packing == "packed" else TEMPLATE_FOR_STYLE[params.style])
    n_orders = sum(1 for ex in examples if is_order_example(ex))
    if n_orders and params.packing == "packed":
        raise RubricInduceError("the pairwise probe's order examples cannot be packed; use packing = \"independent\"")
    pair_template = load_prompt(PAIRWISE_TEMPLATE) if n_orders else None
    side_job = _side_job(side, params, seed, fields, task)
    kept = _reusable(done, template.hash, params.style, params.estimator,
                     pairwise_hash=pair_template.hash if pair_template is not None else None)
    run = _ProbeRun(examples, rubrics, backend, ProbeJob(params, seed, fields, task, template),
                    _render_texts(examples, fields, params.max_example_tokens, backend), kept,
                    progress=progress, on_record=on_record, warmup=warmup, side=side, side_job=side_job)
    if params.packing == "packed":
        return _finish(*_probe_packed(run), run)
    table = _finish(*_probe_independent(run), run)
    if pair_template is not None:
        table.meta["pairwise"] = {"prompt": {"name": pair_template.name, "hash": pair_template.hash},
                                  "style": PAIRWISE_STYLE, "answers": list(pairwise_scale(params.pairwise_ties).labels),
                                  "n_order_examples": n_orders}
        table.meta["n_examples"] = len(examples) - n_orders
    return table


def _side_job(side: SideQuestion | None, params: ProbeParams, seed: int, fields: Sequence[str] | None,
              task: TaskParams) -> ProbeJob | None:
    """The side question's probe job (its own settings and template), refused where it cannot be asked."""
    if side is None:
        return None
    if params.packing == "packed" or side.params.packing == "packed":
        raise RubricInduceError("a side question is asked one call per text, after the text's own probes: "
                                "packing = \"independent\" only")
    return ProbeJob(side.params, seed, fields, task, load_prompt(TEMPLATE_FOR_STYLE[side.params.style]))


def _checked_inputs(examples: Iterable[Example], rubrics: Iterable[Rubric], backend: Backend,
                    params: ProbeParams) -> tuple[list[Example], list[Rubric]]:
    """The examples and rubrics as lists, refused up front when there is nothing to probe or the backend
    cannot give the logprobs the estimator reads."""
    if params.estimator == "logprobs" and not backend.supports_logprobs:
        raise LogprobsUnavailableError(
            f"backend {backend.kind}/{backend.model} gives no logprobs; rerun with the sampling "
            "estimator (--estimator sampling --samples N)")
    examples, rubrics = list(examples), list(rubrics)
    if not examples:
        raise RubricInduceError("nothing to probe: no examples")
    if not rubrics:
        raise RubricInduceError("nothing to probe: no rubrics")
    return examples, rubrics


def _render_texts(examples: Sequence[Example], fields: Sequence[str] | None, max_example_tokens: int | None,
                  backend: Backend) -> dict[str, tuple[str, int | None]]:
    """Each example rendered (and, with ``max_example_tokens``, counted and cut) once, not per rubric."""
    rendered: dict[str, tuple[str, int | None]] = {}
    for ex in examples:
        if ex.id not in rendered:
            rendered[ex.id] = render_probe_text(ex, fields, max_example_tokens, backend)
    return rendered


def _probe_independent(run: _ProbeRun) -> tuple[list[ProbeRecord], BaseException | None, int]:
    """Every (example, rubric) not kept, one probe each, through the sliding window: the records in input
    order (example-major, for prefix reuse), the first failure, and how many records were kept. A side
    question follows its text's rubrics in the same window group (its records go to its hook)."""
    examples, rubrics, kept, side = run.examples, run.rubrics, run.kept, run.side
    pairs = [(i, ex, rb) for i, ex in enumerate(examples) for rb in rubrics]  # example-major: prefix reuse
    pair_scale = pairwise_scale(run.params.pairwise_ties)
    slots: list[ProbeRecord | None] = [
        kept.get((ex.id, rb.id), None)
        if _same_scale(kept.get((ex.id, rb.id)), pair_scale if is_order_example(ex) else rb.scale) else None
        for _, ex, rb in pairs]
    n_todo = sum(rec is None for rec in slots)
    todo: list[tuple[int, int | None]] = []  # (example index, pair index; None: the side question)
    for i, ex in enumerate(examples):
        todo += [(i, k) for k in range(i * len(rubrics), (i + 1) * len(rubrics)) if slots[k] is None]
        if side is not None and ex.id in side.example_ids:
            todo.append((i, None))

    def one(item: tuple[int, int | None]) -> tuple[ProbeRecord, BaseException | None]:
        i, k = item
        ex = examples[i]
        rb, job = (side.rubric, run.side_job) if k is None else (pairs[k][2], run.job)
        text, n_tokens = run.rendered[ex.id]
        with prompt_cache_scope(prompt_cache_key_for(text)):
            return probe_once(run.backend, ex, rb, job, text=text, example_tokens=n_tokens)

    streak = run.streak("probe calls")
    bar = progress_bar(len(pairs), desc="probing", unit="probe", enabled=run.progress)
    bar.update(len(pairs) - n_todo)
    window = run_window(one, todo, max(1, int(run.backend.max_concurrency)),
                        groups=[i for i, _ in todo] if run.warmup else None)
    try:
        for j, (rec, exc) in window:
            k = todo[j][1]
            if k is None:
                if side.on_record:
                    side.on_record(rec)
            else:
                slots[k] = rec
                if run.on_record:
                    run.on_record(rec)
                bar.update()
            streak.add(rec.example_id, exc)
    finally:
        window.close()  # on any exception: submit nothing more, wait for the calls running now
        bar.close()
    return [rec for rec in slots if rec is not None], streak.first, len(pairs) - n_todo


def _finish(records: list[ProbeRecord], first_failure: BaseException | None, reused: int,
            run: _ProbeRun) -> ProbeTable:
    """The table of a probe job: refuses a job whose every call failed; its meta says how it was made."""
    params, job = run.params, run.job
    if first_failure is not None and not any(rec.ok for rec in records):
        raise BackendError(f"every probe failed ({sum(r.call_failed for r in records)} failed calls); the first "
                           f"error: {first_failure}") from first_failure
    meta = {"style": params.style, "estimator": params.estimator, "backend": run.backend.identity(),
            "prompt": {"name": job.template.name, "hash": job.template.hash},
            "n_examples": len(run.examples), "n_rubrics": len(run.rubrics), "seed": job.seed}
    if params.packing == "packed":
        meta["packing"] = {"mode": "packed", "pack_size": params.pack_size, "seed": job.seed}
    if not job.task.is_default:
        meta["task"] = job.task.to_dict()
    if params.max_example_tokens is not None:
        meta["max_example_tokens"] = params.max_example_tokens
    if params.estimator == "sampling":
        meta.update(n_samples=params.samples, temperature=params.temperature)
    if reused:
        meta["reused"] = reused
    return ProbeTable(records, meta)


def _probe_packed(run: _ProbeRun) -> tuple[list[ProbeRecord], BaseException | None, int]:
    """:func:`probe` with ``packing = "packed"``: one call per text and group of rubrics (shuffled per
    text by the seed, cut into groups of ``pack_size``), records in input order. A group whose every
    pair is kept (``done``) is not asked again; a group with any pair to do is asked whole (the call
    cache answers a repeat) and only its missing pairs are taken. Failures stop as :func:`probe`'s do."""
    examples, rubrics = run.examples, run.rubrics
    slots: dict[tuple[int, int], ProbeRecord] = {}
    units: list[tuple[int, list[int]]] = []  # (example index, rubric indices in the order asked)
    for i, ex in enumerate(examples):
        for group in pack_groups(ex.id, len(rubrics), int(run.job.seed), run.params.pack_size):
            have = {r: run.kept.get((ex.id, rubrics[r].id)) for r in group}
            have = {r: rec for r, rec in have.items() if _same_scale(rec, rubrics[r].scale)}
            for r, rec in have.items():
                slots[(i, r)] = rec
            if len(have) < len(group):
                units.append((i, group))
    n_reused = len(slots)
    packed_job = ProbeJob(run.params, int(run.job.seed), run.job.fields, run.job.task)

    def one(k: int) -> tuple[list[ProbeRecord], BaseException | None]:
        i, group = units[k]
        text, n_tokens = run.rendered[examples[i].id]
        with prompt_cache_scope(prompt_cache_key_for(text)):
            return probe_packed_once(run.backend, examples[i], [rubrics[r] for r in group], packed_job, text=text,
                                     example_tokens=n_tokens)

    streak = run.streak("packed probe calls")
    bar = progress_bar(len(examples) * len(rubrics), desc="probing (packed)", unit="probe", enabled=run.progress)
    bar.update(n_reused)
    window = run_window(one, list(range(len(units))), max(1, int(run.backend.max_concurrency)),
                        groups=[u[0] for u in units] if run.warmup else None)
    try:
        for k, (recs, exc) in window:
            i, group = units[k]
            for r, rec in sorted(zip(group, recs)):
                if (i, r) in slots:
                    continue
                slots[(i, r)] = rec
                if run.on_record:
                    run.on_record(rec)
                bar.update()
            streak.add(examples[i].id, exc)
    finally:
        window.close()
        bar.close()
    records = [slots[(i, r)] for i in range(len(examples)) for r in range(len(rubrics)) if (i, r) in slots]
    return records, streak.first, n_reused


def _reusable(done: Iterable[ProbeRecord] | None, prompt_hash: str, style: str,
              estimator: str, *, pairwise_hash: str | None = None) -> Mapping[tuple[str, str], ProbeRecord]:
    """The usable records of ``done`` made with this prompt, style and estimator, by pair (and the
    pairwise probes made with ``pairwise_hash``, score-only, when given)."""
    out: dict[tuple[str, str], ProbeRecord] = {}
    for rec in done or ():
        if not rec.ok or rec.call_failed or rec.estimator != estimator:
            continue
        if rec.order is not None:
            if pairwise_hash is None or rec.prompt_hash != pairwise_hash or rec.style != PAIRWISE_STYLE:
                continue
        elif rec.prompt_hash != prompt_hash or rec.style != style:
            continue
        out[(rec.example_id, rec.rubric_id)] = rec
    return out


def _same_scale(rec: ProbeRecord | None, scale: AnswerScale) -> bool:
    return rec is not None and list(rec.answers) == list(scale.labels) \
        and [float(v) for v in rec.values] == [float(v) for v in scale.values]


def render_probe_text(example: Example, fields: Sequence[str] | None, max_example_tokens: int | None,
                      backend: Backend) -> tuple[str, int | None]:
    """``(text, original token count or None)``: an example as its probes show it (an order example of a
    pair as the pairwise probe shows it), cut to ``max_example_tokens`` by ``backend``'s tokenizer."""
    if is_order_example(example):
        return render_order(example, max_example_tokens, backend.count_tokens, backend.truncate_tokens)
    if max_example_tokens is not None:
        return render_example_tokens(example, fields, max_example_tokens, backend.count_tokens,
                                     backend.truncate_tokens)
    return render_example(example, fields), None


def probe_to_file(  # noqa: PLR0913 (probe's arguments plus its stream file's (marker, fingerprint, hooks))
    path: Any,
    examples: Iterable[Example],
    rubrics: Iterable[Rubric],
    backend: Backend,
    params: ProbeParams | None = None,
    *,
    marker: Any,
    fingerprint: str,
    before_save: Callable[[ProbeTable], None] | None = None,
    echo: Callable[[str], None] | None = None,
    **kwargs: Any,
) -> ProbeTable:
    """:func:`probe`, appending each record to ``path`` (JSONL) as it is final, then saving the whole
    table there (input order, with its manifest) when done; ``run``'s probe stage and the ``probe``
    command share it.

    The file grows while probing, so a killed process (even by SIGKILL) leaves every finished
    record on disk. ``marker`` (a small JSON file) names the ``fingerprint`` of the job the file
    belongs to (whatever decides its records: data, rubrics, settings); a later call with the same
    fingerprint keeps the usable records on disk and probes only the rest, and the marker is
    removed once no call is left failed. ``before_save`` may add to the table's meta before it
    is written. ``kwargs`` go to :func:`probe`.
    """
    path, marker = Path(path), Path(marker)
    done = streamed_records(path, marker, fingerprint)
    if done and echo:
        echo(f"  resuming: {len(done)} probe(s) already on disk are kept")
    write_jsonl(path, (r.to_dict() for r in done))  # a torn last line (a kill mid-write) goes
    write_json(marker, {"fingerprint": fingerprint, "file": path.name})
    with path.open("a", encoding="utf-8") as fh:
        def stream(rec: ProbeRecord) -> None:
            fh.write(json.dumps(rec.to_dict(), ensure_ascii=False, allow_nan=False) + "\n")
            fh.flush()  # in the OS's hands: survives the process being killed

        table = probe(examples, rubrics, backend, params, on_record=stream, done=done, **kwargs)
    if before_save:
        before_save(table)
    table.save(path)  # the whole table in input order, and its manifest, atomically
    if not table.n_call_errors:
        marker.unlink(missing_ok=True)
    return table


def streamed_records(path: Any, marker: Any, fingerprint: str | None) -> list[ProbeRecord]:
    """The usable records an unfinished :func:`probe_to_file` of the same job left in ``path`` ([]
    when ``marker`` is missing or names another fingerprint). Reading stops at the first line that
    is not a whole record (a kill mid-write leaves at most one such line, the last)."""
    try:
        saved = json.loads(Path(marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not fingerprint or not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
        return []
    out = []
    try:
        with Path(path).open("r", encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = ProbeRecord.from_dict(json.loads(line))
                except (ValueError, KeyError, TypeError, AttributeError):
                    break
                if rec.ok and not rec.call_failed:
                    out.append(rec)
    except (OSError, UnicodeDecodeError):
        return out
    return out
