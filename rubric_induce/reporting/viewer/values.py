"""Small readers of received values for the viewer's data: every number, object, string and id list a
run folder's files hold is read through these, so a damaged part reads as absent, never as an error."""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np

__all__ = ["MAX_TEXT_CHARS", "rounded", "count", "as_dict", "as_str", "as_strs", "id_order"]

MAX_TEXT_CHARS = 6000    # a text longer than this is cut in the page (the full text stays in the data file)
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_DIGITS = re.compile(r"([0-9]+)")


def rounded(x: Any, digits: int = 4) -> float | None:
    """A finite float rounded for the page, else None (a bool, a string or a huge int too)."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return round(v, digits) if math.isfinite(v) else None


def count(x: Any) -> int | None:
    """A whole number for the page (a count, a seed), else None."""
    v = rounded(x, 0)
    return int(v) if v is not None and abs(v) < 2 ** 53 else None


def as_dict(x: Any) -> dict[str, Any]:
    """``x`` when a received file holds an object there, else an empty one (a damaged part reads as absent)."""
    return x if isinstance(x, dict) else {}


def as_str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def as_strs(x: Any) -> list[str]:
    """The strings of a list (a lone string counts as a list of one): ids from a received file."""
    if isinstance(x, str):
        return [x]
    return [v for v in x if isinstance(v, str)] if isinstance(x, list) else []


def _natural(i: str) -> list[tuple[int, int, str]]:
    key = []
    for k, part in enumerate(_DIGITS.split(i)):
        if k % 2:  # a digit run: by value (its length without leading zeros, then its digits)
            digits = part.lstrip("0") or "0"
            key.append((0, len(digits), digits))
        elif part:
            key.append((1, 0, part.casefold()))
    return key


def id_order(ids: Sequence[str]) -> list[str]:
    """``ids`` in the order a reader expects: by value when every id is a number (24 before 153, 1.5
    before 2), else naturally (``uss/9`` before ``uss/10``: digit runs compare by value, the rest as
    text, case-folded); ties keep their order. Digit runs compare by length and digits, never through
    ``int()``, so an id of thousands of digits sorts too."""
    ids = list(ids)
    if ids and all(_NUMBER.fullmatch(i) for i in ids):
        return sorted(ids, key=Decimal)
    return sorted(ids, key=_natural)
