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
- **copies an example**: it holds a long span (>= ``min_span`` consecutive words) of an example
  the LLM was shown (e.g. article sentences pasted into an AutoCalibrate criterion).

RUBICON, SPUR and AutoCalibrate screen every item with :class:`RubricScreen` before it enters the
pool and count each rejection by reason in :class:`~rubric_induce.backends.structured.GenerationStats`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["RubricScreen", "rejection_reason", "REASONS", "LABEL", "ANNOTATION", "PROMPT", "EXAMPLE"]

LABEL = "restates the label"
ANNOTATION = "names the annotation"
PROMPT = "copies prompt text"
EXAMPLE = "copies an example"
REASONS = (LABEL, ANNOTATION, PROMPT, EXAMPLE)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_ANNOTATION = re.compile(
    r"\b(label(?:l?ed|s|l?ing)?|annotat(?:ed|ion|ions|or|ors)|raters?|ground truth|human judges?|"
    r"crowd ?workers?)\b")
# Words that carry no content of their own in a short assertion.
_STOP = frozenset("""a an the this that these those it its it's is are was were be been being am has have had
do does did not no very overall generally clearly quite rather so too as of in on at to for with by from
and or but than then there here they them their he she his her we our you your i me my one""".split())
_PARTIES = frozenset("""user users assistant assistants system bot agent conversation conversations dialogue
dialog chat text texts output outputs response responses summary summaries answer answers""".split())


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


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
    and few-shot examples; ``examples``: the example texts shown. ``criteria``: screen long
    AutoCalibrate criteria (they may talk about scores, so only the copy checks apply, and prompt
    text counts as copied only when the whole criterion repeats it).
    """

    class_words: Iterable[str] = ()
    kind_words: Iterable[str] = ()
    prompt_texts: Iterable[str] = ()
    examples: Iterable[str] = ()
    min_span: int = 8
    min_prompt_words: int = 4
    criteria: bool = False
    _prompt: list[list[str]] = field(init=False, repr=False)
    _prompt_grams: set[tuple[str, ...]] = field(init=False, repr=False)
    _example_grams: set[tuple[str, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_span < 2:
            raise ValueError("min_span must be at least 2")
        self.class_words = frozenset(w for t in self.class_words for w in _words(t))
        self.kind_words = frozenset(w for t in self.kind_words for w in _words(t)) | _PARTIES
        self._prompt = [_words(t) for t in self.prompt_texts if t]
        self._prompt_grams = set().union(*(_ngrams(w, self.min_span) for w in self._prompt)) if self._prompt else set()
        ex = [_words(t) for t in self.examples if t]
        self._example_grams = set().union(*(_ngrams(w, self.min_span) for w in ex)) if ex else set()

    def add_examples(self, texts: Iterable[str]) -> None:
        for t in texts:
            self._example_grams |= _ngrams(_words(t), self.min_span)

    def reason(self, text: str) -> str | None:
        """Why ``text`` is rejected (one of :data:`REASONS`), or None to keep it."""
        words = _words(text)
        if not words:
            return None
        if not self.criteria:
            if _ANNOTATION.search(" ".join(words)):
                return ANNOTATION
            content = [w for w in words if w not in _STOP and w not in self.kind_words]
            if content and self.class_words and all(_same_word(w, self.class_words) for w in content):
                return LABEL
        if len(words) >= self.min_prompt_words and any(_contains(p, words) for p in self._prompt):
            return PROMPT
        grams = _ngrams(words, self.min_span)
        if not self.criteria and grams & self._prompt_grams:
            return PROMPT
        if grams & self._example_grams:
            return EXAMPLE
        return None


def rejection_reason(text: str, *, class_words: Iterable[str] = (), kind_words: Iterable[str] = (),
                     prompt_texts: Iterable[str] = (), examples: Iterable[str] = (), min_span: int = 8,
                     criteria: bool = False) -> str | None:
    """One-off :meth:`RubricScreen.reason` (build a :class:`RubricScreen` to screen many items)."""
    return RubricScreen(class_words, kind_words, prompt_texts, examples, min_span=min_span,
                        criteria=criteria).reason(text)
