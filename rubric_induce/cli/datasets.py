"""``rubric-induce datasets``: the names ``--dataset`` and ``[data] dataset`` accept."""
from __future__ import annotations

import click

from rubric_induce.data.datasets import DATASETS

__all__ = ["command"]


@click.command("datasets")
def command() -> None:
    """List the datasets that --dataset accepts."""
    for name in sorted(DATASETS):
        click.echo(name)
