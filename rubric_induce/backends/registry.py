"""The backend registry: each kind of spec string (``fake``, ``local``, ``openai``,
``openai-compatible``) names a factory ``(model, base_url, **options) -> Backend`` that its module
registers; a module is imported only when its kind is opened (llama.cpp, openai stay optional)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rubric_induce.core.registry import Registry

__all__ = ["BACKENDS", "BackendFactory"]

BackendFactory = Callable[..., Any]

BACKENDS: Registry[BackendFactory] = Registry("backend")
BACKENDS.declare("fake", "rubric_induce.backends.fake")
BACKENDS.declare("local", "rubric_induce.backends.local")
BACKENDS.declare("openai", "rubric_induce.backends.openai_compat")
BACKENDS.declare("openai-compatible", "rubric_induce.backends.openai_compat")
