"""Pairs as the pointwise examples the probe stage reads, and back.

A pairwise run (``[data] kind = "pairwise"``) probes each response on its own: the pair ``p``
becomes two :class:`~rubric_induce.data.model.Example` objects, ``p/A`` and ``p/B``, whose fields
are ``prompt`` then ``response`` (the prompt first, so a backend that reuses a cached prefix reuses
it per response), grouped by the pair (a split never cuts a pair). Their label (``data.label``) is
1 for the preferred response and 0 for the other; both responses of a tie get 0. That pointwise
label is what the pointwise stages (generation) see; selection, calibration and evaluation use the
pair's preference itself.

With ``[probe] pairwise = true`` each pair also becomes two *order examples*, ``p/AB`` (response
A shown first) and ``p/BA`` (response B shown first), whose fields are ``prompt``, ``first`` and
``second`` and whose ``meta["pair_order"]`` names the order: the pairwise probe asks each rubric
which of the two shown responses meets it better, once per order
(:mod:`rubric_induce.probing.pairwise`).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Example
from rubric_induce.data.pairs import Pair

__all__ = ["SIDES", "PAIR_FIELDS", "ORDERS", "ORDER_FIELDS", "pair_examples", "side_id", "pairs_in", "order_id",
           "order_examples", "pair_order", "pairs_from_examples"]

SIDES = ("A", "B")
PAIR_FIELDS = ("prompt", "response")
#: The two presentation orders of a pairwise probe: A shown first, then B shown first.
ORDERS = ("AB", "BA")
ORDER_FIELDS = ("prompt", "first", "second")


def side_id(pair_id: str, side: str) -> str:
    """The example id of one side of a pair: ``<pair>/A`` or ``<pair>/B``."""
    return f"{pair_id}/{side}"


def pair_examples(pairs: Sequence[Pair], label: str = "sat") -> list[Example]:
    """Two examples per pair (A then B), labelled 1 (preferred) / 0 (the other; both sides of a tie)."""
    out: list[Example] = []
    for p in pairs:
        for side, text in zip(SIDES, (p.response_a, p.response_b)):
            meta: dict[str, Any] = {"pair": p.id, "side": side}
            if p.subset is not None:
                meta["subset"] = p.subset
            out.append(Example(id=side_id(p.id, side), fields={"prompt": p.prompt, "response": text},
                               labels={label: 1.0 if p.preferred == side else 0.0}, group=p.id, meta=meta))
    return out


def pairs_from_examples(examples: Iterable[Example], label: str = "sat") -> list[Pair]:
    """The pairs whose two sides are among ``examples`` (the inverse of :func:`pair_examples`, in the order
    of each pair's first side): the side labelled 1 is preferred, two sides labelled 0 are a tie. A pair
    with one side only is left out, and so are order examples (:func:`order_examples`). Raises
    :class:`DataError` (field ``data.kind``) when an example is not one side of a pair (pointwise data)."""
    sides: dict[str, dict[str, Example]] = {}
    for e in examples:
        meta = e.meta or {}
        if "pair_order" in meta:  # a pairwise probe's order example: both responses, no side
            continue
        if meta.get("side") not in SIDES or "pair" not in meta:
            raise DataError(f"example {e.id!r} is not one side of a pair: this needs pairwise data "
                            "([data] kind = \"pairwise\")", field="data.kind")
        sides.setdefault(str(meta["pair"]), {})[meta["side"]] = e
    out: list[Pair] = []
    for pid, got in sides.items():
        if set(got) != set(SIDES):
            continue
        a, b = got["A"], got["B"]
        la, lb = a.labels.get(label), b.labels.get(label)
        preferred = "A" if la == 1 and lb != 1 else "B" if lb == 1 and la != 1 else "tie"
        subset = (a.meta or {}).get("subset")
        out.append(Pair(id=pid, prompt=a.fields.get("prompt", ""), response_a=a.fields.get("response", ""),
                        response_b=b.fields.get("response", ""), preferred=preferred, subset=subset))
    return out


def order_id(pair_id: str, order: str) -> str:
    """The example id of one presentation order of a pair: ``<pair>/AB`` or ``<pair>/BA``."""
    return f"{pair_id}/{order}"


def order_examples(pairs: Sequence[Pair]) -> list[Example]:
    """Two order examples per pair (``<pair>/AB`` then ``<pair>/BA``): the prompt and the two responses
    in the order shown (fields ``prompt``, ``first``, ``second``); no labels."""
    out: list[Example] = []
    for p in pairs:
        for order in ORDERS:
            first, second = (p.response_a, p.response_b) if order == "AB" else (p.response_b, p.response_a)
            meta: dict[str, Any] = {"pair": p.id, "pair_order": order}
            if p.subset is not None:
                meta["subset"] = p.subset
            out.append(Example(id=order_id(p.id, order), fields={"prompt": p.prompt, "first": first, "second": second},
                               group=p.id, meta=meta))
    return out


def pair_order(example: Example) -> str | None:
    """``"AB"`` / ``"BA"`` for an order example (:func:`order_examples`), None for any other."""
    order = (example.meta or {}).get("pair_order")
    return order if order in ORDERS else None


def pairs_in(pairs: Iterable[Pair], examples: Iterable[Example]) -> list[Pair]:
    """The pairs (in their order) whose sides are among ``examples`` (e.g. a split's)."""
    have = {(e.meta or {}).get("pair", e.group) for e in examples}
    return [p for p in pairs if p.id in have]
