"""``rubric-induce view RUN``: the run viewer, one self-contained HTML page (the run's report stage writes it too)."""
from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from rubric_induce.data.jsonl import atomic_write_text
from rubric_induce.pipeline.recorded import examples_from_recorded_config
from rubric_induce.reporting.viewer import VIEW_NAME, build_view_data, check_run_dir, render_view

__all__ = ["command"]


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


@click.command("view")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write (default: RUN_DIR/view.html).")
@click.option("--allow-outside", is_flag=True,
              help="Read the examples the run's config.json names even when they are outside RUN_DIR "
                   "(symlinks resolved) or a shared dataset. Off by default: a received run folder's config "
                   "could name any file on this machine, and the page would embed it.")
@click.option("--open", "open_it", is_flag=True, help="Open the page in the default web browser.")
def command(run_dir, out_path, allow_outside, open_it):
    """Write one self-contained HTML page for a `rubric-induce run` directory: the run summary and
    held-out headline, the selected rubrics (provenance, precision curves) and the ones not selected
    (why), a sortable, filterable table of every text with its rubric answers and judges, and the
    per-judge view with reliability diagrams. No network: scripts, styles and data are inline.

    \b
    The texts come from the examples file the run's config.json names, read only when it is
    inside RUN_DIR unless --allow-outside is given (the page built by `run` itself has them).
    Keys in the page: 1-4 sections, / filter, j/k rows, Enter open, Esc back.
    Example:
      rubric-induce view runs/demo --open
    """
    check_run_dir(run_dir)  # a damaged or foreign manifest: exit 2 naming it; other damage is noted in the page
    data = build_view_data(run_dir, allow_outside=allow_outside, load_examples=examples_from_recorded_config)
    path = out_path if out_path is not None else run_dir / VIEW_NAME
    atomic_write_text(path, render_view(data))
    click.echo(f"{path} ({_size(path.stat().st_size)})")
    for note in data["notes"]:  # what the page could not show because of damage or where a file lies
        if "could not be read" in note or "outside the run folder" in note:
            click.echo(f"note: {note}", err=True)
    if open_it:
        webbrowser.open(path.resolve().as_uri())
