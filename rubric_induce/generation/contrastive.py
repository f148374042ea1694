"""Contrastive rubric generation from preference pairs (OpenRubrics-style; issue 33).

For a pairwise run (``[data] kind = "pairwise"``) the LLM is shown one training pair at a time: the
shared prompt, the preferred response and the rejected one (``prompts/contrastive.txt``), and asked
for rubrics that hold for the preferred response and fail for the rejected one, split into

- **hard rules**: explicit requirements of the prompt (content, format, length, constraints), worded
  as checks that also apply to other prompts, and
- **principles**: general qualities that make the preferred response better.

The prompt is worded from the run's ``[task]`` (its kind of text and description). Replies are JSON
under a schema (``{"hard_rules": [...], "principles": [...]}``), so a constrained decoder (the
embedded model, a llama.cpp server) and the fake backend answer in shape. Every item goes through
the generation screens (:mod:`.screen`: restated label or preference — "preferred", "better" —,
annotation talk, generic praise, copied prompt or response text) and one check of its own: a rubric
that talks about the other response ("better than the rejected one", "the first response") cannot
be checked on one response and is rejected (``names the other response``); rejections are counted
by reason. The same sentence from several pairs
is one rubric whose provenance lists every source pair.

Each rubric is a SAT rubric (agreeing means better) whose provenance holds its ``kind``
(``hard_rule`` or ``principle``), the ``source_pair_ids`` and their sides' example ids, the model,
the prompt hash and the seed; the pool manifest counts rubrics per kind (``n_by_kind``) and the
pairs seen (``n_pairs``: training pairs, ties skipped, pairs shown). Tie pairs are skipped (there
is nothing to contrast); ``max_pairs`` is a seeded sample of the decided training pairs. The
generator reads pairs back from the pairwise run's examples (``<pair>/A``, ``<pair>/B``, see
:mod:`rubric_induce.data.pair_examples`); pointwise examples are refused with a
:class:`~rubric_induce.core.errors.DataError` naming ``generate.method``.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubric_induce.backends.base import Backend
from rubric_induce.backends.structured import (
    GenerationStats,
    ask_json,
    derive_seed,
    is_sentence,
    string_list,
    string_list_schema,
)
from rubric_induce.core.errors import DataError, ReplyParseError
from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.core.progress import progress_bar
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.model import Example, Rubric, RubricPool
from rubric_induce.data.pair_examples import pairs_from_examples, side_id
from rubric_induce.data.pairs import Pair
from rubric_induce.generation.registry import GenerateContext, GenerateResult, generator
from rubric_induce.generation.screen import RubricScreen, no_rubrics_error, screen_item

__all__ = ["ContrastiveParams", "KINDS", "HARD_RULE", "PRINCIPLE", "PROMPT_NAME", "NAMES_THE_PAIR", "generate_contrastive",
           "contrastive_messages", "sample_pairs"]

log = logging.getLogger("rubric_induce.generation")

HARD_RULE = "hard_rule"
PRINCIPLE = "principle"
KINDS = (HARD_RULE, PRINCIPLE)
PROMPT_NAME = "contrastive"
_KEYS = {HARD_RULE: "hard_rules", PRINCIPLE: "principles"}
#: Words that name a side of the preference or the comparison itself: a rubric made of them only restates it.
PREFERENCE_WORDS = ("preferred", "rejected", "chosen", "winner", "loser", "winning", "losing", "better", "worse",
                    "best", "worst")
#: A rubric that talks about the other response of the pair cannot be checked on one response alone.
NAMES_THE_PAIR = "names the other response"
_PAIR_TALK = re.compile(r"\b(preferred|rejected|chosen|other|first|second|both|either)\s+(one|response|answer|output)s?\b"
                        r"|\bthan\s+(the\s+)?(rejected|preferred|chosen|other)\b")


@dataclass(frozen=True)
class ContrastiveParams(Params):
    """Options of contrastive generation (pairwise runs)."""

    section = "generate.options"
    max_pairs: int | None = param(None, ge=1, help="Budget: a seeded sample of N decided training pairs "
                                                   "(default: all; ties are skipped).")
    max_rules: int = param(3, ge=1, help="Hard rules (explicit requirements of the prompt) asked for per pair.")
    max_principles: int = param(3, ge=1, help="Principles (general qualities) asked for per pair.")
    max_response_chars: int | None = param(1500, ge=100, help="Truncate the prompt and each response to N "
                                                              "characters.")
    temperature: float = param(0.0, ge=0.0, help="Generation temperature.")
    retries: int = param(2, ge=0, help="Retries of an unparseable reply.", hidden=True)


_DEFAULTS = ContrastiveParams()


def sample_pairs(pairs: Sequence[Pair], max_pairs: int | None, seed: int,
                 stats: GenerationStats | None = None) -> list[Pair]:
    """The decided pairs (ties skipped and counted in ``stats``), a seeded sample of ``max_pairs`` of
    them when there are more, in their original order."""
    decided = []
    for p in pairs:
        if p.preferred == "tie":
            if stats is not None:
                stats.skip("tie", pair_id=p.id)
            continue
        decided.append(p)
    if max_pairs is None or len(decided) <= max_pairs:
        return decided

    rng = np.random.default_rng(derive_seed(seed, "contrastive_pairs", max_pairs))
    keep = sorted(rng.choice(len(decided), size=max_pairs, replace=False).tolist())
    return [decided[i] for i in keep]


def _cut(text: str, n: int | None) -> str:
    return text if n is None or len(text) <= n else text[:n].rstrip() + " [...]"


def _sides(pair: Pair) -> tuple[str, str]:
    """(preferred, rejected) response of a decided pair."""
    return (pair.response_a, pair.response_b) if pair.preferred == "A" else (pair.response_b, pair.response_a)


def contrastive_messages(pair: Pair, task: TaskParams | None = None, *, max_rules: int = _DEFAULTS.max_rules,
                         max_principles: int = _DEFAULTS.max_principles,
                         max_chars: int | None = _DEFAULTS.max_response_chars) -> list[dict[str, str]]:
    """The chat messages that show ``pair`` (preferred and rejected response) to the LLM."""
    words = (task or TaskParams()).wording()
    preferred, rejected = _sides(pair)
    return load_prompt(PROMPT_NAME).render(
        kind=words.kind, kinds=words.kinds, kind_title=words.kind[:1].upper() + words.kind[1:],
        task_block=words.task_block(classes=False), prompt=_cut(pair.prompt, max_chars),
        preferred=_cut(preferred, max_chars), rejected=_cut(rejected, max_chars),
        max_rules=str(max_rules), max_principles=str(max_principles))


def _schema(max_rules: int, max_principles: int, subjects: Sequence[str] | None) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for kind, n in ((HARD_RULE, max_rules), (PRINCIPLE, max_principles)):
        key = _KEYS[kind]
        props.update(string_list_schema(key, min_items=1, max_items=n, max_length=200,
                                        subjects=subjects)["properties"])
    return {"type": "object", "properties": props, "required": list(props)}


def _parse(value: Any) -> dict[str, list[str]]:
    """Both lists of a reply (a list may be empty or missing); at least one sentence in all."""
    if not isinstance(value, Mapping):
        raise ReplyParseError(f"expected an object with {sorted(_KEYS.values())}, got {type(value).__name__}")
    out: dict[str, list[str]] = {}
    for kind, key in _KEYS.items():
        out[kind] = string_list(key, min_items=0)(value) if key in value else []
    if not any(is_sentence(t) for items in out.values() for t in items):
        raise ReplyParseError(f"no usable rubric under {sorted(_KEYS.values())}")
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().strip(" .").split())


def generate_contrastive(pairs: Sequence[Pair], backend: Backend, params: ContrastiveParams | None = None, *,
                         task: TaskParams | None = None, seed: int = 0, progress: bool = False,
                         **overrides: Any) -> RubricPool:
    """Hard rules and principles that separate the preferred from the rejected response of each pair.

    ``params`` (:class:`ContrastiveParams`, default: its defaults) with keyword ``overrides`` of its
    fields (``max_pairs``, ``max_rules``, ``max_principles`` ...), checked like a config.
    One JSON-constrained call per shown pair (ties skipped; ``max_pairs``: a seeded sample of the
    rest). Returns a pool of SAT rubrics with ``kind`` and ``source_pair_ids`` in their provenance
    and ``n_by_kind`` in the manifest; raises :class:`GenerationError` rather than return an empty
    pool."""
    params = resolve_params(ContrastiveParams, params, overrides)
    task = (task or TaskParams()).resolved()
    words = task.wording()
    stats = GenerationStats()
    shown = sample_pairs(pairs, params.max_pairs, seed, stats)
    if not shown:
        raise DataError(f"contrastive generation needs a pair with a preferred side; the {len(pairs)} training "
                        "pair(s) are all ties", field="generate.method")
    template = load_prompt(PROMPT_NAME)
    subjects = list(words.subjects())
    schema = _schema(params.max_rules, params.max_principles, subjects)
    texts = [_cut(t, params.max_response_chars) for p in shown for t in (p.prompt, p.response_a, p.response_b)]
    screen = RubricScreen(class_words=words.class_words() | set(PREFERENCE_WORDS),
                          kind_words=[words.kind, words.kinds], prompt_texts=words.prompt_texts(), examples=texts)
    model = f"{backend.kind}/{backend.model}"
    made = _Made(params, screen, stats)
    bar = progress_bar(len(shown), desc="contrastive", enabled=progress)
    try:
        for pair in shown:
            messages = contrastive_messages(pair, task, max_rules=params.max_rules,
                                            max_principles=params.max_principles, max_chars=params.max_response_chars)
            reply = ask_json(backend, messages, schema, _parse, step="contrastive", stats=stats,
                             seed=derive_seed(seed, "contrastive", pair.id), temperature=params.temperature,
                             max_tokens=60 * (params.max_rules + params.max_principles) + 60, retries=params.retries,
                             context={"pair_id": pair.id})
            bar.update()
            if reply is not None:
                made.add(pair, reply)
    finally:
        bar.close()
    if not made.items:
        raise no_rubrics_error("contrastive", stats)
    rubrics = [Rubric.create(m["text"], "SAT", provenance={
        "method": "contrastive", "step": "contrastive", "kind": m["kind"], "model": model,
        "prompt_hash": template.hash, "seed": seed, "source_pair_ids": list(m["pairs"]),
        "source_example_ids": [side_id(p, s) for p in m["pairs"] for s in ("A", "B")]})
        for m in made.items.values()]
    pool = RubricPool(rubrics)
    n_ties = sum(1 for s in stats.skipped if s.get("reason") == "tie")
    pool.manifest = {
        "method": "contrastive", "seed": seed, "task": task.to_dict(),
        "settings": {"max_pairs": params.max_pairs, "max_rules": params.max_rules,
                     "max_principles": params.max_principles, "max_response_chars": params.max_response_chars,
                     "temperature": params.temperature, "retries": params.retries, "subjects": subjects},
        "backend": backend.identity(), "model": model, "prompts": {PROMPT_NAME: template.hash},
        "n_pairs": {"training": len(pairs), "ties_skipped": n_ties, "shown": len(shown),
                    "shown_ids": [p.id for p in shown]},
        "n_by_kind": count_kinds(pool),
        "n_by_polarity": {p: len(pool.by_polarity(p)) for p in ("SAT", "DSAT")},
        "stats": stats.to_dict(),
    }
    log.info("contrastive: %d rubrics from %d pairs; %s", len(pool), len(shown), stats.summary())
    return pool


@dataclass
class _Made:
    """The rubrics written so far, by normalised text (``{text, kind, pairs}``); screens each reply's items."""

    params: ContrastiveParams
    screen: RubricScreen
    stats: GenerationStats
    items: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, pair: Pair, reply: Mapping[str, list[str]]) -> None:
        """A reply's sentences, at most the cap of each kind, that pass the screens; a repeated one
        adds the pair to the first."""
        stats = self.stats
        for kind in KINDS:
            items = reply[kind]
            good = [t for t in items if is_sentence(t)]
            if len(good) < len(items):
                stats.reject("not a sentence", len(items) - len(good))
            cap = self.params.max_rules if kind == HARD_RULE else self.params.max_principles
            if len(good) > cap:
                stats.reject(f"beyond max_{'rules' if kind == HARD_RULE else 'principles'}", len(good) - cap)
            for text in good[:cap]:
                if _PAIR_TALK.search(text.lower()):
                    stats.reject(NAMES_THE_PAIR, text=text)
                    continue
                if not screen_item(self.screen, text, stats):
                    continue
                key = _norm(text)
                if key in self.items:
                    stats.reject("duplicate")
                    if pair.id not in self.items[key]["pairs"]:
                        self.items[key]["pairs"].append(pair.id)
                    continue
                self.items[key] = {"text": text, "kind": kind, "pairs": [pair.id]}


def count_kinds(rubrics) -> dict[str, int]:
    """Rubrics per contrastive kind (``hard_rule``, ``principle``)."""
    return {k: sum(1 for r in rubrics if (r.provenance or {}).get("kind") == k) for k in KINDS}


# ----------------------------------------------------------------------------- the registered generator
@generator("contrastive", ContrastiveParams, binary=False,
           description="hard rules and principles that separate preferred from rejected responses (pairwise runs)")
def _run_contrastive(examples: list[Example], backend: Backend, opts: ContrastiveParams,
                     ctx: GenerateContext) -> GenerateResult:
    try:
        pairs = pairs_from_examples(examples, ctx.label or "sat")
    except DataError as exc:
        raise DataError(f"generate.method = 'contrastive' needs pairwise data ([data] kind = \"pairwise\"): "
                        f"{exc.message}", field="generate.method") from None
    pool = generate_contrastive(pairs, backend, opts, task=ctx.task, seed=ctx.seed, progress=ctx.progress)
    return GenerateResult(pool, "contrastive", len(pairs), extra={"n_pairs_shown": pool.manifest["n_pairs"]["shown"]})
