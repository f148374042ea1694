"""Shards without a coordinator: texts split by a stable hash of their id.

``--shard i/n`` gives machine ``i`` (1-based) the texts whose id hashes to ``i``: the split needs no
shared state, does not depend on the order or number of texts (adding texts never moves another
text to a different shard), and the ``n`` shards are disjoint and together complete. Each machine
probes its shard into its own call cache; ``rubric-induce cache merge`` joins the caches (keys are
content hashes, so equal keys hold equal calls) and a run over the merged cache makes no probe call.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from rubric_induce.core.errors import DataError

__all__ = ["Shard", "parse_shard", "shard_of", "select_shard"]

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, example_id: str) -> bool:
        return shard_of(example_id, self.count) == self.index

    @property
    def tag(self) -> str:
        """A file-name-safe label, e.g. ``shard-2-of-8``."""
        return f"shard-{self.index}-of-{self.count}"


_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text: str | Shard | None, *, field: str = "--shard") -> Shard | None:
    """``"i/n"`` (1 <= i <= n) as a :class:`Shard`; None stays None; anything else is a DataError."""
    if text is None or isinstance(text, Shard):
        return text
    m = _SHARD.fullmatch(str(text))
    if not m:
        raise DataError(f"expected i/n (e.g. 2/8: the second of eight shards), got {text!r}", field=field)
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise DataError(f"shard {i}/{n}: i must lie between 1 and n (n >= 1)", field=field)
    return Shard(i, n)


def shard_of(example_id: str, count: int) -> int:
    """The shard (1-based, of ``count``) that holds the text with this id: SHA-256 of the id, mod n."""
    digest = hashlib.sha256(str(example_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % int(count) + 1


def select_shard(items: Iterable[T], shard: Shard | str | None, *, key=lambda e: e.id) -> list[T]:
    """The items of ``shard`` in their order (all of them when ``shard`` is None)."""
    shard = parse_shard(shard)
    items = list(items)
    if shard is None:
        return items
    return [it for it in items if shard_of(key(it), shard.count) == shard.index]
