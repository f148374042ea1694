"""The generate stage's one entry point: :func:`generate` with :class:`GenerateParams`.

Generators are registered by name in :data:`~rubric_induce.generation.registry.GENERATORS` (by the
:func:`~rubric_induce.generation.registry.generator` decorator in their modules); each owns a parameter class (its
``options``) and returns a :class:`GenerateResult`, so the ``run`` pipeline, the ``generate``
command and the experiments call the same code with the same defaults and checks.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend
from rubric_induce.backends.structured import MAX_REJECTED_ITEMS, GenerationError, GenerationStats, derive_seed
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.params import Params, options_from, param, read_at_file, resolve_params
from rubric_induce.core.progress import heartbeat
from rubric_induce.core.task import TaskParams
from rubric_induce.data import Example, Rubric, RubricPool
from rubric_induce.data.render import render_example
from rubric_induce.generation.contrastive import ContrastiveParams
from rubric_induce.generation.evidence import reasons
from rubric_induce.generation.params import AutoCalibrateParams, RubiconParams
from rubric_induce.generation.registry import GENERATORS, POOL_FILE, GenerateContext, GenerateResult, Generator
from rubric_induce.generation.rubicon import balanced_sample
from rubric_induce.generation.screen import RubricScreen, screen_item

__all__ = ["GenerateParams", "RubiconParams", "AutoCalibrateParams", "ContrastiveParams", "Generator", "GENERATORS",
           "GenerateContext", "GenerateResult", "generate", "POOL_FILE", "planned_calls"]

@dataclass(frozen=True)
class GenerateParams(Params):
    """The generate stage: which method, its options, the sample it sees, rubrics to mix in."""

    section = "generate"
    method: str = param("rubicon", choices=(*GENERATORS, "none"),
                        help="rubicon | spur | autocalibrate | contrastive (pairwise runs), or none (only the "
                             "included rubrics).")
    include: tuple[str, ...] = param((), help="Hand-written or earlier rubric files to mix in.")
    domain: str | None = param(None, help="Domain description text, or @file (RUBICON domain sensitization; "
                                          "default: the task description).")
    per_class: int | None = param(None, ge=1, help="Budget: a seeded sample of N positive + N negative "
                                                   "examples (rubicon/spur).")
    options: dict[str, Any] = param(factory=dict, help="The generator's own options (see its parameters).")

    def check(self) -> None:
        if self.method == "none" and not self.include:
            raise DataError("with method = 'none' give generate.include (rubric files to use)",
                            field="generate.include")
        self.method_options()

    def method_options(self) -> Params | None:
        """The generator's options, validated (None for method 'none')."""
        if self.method == "none":
            return None
        return options_from(GENERATORS.get(self.method).params, self.options, where="generate.options")


def generate(
    examples: Sequence[Example],
    backend: Backend | None,
    params: GenerateParams | None = None,
    *,
    context: GenerateContext | None = None,
    include: Sequence[Sequence[Rubric]] = (),
    **overrides: Any,
) -> GenerateResult:
    """The generate stage: rubrics drafted from labelled examples, with the included pools mixed in.

    ``params.method`` picks the generator.

    Sampling budgets (``per_class`` for rubicon/spur, ``max_examples`` for autocalibrate) are
    applied here, seeded by ``context.seed``; contrastive generation (pairwise runs) samples its
    pairs itself (``options.max_pairs``). Generated rubrics that copy any training text or rater
    reason (not only the ones shown) are dropped and counted in the manifest's ``stats``.

    Args:
        examples: The labelled training examples (their ``rationale``, where the data has one, is
            read as evidence).
        backend: The LLM; None only with ``method = "none"`` (the included rubrics alone).
        params: The stage's settings (default: :class:`GenerateParams` defaults).
        context: The run (:class:`GenerateContext`): label and threshold, the domain text itself
            (callers resolve ``@file``; default for RUBICON's DS: the task description), seed,
            fields shown, task (default: the generic task; ``@file`` descriptions are read relative
            to the working directory, so callers with a config resolve them first), progress bars.
        include: Rubric pools the caller has read, mixed into the result.
        **overrides: Fields of ``params`` (``method``, ``per_class``, ``options`` ...), checked like
            a config; an unknown name is a :class:`TypeError`.

    Returns:
        The pool with its manifest (method, included files, seed, task, the generator's own
        record) and the generator's extras.

    Raises:
        RubricInduceError: Generation needs a backend, or produced no rubric and none were included.
    """
    params = resolve_params(GenerateParams, params, overrides)
    examples = list(examples)
    context = context or GenerateContext()
    task = (context.task or TaskParams()).resolved()
    context = dataclasses.replace(context, task=task)
    opts = params.method_options()
    generated: GenerateResult | None = None
    failure: dict[str, Any] = {}
    if opts is not None:
        try:
            generated = _run_generator(examples, backend, params, opts, context)
        except GenerationError as exc:
            if not any(len(inc) for inc in include):
                raise
            # the included rubrics still make a pool: go on with them, and say what generation did
            failure = {"generation_error": str(exc), "stats": getattr(exc, "stats", None)}
    pool = RubricPool([])
    for r in (_without_copies(generated.pool, examples, context.fields) if generated else []):
        pool.add(r)
    n_generated = len(pool)
    for inc in include:
        for r in inc:
            pool.add(r)
    if not len(pool):
        raise RubricInduceError("generation produced no rubrics and none were included; add "
                                "generate.include = ['my_rubrics.json'] or use a stronger backend")
    pool.manifest = {**(generated.pool.manifest if generated else {}), **failure, "method": params.method,
                     "included": list(params.include), "seed": context.seed, "task": task.to_dict()}
    extra = generated.extra if generated else {}
    if failure:
        extra = {**extra, "generation_error": failure["generation_error"]}
    return GenerateResult(pool, params.method, len(examples), n_included=len(pool) - n_generated, extra=extra)


def _run_generator(examples: list[Example], backend: Backend | None, params: GenerateParams, opts: Params,
                   context: GenerateContext) -> GenerateResult:
    """The chosen generator on its budgeted sample of ``examples`` (``per_class`` / ``max_examples``)."""
    gen = GENERATORS.get(params.method)
    shown = examples
    if gen.binary and params.per_class:
        shown = balanced_sample(shown, context.label or "sat", params.per_class, threshold=context.label_threshold,
                                seed=context.seed)
    if isinstance(opts, AutoCalibrateParams) and opts.max_examples and len(shown) > opts.max_examples:
        rng = np.random.default_rng(derive_seed(context.seed, "max_examples", opts.max_examples))
        keep = sorted(rng.choice(len(shown), size=opts.max_examples, replace=False).tolist())
        shown = [shown[i] for i in keep]
    if backend is None:
        raise RubricInduceError(f"generation with {params.method!r} needs an LLM backend")
    # no bars (stderr not a terminal): a line every 30 s, since minutes of silence look like a hang
    with heartbeat(f"generate ({params.method})", planned_calls(opts, len(shown)), enabled=not context.progress):
        generated = gen.run(shown, backend, opts, context)
    generated.extra["n_shown"] = len(shown)
    return generated


def planned_calls(opts: Params, n_shown: int) -> int | None:
    """About how many calls generation makes (rubicon/spur: one per example, then the summarizing
    batches of their patterns at most); None when unknown in advance (autocalibrate)."""
    if isinstance(opts, RubiconParams):
        return n_shown + -(-n_shown * opts.top_k // opts.batch_size) + 1
    if isinstance(opts, ContrastiveParams):  # one call per shown pair (two examples each)
        n = n_shown // 2
        return min(n, opts.max_pairs) if opts.max_pairs else n
    return None


def _without_copies(pool: RubricPool, examples: Sequence[Example], fields: Sequence[str] | None) -> list[Rubric]:
    """The generated rubrics that share no span of ``example_span`` words with any training text
    (the generators screen only the texts they showed the LLM); each rejection is counted in the
    pool manifest's ``stats`` with the copied span quoted."""
    texts = []
    for e in examples:
        try:
            texts.append(render_example(e, fields))
        except DataError:  # a field this example lacks: its text was never shown, nor can be copied
            continue
    screen = RubricScreen(examples=texts, reasons=reasons(examples), criteria=True)  # the copy checks alone
    stats = GenerationStats()
    kept = [r for r in pool if screen_item(screen, r.text, stats)]
    if stats.rejected:
        old = dict(pool.manifest.get("stats") or {})
        rejected = dict(old.get("rejected") or {})
        for reason, n in stats.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + n
        items = list(old.get("rejected_items") or [])
        items += stats.rejected_items[:max(0, MAX_REJECTED_ITEMS - len(items))]
        pool.manifest = {**pool.manifest, "stats": {**old, "rejected": rejected, "rejected_items": items}}
        if "n_by_polarity" in pool.manifest:
            pool.manifest["n_by_polarity"] = {p: sum(r.polarity == p for r in kept) for p in ("SAT", "DSAT")}
        if "n_by_kind" in pool.manifest:  # contrastive: hard rules and principles
            pool.manifest["n_by_kind"] = {k: sum((r.provenance or {}).get("kind") == k for r in kept)
                                          for k in pool.manifest["n_by_kind"]}
    return kept


def read_domain(domain: str | None, resolve: Callable[[str], Path] = Path) -> str | None:
    """A domain given as text or as ``@path`` (read; errors name the file)."""
    return read_at_file(domain, resolve, field="generate.domain", what="domain")
