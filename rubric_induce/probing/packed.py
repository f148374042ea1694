"""Packed probing: one call asks several rubrics about one text and reads one answer per line.

Independent probing (LLM-RUBRIC's way) sends a text once per rubric; on an API that caches no
short prompts (OpenAI caches only prompts of 1,024+ tokens) a text probed on k rubrics is paid k
times. A packed call lists up to ``pack_size`` rubrics after the text, numbered ``R1``, ``R2``, ...
in an order shuffled per text (seeded, recorded in every record), and asks for exactly one line
``R<n>: <answer>`` each. The reply is generated greedily with the top logprobs of every token
(``top_logprobs=20``, what the OpenAI API allows); each rubric's distribution is read at *its*
answer position: the first visible token after its own ``R<n>:`` label at the start of a line,
located by the label and colon in the concatenated token text (so a label split over several
tokens, or fused with the answer, is found), never at the first digit of the reply. Lines out of
order are matched by label; a label without a line, or a line with nothing after the colon, is a
failed probe of that rubric (``error`` set, counted in reports); extra text is ignored. Allowed
answers missing from the top alternatives at the answer position are bounded, as for independent
probes (:class:`~rubric_induce.data.probes.ProbeRecord`): none listed reads as uniform below the bound.

The price is fidelity: later answers are conditioned on the earlier ones in the same reply, and
the model sees all the questions at once. ``experiments/packed_vs_independent.py`` measures it.
"""
from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rubric_induce.backends.base import Backend, TokenLogprob
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import PromptTemplate, load_prompt
from rubric_induce.data.model import Example, Rubric
from rubric_induce.data.render import render_example

__all__ = ["PACKINGS", "PACKED_TEMPLATE", "PACKED_TOP_LOGPROBS", "PackedAnswer", "label_for", "pack_order",
           "pack_groups", "build_packed_messages", "default_format_example", "parse_packed_tokens",
           "parse_packed_text", "packed_max_tokens"]

PACKINGS = ("independent", "packed")
PACKED_TEMPLATE = "probe_packed"
#: Alternatives read at every generated token: the most the OpenAI API returns.
PACKED_TOP_LOGPROBS = 20
# A label at the start of a line (after spaces and markdown bullets/emphasis), then a colon.
_LABEL = re.compile(r"^[ \t>*_#\-]*R(\d+)[ \t*_]*:", re.MULTILINE)
_SKIP = " \t*_`\"'"  # between the colon and the answer: spaces, markdown emphasis, quotes


def label_for(position: int) -> str:
    """The label of the rubric at 0-based ``position`` in a packed prompt: ``R1``, ``R2``, ..."""
    return f"R{position + 1}"


def pack_order(example_id: str, n: int, seed: int) -> list[int]:
    """The shuffled order (indices into the rubric list) of one text's packed rubrics: a function of
    the run's seed and the example id only, so a rerun (or a batch export) asks the same prompt."""
    digest = hashlib.sha256(f"{seed}\x00{example_id}".encode()).digest()
    order = list(range(n))
    random.Random(int.from_bytes(digest[:8], "little")).shuffle(order)
    return order


def pack_groups(example_id: str, n: int, seed: int, pack_size: int | None) -> list[list[int]]:
    """One text's calls: the shuffled rubric indices cut into groups of at most ``pack_size``
    (None: all in one call), sized as evenly as possible."""
    order = pack_order(example_id, n, seed)
    size = n if not pack_size else max(1, int(pack_size))
    n_groups = max(1, math.ceil(n / size))
    base, extra = divmod(n, n_groups)
    out, start = [], 0
    for g in range(n_groups):
        stop = start + base + (1 if g < extra else 0)
        out.append(order[start:stop])
        start = stop
    return out


def _question(position: int, rubric: Rubric, scale_phrase: str) -> str:
    text = " ".join(rubric.text.split())  # one line: a newline inside could look like a label line
    out = f"{label_for(position)}. {text}"
    if rubric.levels:
        out += "\n    Levels: " + "; ".join(f"{lab}: {' '.join(d.split())}"
                                              for lab, d in zip(rubric.scale.labels, rubric.levels))
    return out + f"\n    Answer with only {scale_phrase}."


def default_format_example(n: int) -> str:
    """The reply shape a packed prompt shows for ``n`` questions: ``R1: <answer>``, ``R2: <answer>``, ``...``."""
    shown = [f"{label_for(i)}: <answer>" for i in range(min(2, n))]
    return "\n".join(shown + (["..."] if n > 2 else []))


def build_packed_messages(example: Example, rubrics: Sequence[Rubric], scale_phrases: Sequence[str], *,
                          fields: Sequence[str] | None = None, task: TaskParams | None = None,
                          text: str | None = None, template: PromptTemplate | None = None,
                          format_example: str | None = None) -> tuple[list[dict[str, str]], PromptTemplate]:
    """The chat messages of one packed call (``rubrics`` in the order asked, ``scale_phrases`` their
    answer instructions as the single-question prompts word them) and the template used.

    ``format_example``: the reply shape shown (default :func:`default_format_example`: the first two labels
    with an ``<answer>`` placeholder, then ``...``; no example answer, so none is suggested)."""
    template = template or load_prompt(PACKED_TEMPLATE)
    words = (task or TaskParams()).wording()
    names = list(fields) if fields is not None else list(example.fields)
    questions = "\n".join(_question(i, rb, phrase) for i, (rb, phrase) in enumerate(zip(rubrics, scale_phrases)))
    shown = default_format_example(len(rubrics)) if format_example is None else format_example
    messages = template.render(example=render_example(example, fields) if text is None else text,
                               questions=questions, format_example=shown, kind=words.probe_kind,
                               a_kind=("an " if words.probe_kind[:1].lower() in "aeiou" else "a ") + words.probe_kind,
                               task_block=words.context_block(),
                               fields_note=words.fields_note(names) if len(names) > 1 else "")
    return messages, template


def packed_max_tokens(rubrics: Sequence[Rubric], backend: Backend) -> int:
    """The reply length cap of a packed call: each line's label, colon, longest answer and newline,
    with room to spare (generation stops at the end of the reply anyway)."""
    per = [6 + max(backend.count_tokens(lab) for lab in rb.scale.labels) for rb in rubrics]
    return sum(per) + 16


@dataclass
class PackedAnswer:
    """What a packed reply says for one label: the distribution over the labels' answers (raw, in the
    rubric's answer order), the bound of unlisted answers (None: the backend listed everything), or
    an error (no such line; no allowed answer on it)."""

    raw: list[float] | None
    bound: float | None = None
    error: str | None = None


def parse_packed_tokens(tokens: Sequence[TokenLogprob],
                        labels: Sequence[Sequence[str]]) -> list[PackedAnswer]:
    """The answer distribution of each packed question from the generated tokens' logprobs.

    ``labels[i]``: the allowed answers of the question labelled ``R{i+1}``. Lines are found by
    their label and colon at the start of a line (the first line with a label counts; repeats and
    labels beyond ``len(labels)`` are ignored); the answer position is the first token holding a
    visible character (past spaces, markdown emphasis and quotes) after the colon, on that line.
    Every top alternative there is read as the text it would make after the colon, so " 4", "4"
    and a token fusing the colon with the answer all count; alternatives spelling the same answer
    are summed.
    """
    starts, text = [], ""
    for tok in tokens:
        starts.append(len(text))
        text += tok.token
    found: dict[int, int] = {}
    for m in _LABEL.finditer(text):
        i = int(m.group(1)) - 1
        if 0 <= i < len(labels) and i not in found:
            found[i] = m.end()
    out = []
    for i, answers in enumerate(labels):
        if i not in found:
            out.append(PackedAnswer(None, error=f"no '{label_for(i)}:' line in the packed reply"))
            continue
        out.append(_read_at(tokens, starts, text, found[i], answers, label_for(i)))
    return out


def _read_at(tokens: Sequence[TokenLogprob], starts: list[int], text: str, end: int,
             answers: Sequence[str], label: str) -> PackedAnswer:
    pos = end
    while pos < len(text) and text[pos] in _SKIP:
        pos += 1
    if pos >= len(text) or text[pos] in "\r\n":
        return PackedAnswer(None, error=f"no answer after '{label}:' in the packed reply")
    j = max(k for k, s in enumerate(starts) if s <= pos)  # the token holding the answer's first character
    before = text[: starts[j]]
    tok = tokens[j]
    top = tok.top or {tok.token: tok.logprob}
    raw = []
    for lab in answers:
        lps = [lp for t, lp in top.items()
               if (before + t)[end:].split("\n", 1)[0].strip(_SKIP).rstrip(".,;").lower() == lab.lower()]
        raw.append(float(np.exp(np.logaddexp.reduce(lps))) if lps else 0.0)
    finite = [lp for lp in top.values() if lp > -math.inf]
    bound = math.exp(min(finite)) if finite and tok.top else None
    return PackedAnswer(raw, bound)


def parse_packed_text(text: str, labels: Sequence[Sequence[str]]) -> list[str | None]:
    """The answer written on each question's line of a packed reply (None: no line, or no allowed
    answer at its start); for replies without logprobs (e.g. a transcript).

    Lines are found as :func:`parse_packed_tokens` finds them (first line per label); the answer is
    the allowed answer the line starts with after the colon (past spaces, markdown emphasis and
    quotes), followed by the end of the line or a character that is not a letter or digit, so
    ``R3: 2 - the system repeated itself`` reads 2 and ``R1: The answer is 4`` reads nothing.
    """
    found: dict[int, int] = {}
    for m in _LABEL.finditer(text):
        i = int(m.group(1)) - 1
        if 0 <= i < len(labels) and i not in found:
            found[i] = m.end()
    out: list[str | None] = []
    for i, answers in enumerate(labels):
        if i not in found:
            out.append(None)
            continue
        rest = text[found[i]:].split("\n", 1)[0].lstrip(_SKIP).lower()
        hits = [a for a in answers if rest.startswith(a.lower())
                and (len(rest) == len(a) or not rest[len(a)].isalnum())]
        out.append(max(hits, key=len) if hits else None)
    return out
