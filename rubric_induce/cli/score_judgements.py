"""``rubric-induce score --judgements FILE --guarantee-file G.json``: any judges' outputs on new texts
(a judgements file, :mod:`rubric_induce.data.judgements`, read by the same reader as
``calibrate-guarantee --judgements``) answered or abstained with a guarantee that command saved
(:mod:`rubric_induce.scoring.judgements_apply`). No run, no LLM call, no label read."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rubric_induce.cli._shared import echo
from rubric_induce.core.errors import DataError
from rubric_induce.scoring.judgements_apply import score_judgements

__all__ = ["ALLOWED", "score_judgements_file"]

#: The ``score`` options that go with ``--judgements``; any other given on the command line is refused.
ALLOWED = frozenset({"judgements", "guarantee_file", "guarantee", "delta", "out_path", "progress"})


def _refuse_others(ctx: click.Context, artifacts: tuple[Path, ...]) -> None:
    """``--judgements`` reads judges' outputs, not a run: a run, its texts or probes, and the run
    scorer's options do not go with it (exit 2 naming them). Options set by environment variables
    (backend, cache) are not refused: they were not asked for here."""
    given = sorted(p.opts[0] for p in ctx.command.params
                   if p.name not in ALLOWED and p.name != "artifact"
                   and ctx.get_parameter_source(p.name) is click.core.ParameterSource.COMMANDLINE)
    if artifacts:
        given.insert(0, f"a run ({artifacts[0]})")
    if given:
        raise click.UsageError(f"--judgements scores judges' outputs with a saved guarantee; it does not go with "
                               f"{', '.join(given)} (those score texts or probes with a run)")


def _summary(g: Any, rows: list[dict[str, Any]]) -> str:
    """The guarantee's line, then what it did on this file: answered, abstained, calls and cost per text."""
    n = len(rows)
    answered = sum(r["decision"] == "answered" for r in rows)
    calls = sum(r["calls"] for r in rows) / max(n, 1)
    costs = [r["cost"] for r in rows]
    cost = f", cost per text {sum(costs) / n:.4g}" if n and None not in costs else ""
    return (f"{g.line()}; answered {answered} of {n} texts, abstained {n - answered} (calls per text "
            f"{calls:.2f}{cost})")


def score_judgements_file(ctx: click.Context, artifacts: tuple[Path, ...], opts: dict[str, Any],
                          write_rows: Callable[..., None]) -> None:
    """Check the options, answer or abstain each text of ``opts['judgements']`` with the record of
    ``opts['guarantee_file']`` for ``--guarantee`` (and ``--delta``), write a row per text, print
    the guarantee line. ``opts``: the command's options by name."""
    if opts["judgements"] is None or opts["guarantee_file"] is None:
        raise click.UsageError("--judgements FILE and --guarantee-file G.json go together (the file is written by "
                               "rubric-induce calibrate-guarantee --judgements)")
    _refuse_others(ctx, artifacts)
    try:
        g, rows = score_judgements(opts["judgements"], opts["guarantee_file"], target=opts["guarantee"],
                                   delta=opts["delta"])
    except DataError as exc:
        if exc.field != "target":
            raise
        raise DataError(exc.message.replace("--target", "--guarantee"), path=exc.path, field="guarantee") from None
    write_rows(rows, opts["out_path"])
    echo(_summary(g, rows))
    if opts["out_path"]:
        echo(f"scored {len(rows)} texts; wrote {opts['out_path']}")
