"""``rubric-induce compare``: P(A ≻ B) for new pairs with a pairwise run's rubrics and Bradley-Terry head.

``compare RUN --pairs FILE [--out FILE]``: the pairs are read as a pairwise run reads its data
(:func:`~rubric_induce.data.pairs.read_pairs`: LLMBar's ``input, output_1, output_2, label``,
prompt / chosen / rejected, HH-style conversations; JSONL, JSON, CSV or TSV), except that a label is
optional (new pairs seldom have one; a label that is there must name a side). Both responses of each
pair are probed on every selected rubric and :meth:`RubricScorer.compare_outcomes
<rubric_induce.scoring.scorer.RubricScorer.compare_outcomes>` gives P(A ≻ B), P(tie), P(B ≻ A).
One row per pair (JSONL, or CSV / TSV / a JSON array by ``--out``'s suffix). Bad pairs stop before
any LLM call with the file, line and field (exit 2).
"""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.cli._shared import (
    backend_options_given,
    echo,
    progress_option,
    run_backend_options,
    show_progress,
)
from rubric_induce.cli.score import write_rows
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import suggest
from rubric_induce.data.pairs import PAIR_LAYOUTS, PairMapping, read_pairs
from rubric_induce.scoring.scorer import RubricScorer

__all__ = ["command", "pair_rows"]

_ROLES = ("id", "prompt", "a", "b", "label", "chosen", "rejected", "subset")


def _mapping(layout: str, fmt: str, maps: tuple[str, ...], seed: int):
    given: dict[str, object] = {"layout": layout, "format": fmt, "seed": seed}
    for item in maps:
        role, sep, column = item.partition("=")
        role, column = role.strip(), column.strip()
        if not sep or not role or not column:
            raise DataError(f"expected ROLE=COLUMN, got {item!r}", field="--map")
        if role not in _ROLES:
            raise DataError(f"unknown role {role!r}{suggest(role, _ROLES)}; roles: {', '.join(_ROLES)}", field="--map")
        given[role] = column
    return PairMapping.from_mapping(given)


def pair_rows(pairs, outcomes) -> list[dict]:
    """One output row per pair: the three probabilities, the pick, and the gold label where there is one."""
    rows = []
    for pair, (p_a, p_tie, p_b) in zip(pairs, outcomes):
        # the most probable outcome; an exact draw of A and B goes to A, as the TRL judge's pick does
        pick = "tie" if p_tie > max(p_a, p_b) else "A" if p_a >= p_b else "B"
        row = {"id": pair.id, "p_a": float(p_a), "p_tie": float(p_tie), "p_b": float(p_b), "pick": pick,
               "preferred": pair.preferred, "correct": None if pair.preferred is None else pick == pair.preferred}
        if pair.swapped is not None:  # chosen / rejected data: where the chosen response was put
            row["swapped"] = pair.swapped
            row["p_chosen"] = float(p_b if pair.swapped else p_a)
        if pair.subset is not None:
            row["subset"] = pair.subset
        rows.append(row)
    return rows


@click.command("compare")
@click.argument("artifact", type=click.Path(exists=True, path_type=Path))
@click.option("--pairs", "pairs_path", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Pairs to compare: LLMBar-style (input, output_1, output_2[, label]), prompt/chosen/rejected, or "
                   "HH-style chosen/rejected conversations; JSONL, JSON, CSV or TSV. A label is optional.")
@click.option("--layout", type=click.Choice(PAIR_LAYOUTS), default="auto", show_default=True,
              help="ab, chosen_rejected, hh, or auto (from the first row's keys).")
@click.option("--format", "fmt", type=click.Choice(["auto", "jsonl", "json", "csv", "tsv"]), default="auto",
              show_default=True, help="Input format (auto: from the file name).")
@click.option("--map", "maps", multiple=True, metavar="ROLE=COLUMN",
              help="Column holding a role (repeatable): id, prompt, a, b, label, chosen, rejected, subset "
                   "(default: the layout's usual names).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="chosen/rejected data: seed of the chosen side's A/B placement (as [data.mapping] seed).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write, by its suffix: .csv or .tsv, .json (an array), else JSON Lines (default: JSON "
                   "Lines on stdout). Columns: id, p_a = P(A > B), p_tie, p_b, pick, preferred, correct "
                   "(and swapped, p_chosen for chosen/rejected data; subset).")
@run_backend_options
@progress_option
def command(artifact, pairs_path, layout, fmt, maps, seed, out_path, backend_spec, cache_path, progress,
            **backend_opts) -> None:
    """P(A > B) for each pair of a file, with a pairwise run's rubrics and Bradley-Terry head.

    \b
    Examples:
      rubric-induce compare runs/llmbar --pairs new_pairs.json --out verdicts.csv
      rubric-induce compare runs/llmbar --pairs prefs.jsonl --layout chosen_rejected
      rubric-induce compare runs/llmbar --pairs arena.csv --map a=model_a_reply --map b=model_b_reply
    """
    mapping = _mapping(layout, fmt, maps, seed)
    given = backend_options_given(backend_opts) or None
    scorer = RubricScorer.load(artifact, backend=backend_spec, cache=cache_path, backend_options=given)
    try:
        if scorer.kind != "pairwise":
            raise DataError("compare needs a pairwise run's artifact (kind = 'pairwise'); this run scores single "
                            "texts: use `rubric-induce score`", path=scorer.source, field="kind")
        pairs = read_pairs(pairs_path, mapping, labels="optional")  # every pair checked before any LLM call
        if scorer.pairwise_head is None:
            echo("note: this run has no Bradley-Terry head (calibrate disabled): P(A > B) is 1, 0.5 or 0 by the sign "
                 "of the mean rubric difference")
        outcomes = scorer.compare_outcomes([p.prompt for p in pairs], [p.response_a for p in pairs],
                                           [p.response_b for p in pairs], progress=show_progress(progress))
    finally:
        scorer.close()
    rows = pair_rows(pairs, outcomes)
    write_rows(rows, out_path)
    judged = [r for r in rows if r["preferred"] in ("A", "B")]
    line = f"compared {len(rows)} pair(s)"
    if judged:
        right = sum(r["pick"] == r["preferred"] for r in judged)
        line += f"; picked the preferred side on {right} of {len(judged)} labelled non-tie pair(s) ({right / len(judged):.1%})"
    echo(line + (f"; wrote {out_path}" if out_path else ""))
