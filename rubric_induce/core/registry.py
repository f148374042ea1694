"""Named implementations of one kind (LLM backends, rubric generators, hand-off formats): a dict
plus a decorator, one pattern for all three.

A name can be declared with the module that registers it, so the registry's owner imports no
optional tool until that name is used: ``handoff`` core imports no tool module, and a base install
lists the ``inspect`` format without importing inspect_ai.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib import import_module
from typing import Generic, TypeVar

from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.params import suggest

__all__ = ["Registry", "UnknownNameError"]

T = TypeVar("T")


class UnknownNameError(RubricInduceError, ValueError):
    """A name no entry of the registry answers to; the message lists the known ones."""


class Registry(Generic[T]):
    """``{name: entry}`` of one kind, filled by :meth:`register` and, lazily, by :meth:`declare`."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._modules: dict[str, str] = {}

    def register(self, name: str, entry: T | None = None) -> Callable[[T], T] | T:
        """Add ``entry`` under ``name``; without ``entry``, a decorator that adds what it decorates."""
        def add(obj: T) -> T:
            if name in self._entries and self._entries[name] is not obj:
                raise RubricInduceError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = obj
            return obj

        return add if entry is None else add(entry)

    def declare(self, name: str, module: str) -> None:
        """Say which module registers ``name``; it is imported the first time the name is asked for."""
        self._modules[name] = module

    def get(self, name: str) -> T:
        """The entry of ``name`` (importing its module when declared); an unknown name lists the known ones."""
        if name not in self._entries and name in self._modules:
            import_module(self._modules[name])
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(f"unknown {self.kind} {name!r}{suggest(name, self.names())}; known: "
                                   + ", ".join(self.names())) from None

    def names(self) -> tuple[str, ...]:
        """Every name, registered or declared, in the order first given."""
        return tuple(dict.fromkeys([*self._modules, *self._entries]))

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
