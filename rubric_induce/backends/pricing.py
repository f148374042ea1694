"""Price table: US$ per million tokens, with cached-input and batch-API rates.

Probing is the whole cost of a run, and providers charge it three ways: plain calls, calls whose
prompt prefix the provider has cached (a cheaper ``cached_input`` rate for the cached tokens) and
the batch API (about half price, results within a day). :func:`cost` prices one usage under any of
them; :func:`rubric_induce.probing.plan.plan_probes` compares all three before a single call.

The built-in rates are OpenAI's published list prices (standard tier) at the time of writing; they
change, so a user table extends or overrides them: a mapping, a ``.toml`` / ``.json`` file, the
``[prices]`` table of a run config or ``--prices FILE`` (see :func:`load_prices`). A model name
matches an entry when it equals it or is a dated snapshot of it (``gpt-4o-2024-08-06`` matches
``gpt-4o``); a provider prefix (``openai/gpt-4o``) is ignored. Unknown models have no price
(``None``), never a guessed one.
"""
from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.textfiles import parse_json

__all__ = [
    "ModelPrice",
    "BUILTIN_PRICES",
    "load_prices",
    "parse_prices",
    "register_prices",
    "registered_prices",
    "price_of",
    "is_snapshot_of",
    "cost",
    "PRICES_ENV",
    "MAX_PRICE",
]

#: Environment variable naming a user price file read by every process (optional).
PRICES_ENV = "RUBRIC_INDUCE_PRICES"


@dataclass(frozen=True)
class ModelPrice:
    """US$ per million tokens. ``None`` rates: the provider offers no such discount / API."""

    input: float
    output: float
    cached_input: float | None = None   # None: no prompt-caching discount (cached tokens cost `input`)
    batch_input: float | None = None    # None: no batch API for this model
    batch_output: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def _p(i: float, o: float, c: float | None, bi: float | None = None, bo: float | None = None) -> ModelPrice:
    # Batch API: half the plain rates unless given.
    return ModelPrice(i, o, c, i / 2 if bi is None else bi, o / 2 if bo is None else bo)


#: OpenAI list prices (standard tier, US$ / 1M tokens): input, output, cached input; batch = half.
BUILTIN_PRICES: dict[str, ModelPrice] = {
    "gpt-5": _p(1.25, 10.00, 0.125),
    "gpt-5-mini": _p(0.25, 2.00, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-4.1": _p(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-4o": _p(2.50, 10.00, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "o1": _p(15.00, 60.00, 7.50),
    "o3": _p(2.00, 8.00, 0.50),
    "o3-mini": _p(1.10, 4.40, 0.55),
    "o4-mini": _p(1.10, 4.40, 0.275),
    "gpt-4-turbo": _p(10.00, 30.00, None),
    "gpt-4": _p(30.00, 60.00, None),
    "gpt-3.5-turbo": _p(0.50, 1.50, None),
    "gpt-3.5-turbo-16k": _p(3.00, 4.00, None),
}

#: Highest rate accepted, US$ per million tokens: far above any real price, and low enough that no
#: plan or tally overflows to infinity (a larger value is a typo, e.g. a missing decimal point).
MAX_PRICE = 1e6

_lock = threading.Lock()
_registered: dict[str, ModelPrice] = {}
_env_loaded: str | None = None


def _coerce(name: str, raw: Any, where: str | None) -> ModelPrice:
    if isinstance(raw, ModelPrice):
        return raw
    allowed = {f.name for f in fields(ModelPrice)}
    if isinstance(raw, (list, tuple)) and len(raw) in (2, 3, 4, 5):
        raw = dict(zip(("input", "output", "cached_input", "batch_input", "batch_output"), raw))
    if not isinstance(raw, Mapping):
        raise DataError(f"price of {name!r} must be a table {{input, output, cached_input, batch_input, "
                        f"batch_output}} in US$ per million tokens, got {type(raw).__name__}",
                        path=where, field=f"prices.{name}")
    unknown = set(raw) - allowed
    if unknown:
        raise DataError(f"unknown price field(s) {sorted(unknown)}; expected {sorted(allowed)}",
                        path=where, field=f"prices.{name}")
    for req in ("input", "output"):
        if req not in raw:
            raise DataError(f"price of {name!r} needs {req!r}", path=where, field=f"prices.{name}.{req}")
    values: dict[str, float | None] = {}
    for key, val in raw.items():
        if val is None:
            values[key] = None
            continue
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val) or val < 0 \
                or val > MAX_PRICE:
            raise DataError(f"must be a number from 0 to {MAX_PRICE:g} (US$ per million tokens), got {val!r}",
                            path=where, field=f"prices.{name}.{key}")
        values[key] = float(val)
    if "batch_input" not in raw and "batch_output" not in raw:
        # Not said: no batch API assumed (a user table describes a provider we know nothing of).
        values.setdefault("batch_input", None)
        values.setdefault("batch_output", None)
    return ModelPrice(**values)  # type: ignore[arg-type]


def _read_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read price table: {exc.strerror or exc}", path=p) from exc
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        raise DataError(f"not UTF-8 text (byte {exc.object[exc.start]:#04x})", path=p, line=line) from None
    if p.suffix.lower() == ".json":  # a lone surrogate escape or a 5,000-digit integer names its line and field
        data = parse_json(text, path=p)
    else:
        import tomllib

        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as exc:
            raise DataError(f"not valid TOML: {exc}", path=p) from None
    if isinstance(data, Mapping) and isinstance(data.get("prices"), Mapping):
        data = data["prices"]  # a whole config file, or a file with a [prices] table
    if not isinstance(data, Mapping):
        raise DataError("a price table maps model names to {input, output, ...}", path=p)
    return dict(data)


def parse_prices(extra: Mapping[str, Any] | str | Path | None, *, source: str | None = None) -> dict[str, ModelPrice]:
    """User entries only (a mapping, or a TOML/JSON file), validated; errors name ``source``/the file."""
    return _parse(extra, source)


def _parse(extra: Mapping[str, Any] | str | Path | None, where: str | None = None) -> dict[str, ModelPrice]:
    if extra is None:
        return {}
    if isinstance(extra, (str, Path)):
        where = str(extra)
        extra = _read_file(extra)
    return {str(name): _coerce(str(name), raw, where) for name, raw in extra.items()}


def register_prices(extra: Mapping[str, Any] | str | Path | None) -> dict[str, ModelPrice]:
    """Add user rates to this process's default table (later calls override earlier ones).

    Used by the run config's ``[prices]`` table and ``--prices FILE`` so that live cost accounting
    (:func:`rubric_induce.backends.base.price_for`) and plans agree. Returns the parsed entries.
    """
    parsed = _parse(extra)
    with _lock:
        _registered.update(parsed)
    return parsed


def registered_prices() -> dict[str, ModelPrice]:
    """The user entries added so far (by :func:`register_prices` and ``$RUBRIC_INDUCE_PRICES``)."""
    _load_env()
    with _lock:
        return dict(_registered)


def _load_env() -> None:
    global _env_loaded
    path = os.environ.get(PRICES_ENV)
    if path and path != _env_loaded:
        parsed = _parse(path)
        with _lock:
            for name, price in parsed.items():
                _registered.setdefault(name, price)  # explicit registrations win over the environment
            _env_loaded = path


def load_prices(extra: Mapping[str, Any] | str | Path | None = None) -> dict[str, ModelPrice]:
    """Built-in rates, then registered user rates, then ``extra`` (a mapping or a TOML/JSON file).

    A file may be a bare table (``[gpt-4o] input = 2.5 ...``) or contain a ``[prices]`` table
    (a run config). Entries: ``input`` and ``output`` required; ``cached_input``, ``batch_input``,
    ``batch_output`` optional (absent batch rates: no batch API). Bad entries raise
    :class:`~rubric_induce.core.errors.DataError` naming the file and field.
    """
    table = dict(BUILTIN_PRICES)
    table.update(registered_prices())
    table.update(_parse(extra))
    return table


def _base_name(model: str) -> str:
    return model.split("/")[-1].strip()


# What a dated snapshot appends to a model name: -2024-08-06, -0613, -1106-preview, -latest.
_SNAPSHOT = re.compile(r"-(20\d\d-\d\d-\d\d|\d{4})(-preview)?|-latest|-preview")


def is_snapshot_of(name: str, model: str) -> bool:
    """True when ``name`` is a dated snapshot of ``model`` (``gpt-4o-2024-08-06`` of ``gpt-4o``)."""
    base, want = _base_name(name), _base_name(model)
    return base.startswith(want + "-") and _SNAPSHOT.fullmatch(base[len(want):]) is not None


def price_of(model: str, table: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The rates of ``model`` (exact name, else the longest entry it is a dated snapshot of)."""
    table = load_prices() if table is None else table
    base = _base_name(model)
    for cand in (model, base):
        if cand in table:
            return table[cand]
    for name in sorted(table, key=len, reverse=True):
        if base.startswith(name + "-") and _SNAPSHOT.fullmatch(base[len(name):]):
            return table[name]
    return None


def cost(model: str, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0,
         batch: bool = False, table: Mapping[str, ModelPrice] | None = None) -> float | None:
    """US$ for one usage, or None when the model's price (or its batch rate) is unknown.

    ``prompt_tokens`` includes ``cached_tokens`` (as in OpenAI's usage); cached tokens are priced
    at ``cached_input`` (``input`` when the model has no caching discount). ``batch=True`` prices
    at the batch rates (the batch API gives no extra caching discount here: all prompt tokens at
    ``batch_input``).
    """
    price = price_of(model, table)
    if price is None:
        return None
    prompt_tokens, completion_tokens = int(prompt_tokens), int(completion_tokens)
    if batch:
        if price.batch_input is None or price.batch_output is None:
            return None
        return (prompt_tokens * price.batch_input + completion_tokens * price.batch_output) / 1e6
    cached = max(0, min(int(cached_tokens), prompt_tokens))
    cached_rate = price.input if price.cached_input is None else price.cached_input
    return ((prompt_tokens - cached) * price.input + cached * cached_rate
            + completion_tokens * price.output) / 1e6
