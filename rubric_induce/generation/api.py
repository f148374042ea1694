"""The generate stage's one entry point: :func:`generate` with :class:`GenerateParams`.

Generators are registered by name in :data:`GENERATORS`; each owns a parameter class (its
``options``) and returns a :class:`GenerateResult`, so the ``run`` pipeline, the ``generate``
command and the experiments call the same code with the same defaults and checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rubric_induce.backends.base import Backend
from rubric_induce.data import Example, Rubric, RubricPool
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.params import Params, options_from, param, read_at_file, resolve_params
from rubric_induce.backends.structured import GenerationError
from rubric_induce.core.task import TaskParams

__all__ = ["GenerateParams", "RubiconParams", "AutoCalibrateParams", "Generator", "GENERATORS",
           "GenerateResult", "generate", "POOL_FILE"]

POOL_FILE = "pool.jsonl"


@dataclass(frozen=True)
class RubiconParams(Params):
    """Options of RUBICON (growing SAT/DSAT pool) and SPUR (fixed-size set)."""

    section = "generate.options"
    top_k: int = param(3, ge=1, help="Patterns extracted per example.")
    batch_size: int = param(8, ge=1, help="Patterns per summarization call.")
    max_new: int = param(5, ge=1, help="New rubrics asked for per batch (rubicon).")
    max_shown: int | None = param(60, ge=1, help="Existing rubrics shown per summarization call (rubicon).",
                                  hidden=True)
    spur_size: int = param(10, ge=1, help="Rubrics per polarity in the SPUR set.")
    use_ds: bool | None = param(None, cli="--ds/--no-ds",
                                help="Domain sensitization block (default: on for rubicon, off for spur; "
                                     "needs generate.domain or a task description).")
    use_cdp: bool | None = param(None, cli="--cdp/--no-cdp",
                                 help="Conversation design principles block (default: on for rubicon on "
                                      "conversations, off otherwise and for spur).")
    temperature: float = param(0.0, ge=0.0, help="Generation temperature.")
    max_example_chars: int | None = param(6000, ge=100, help="Truncate each shown example to N characters.")
    retries: int = param(2, ge=0, help="Retries of an unparseable reply.", hidden=True)


@dataclass(frozen=True)
class AutoCalibrateParams(Params):
    """Options of AutoCalibrate (draft, revisit and refine criteria for one Likert aspect)."""

    section = "generate.options"
    aspect: str | None = param(None, help="The aspect to write criteria for (default: the label).")
    task: str | None = param(None, help="Legacy one-sentence task statement for the prompts (default: from "
                                        "the run's task description, [task] / --task-description).")
    scale: tuple[int, int] = param((1, 5), help="The human score range LOW,HIGH.")
    sample_sizes: tuple[int, ...] = param((4, 6, 8, 10, 12), ge=1, help="In-context sample sizes for drafting.")
    trials: int = param(4, ge=1, help="Monte-Carlo trials per sample size.")
    samples: int = param(3, ge=1, cli="--draft-samples", help="Temperature samples per drafting prompt.")
    top_k: int = param(5, ge=1, cli="--keep", help="Criteria kept after each revisit (top-K).")
    metric: str = param("spearman", choices=("spearman", "pearson", "kendall"),
                        help="Correlation used to rank criteria.")
    refine_sizes: tuple[int, ...] = param((1, 2, 4), ge=1, help="Misaligned-example sample sizes for refinement.")
    refine_trials: int = param(4, ge=1, help="Refinement trials per sample size.")
    refine_samples: int = param(2, ge=1, help="Temperature samples per refinement prompt.")
    rounds: int = param(1, ge=0, help="Refine-and-filter rounds.")
    draft_temperature: float = param(1.0, ge=0.0, help="Drafting temperature.")
    refine_temperature: float = param(1.0, ge=0.0, help="Refinement temperature.")
    levels: int = param(0, choices=(0, 4, 5), help="Expand the final criteria into 4 or 5 level descriptors (0 = no).")
    max_examples: int | None = param(None, ge=3, help="Budget: a seeded sample of N labelled examples.")
    max_example_chars: int | None = param(1500, ge=100, help="Truncate each shown example to N characters.")
    retries: int = param(2, ge=0, help="Retries of an unparseable reply.", hidden=True)

    def check(self) -> None:
        if self.scale[1] <= self.scale[0]:
            raise DataError(f"need LOW < HIGH, got {list(self.scale)}", field=self.where("scale"))


@dataclass
class GenerateResult:
    """A generated pool, what it cost in replies, and the generator's own extras."""

    pool: RubricPool
    method: str
    n_examples: int
    n_included: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def stats(self) -> dict[str, Any]:
        return self.pool.manifest.get("stats") or {}

    def summary(self) -> dict[str, Any]:
        return {"method": self.method, "n_train": self.n_examples,
                "generated": len(self.pool) - self.n_included, "generation_stats": self.stats or None,
                "rejected": dict(self.stats.get("rejected") or {}),
                "included": self.n_included, "pool": len(self.pool),
                **({"generation_error": self.extra["generation_error"]} if "generation_error" in self.extra else {})}

    def save(self, out: str | Path) -> Path:
        """Write the pool as ``pool.jsonl`` in a run directory (or to ``out`` when it ends in .jsonl)."""
        out = Path(out)
        path = out if out.suffix == ".jsonl" else out / POOL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        self.pool.save(path)
        return path


@dataclass(frozen=True)
class Generator:
    """A registered generation method: its options class and the function that runs it."""

    name: str
    params: type[Params]
    run: Callable[..., GenerateResult]
    binary: bool  # learns from 0/1 labels (else a graded aspect)
    description: str = ""


def _run_rubicon(mode: str):
    def run(examples: list[Example], backend: Backend, opts: RubiconParams, *, label: str,
            label_threshold: float | None, domain: str | None, seed: int, fields, progress: bool,
            task: TaskParams) -> GenerateResult:
        from rubric_induce.generation.rubicon import generate_rubicon

        default_on = mode == "rubicon"
        use_ds = default_on if opts.use_ds is None else opts.use_ds
        use_cdp = (default_on and task.wording().is_conversation) if opts.use_cdp is None else opts.use_cdp
        if use_ds and not (domain and domain.strip()) and not task.description:
            raise DataError("domain sensitization needs a domain description (generate.domain / --domain) or a "
                            "task description (task.description / --task-description); or switch it off "
                            "(generate.options.use_ds = false / --no-ds)", field="generate.domain")
        pool = generate_rubicon(examples, backend, label=label, task=task, domain=domain, use_ds=use_ds,
                                use_cdp=use_cdp,
                                top_k=opts.top_k, batch_size=opts.batch_size, max_new=opts.max_new,
                                max_shown=opts.max_shown, mode=mode, spur_size=opts.spur_size, seed=seed,
                                temperature=opts.temperature, threshold=label_threshold, fields=fields,
                                max_example_chars=opts.max_example_chars, retries=opts.retries, progress=progress)
        return GenerateResult(pool, mode, len(examples))
    return run


def _run_autocalibrate(examples: list[Example], backend: Backend, opts: AutoCalibrateParams, *, label: str,
                       label_threshold: float | None, domain: str | None, seed: int, fields,
                       progress: bool, task: TaskParams) -> GenerateResult:
    from rubric_induce.generation.autocalibrate import generate_autocalibrate

    result = generate_autocalibrate(
        examples, backend, aspect=opts.aspect or label, label=label, task=opts.task or task, scale=opts.scale,
        sample_sizes=opts.sample_sizes, trials=opts.trials, samples=opts.samples, top_k=opts.top_k,
        metric=opts.metric, refine_sizes=opts.refine_sizes, refine_trials=opts.refine_trials,
        refine_samples=opts.refine_samples, rounds=opts.rounds, draft_temperature=opts.draft_temperature,
        refine_temperature=opts.refine_temperature, levels=opts.levels or None, seed=seed, fields=fields,
        max_example_chars=opts.max_example_chars, retries=opts.retries, progress=progress)
    best = result.best
    return GenerateResult(result.pool, "autocalibrate", len(examples),
                          extra={"best": best.text, "best_correlation": best.provenance.get("correlation"),
                                 "metric": opts.metric, "n_candidates": len(result.candidates)})


GENERATORS: dict[str, Generator] = {
    "rubicon": Generator("rubicon", RubiconParams, _run_rubicon("rubicon"), True,
                         "growing SAT/DSAT pool from extracted patterns"),
    "spur": Generator("spur", RubiconParams, _run_rubicon("spur"), True, "fixed-size SAT/DSAT set (baseline)"),
    "autocalibrate": Generator("autocalibrate", AutoCalibrateParams, _run_autocalibrate, False,
                               "draft/revisit/refine criteria for one Likert aspect"),
}


@dataclass(frozen=True)
class GenerateParams(Params):
    """The generate stage: which method, its options, the sample it sees, rubrics to mix in."""

    section = "generate"
    method: str = param("rubicon", choices=(*GENERATORS, "none"),
                        help="rubicon | spur | autocalibrate, or none (only the included rubrics).")
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
        return options_from(GENERATORS[self.method].params, self.options, where="generate.options")


def generate(
    examples: Sequence[Example],
    backend: Backend | None,
    params: GenerateParams | None = None,
    *,
    label: str = "sat",
    label_threshold: float | None = None,
    domain: str | None = None,
    include: Sequence[Sequence[Rubric]] = (),
    seed: int = 0,
    fields: Sequence[str] | None = None,
    task: TaskParams | None = None,
    progress: bool = False,
    **overrides: Any,
) -> GenerateResult:
    """Draft rubrics from labelled examples with ``params.method`` and mix in ``include``d pools.

    ``task`` says what is judged and what the label means; every prompt is worded from it
    (default: the generic task; ``@file`` descriptions are read relative to the working
    directory, so callers with a config resolve them first). ``domain`` is the domain text itself
    (callers resolve ``@file``; default for RUBICON's DS: the task description); ``include``
    holds pools the caller has read. Sampling budgets (``per_class`` for rubicon/spur,
    ``max_examples`` for autocalibrate) are applied here, seeded by ``seed``.
    """
    params = resolve_params(GenerateParams, params, overrides)
    examples = list(examples)
    task = (task or TaskParams()).resolved()
    opts = params.method_options()
    generated: GenerateResult | None = None
    failure: dict[str, Any] = {}
    if opts is not None:
        gen = GENERATORS[params.method]
        shown = examples
        if gen.binary and params.per_class:
            from rubric_induce.generation.rubicon import balanced_sample

            shown = balanced_sample(shown, label, params.per_class, threshold=label_threshold, seed=seed)
        if isinstance(opts, AutoCalibrateParams) and opts.max_examples and len(shown) > opts.max_examples:
            import numpy as np

            from rubric_induce.backends.structured import derive_seed

            rng = np.random.default_rng(derive_seed(seed, "max_examples", opts.max_examples))
            keep = sorted(rng.choice(len(shown), size=opts.max_examples, replace=False).tolist())
            shown = [shown[i] for i in keep]
        if backend is None:
            raise RubricInduceError(f"generation with {params.method!r} needs an LLM backend")
        from rubric_induce.core.progress import heartbeat

        try:
            # no bars (stderr not a terminal): a line every 30 s, since minutes of silence look like a hang
            with heartbeat(f"generate ({params.method})", _planned_calls(opts, len(shown)), enabled=not progress):
                generated = gen.run(shown, backend, opts, label=label, label_threshold=label_threshold,
                                    domain=domain, seed=seed, fields=fields, progress=progress, task=task)
            generated.extra["n_shown"] = len(shown)
        except GenerationError as exc:
            if not any(len(inc) for inc in include):
                raise
            # the included rubrics still make a pool: go on with them, and say what generation did
            failure = {"generation_error": str(exc), "stats": getattr(exc, "stats", None)}
    pool = RubricPool([])
    for r in (_without_copies(generated.pool, examples, fields) if generated else []):
        pool.add(r)
    n_generated = len(pool)
    for inc in include:
        for r in inc:
            pool.add(r)
    if not len(pool):
        raise RubricInduceError("generation produced no rubrics and none were included; add "
                                "generate.include = ['my_rubrics.json'] or use a stronger backend")
    pool.manifest = {**(generated.pool.manifest if generated else {}), **failure, "method": params.method,
                     "included": list(params.include), "seed": seed, "task": task.to_dict()}
    extra = generated.extra if generated else {}
    if failure:
        extra = {**extra, "generation_error": failure["generation_error"]}
    return GenerateResult(pool, params.method, len(examples), n_included=len(pool) - n_generated, extra=extra)


def _planned_calls(opts: Params, n_shown: int) -> int | None:
    """About how many calls generation makes (rubicon/spur: one per example, then the summarizing
    batches of their patterns at most); None when unknown in advance (autocalibrate)."""
    if isinstance(opts, RubiconParams):
        return n_shown + -(-n_shown * opts.top_k // opts.batch_size) + 1
    return None


def _without_copies(pool: RubricPool, examples: Sequence[Example], fields: Sequence[str] | None) -> list[Rubric]:
    """The generated rubrics that share no span of ``example_span`` words with any training text
    (the generators screen only the texts they showed the LLM); each rejection is counted in the
    pool manifest's ``stats`` with the copied span quoted."""
    from rubric_induce.data.render import render_example
    from rubric_induce.backends.structured import GenerationStats
    from rubric_induce.generation.screen import RubricScreen, screen_item

    texts = []
    for e in examples:
        try:
            texts.append(render_example(e, fields))
        except DataError:  # a field this example lacks: its text was never shown, nor can be copied
            continue
    screen = RubricScreen(examples=texts, criteria=True)  # the copy check alone
    stats = GenerationStats()
    kept = [r for r in pool if screen_item(screen, r.text, stats)]
    if stats.rejected:
        from rubric_induce.backends.structured import MAX_REJECTED_ITEMS

        old = dict(pool.manifest.get("stats") or {})
        rejected = dict(old.get("rejected") or {})
        for reason, n in stats.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + n
        items = list(old.get("rejected_items") or [])
        items += stats.rejected_items[:max(0, MAX_REJECTED_ITEMS - len(items))]
        pool.manifest = {**pool.manifest, "stats": {**old, "rejected": rejected, "rejected_items": items}}
        if "n_by_polarity" in pool.manifest:
            pool.manifest["n_by_polarity"] = {p: sum(r.polarity == p for r in kept) for p in ("SAT", "DSAT")}
    return kept


def read_domain(domain: str | None, resolve: Callable[[str], Path] = Path) -> str | None:
    """A domain given as text or as ``@path`` (read; errors name the file)."""
    return read_at_file(domain, resolve, field="generate.domain", what="domain")
