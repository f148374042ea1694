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
order are matched by label, and the *last* line of a label counts (:func:`answer_lines`: an echo of
the questions or of the reply shape before the answers never wins). The written answer follows the
text reader's rule (:func:`written_answer`): ``R1: 45`` on a 1-5 scale is no answer, so its first
digit never counts as a confident 4. A label without a line, or a line with nothing after the colon,
is a failed probe of that rubric (``error`` set, counted in reports); extra text is ignored. Allowed
answers missing from the alternatives listed at the answer position are bounded exactly as for
independent probes (one shared reading, :func:`~rubric_induce.backends.base.listed_alternatives`;
:class:`~rubric_induce.data.probes.ProbeRecord`): a reply without ``top_logprobs`` lists only the
chosen token, whose probability bounds the rest, and none listed reads as uniform below the bound.
A reply whose tokens are not text (a damaged server reply) fails every rubric of its call.

The price is fidelity: later answers are conditioned on the earlier ones in the same reply, and
the model sees all the questions at once. ``experiments/bench/packed_vs_independent.py`` measures it.
"""
from __future__ import annotations

import bisect
import hashlib
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rubric_induce.backends.base import Backend, TokenLogprob, listed_alternatives
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import PromptTemplate, load_prompt
from rubric_induce.data.model import Example, Rubric
from rubric_induce.data.render import render_example

__all__ = ["PACKINGS", "PACKED_TEMPLATE", "PACKED_TOP_LOGPROBS", "PackedAnswer", "label_for", "pack_order",
           "pack_groups", "build_packed_messages", "default_format_example", "parse_packed_tokens",
           "parse_packed_text", "packed_max_tokens", "answer_lines", "written_answer", "MAX_LABEL_DIGITS"]

PACKINGS = ("independent", "packed")
PACKED_TEMPLATE = "probe_packed"
#: Alternatives read at every generated token: the most the OpenAI API returns.
PACKED_TOP_LOGPROBS = 20
# A label at the start of a line (after spaces and markdown bullets/emphasis), then a colon.
_LABEL = re.compile(r"^[ \t>*_#\-]*R(\d+)[ \t*_]*:", re.MULTILINE)
_SKIP = " \t*_`\"'"  # between the colon and the answer: spaces, markdown emphasis, quotes
#: The longest question number a label may carry (a longer one is no label: Python refuses to read
#: integers of more than 4,300 digits, and no packed call asks a million questions).
MAX_LABEL_DIGITS = 6


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


def answer_lines(text: str, n: int) -> dict[int, int]:
    """Where each of ``n`` packed questions is answered in ``text``: ``{index: end of its label's colon}``.

    A line counts when it starts with a label ``R<n>`` (after spaces and markdown bullets or emphasis)
    and a colon; labels beyond ``n`` (or of more than :data:`MAX_LABEL_DIGITS` digits) are no lines.
    **The last line of each label counts**: a model that first echoes the questions or the reply shape
    (``R1: <answer>``, or an example answer) and then answers is read at its answers, and one that
    corrects itself at its correction."""
    found: dict[int, int] = {}
    for m in _LABEL.finditer(text):
        digits = m.group(1)
        if len(digits) > MAX_LABEL_DIGITS:  # R<5000 digits>: no question has such a number
            continue
        i = int(digits) - 1
        if 0 <= i < n:
            found[i] = m.end()
    return found


def written_answer(line: str, answers: Sequence[str]) -> str | None:
    """The allowed answer a packed reply's line starts with after its colon, or None (the text reader's
    rule, which the token reader shares): past spaces, markdown emphasis and quotes, an answer
    followed by the end of the line or by a character that is not a letter or digit, so ``2 - the
    system repeated itself`` and ``4.`` read 2 and 4, while ``45`` (on a 1-5 scale) and ``The answer
    is 4`` read nothing. The longest answer that fits wins."""
    rest = line.lstrip(_SKIP).lower()
    hits = [a for a in answers if rest.startswith(a.lower())
            and (len(rest) == len(a.lower()) or not rest[len(a.lower())].isalnum())]
    return max(hits, key=len) if hits else None


def _damaged(tokens: Sequence[TokenLogprob]) -> str | None:
    """Why ``tokens`` cannot be read (a token or alternative that is not text, a logprob that is not a
    number), or None."""
    for k, tok in enumerate(tokens):
        if not isinstance(getattr(tok, "token", None), str):
            return f"token {k} is not text ({getattr(tok, 'token', tok)!r})"
        lp, top = tok.logprob, tok.top
        if isinstance(lp, bool) or not isinstance(lp, (int, float)) or math.isnan(lp):
            return f"token {k} has logprob {lp!r}"
        if top is not None and not (isinstance(top, dict) and all(
                isinstance(t, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)
                for t, v in top.items())):
            return f"token {k} has alternatives that are not {{text: logprob}}"
    return None


def parse_packed_tokens(tokens: Sequence[TokenLogprob],
                        labels: Sequence[Sequence[str]]) -> list[PackedAnswer]:
    """The answer distribution of each packed question from the generated tokens' logprobs.

    ``labels[i]``: the allowed answers of the question labelled ``R{i+1}``. Lines are found by
    :func:`answer_lines` (the last line per label counts); the answer position is the first token
    holding a visible character (past spaces, markdown emphasis and quotes) after the colon, on
    that line. The alternatives listed there (:func:`~rubric_induce.backends.base.listed_alternatives`:
    the chosen token among them) are read so: the chosen token is the answer the line actually
    writes (:func:`written_answer`, the text reader's rule: ``45`` on a 1-5 scale is no answer, so
    its first digit never counts as 4); every other alternative is the text it would make after the
    colon, so " 4", "4" and a token fusing the colon with the answer all count; alternatives
    spelling the same answer are summed. Answers not listed are bounded by the smallest listed
    probability, as for independent probes (also when the backend listed only the chosen token).
    A reply whose tokens are not text is an error for every question.
    """
    why = _damaged(tokens)
    if why is not None:
        return [PackedAnswer(None, error=f"damaged packed reply: {why}") for _ in labels]
    starts, text = [], ""
    for tok in tokens:
        starts.append(len(text))
        text += tok.token
    found = answer_lines(text, len(labels))
    out = []
    for i, answers in enumerate(labels):
        if i not in found:
            out.append(PackedAnswer(None, error=f"no '{label_for(i)}:' line in the packed reply"))
            continue
        out.append(_read_at(tokens, starts, text, found[i], answers, label_for(i)))
    return out


def _line_at(text: str, pos: int) -> str:
    """The text from ``pos`` to the end of its line."""
    return text[pos:].split("\n", 1)[0].split("\r", 1)[0]


def _read_at(tokens: Sequence[TokenLogprob], starts: list[int], text: str, end: int,
             answers: Sequence[str], label: str) -> PackedAnswer:
    pos = end
    while pos < len(text) and text[pos] in _SKIP:
        pos += 1
    if pos >= len(text) or text[pos] in "\r\n":
        return PackedAnswer(None, error=f"no answer after '{label}:' in the packed reply")
    j = bisect.bisect_right(starts, pos) - 1  # the token holding the answer's first character
    before = text[: starts[j]]
    tok = tokens[j]
    written = written_answer(_line_at(text, end), answers)
    alts, bound = listed_alternatives(tok.token, tok.logprob, tok.top or {})
    index = {a.lower(): k for k, a in enumerate(answers)}
    lps: list[list[float]] = [[] for _ in answers]
    for t, lp in alts.items():
        if t == tok.token:
            k = None if written is None else index[written.lower()]
        else:
            k = index.get(_line_at(before + t, end).strip(_SKIP).rstrip(".,;").lower())
        if k is not None:
            lps[k].append(lp)
    raw = [float(np.exp(np.logaddexp.reduce(v))) if v else 0.0 for v in lps]
    return PackedAnswer(raw, None if bound is None else math.exp(bound))


def parse_packed_text(text: str, labels: Sequence[Sequence[str]]) -> list[str | None]:
    """The answer written on each question's line of a packed reply (None: no line, or no allowed
    answer at its start); for replies without logprobs (e.g. a transcript).

    Lines are found as :func:`parse_packed_tokens` finds them (:func:`answer_lines`: the last line per
    label); the answer is :func:`written_answer` of the line after the colon, so
    ``R3: 2 - the system repeated itself`` reads 2 and ``R1: The answer is 4`` reads nothing.
    """
    found = answer_lines(text, len(labels))
    return [None if i not in found else written_answer(_line_at(text, found[i]), answers)
            for i, answers in enumerate(labels)]
