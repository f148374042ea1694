"""Reject generated rubrics that cannot work as rubrics, with the reason (:func:`rejection_reason`).

A rubric is useful only if a judge can check it on an unlabelled text. Four kinds of generated
item fail that, and small models produce all of them:

- **restates the label**: the rubric says only that the text belongs to a class ("The user was
  satisfied.", "The summary is consistent."): its words, beyond the kind of text and its parties,
  are class names;
- **names the annotation**: it talks about the labelling itself ("The conversation was labelled
  negative.", "The rater gave a high score.");
- **copies prompt text**: it repeats the task description, a CDP/DS block or a few-shot example of
  the prompt (e.g. "The assistant confirms the details before booking." from the uss preset);
- **copies an example**: it holds a span (>= ``example_span`` consecutive words, 6 by default,
  after lower-casing and dropping punctuation) of an example text (e.g. article sentences pasted
  into an AutoCalibrate criterion); the copied span is quoted in the rejection record;
- **copies a rater's reason**: the same span test against the raters' free-text reasons shown as
  evidence (``[data.mapping] rationale``): a reason is evidence to generalise from, not a rubric;
- **is generic**: it says only that the text is good or meets the criteria ("The response meets
  all criteria.", "The response is a natural utterance."): every word beyond the kind of text and
  its parties is a generic word of praise or blame, or it appeals to "all criteria".

The label, annotation, generic and prompt checks look at **each sentence** on its own: one bad
sentence rejects the rubric, so a restatement cannot hide behind a second sentence ("The response
is a natural utterance. The response meets all criteria.").

RUBICON, SPUR and AutoCalibrate screen every item with :class:`RubricScreen` before it enters the
pool and count each rejection by reason in :class:`~rubric_induce.backends.structured.GenerationStats`;
:func:`~rubric_induce.generation.api.generate` screens the generated pool once more for copies of
any training text (not only the ones shown to the LLM).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rubric_induce.backends.structured import MAX_REJECTED_ITEMS, GenerationError

__all__ = ["RubricScreen", "Rejection", "rejection_reason", "copied_span", "screen_item", "record_rejection",
           "sentences", "REASONS", "LABEL", "ANNOTATION", "PROMPT", "EXAMPLE", "REASON", "GENERIC"]

LABEL = "restates the label"
ANNOTATION = "names the annotation"
PROMPT = "copies prompt text"
EXAMPLE = "copies an example"
GENERIC = "is generic"
REASON = "copies a rater's reason"
REASONS = (LABEL, ANNOTATION, PROMPT, EXAMPLE, REASON, GENERIC)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_ANNOTATION = re.compile(
    r"\b(label(?:l?ed|s|l?ing)?|annotat(?:ed|ion|ions|or|ors)|raters?|ground truth|human judges?|"
    r"crowd ?workers?)\b")
# Words that carry no content of their own in a short assertion.
_STOP = frozenset("""a an the this that these those it its it's is are was were be been being am has have had
do does did not no very overall generally clearly quite rather so too as of in on at to for with by from
and or but than then there here they them their he she his her we our you your i me my one""".split())
#: Words of praise or blame that say nothing a judge could check ("good", "meets all criteria").
_GENERIC_WORDS = frozenset("""good bad great excellent poor poorly fine ok okay nice perfect ideal quality high low
natural naturally utterance utterances appropriate inappropriate acceptable unacceptable adequate inadequate
satisfactory unsatisfactory correct incorrect right wrong well written overall all every criteria criterion
requirement requirements standard standards expectation expectations expected meets meet met satisfies fulfils
fulfills fulfil fulfill""".split())
_GENERIC = re.compile(
    r"\b(?:meets?|met|satisf(?:y|ies)|fulfil?ls?|follows?|passes?)\s+"
    r"(?:(?:all|every|each|any)\s+(?:of\s+)?(?:the\s+)?(?:(?:stated|given|listed|necessary|required|relevant|"
    r"specified|above|quality|user's|task's|evaluation)\s+)?|the\s+)"
    r"(?:criteria|criterion|requirements?|standards?|expectations?|rubrics?|guidelines?)\b")
#: Words that add nothing to a class word ("a natural response to the question", "a mix of natural
#: and unnatural language"): next to class words alone they still make a restatement of the label.
_FILLER = frozenset("""question questions language mix way manner sense reply replies message messages statement
statements turn turns context topic thing things kind sort sounding sounds seems looks""".split())
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_PARTIES = frozenset("""user users assistant assistants system bot agent conversation conversations dialogue
dialog chat text texts output outputs response responses summary summaries answer answers""".split())


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (at ``.``, ``!``, ``?`` or ``;`` followed by a space)."""
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text.strip())) if _words(s)]


@dataclass(frozen=True)
class Rejection:
    """Why a rubric was rejected: the reason (one of :data:`REASONS`) and the evidence (the
    offending sentence, or the span copied from a text)."""

    reason: str
    sentence: str | None = None
    span: str | None = None

    def record(self, text: str) -> dict[str, str]:
        """The entry for ``GenerationStats.rejected_items``."""
        out = {"reason": self.reason, "text": text}
        if self.span is not None:
            out["span"] = self.span
        if self.sentence is not None and self.sentence != text.strip():
            out["sentence"] = self.sentence
        return out


def copied_span(words: Sequence[str], grams: set[tuple[str, ...]], n: int) -> str | None:
    """The longest run of ``words`` made of ``n``-grams in ``grams`` (a span shared with a text),
    joined by spaces; None when no ``n``-gram is shared."""
    hits = [i for i in range(len(words) - n + 1) if tuple(words[i:i + n]) in grams]
    if not hits:
        return None
    best, start, end = (0, 0), hits[0], hits[0] + n
    for i in hits[1:] + [None]:
        if i is not None and i <= end - n + 1:
            end = i + n
            continue
        if end - start > best[1] - best[0]:
            best = (start, end)
        if i is not None:
            start, end = i, i + n
    return " ".join(words[best[0]:best[1]])


def _ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _same_word(word: str, names: frozenset[str]) -> bool:
    """``word`` is one of ``names`` or an inflection of one ("consistently", "satisfied" for
    "consistent", "satisfaction"): a shared prefix of all but the last three letters, at least 5."""
    if word in names:
        return True
    for name in names:
        n = 0
        for a, b in zip(word, name):
            if a != b:
                break
            n += 1
        if n >= 5 and n >= min(len(word), len(name)) - 3:
            return True
    return False


def _contains(hay: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return any(list(hay[i:i + n]) == list(needle) for i in range(len(hay) - n + 1))


@dataclass
class RubricScreen:
    """The inputs a generator showed the LLM, to screen its replies against.

    ``class_words``: words naming the label's classes; ``kind_words``: the kind of text and its
    parties (allowed next to class words); ``prompt_texts``: task description, instruction blocks
    and few-shot examples; ``examples``: the example texts shown; ``reasons``: the raters' reasons
    shown with them (screened like example texts, rejected as :data:`REASON`). ``criteria``: screen long
    AutoCalibrate criteria (they may talk about scores, so only the copy checks apply, and prompt
    text counts as copied only when the whole criterion repeats it). ``min_span``: words shared
    in a row with prompt text that make a copy; ``example_span``: the same for example texts.
    """

    class_words: Iterable[str] = ()
    kind_words: Iterable[str] = ()
    prompt_texts: Iterable[str] = ()
    examples: Iterable[str] = ()
    min_span: int = 8
    min_prompt_words: int = 4
    criteria: bool = False
    example_span: int = 6
    reasons: Iterable[str] = ()
    _prompt: list[list[str]] = field(init=False, repr=False)
    _prompt_grams: set[tuple[str, ...]] = field(init=False, repr=False)
    _example_grams: set[tuple[str, ...]] = field(init=False, repr=False)
    _reason_grams: set[tuple[str, ...]] = field(init=False, repr=False)
    _short_reasons: list[list[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_span < 2 or self.example_span < 2:
            raise ValueError("min_span and example_span must be at least 2")
        self.class_words = frozenset(w for t in self.class_words for w in _words(t))
        self.kind_words = frozenset(w for t in self.kind_words for w in _words(t)) | _PARTIES
        self._prompt = [_words(t) for t in self.prompt_texts if t]
        self._prompt_grams = set().union(*(_ngrams(w, self.min_span) for w in self._prompt)) if self._prompt else set()
        ex = [_words(t) for t in self.examples if t]
        self._example_grams = set().union(*(_ngrams(w, self.example_span) for w in ex)) if ex else set()
        why = [_words(t) for t in self.reasons if t]
        self._reason_grams = set().union(*(_ngrams(w, self.example_span) for w in why)) if why else set()
        # a reason shorter than the span is a copy when the rubric holds all of it
        self._short_reasons = [w for w in why if self.min_prompt_words <= len(w) < self.example_span]

    def reason(self, text: str) -> str | None:
        """Why ``text`` is rejected (one of :data:`REASONS`), or None to keep it."""
        found = self.check(text)
        return found.reason if found else None

    def check(self, text: str) -> Rejection | None:
        """Why ``text`` is rejected, with the offending sentence or copied span; None to keep it."""
        words = _words(text)
        if not words:
            return None
        for sentence in (sentences(text) or [text]):
            found = self._sentence(sentence)
            if found is not None:
                return found
        if self.criteria and len(words) >= self.min_prompt_words and any(_contains(p, words) for p in self._prompt):
            return Rejection(PROMPT)  # a criterion may quote the prompt; repeating it whole is a copy
        grams = _ngrams(words, self.min_span)
        if not self.criteria and grams & self._prompt_grams:
            return Rejection(PROMPT, span=copied_span(words, self._prompt_grams, self.min_span))
        span = copied_span(words, self._example_grams, self.example_span)
        if span is not None:
            return Rejection(EXAMPLE, span=span)
        span = copied_span(words, self._reason_grams, self.example_span)
        if span is None:
            span = next((" ".join(r) for r in self._short_reasons if _contains(words, r)), None)
        if span is not None:
            return Rejection(REASON, span=span)
        return None

    def _sentence(self, sentence: str) -> Rejection | None:
        words = _words(sentence)
        if not words:
            return None
        if not self.criteria:
            joined = " ".join(words)
            if _ANNOTATION.search(joined):
                return Rejection(ANNOTATION, sentence)
            content = [w for w in words if w not in _STOP and w not in self.kind_words]
            named = [w for w in content if w not in _FILLER]
            if named and self.class_words and all(_same_word(w, self.class_words) for w in named):
                return Rejection(LABEL, sentence)
            if _GENERIC.search(joined) or all(w in _GENERIC_WORDS or _same_word(w, self.class_words)
                                              for w in content):  # no content word at all is generic too
                return Rejection(GENERIC, sentence)
            if len(words) >= self.min_prompt_words and any(_contains(p, words) for p in self._prompt):
                return Rejection(PROMPT, sentence)
        return None


def screen_item(screen: RubricScreen | None, text: str, stats) -> bool:
    """Whether ``screen`` keeps ``text``; a rejection is counted in ``stats`` (a
    :class:`~rubric_induce.backends.structured.GenerationStats`) by reason, its record quoting the evidence."""
    found = screen.check(text) if screen is not None else None
    if found is None:
        return True
    record_rejection(stats, found, text)
    return False


def record_rejection(stats, found: Rejection, text: str) -> None:
    """Count ``found`` in ``stats`` and keep its record (text, offending sentence, copied span)."""
    stats.reject(found.reason)
    if len(stats.rejected_items) < MAX_REJECTED_ITEMS:
        stats.rejected_items.append(found.record(text))


def no_rubrics_error(what: str, stats):
    """The :class:`~rubric_induce.backends.structured.GenerationError` of a generator that kept no rubric:
    what went wrong (failures, the first rejections with their reasons) and what helps; it carries
    ``stats`` so a caller with included rubrics can still report them."""
    rejected = "; ".join(f"{r['text']!r} ({r['reason']})" for r in stats.rejected_items[:3])
    err = GenerationError(f"{what} generation produced no rubrics: {stats.summary()}; "
                          f"first failure: {stats.failures[0].error if stats.failures else 'none'}"
                          + (f"; rejected, e.g. {rejected}" if rejected else "")
                          + "; a stronger backend, or hand-written rubrics in generate.include, help")
    err.stats = stats.to_dict()  # type: ignore[attr-defined]
    return err


def rejection_reason(text: str, *, class_words: Iterable[str] = (), kind_words: Iterable[str] = (),
                     prompt_texts: Iterable[str] = (), examples: Iterable[str] = (), min_span: int = 8,
                     criteria: bool = False, example_span: int = 6) -> str | None:
    """One-off :meth:`RubricScreen.reason` (build a :class:`RubricScreen` to screen many items)."""
    return RubricScreen(class_words, kind_words, prompt_texts, examples, min_span=min_span,
                        criteria=criteria, example_span=example_span).reason(text)
