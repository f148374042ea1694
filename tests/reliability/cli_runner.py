"""The reliability suite's way to run the CLI: in-process, where a traceback fails the test.

Imported as ``from cli_runner import invoke`` (pytest puts this folder on ``sys.path`` for the
suite's test files, which have no ``__init__.py``), as ``runconfigs`` is.
"""
from __future__ import annotations

from click.testing import CliRunner

from rubric_induce.cli import cli


def invoke(*args) -> tuple[int, str]:
    """Run the CLI in-process with ``args`` (made strings); an exception that is not a clean exit
    fails the test with its traceback, and no output may hold one. Returns (exit code, output)."""
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        raise AssertionError("".join(traceback.format_exception(res.exception)))
    assert "Traceback" not in res.output
    return res.exit_code, res.output
