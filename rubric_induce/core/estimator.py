"""scikit-learn's parameter plumbing, once, for the selectors, calibrators and heads.

Every estimator here follows scikit-learn's contract: the constructor only stores its arguments,
which are the parameters; ``fit`` returns ``self`` and learned attributes end in ``_``. This base
gives them ``get_params`` / ``set_params`` (so ``sklearn.base.clone`` and grid searches work),
``clone`` (an unfitted copy, with overrides) and a ``repr`` that shows the parameters that differ
from the constructor's defaults, as scikit-learn prints its own.
"""
from __future__ import annotations

import inspect
from typing import Any, TypeVar

__all__ = ["Estimator", "param_names"]

E = TypeVar("E", bound="Estimator")


def param_names(cls: type) -> tuple[str, ...]:
    """The parameters of an estimator class: its constructor's arguments, in order."""
    return tuple(p for p in inspect.signature(cls.__init__).parameters if p != "self")


def _differs(value: Any, default: Any) -> bool:
    if default is inspect.Parameter.empty:
        return True
    try:
        return bool(value != default)
    except (TypeError, ValueError):  # arrays and the like: shown
        return True


class Estimator:
    """Base of the estimators: parameters are the constructor's arguments, stored under their names."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's arguments (no parameter is itself an estimator, so ``deep`` changes nothing)."""
        return {name: getattr(self, name) for name in param_names(type(self))}

    def set_params(self: E, **params: Any) -> E:
        names = param_names(type(self))
        for key, value in params.items():
            if key not in names:
                raise ValueError(f"unknown {type(self).__name__} parameter {key!r}; valid: {', '.join(names)}")
            setattr(self, key, value)
        return self

    def clone(self: E, **overrides: Any) -> E:
        """An unfitted copy with the same parameters (and ``overrides``)."""
        return type(self)(**{**self.get_params(), **overrides})

    def __repr__(self) -> str:
        defaults = inspect.signature(type(self).__init__).parameters
        shown = {k: v for k, v in self.get_params().items() if _differs(v, defaults[k].default)}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
