"""Which LLM answers and where its calls are cached: :class:`BackendParams`."""
from __future__ import annotations

from dataclasses import dataclass

from ..params import Params, param

__all__ = ["BackendParams"]


@dataclass(frozen=True)
class BackendParams(Params):
    """The backend spec (see :func:`~rubric_induce.backends.get_backend`) and the call cache file."""

    section = "backend"
    spec: str = param("local", help="LLM backend: local[/model.gguf], openai/<model>, "
                                    "openai-compatible/<model>@<base_url>, fake.")
    cache: str = param("llm_calls.sqlite", help="SQLite call cache (in a run: relative to the run directory).")

    def check(self) -> None:
        from ..errors import BackendError, DataError
        from . import parse_backend_spec

        try:
            parse_backend_spec(self.spec)
        except BackendError as exc:
            raise DataError(str(exc), field="backend.spec") from None
