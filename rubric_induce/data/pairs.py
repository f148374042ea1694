"""Pairwise preference data: two responses to one prompt and which one is preferred.

:class:`Pair` is the pairwise counterpart of :class:`~rubric_induce.data.model.Example`.
:class:`PairMapping` names the columns, and :func:`read_pairs` reads the three common layouts as
they ship, without a converter:

- ``ab``: a prompt and two responses in fixed positions plus a label naming the preferred one
  (LLMBar's ``input, output_1, output_2, label`` with label 1/2; arena-style ``A``/``B``/``tie``);
- ``chosen_rejected``: a prompt, the chosen and the rejected response (UltraFeedback-style). The
  chosen side is put at A or B by a hash of ``seed`` and the pair, so position is not the label,
  the same pair always lands the same way, and ``Pair.swapped`` records where it went;
- ``hh``: Anthropic-HH-style ``chosen``/``rejected`` full conversations (``"\\n\\nHuman: ...
  \\n\\nAssistant: ..."`` text, or lists of ``{role, content}`` messages) that share a prefix: the
  shared prefix up to the last common assistant turn is the prompt, the rest are the responses
  (shuffled into A/B as for ``chosen_rejected``).

Bad input (a missing side, a non-text side, the same text on both sides, a label that names
neither side) stops with a :class:`~rubric_induce.core.errors.DataError` naming the file, the
line (JSONL, CSV) or record index (JSON array) and the field, before anything is returned.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param
from rubric_induce.data.tables import MISSING, known_keys, lookup_field, read_rows

__all__ = ["Pair", "PairMapping", "PREFERENCES", "PAIR_LAYOUTS", "preference_signs", "read_pairs", "pairs_from_rows",
           "pair_targets", "split_shared_prefix"]

PREFERENCES = ("A", "B", "tie")
PAIR_LAYOUTS = ("auto", "ab", "chosen_rejected", "hh")
_FORMATS = ("auto", "jsonl", "json", "csv", "tsv")
_TARGET = {"A": 1, "B": -1, "tie": 0}
# Label spellings understood without a `label_values` table (keys compared lower-cased).
DEFAULT_LABEL_VALUES = {"1": "A", "2": "B", "a": "A", "b": "B", "tie": "tie", "0": "tie",
                        "model_a": "A", "model_b": "B", "output_1": "A", "output_2": "B",
                        "response_a": "A", "response_b": "B"}
_PROMPT_KEYS = ("input", "prompt", "instruction", "question", "context")
_A_KEYS = ("output_1", "response_a", "response_1", "a")
_B_KEYS = ("output_2", "response_b", "response_2", "b")
_LABEL_KEYS = ("label", "preferred", "winner", "preference")


@dataclass(frozen=True)
class Pair:
    """Two responses to one prompt, and which is preferred (``"A"``, ``"B"`` or ``"tie"``).

    ``judges`` holds optional per-judge preferences (judge id -> ``"A"``/``"B"``/``"tie"``);
    ``swapped`` is True where a chosen/rejected pair put the chosen response at B (None for
    ``ab`` data, whose positions come from the file). ``preferred`` is None only for an unlabelled
    pair (new pairs to compare, read with ``labels="optional"``), which has no :attr:`target`.
    """

    id: str
    prompt: str
    response_a: str
    response_b: str
    preferred: str | None
    judges: dict[str, str] = field(default_factory=dict)
    subset: str | None = None
    swapped: bool | None = None

    def __post_init__(self) -> None:
        if self.preferred is not None and self.preferred not in PREFERENCES:
            raise DataError(f"preferred must be one of {PREFERENCES}, got {self.preferred!r}",
                            field="preferred")
        for judge, pref in self.judges.items():
            if pref not in PREFERENCES:
                raise DataError(f"preferred must be one of {PREFERENCES}, got {pref!r}",
                                field=f"judges.{judge}")

    @property
    def target(self) -> int:
        """+1 where A is preferred, -1 where B is, 0 for a tie (the sign a score difference should have)."""
        if self.preferred is None:
            raise DataError(f"pair {self.id!r} has no preference label", field="preferred")
        return _TARGET[self.preferred]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "prompt": self.prompt, "response_a": self.response_a,
                               "response_b": self.response_b, "preferred": self.preferred}
        if self.judges:
            out["judges"] = dict(self.judges)
        if self.subset is not None:
            out["subset"] = self.subset
        if self.swapped is not None:
            out["swapped"] = self.swapped
        return out

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Pair:
        return cls(id=str(row["id"]), prompt=row["prompt"], response_a=row["response_a"],
                   response_b=row["response_b"], preferred=row["preferred"],
                   judges=dict(row.get("judges") or {}), subset=row.get("subset"),
                   swapped=row.get("swapped"))


def pair_targets(pairs: Sequence[Pair]) -> list[int]:
    """+1 / -1 / 0 per pair (A preferred / B preferred / tie)."""
    return [p.target for p in pairs]


def _column(value: Any, where: str) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise DataError(f"expected the name of a column, got {value!r}", field=where)


@dataclass(frozen=True)
class PairMapping(Params):
    """Which columns (CSV/TSV) or keys (JSON; dotted paths reach into objects) hold a pair.

    Unset columns default by layout: ``ab`` looks for ``input``/``prompt``/..., ``output_1``/
    ``response_a`` and ``output_2``/``response_b`` and ``label``/``preferred``/``winner``;
    ``chosen_rejected`` for ``prompt``/``input``, ``chosen``, ``rejected``; ``hh`` for
    ``chosen``, ``rejected``. ``auto`` picks ``chosen_rejected`` when the first row has
    chosen/rejected and a prompt, ``hh`` when it has chosen/rejected only, else ``ab``.
    """

    section = "data.mapping"
    format: str = param("auto", choices=_FORMATS,
                        help="File format: auto (from the extension), jsonl, json, csv or tsv.")
    layout: str = param("auto", choices=PAIR_LAYOUTS,
                        help="ab (prompt, two responses, a label), chosen_rejected (prompt, chosen, rejected), "
                             "hh (chosen/rejected full conversations sharing a prefix) or auto.")
    id: str | None = param(None, help="Column holding the pair id (default: `id` where a row has it, else a hash "
                                      "of the texts).")
    prompt: str | None = param(None, help="Column holding the shared prompt / context.")
    a: str | None = param(None, help="ab layout: the column holding response A.")
    b: str | None = param(None, help="ab layout: the column holding response B.")
    label: str | None = param(None, help="ab layout: the column naming the preferred response.")
    label_values: dict[str, Any] | None = param(
        None, help="ab layout: {answer = \"A\" | \"B\" | \"tie\"} for label spellings beyond the defaults "
                   "(1/2, A/B, tie, model_a/model_b, output_1/output_2).")
    chosen: str | None = param(None, help="chosen_rejected / hh layouts: the column holding the chosen response.")
    rejected: str | None = param(None, help="chosen_rejected / hh layouts: the column holding the rejected one.")
    judges: dict[str, str] | None = param(
        None, help="ab layout: {judge = column}: per-judge preferences, spelled like the label.")
    subset: str | None = param(None, help="Column naming each pair's subset (reports give per-subset rows).")
    seed: int = param(0, help="Seed of the chosen-side placement (chosen_rejected / hh): the chosen response "
                              "goes to A or B by a hash of the seed and the pair.")

    def check(self) -> None:
        for name in ("id", "prompt", "a", "b", "label", "chosen", "rejected", "subset"):
            _column(getattr(self, name), self.where(name))
        if self.label_values is not None:
            if not isinstance(self.label_values, Mapping):
                raise DataError(f"expected a table {{answer = \"A\"|\"B\"|\"tie\"}}, got {self.label_values!r}",
                                field=self.where("label_values"))
            for k, v in self.label_values.items():
                if v not in PREFERENCES:
                    raise DataError(f"expected one of {PREFERENCES}, got {v!r}",
                                    field=f"{self.where('label_values')}.{k}")
        if self.judges is not None:
            if not isinstance(self.judges, Mapping) or not self.judges:
                raise DataError(f"expected a table {{judge = column}}, got {self.judges!r}",
                                field=self.where("judges"))
            for judge, col in self.judges.items():
                _column(col, f"{self.where('judges')}.{judge}")
            if self.layout not in ("auto", "ab"):
                raise DataError("per-judge preferences are read in the ab layout only (chosen/rejected "
                                "positions are shuffled)", field=self.where("judges"))

    def label_table(self) -> dict[str, str]:
        table = dict(DEFAULT_LABEL_VALUES)
        table.update({str(k).strip().lower(): v for k, v in (self.label_values or {}).items()})
        return table


class _Loc:
    """Where a row came from, for errors: file, line (JSONL/CSV) or record index (JSON array)."""

    def __init__(self, path: str | Path | None, line: int | None, index: int | None) -> None:
        self.path, self.line, self.index = path, line, index

    def error(self, message: str, field: str | None = None) -> DataError:
        prefix = f"record {self.index}: " if self.line is None and self.index is not None else ""
        return DataError(prefix + message, path=self.path, line=self.line, field=field)


def _first_present(row: Mapping[str, Any], keys: Sequence[str], tabular: bool) -> str | None:
    return next((k for k in keys if lookup_field(row, k, tabular) is not MISSING), None)


def _detect_layout(row: Mapping[str, Any], mapping: PairMapping, tabular: bool) -> str:
    if mapping.layout != "auto":
        return mapping.layout
    if mapping.a or mapping.b or mapping.label:
        return "ab"
    chosen = mapping.chosen or "chosen"
    rejected = mapping.rejected or "rejected"
    if lookup_field(row, chosen, tabular) is not MISSING or lookup_field(row, rejected, tabular) is not MISSING:
        has_prompt = mapping.prompt or _first_present(row, _PROMPT_KEYS, tabular)
        return "chosen_rejected" if has_prompt else "hh"
    return "ab"


def _columns(layout: str, row: Mapping[str, Any], mapping: PairMapping, tabular: bool) -> dict[str, str]:
    """The column of every role in this layout (the mapping's, else the first default present)."""
    def pick(given: str | None, keys: Sequence[str]) -> str:
        return given or _first_present(row, keys, tabular) or keys[0]

    if layout == "ab":
        return {"prompt": pick(mapping.prompt, _PROMPT_KEYS), "a": pick(mapping.a, _A_KEYS),
                "b": pick(mapping.b, _B_KEYS), "label": pick(mapping.label, _LABEL_KEYS)}
    cols = {"chosen": mapping.chosen or "chosen", "rejected": mapping.rejected or "rejected"}
    if layout == "chosen_rejected":
        cols["prompt"] = pick(mapping.prompt, _PROMPT_KEYS)
    return cols


def _text(row: Mapping[str, Any], col: str, tabular: bool, loc: _Loc) -> str:
    value = lookup_field(row, col, tabular)
    if value is MISSING or value is None:
        raise loc.error(f"missing required field{known_keys(row, col) if value is MISSING else ''}", col)
    if not isinstance(value, str):
        raise loc.error(f"expected text, got {type(value).__name__}", col)
    if not value.strip():
        raise loc.error("text is empty", col)
    return value


def _preference(value: Any, col: str, table: Mapping[str, str], loc: _Loc) -> str:
    if value is MISSING or value is None:
        raise loc.error("missing required field", col)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise loc.error(f"expected a label naming a side (1/2, A/B, tie), got {type(value).__name__}", col)
    key = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    pref = table.get(key.strip().lower())
    if pref is None:
        known = ", ".join(sorted({k for k in table}))
        raise loc.error(f"label {value!r} names neither side; known labels: {known} (add others with "
                        "label_values)", col)
    return pref


def _message_text(messages: list, col: str, loc: _Loc) -> list[tuple[str, str]]:
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping) or not isinstance(msg.get("content"), str):
            raise loc.error(f"message {i}: expected an object with text `content` (and `role`)", col)
        out.append((str(msg.get("role", "")), msg["content"]))
    return out


def _render(messages: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join(f"{role.capitalize()}: {content}" if role else content for role, content in messages)


def split_shared_prefix(chosen: str | list, rejected: str | list, *, marker: str = "Assistant:"
                        ) -> tuple[str, str, str] | None:
    """(prompt, chosen response, rejected response) of two conversations sharing a prefix.

    Text conversations are cut after the last ``marker`` inside their common prefix; message lists
    after their common leading messages. None where there is no shared prefix to cut at.
    """
    if isinstance(chosen, list) and isinstance(rejected, list):
        n = 0
        while n < min(len(chosen), len(rejected)) - 1 and chosen[n] == rejected[n]:
            n += 1
        if n == 0:
            return None
        return _render(chosen[:n]), _render(chosen[n:]), _render(rejected[n:])
    if not (isinstance(chosen, str) and isinstance(rejected, str)):
        return None
    cp = 0
    for x, y in zip(chosen, rejected):
        if x != y:
            break
        cp += 1
    k = chosen.rfind(marker, 0, cp)
    if k < 0:
        return None
    cut = k + len(marker)
    return chosen[:cut].strip(), chosen[cut:].strip(), rejected[cut:].strip()


def _side(row: Mapping[str, Any], col: str, tabular: bool, loc: _Loc) -> str | list:
    value = lookup_field(row, col, tabular)
    if value is MISSING or value is None:
        raise loc.error(f"missing required field{known_keys(row, col) if value is MISSING else ''}", col)
    if isinstance(value, list):
        if not value:
            raise loc.error("conversation is empty", col)
        return _message_text(value, col, loc)
    if not isinstance(value, str):
        raise loc.error(f"expected text or a list of messages, got {type(value).__name__}", col)
    if not value.strip():
        raise loc.error("text is empty", col)
    return value


def _hash_id(*texts: str) -> str:
    return "pair-" + hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()[:12]


def _swap(seed: int, key: str) -> bool:
    """Whether the chosen side goes to B: a hash of the seed and the pair, so order-independent."""
    return hashlib.sha256(f"{seed}\x00{key}".encode()).digest()[0] & 1 == 1


def _row_id(row: Mapping[str, Any], mapping: PairMapping, tabular: bool, loc: _Loc, fallback: str) -> str:
    col = mapping.id or ("id" if lookup_field(row, "id", tabular) is not MISSING else None)
    if col is None:
        return fallback
    value = lookup_field(row, col, tabular)
    if value is MISSING or value is None or isinstance(value, (bool, list, dict)) or not str(value).strip():
        raise loc.error(f"expected an id (text or number), got {value!r}", col)
    return str(value)


def _subset(row: Mapping[str, Any], mapping: PairMapping, tabular: bool, loc: _Loc, default: str | None) -> str | None:
    if mapping.subset is None:
        return default
    value = lookup_field(row, mapping.subset, tabular)
    if value is MISSING or value is None:
        return default
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise loc.error(f"expected a subset name, got {type(value).__name__}", mapping.subset)
    return str(value)


def _pair_from_row(row: Mapping[str, Any], layout: str, mapping: PairMapping, tabular: bool, loc: _Loc,
                   subset: str | None, labels: str = "required") -> Pair:
    cols = _columns(layout, row, mapping, tabular)
    if layout == "ab":
        prompt = _text(row, cols["prompt"], tabular, loc)
        a = _text(row, cols["a"], tabular, loc)
        b = _text(row, cols["b"], tabular, loc)
        if a.strip() == b.strip():
            raise loc.error("the two responses are the same text (a pair needs two different responses)", cols["b"])
        table = mapping.label_table()
        value = lookup_field(row, cols["label"], tabular)
        if labels == "optional" and (value is MISSING or value is None or value == ""):
            preferred = None  # a new pair to compare; a label that is there must still name a side
        else:
            preferred = _preference(value, cols["label"], table, loc)
        judges = {}
        for judge, col in (mapping.judges or {}).items():
            value = lookup_field(row, col, tabular)
            if value is not MISSING and value is not None and value != "":
                judges[judge] = _preference(value, col, table, loc)
        pid = _row_id(row, mapping, tabular, loc, _hash_id(prompt, a, b))
        return Pair(pid, prompt, a, b, preferred, judges, _subset(row, mapping, tabular, loc, subset))
    if layout == "chosen_rejected":
        prompt = _text(row, cols["prompt"], tabular, loc)
        chosen_raw = _side(row, cols["chosen"], tabular, loc)
        rejected_raw = _side(row, cols["rejected"], tabular, loc)
        chosen = chosen_raw if isinstance(chosen_raw, str) else _render(chosen_raw)
        rejected = rejected_raw if isinstance(rejected_raw, str) else _render(rejected_raw)
        if isinstance(chosen_raw, list) and isinstance(rejected_raw, list):
            split = split_shared_prefix(chosen_raw, rejected_raw)
            if split is not None:  # UltraFeedback-binarized: messages repeat the prompt
                _, chosen, rejected = split
    else:
        chosen_raw = _side(row, cols["chosen"], tabular, loc)
        rejected_raw = _side(row, cols["rejected"], tabular, loc)
        if type(chosen_raw) is not type(rejected_raw):
            raise loc.error("chosen and rejected must both be text or both be message lists", cols["rejected"])
        split = split_shared_prefix(chosen_raw, rejected_raw)
        if split is None:
            raise loc.error("chosen and rejected share no prefix ending at an assistant turn "
                            "(HH layout: the prompt is their shared beginning)", cols["rejected"])
        prompt, chosen, rejected = split
    if not chosen.strip() or not rejected.strip():
        raise loc.error("text is empty", cols["chosen"] if not chosen.strip() else cols["rejected"])
    if chosen.strip() == rejected.strip():
        raise loc.error("chosen and rejected are the same text (a pair needs two different responses)",
                        cols["rejected"])
    key = _hash_id(prompt, chosen, rejected)
    pid = _row_id(row, mapping, tabular, loc, key)
    swapped = _swap(mapping.seed, key)
    a, b = (rejected, chosen) if swapped else (chosen, rejected)
    return Pair(pid, prompt, a, b, "B" if swapped else "A", {}, _subset(row, mapping, tabular, loc, subset),
                swapped)


def pairs_from_rows(rows: Iterable[tuple[int | None, int | None, Mapping[str, Any]]],
                    mapping: PairMapping | None = None, *, path: str | Path | None = None,
                    subset: str | None = None, tabular: bool = False, labels: str = "required") -> list[Pair]:
    """Pairs from ``(line, record index, row)`` triples (what :func:`read_rows` yields); ``labels``:
    as in :func:`read_pairs`."""
    if labels not in ("required", "optional"):
        raise ValueError(f"labels must be 'required' or 'optional', got {labels!r}")
    mapping = mapping or PairMapping()
    out: list[Pair] = []
    seen: dict[str, _Loc] = {}
    layout = None
    for line, index, row in rows:
        loc = _Loc(path, line, index)
        if not isinstance(row, Mapping):
            raise loc.error(f"expected an object, got {type(row).__name__}")
        layout = layout or _detect_layout(row, mapping, tabular)
        pair = _pair_from_row(row, layout, mapping, tabular, loc, subset, labels)
        if pair.id in seen:
            first = seen[pair.id]
            where = f"line {first.line}" if first.line is not None else f"record {first.index}"
            raise loc.error(f"duplicate pair id {pair.id!r} (first at {where}; identical pairs hash alike)",
                            mapping.id or "id")
        seen[pair.id] = loc
        out.append(pair)
    if not out:
        raise DataError("no pairs found (the file holds no rows)", path=path)
    return out


def _format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    return {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv"}.get(suffix, "jsonl")


def read_pairs(path: str | Path, mapping: PairMapping | Mapping[str, Any] | None = None, *,
               subset: str | None = None, labels: str = "required") -> list[Pair]:
    """Every pair of a JSON / JSONL / CSV / TSV file; ``subset`` labels pairs without a subset column.

    ``labels="optional"`` (new pairs to compare): an ``ab`` row without a label (absent, null or
    empty) gives a pair whose ``preferred`` is None; a label that is there must still name a side.

    Raises :class:`DataError` (file, line or record index, field) on the first bad row; nothing
    partial is returned.
    """
    path = Path(path)
    if mapping is None or isinstance(mapping, Mapping):
        mapping = PairMapping.from_mapping(mapping)
    if not path.is_file():
        raise DataError("file not found" if not path.exists() else "not a file", path=path)
    fmt = _format(path, mapping.format)
    tabular = fmt in ("csv", "tsv")
    return pairs_from_rows(read_rows(path, fmt, []), mapping, path=path, subset=subset, tabular=tabular,
                           labels=labels)


_SIGN = {"A": 1, "B": -1, "tie": 0, 1: 1, -1: -1, 0: 0}


def preference_signs(y: Sequence[Any] | np.ndarray) -> np.ndarray:
    """+1 (A preferred) / -1 (B preferred) / 0 (tie) per pair from ``"A"``/``"B"``/``"tie"`` or those ints."""
    out = np.empty(len(y), dtype=int)
    for i, v in enumerate(y):
        key = v.item() if isinstance(v, np.generic) else v
        if isinstance(key, bool) or key not in _SIGN:
            raise DataError(f"preference {i}: expected 'A', 'B', 'tie' or +1/-1/0, got {v!r}", field="y")
        out[i] = _SIGN[key]
    return out
