"""``rubric-induce datasets``: the names ``--dataset`` and ``[data] dataset`` accept."""
from __future__ import annotations

import click

__all__ = ["command"]


@click.command("datasets")
def command() -> None:
    """List the datasets that --dataset accepts."""
    from rubric_induce.data.datasets import DATASETS

    for name in sorted(DATASETS):
        click.echo(name)
