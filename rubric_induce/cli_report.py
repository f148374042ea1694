"""``rubric-induce report``: render a run directory as markdown with figures.

Kept in its own module so the main CLI only registers it (imported when the command is used).
"""
from __future__ import annotations

from pathlib import Path

import click

__all__ = ["report"]


@click.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Markdown file to write (default: RUN_DIR/report.md). Figures go to RUN_DIR/figures.")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Bootstrap resamples for the confidence intervals.")
@click.option("--alpha", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.05,
              show_default=True, help="1 - confidence level of the intervals.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap and plot jitter.")
@click.option("--figures/--no-figures", default=True, show_default=True,
              help="Draw PNG figures (needs matplotlib: pip install 'rubric-induce[plots]').")
def report(run_dir, out_path, n_boot, alpha, seed, figures):
    """Summarise a run directory: correlations with human scores (dataset and summary level, with
    bootstrap intervals), Williams' tests, kappa, precision and reliability plots, the manifest.

    \b
    Reads, where present: scores.jsonl (anywhere below RUN_DIR), manifest.json, other *.md files.
    Example:
      rubric-induce report runs/summeval --out runs/summeval/report.md
    """
    from .evaluation.run_report import render_run_report

    path = render_run_report(run_dir, out_path, n_boot=n_boot, alpha=alpha, seed=seed, figures=figures)
    click.echo(str(path))
