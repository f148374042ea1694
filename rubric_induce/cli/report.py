"""``rubric-induce report RUN``: a run directory as markdown with figures (the run's own report stage)."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.core.params import click_options
from rubric_induce.reporting.report import ReportParams, report

__all__ = ["command"]


@click.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown file to write (default: RUN_DIR/report.md). Figures go to RUN_DIR/figures.")
@click_options(ReportParams)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap and plot jitter.")
def command(run_dir, out_path, seed, **options):
    """Summarise a run directory: the run summary (for `rubric-induce run` folders), correlations with
    human scores (dataset and summary level, with bootstrap intervals), Williams' tests, kappa,
    precision and reliability plots, the manifest.

    \b
    Reads, where present: manifest.json, stages/, selected.jsonl, scores.jsonl (anywhere below
    RUN_DIR), other *.md files.
    Example:
      rubric-induce report runs/summeval --out runs/summeval/report.md
    """
    click.echo(str(report(run_dir, ReportParams.from_kwargs(options), out=out_path, seed=seed)))
