"""Exception types shared by every stage.

Errors carry enough location (file, line, field) for a user to fix their input without
reading our code.
"""
from __future__ import annotations

from pathlib import Path

__all__ = [
    "RubricInduceError",
    "DataError",
    "BackendError",
    "LogprobsUnavailableError",
    "ContextOverflowError",
    "BackendUnavailableError",
    "UntrustworthyLogprobsError",
    "MissingDependencyError",
    "ReplyParseError",
    "NotFittedError",
]


class RubricInduceError(Exception):
    """Base class for every error raised on purpose by rubric-induce."""


class DataError(RubricInduceError, ValueError):
    """Bad input data; names the file, line (1-based) and field where it was found.

    Args:
        message: What is wrong.
        path: The file it was found in.
        line: The 1-based line (or None).
        field: The column, key or config field.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.message = message
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class BackendError(RubricInduceError, RuntimeError):
    """An LLM backend could not answer (after retries) or was configured wrongly."""


class LogprobsUnavailableError(BackendError):
    """The backend gave no log-probabilities; use the sampling estimator instead."""


class ContextOverflowError(BackendError):
    """One prompt does not fit the model's context window (a per-example error: probing records
    it as a failed probe naming the example; ``probe.max_example_tokens`` or ``backend.n_ctx``
    fix it)."""


class UntrustworthyLogprobsError(BackendError):
    """The server returned a value that is not a log-probability (positive, NaN, not a number): its
    logprobs cannot be trusted for any call, so probing stops at once instead of recording a failed
    probe per call."""


class BackendUnavailableError(BackendError):
    """The backend as a whole cannot answer (credentials refused, no permission, unknown model or
    endpoint, closed): every other call would fail the same way, so probing stops at once instead
    of recording a failed probe per call."""


class ReplyParseError(RubricInduceError, ValueError):
    """An LLM reply could not be parsed into the structure that was asked for."""


class NotFittedError(RubricInduceError, ValueError, AttributeError):
    """An estimator (selector, calibrator, baseline) was used before ``fit``.

    ValueError and AttributeError as in scikit-learn, so code written against sklearn's
    ``NotFittedError`` catches it too. Selection and calibration re-export this one class.
    """


class MissingDependencyError(RubricInduceError, ImportError):
    """An optional package is needed for this feature; the message says what to install."""

    def __init__(self, package: str, feature: str, extra: str | None = None) -> None:
        hint = f"pip install 'rubric-induce[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{feature} needs the optional package {package!r}: {hint}")
        self.package = package
