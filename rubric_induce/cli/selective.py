"""``score --guarantee`` and ``score --cascade``: the options and the cascade path of ``rubric-induce
score`` (selective scoring; fitted by ``rubric-induce calibrate-guarantee``)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from rubric_induce.cli._shared import echo
from rubric_induce.core.errors import DataError
from rubric_induce.scoring.artifact import ARTIFACT_NAME
from rubric_induce.scoring.guarantee import check_level
from rubric_induce.scoring.scorer import RubricScorer
from rubric_induce.scoring.selective import check_cascade, resolve_cascade, resolve_guarantee, run_folder, score_cascade

__all__ = ["guarantee_options", "selective_entry", "guarantee_summary"]


def guarantee_options(f):
    f = click.option("--cascade", is_flag=True, default=False,
                     help="Score through a cascade: give the runs cheapest first (score --cascade RUN_CHEAP "
                          "RUN_STRONG ...); each text goes to the first run confident enough, what none answers "
                          "is abstained. Needs --guarantee and a cascade fitted by calibrate-guarantee.")(f)
    f = click.option("--measure", type=click.Choice(["proba", "heads", "variance"]), default=None,
                     help="--guarantee: the confidence measure it was fitted with (default: any).")(f)
    f = click.option("--delta", type=float, default=None,
                     help="--guarantee: its delta (holds with probability >= 1 - delta; default: any fitted).")(f)
    return click.option("--guarantee", type=float, default=None, metavar="TARGET",
                        help="Answer only texts confident enough for agreement with humans >= TARGET on the "
                             "answered ones (fitted by calibrate-guarantee); each row gets `answered` and "
                             "`confidence`.")(f)


def selective_entry(artifacts: Sequence[Path], *, cascade: bool, guarantee: float | None, delta: float | None,
                    measure: str | None, input_path: Path | None, probes_path: Path | None, out_path: Path | None,
                    backend_spec: str | None, cache_path: Path | None, adaptive: bool, mapping: Callable[[Any], Any],
                    progress: bool, write_rows: Callable[..., None]) -> Path | None:
    """Check the selective options; run a cascade (returns None), else return the one run to score."""
    if guarantee is not None:
        check_level(guarantee, "guarantee")
    if delta is not None:
        check_level(delta, "delta")
    if guarantee is None and (delta is not None or measure is not None):
        raise click.UsageError("--delta and --measure go with --guarantee")
    if guarantee is not None and adaptive:
        raise DataError("a guarantee was fitted on texts scored with every rubric; it does not hold with "
                        "--adaptive", field="guarantee")
    if not cascade:
        if len(artifacts) > 1:
            raise click.UsageError("give one run (several go with --cascade, cheapest first)")
        artifact = artifacts[0]
        is_run = (artifact / ARTIFACT_NAME).exists() if artifact.is_dir() else artifact.name == ARTIFACT_NAME
        if guarantee is not None and not is_run:
            raise DataError(f"--guarantee needs a run (with {ARTIFACT_NAME}) it was fitted into",
                            path=artifact, field="guarantee")
        return artifact
    if guarantee is None:
        raise DataError("--cascade needs --guarantee TARGET (a cascade fitted by calibrate-guarantee)",
                        field="guarantee")
    if len(artifacts) < 2:
        raise DataError("--cascade needs two or more runs, cheapest first", field="cascade")
    if input_path is None or probes_path is not None:
        raise click.UsageError("--cascade scores texts (--input FILE): each run probes with its own rubrics")
    _score_cascade(artifacts, guarantee, delta, input_path, out_path, backend_spec, cache_path, mapping, progress,
                   write_rows)
    return None


def _score_cascade(artifacts, target, delta, input_path, out_path, backend_spec, cache_path, mapping, progress,
                   write_rows) -> None:
    names = [str(run_folder(a)) for a in artifacts]
    scorers = [RubricScorer.load(a, backend=backend_spec, cache=cache_path) for a in artifacts]
    try:
        check_cascade(scorers, names)
        record = resolve_cascade(artifacts[0], names, target, delta)
        examples = scorers[0].read(input_path, mapping(scorers[0]))
        results, report = score_cascade(scorers, names, examples, record, progress=progress)
    finally:
        for s in scorers:
            s.close()
    write_rows((r.to_dict() for r in results), out_path)
    echo(f"cascade: agreement >= {record['target']:g} guaranteed with probability >= {1 - record['delta']:g} "
         f"({record.get('method', 'bonferroni')}); answered {report['answered']} of {report['n']} texts "
         f"({report['coverage']:.1%}), abstained {report['abstained']}; {report['calls']} probe calls"
         + (f", ${report['cost']:.4f}" if report["cost"] is not None else ""))
    for row in report["stages"]:
        cost = f", ${row['cost']:.4f}" if row["cost"] is not None else ""
        echo(f"  {Path(row['stage']).name}: reached {row['reached']}, answered {row['answered']} "
             f"({row['coverage']:.1%}), {row['calls']} calls{cost}")


def guarantee_summary(scorer: Any, answered: int, total: int, wanted: Any) -> str:
    """The guarantee line and how many of the ``total`` texts were ``answered``."""
    g = resolve_guarantee(wanted, scorer.source)
    return f"{g.line()}; answered {answered} of {total} texts, abstained {total - answered}"
