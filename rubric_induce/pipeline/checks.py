"""Checks of a run's names and numbers against its data, done before the first LLM call.

:func:`~rubric_induce.pipeline.runner.preflight` calls :func:`check_run_inputs`; ``run`` and
``run --check`` both go through preflight, so ``--check`` refuses exactly what a run would refuse
before it pays for an LLM call. Every error names the config file and the field, and suggests the
closest name the data has.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from rubric_induce.calibration.api import run_questions
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import suggest
from rubric_induce.generation.api import read_domain
from rubric_induce.handoff import import_rubrics

if TYPE_CHECKING:
    from rubric_induce.pipeline.context import RunContext

__all__ = ["check_run_inputs", "known_questions", "check_field_names"]


def known_questions(examples: Iterable) -> list[str]:
    """Every label name the examples carry, as aggregate labels or in judgments."""
    names: dict[str, None] = {}
    for ex in examples:
        names.update(dict.fromkeys(ex.labels))
        for jd in ex.judgments:
            names.update(dict.fromkeys(jd.labels))
    return list(names)


def check_field_names(names: Sequence[str], examples: Sequence, *, source: str | None, field: str) -> None:
    """Each of ``names`` must be a text field of every example (else: which, and the closest name)."""
    have: dict[str, None] = {}
    for ex in examples:
        have.update(dict.fromkeys(ex.fields))
    for name in names:
        lacking = [ex for ex in examples if name not in ex.fields]
        if not lacking:
            continue
        if len(lacking) == len(examples):
            raise DataError(f"names field {name!r}, which the examples do not have{suggest(name, list(have))}; "
                            f"they have {', '.join(have)}", path=source, field=f"{field}.{name}")
        ex = lacking[0]
        line = (ex.meta or {}).get("line")
        raise DataError(f"names field {name!r}, which {len(lacking)} of {len(examples)} examples lack, e.g. "
                        f"{ex.id!r}{f' (line {line})' if isinstance(line, int) else ''}", path=source,
                        field=f"{field}.{name}")


def check_run_inputs(ctx: RunContext, *, calibrate: bool = True) -> None:
    """The domain file and included rubric files (read), and fields, the calibrate question and its
    answers (checked against the examples)."""
    cfg = ctx.config
    src = cfg.source
    read_domain(cfg.generate.domain, cfg.resolve)  # an @file that cannot be read fails now, not in generate
    for path in cfg.generate.include:  # rubric files: parsed now, so a bad line fails before any LLM call
        import_rubrics(cfg.resolve(path))
    examples = ctx.examples
    if cfg.data.fields is not None:
        check_field_names(cfg.data.fields, examples, source=src, field="data.fields")
    check_field_names(list(cfg.task.fields), examples, source=src, field="task.fields")
    if calibrate and cfg.calibrate.enabled:
        _check_calibrate(ctx)


def _check_calibrate(ctx: RunContext) -> None:
    """The calibrate stage's data checks, run before the LLM stages instead of after them: for the
    main question, and for every aspect ``calibrate.questions`` names."""
    cfg = ctx.config
    aspects, named = run_questions(cfg.calibrate, cfg.data)
    field = ("calibrate.questions" if cfg.calibrate.questions else "calibrate.question" if cfg.calibrate.question
             else "data.label")
    for question in aspects if named else aspects[:1]:
        _check_question(ctx, question, field)


def _check_question(ctx: RunContext, question: str, field: str) -> None:
    """One calibrated question's checks: rated by the examples, by at least 4 training texts, with
    at least two answers (and a warning for a lone far-out answer or a continuous label)."""
    cfg = ctx.config
    src = cfg.source
    known = known_questions(ctx.examples)
    if question not in known:
        raise DataError(f"no example has a label or judgment {question!r}{suggest(question, known)}; "
                        f"they have {', '.join(known) or 'none'} (or set calibrate.enabled = false)",
                        path=src, field=field)
    train = [e for e in ctx.train if e.labels.get(question) is not None
             or any(j.labels.get(question) is not None for j in e.judgments)]
    if len(train) < 4:
        held = len(ctx.examples) - len(ctx.train)
        more = f"; {held} of {len(ctx.examples)} are held out: a smaller run.test_size keeps more" if held else ""
        raise DataError(f"only {len(train)} training examples carry label {question!r}; calibration needs at least "
                        f"4 (or set calibrate.enabled = false){more}", path=src, field=field)
    # the answer classes calibration learns: every answer seen, calibrate.not_applicable left out
    na = {float(v) for v in cfg.calibrate.not_applicable}
    counts: dict[float, int] = {}
    for ex in train:
        rows = [j.labels for j in ex.judgments if question in j.labels] or [ex.labels]  # as from_probes
        for labels in rows:
            v = labels.get(question)
            if v is not None and np.isfinite(float(v)) and float(v) not in na:
                counts[float(v)] = counts.get(float(v), 0) + 1
    answers = set(counts)
    if question not in cfg.data.scales:  # a lone answer far outside the rest is likely a typo (a 99 on 1-5)
        for v, n in counts.items():
            rest = [a for a in answers if a != v]
            if n == 1 and len(rest) >= 2:
                lo, hi = min(rest), max(rest)
                if v > hi + (hi - lo) or v < lo - (hi - lo):
                    ctx.echo(f"warning: answer {v:g} to {question!r} appears once, far outside the other answers "
                             f"[{lo:g}, {hi:g}], and becomes a calibration class of its own: declare the range, "
                             f"e.g. [data] scales = {{ {question} = [{lo:g}, {hi:g}] }}, to make it an error")
    n_rows = sum(counts.values())
    if len(answers) >= 12 and len(answers) > n_rows / 2:  # a continuous label: one class per distinct value
        ctx.echo(f"warning: {question!r} has {len(answers)} distinct answers in {n_rows} training ratings; calibration "
                 "learns one class per answer, so most classes have a single example (a continuous label?): round "
                 f"it to a few values (e.g. halves on a 1-5 scale) or calibrate a rating with few answers "
                 "(calibrate.question)")
    if len(answers) < 2:
        raise DataError(f"calibration needs at least two answers to {question!r} in the training split, found "
                        f"{sorted(answers)}{' (calibrate.not_applicable left out)' if na else ''}: calibrate another "
                        "label, or set calibrate.enabled = false", path=src, field=field)
