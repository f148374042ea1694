"""The ``rubric-induce`` command line: one module per command, each a thin adapter over a stage's
library entry point (``rubric_induce.cli.<command>``), registered here and imported when used.

Exit codes: 0 success; 2 bad input or config (a usage error, a bad file, field or value, a path
that cannot be read or written: the message names the file, line and field); 1 a failure while running (a backend that cannot
answer, a missing optional package, generation that produced nothing); 130 interrupted (finished
LLM calls stay in the cache). A user error never ends in a traceback.
"""
from __future__ import annotations

import importlib
import sys
import unicodedata

import click

from rubric_induce import __version__
from rubric_induce.backends.redact import redact_text
from rubric_induce.core.errors import DataError, RubricInduceError

__all__ = ["main", "cli", "COMMANDS", "CommandError", "exit_code", "EXIT_INPUT", "EXIT_FAILURE",
           "EXIT_INTERRUPTED"]

EXIT_FAILURE = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130

# command name -> module under rubric_induce.cli (attribute ``command`` in each)
COMMANDS = {
    "run": "run", "generate": "generate", "dedup": "dedup", "probe": "probe", "select": "select",
    "calibrate": "calibrate", "score": "score", "report": "report", "feedback": "feedback",
    "export": "export", "import": "import_", "datasets": "datasets", "view": "view",
    "plan": "plan", "ingest": "ingest", "cache": "cache",
    "batch-run": "batch_run", "calibrate-guarantee": "calibrate_guarantee", "compare": "compare", "estimate": "estimate",
    "suggest": "suggest",
}


class CommandError(click.ClickException):
    """A library error shown as one ``error: ...`` line with the documented exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(redact_text(message))  # no credential of a backend URL on the screen
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", err=True, file=file)


def one_line(message: str) -> str:
    """``message`` on one line: line breaks and other control characters from the data it names
    (a file name, a field) are shown escaped (``\\n``, ``\\x1e``), never acted on."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in message)


class _LazyGroup(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except RubricInduceError as exc:
            raise CommandError(str(exc), exit_code(exc)) from None
        except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as exc:
            # a path the user gave cannot be read or written: an input error, not a bug
            where = f"{exc.filename}: " if exc.filename else ""
            raise CommandError(f"{where}{exc.strerror or exc}", EXIT_INPUT) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return importlib.import_module(f"{__name__}.{COMMANDS[name]}").command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="rubric-induce")
def cli() -> None:
    """Induce, probe, select and calibrate LLM rubrics from human-labelled examples."""


def exit_code(exc: BaseException) -> int:
    """The documented exit code of an error raised by a command."""
    if isinstance(exc, DataError):
        return EXIT_INPUT
    return EXIT_FAILURE


def main(argv: list[str] | None = None) -> None:
    """Entry point: turn errors into one clear line and the documented exit code."""
    try:
        cli.main(args=argv, prog_name="rubric-induce", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("\ninterrupted; finished LLM calls are in the cache: rerun the same command to resume", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except RubricInduceError as exc:
        click.echo(f"error: {redact_text(str(exc))}", err=True)
        sys.exit(exit_code(exc))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
