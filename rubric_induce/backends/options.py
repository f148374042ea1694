"""Per-call options of an LLM call as one immutable value (after inspect_ai's ``GenerateConfig``).

Every backend method takes ``options: CallOptions | None``; ``None`` means the defaults. The
value is validated once, here, so backends can trust it, and :meth:`CallOptions.to_key` gives
the exact form the call cache hashes: two option values get the same key only when every
backend would receive the same arguments from them.

``assistant_prefix`` is deliberately *not* an option: it is text the model conditions on (the
start of its own reply), like the messages, not a decoding setting, and only
:meth:`~rubric_induce.backends.Backend.answer_logprobs` has a meaning for it, so it stays an
explicit argument of that method.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import numbers
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CallOptions"]


def _as_int(name: str, value: Any, *, minimum: int | None) -> int:
    if isinstance(value, bool):
        raise TypeError(f"CallOptions.{name} must be an integer, got a bool ({value!r})")
    try:
        out = operator.index(value)  # int and numpy integers; refuses 2.0 and "2"
    except TypeError:
        raise TypeError(f"CallOptions.{name} must be an integer, got {type(value).__name__} "
                        f"({value!r})") from None
    if minimum is not None and out < minimum:
        raise ValueError(f"CallOptions.{name} must be >= {minimum}, got {out}")
    return int(out)


@dataclass(frozen=True, eq=False)
class CallOptions:
    """What a caller may set per call; backends read the fields that apply to the method.

    ``chat`` uses all of them. ``answer_logprobs`` reads the model's next-token distribution,
    which no sampling setting changes, so it ignores ``temperature``, ``max_tokens``, ``seed``,
    ``json_schema`` and ``stop``; an OpenAI-compatible backend uses ``top_logprobs`` there, when
    set, as the number of first-token alternatives to ask for.

    Values are normalised on construction (numpy integers become ``int``, ``temperature`` a
    ``float``, ``stop`` a tuple, an empty ``stop`` ``None``); ``json_schema`` is copied, and
    must be plain JSON because that is how every backend sends it. Treat it as read-only.
    """

    #: Sampling temperature; 0 is greedy.
    temperature: float = 0.0
    #: Most tokens to generate.
    max_tokens: int = 256
    #: Sampling seed; ``None`` lets the backend use its own default seed.
    seed: int | None = None
    #: JSON schema the reply must follow; backends that can constrain decoding do.
    json_schema: Mapping[str, Any] | None = None
    #: Strings that end the reply (not included in it).
    stop: tuple[str, ...] | None = None
    #: Alternatives per generated token to return with their logprobs; 0 asks for none.
    top_logprobs: int = 0

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise through the back door, once
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, numbers.Real):
            raise TypeError(f"CallOptions.temperature must be a number, got {type(t).__name__} ({t!r})")
        t = float(t)
        if not math.isfinite(t) or t < 0:
            raise ValueError(f"CallOptions.temperature must be a finite number >= 0, got {t}")
        set_(self, "temperature", t + 0.0)  # -0.0 -> 0.0, so equal values have equal keys
        set_(self, "max_tokens", _as_int("max_tokens", self.max_tokens, minimum=1))
        if self.seed is not None:
            set_(self, "seed", _as_int("seed", self.seed, minimum=None))
        set_(self, "top_logprobs", _as_int("top_logprobs", self.top_logprobs, minimum=0))
        set_(self, "stop", self._check_stop(self.stop))
        if self.json_schema is not None:
            if not isinstance(self.json_schema, Mapping):
                raise TypeError("CallOptions.json_schema must be a mapping (a JSON schema object), "
                                f"got {type(self.json_schema).__name__}")
            set_(self, "json_schema", copy.deepcopy(dict(self.json_schema)))
            self._schema_json()  # fail now, not in the backend

    @staticmethod
    def _check_stop(stop: Any) -> tuple[str, ...] | None:
        if stop is None:
            return None
        if isinstance(stop, str):
            raise TypeError(f"CallOptions.stop must be a sequence of strings, e.g. stop=({stop!r},), "
                            "not a bare string")
        if not isinstance(stop, Sequence):
            raise TypeError(f"CallOptions.stop must be a sequence of strings, got {type(stop).__name__}")
        bad = [s for s in stop if not isinstance(s, str)]
        if bad:
            raise TypeError(f"CallOptions.stop must hold strings only, got {bad[0]!r}")
        return tuple(stop) or None

    def _schema_json(self) -> str | None:
        """The schema as the backends send it: JSON in the caller's key order (order matters)."""
        if self.json_schema is None:
            return None
        try:
            return json.dumps(self.json_schema, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"CallOptions.json_schema must be plain JSON (dicts, lists, str, "
                            f"finite numbers, bool, None): {exc}") from None

    def merged(self, **changes: Any) -> CallOptions:
        """A copy with ``changes`` applied (and validated); unknown names raise TypeError."""
        return dataclasses.replace(self, **changes)

    replace = merged

    @classmethod
    def resolve(cls, options: CallOptions | None) -> CallOptions:
        """``options`` itself, or the defaults for ``None``; anything else is a TypeError."""
        if options is None:
            return _DEFAULT
        if not isinstance(options, cls):
            raise TypeError(f"options must be a CallOptions (or None), got {type(options).__name__}; "
                            "write e.g. backend.chat(messages, CallOptions(temperature=0.7))")
        return options

    def to_key(self) -> dict[str, Any]:
        """Exact, canonical, JSON-able form: equal keys mean every backend gets equal arguments.

        The schema is kept as its JSON text in the caller's key order, because property order
        decides the order a constrained decoder writes the fields in.
        """
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed,
                "json_schema": self._schema_json(), "stop": None if self.stop is None else list(self.stop),
                "top_logprobs": self.top_logprobs}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CallOptions):
            return NotImplemented
        return self.to_key() == other.to_key()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_key(), sort_keys=True))


_DEFAULT = CallOptions()
