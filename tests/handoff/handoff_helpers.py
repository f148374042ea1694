"""Helpers shared by the hand-off tests (a module, not conftest.py: two conftest modules would both
be importable as ``conftest``)."""
from __future__ import annotations

GOOD = "Booked for 7 pm, confirmation sent."
BAD = "Sorry, I cannot help with that."


def answer_probs(rubric, good: bool) -> dict[str, float]:
    """The test judge's answer distribution: a SAT rubric holds on the good text, a DSAT one on the
    bad text (high answer 0.7 / low 0.1), and the reverse otherwise; every answer gets some mass."""
    labels = list(rubric.scale.labels)
    order = sorted(range(len(labels)), key=lambda i: rubric.scale.values[i])
    holds = (rubric.polarity != "DSAT") == good
    probs = dict.fromkeys(labels, 0.2 / (len(labels) - 2) if len(labels) > 2 else 0.0)
    hi, lo = labels[order[-1]], labels[order[0]]
    probs[hi], probs[lo] = (0.7, 0.1) if holds else (0.1, 0.7)
    if len(labels) == 2:
        probs[hi], probs[lo] = (0.8, 0.2) if holds else (0.2, 0.8)
    return probs


def rubric_in(text: str, rubrics) -> object:
    """The rubric whose text appears in a prompt (case-insensitive, without its final period: the
    question templates lower-case a leading article), longest first."""
    low = text.lower()
    for r in sorted(rubrics, key=lambda r: -len(r.text)):
        if r.text.rstrip(" .").lower() in low:
            return r
    raise AssertionError(f"no rubric text in prompt: {text[:200]!r}")
