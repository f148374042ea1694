"""Lazy torch import with a clear error when the optional dependency is missing."""
from __future__ import annotations

from typing import Any

from rubric_induce.core.errors import MissingDependencyError

__all__ = ["require_torch"]


def require_torch() -> Any:
    """Import and return torch, or raise :class:`MissingDependencyError` naming the extra."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise MissingDependencyError("torch", "the calibration network", extra="calibrate") from exc
    return torch
