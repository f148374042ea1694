"""Probe results: the answer distribution of every (example, rubric) pair, and its file format.

Probing writes these and selection, calibration, feedback and scoring read them; they live in the
data layer so that readers need not import the probing stage.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.data.jsonl import read_json, read_jsonl, write_json, write_jsonl
from rubric_induce.data.model import manifest_path
from rubric_induce.data.probe_arrays import ProbeArrays

__all__ = ["ProbeRecord", "ProbeTable", "ProbeStore", "ProbeBlock", "probe_health_markdown"]


@dataclass
class ProbeRecord:
    """The answer distribution of one rubric on one example.

    ``raw`` are the unnormalised answer probabilities in the order of ``answers``; their sum is
    the mass Z. ``error`` is set (and ``raw`` all zero) when no distribution could be read, e.g.
    an analysis without a ``Rating:`` line or a prompt too long for the model; such records are
    counted in reports, never dropped.

    **Bounded answers.** A served model lists only its top-k tokens. An allowed answer missing
    from them is *bounded*, not failed: its probability is at most ``bound`` (the smallest
    listed probability), and ``bounded`` names those answers. The distribution is then formed
    so: when some answer is listed, each bounded answer gets ``raw`` 0 (the low end of its
    interval [0, bound]; the error this makes in ``probs`` is at most ``len(bounded) * bound /
    mass``), so Z is the listed mass, a lower bound; when *no* answer is listed, each gets
    ``raw = bound`` (a uniform distribution, the neutral reading), so Z is ``len(answers) *
    bound``, an upper bound of the mass. ``bound`` is None for backends that see the whole
    distribution (local).

    ``truncated``: the example's text was cut to ``probe.max_example_tokens`` (and marked in
    the prompt); ``example_tokens`` is its original length in tokens then.

    ``pack_position`` / ``pack_size`` / ``pack_seed``: set by packed probing (``probe.packing =
    "packed"``): the rubric's 0-based place in its packed call (label ``R<pack_position + 1>``), the
    number of rubrics in that call, and the seed that shuffled the text's rubrics; None otherwise.

    ``order``: set on a pairwise probe (``probe.pairwise``): ``"AB"`` (the pair's response A shown
    first) or ``"BA"`` (B first). Its ``answers`` are then the *shown positions* (``"A"``: the
    response shown first wins, ``"B"``: the one shown second, optionally ``"tie"``) with values 1,
    0 (and 0.5), so ``expected`` is P(the first-shown response wins), ties counting half; see
    :mod:`rubric_induce.probing.pairwise`.

    ``call_failed``: ``error`` comes from a call that raised (the backend gave up after its
    retries, a bad reply, a prompt over the context window) rather than from a reply without a
    usable answer. Such a call is not in the call cache, so probing again retries exactly these.
    """

    example_id: str
    rubric_id: str
    answers: list[str]
    values: list[float]
    raw: list[float]
    style: str
    estimator: str
    prompt_hash: str
    n_samples: int | None = None
    forced_answer: bool = False
    analysis: str | None = None
    error: str | None = None
    bound: float | None = None
    bounded: list[str] | None = None
    truncated: bool = False
    example_tokens: int | None = None
    call_failed: bool = False
    pack_position: int | None = None
    pack_size: int | None = None
    pack_seed: int | None = None
    order: str | None = None

    @property
    def mass(self) -> float:
        return float(sum(self.raw))

    @property
    def probs(self) -> list[float]:
        z = self.mass
        return [p / z for p in self.raw] if z > 0 else [0.0] * len(self.raw)

    @property
    def expected(self) -> float:
        z = self.mass
        if z <= 0:
            return math.nan
        return float(sum(p * v for p, v in zip(self.raw, self.values)) / z)

    @property
    def ok(self) -> bool:
        return self.error is None and self.mass > 0

    @property
    def is_bounded(self) -> bool:
        """Some allowed answer was outside the backend's top-k (see the class docstring)."""
        return bool(self.bounded)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "example_id": self.example_id, "rubric_id": self.rubric_id, "answers": self.answers,
            "values": self.values, "probs": [round(p, 8) for p in self.probs],
            "raw": [float(p) for p in self.raw], "mass": self.mass,
            "expected": None if math.isnan(self.expected) else self.expected,
            "style": self.style, "estimator": self.estimator, "prompt_hash": self.prompt_hash,
        }
        for key in ("n_samples", "analysis", "error", "example_tokens"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.forced_answer:
            out["forced_answer"] = True
        if self.bounded:
            out["bound"] = self.bound
            out["bounded"] = list(self.bounded)
        if self.truncated:
            out["truncated"] = True
        if self.call_failed:
            out["call_failed"] = True
        for key in ("pack_position", "pack_size", "pack_seed", "order"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProbeRecord:
        return cls(
            example_id=str(d["example_id"]), rubric_id=str(d["rubric_id"]),
            answers=[str(a) for a in d["answers"]], values=[float(v) for v in d["values"]],
            raw=[float(p) for p in d["raw"]], style=str(d["style"]), estimator=str(d["estimator"]),
            prompt_hash=str(d["prompt_hash"]), n_samples=d.get("n_samples"),
            forced_answer=bool(d.get("forced_answer", False)), analysis=d.get("analysis"),
            error=d.get("error"), bound=None if d.get("bound") is None else float(d["bound"]),
            bounded=None if d.get("bounded") is None else [str(a) for a in d["bounded"]],
            truncated=bool(d.get("truncated", False)),
            example_tokens=None if d.get("example_tokens") is None else int(d["example_tokens"]),
            call_failed=bool(d.get("call_failed", False)),
            **{k: int(d[k]) for k in ("pack_position", "pack_size", "pack_seed") if d.get(k) is not None},
            order=None if d.get("order") is None else str(d["order"]),
        )


@dataclass
class ProbeTable:
    """All probe records of a run, with the settings that produced them in ``meta``."""

    records: list[ProbeRecord] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    @property
    def n_errors(self) -> int:
        return sum(1 for r in self.records if not r.ok)

    @property
    def n_call_errors(self) -> int:
        """Records whose call raised (see :attr:`ProbeRecord.call_failed`): a rerun retries them."""
        return sum(1 for r in self.records if r.call_failed)

    @property
    def n_bounded(self) -> int:
        """Usable probes with some answer outside the backend's top-k."""
        return sum(1 for r in self.records if r.ok and r.is_bounded)

    @property
    def n_truncated(self) -> int:
        return sum(1 for r in self.records if r.truncated)

    def health(self, rubric_ids: Sequence[str] | None = None,
               example_ids: Sequence[str] | None = None) -> dict[str, dict[str, int]]:
        """Per rubric: ``n`` expected probes (one per example), how many are ``bounded`` (usable,
        some answer outside the top-k), ``failed`` (a record without a distribution) and
        ``absent`` (no record). Defaults: the rubrics and examples in the table."""
        rb = list(rubric_ids) if rubric_ids is not None else list(dict.fromkeys(r.rubric_id for r in self.records))
        ex = list(example_ids) if example_ids is not None else list(dict.fromkeys(r.example_id for r in self.records))
        wanted = set(ex)
        out = {rid: {"n": len(ex), "bounded": 0, "failed": 0, "absent": len(ex)} for rid in rb}
        seen: set[tuple[str, str]] = set()
        for r in self.records:
            h = out.get(r.rubric_id)
            if h is None or r.example_id not in wanted or (r.example_id, r.rubric_id) in seen:
                continue
            seen.add((r.example_id, r.rubric_id))
            h["absent"] -= 1
            if not r.ok:
                h["failed"] += 1
            elif r.is_bounded:
                h["bounded"] += 1
        return out

    def get(self, example_id: str, rubric_id: str) -> ProbeRecord:
        for r in self.records:
            if r.example_id == example_id and r.rubric_id == rubric_id:
                return r
        raise KeyError((example_id, rubric_id))

    def arrays(self, example_ids: Sequence[str] | None = None,
               rubric_ids: Sequence[str] | None = None) -> ProbeArrays:
        """Dense views of the probes of ``example_ids`` x ``rubric_ids`` (default: all, in table order).

        One pass over the records, however many examples are asked for (scoring and evaluation
        build it once and then read rows: :meth:`ProbeArrays.take`). A pair probed twice keeps its
        last record; an id asked for twice gets the same row (column) twice.
        """
        records = self.records
        ex_ids = list(example_ids) if example_ids is not None else list(dict.fromkeys(r.example_id for r in records))
        rb_ids = list(rubric_ids) if rubric_ids is not None else list(dict.fromkeys(r.rubric_id for r in records))
        ex_unique, rb_unique = list(dict.fromkeys(ex_ids)), list(dict.fromkeys(rb_ids))
        e_index = {e: i for i, e in enumerate(ex_unique)}
        r_index = {r: j for j, r in enumerate(rb_unique)}
        n_r = len(rb_unique)
        k = max((len(r.answers) for r in records), default=1)
        cells: dict[int, ProbeRecord] = {}  # flat (example, rubric) cell -> its last record
        for rec in records:
            i = e_index.get(rec.example_id)
            if i is None:
                continue
            j = r_index.get(rec.rubric_id)
            if j is not None:
                cells[i * n_r + j] = rec
        size = len(ex_unique) * n_r
        raw = np.zeros((size, k))
        mask = np.zeros((size, k), dtype=bool)
        values = np.zeros((size, k))
        ok = np.zeros(size, dtype=bool)
        if cells:
            found = list(cells.values())
            where = np.fromiter(cells.keys(), dtype=np.int64, count=len(cells))
            ok[where] = np.fromiter((rec.ok for rec in found), dtype=bool, count=len(found))
            sizes = np.fromiter((len(rec.answers) for rec in found), dtype=np.int64, count=len(found))
            for n in np.unique(sizes).tolist():  # one block assignment per scale size
                pick = np.flatnonzero(sizes == n)
                group = [found[t] for t in pick.tolist()]
                raw[where[pick], :n] = np.array([rec.raw for rec in group], dtype=float).reshape(len(group), n)
                values[where[pick], :n] = np.array([rec.values for rec in group], dtype=float).reshape(len(group), n)
                mask[where[pick], :n] = True
        shape = (len(ex_unique), n_r)
        raw, mask, values = (a.reshape(*shape, k) for a in (raw, mask, values))
        ok = ok.reshape(shape)
        if len(ex_unique) != len(ex_ids) or n_r != len(rb_ids):  # repeated ids: repeat their rows / columns
            rows = np.array([e_index[e] for e in ex_ids], dtype=np.int64)
            cols = np.array([r_index[r] for r in rb_ids], dtype=np.int64)
            raw, mask, values, ok = (a[np.ix_(rows, cols)] for a in (raw, mask, values, ok))
        mass = raw.sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            probs = np.where(mass[..., None] > 0, raw / mass[..., None], 0.0)
            expected = np.where(ok, (probs * values).sum(axis=2), np.nan)
        return ProbeArrays(ex_ids, rb_ids, raw, probs, mass, expected, ok, mask)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        write_jsonl(path, (r.to_dict() for r in self.records))
        write_json(manifest_path(path), {**self.meta, "n_records": len(self.records),
                                          "n_errors": self.n_errors, "n_call_errors": self.n_call_errors,
                                          "n_bounded": self.n_bounded,
                                          "n_truncated": self.n_truncated})
        return path

    @classmethod
    def load(cls, path: str | Path) -> ProbeTable:
        records = list(iter_records(path))
        mpath = manifest_path(path)
        return cls(records, read_json(mpath) if mpath.exists() else {})

    @classmethod
    def scan(cls, path: str | Path, rubric_ids: Sequence[str], example_ids: Sequence[str] | None = None, *,
             on_record: Any = None) -> ProbeStore:
        """The probes of ``rubric_ids`` in the file at ``path``, read line by line into a
        :class:`ProbeStore` (per-cell arrays, never a record object per line kept): the same
        :meth:`ProbeStore.arrays` as ``ProbeTable.load(path).arrays(ids, rubric_ids)`` at a fraction
        of the memory. ``example_ids``: keep only these examples (default: every example in the
        file). ``on_record(record)`` is called with every record read (all rubrics and examples),
        for statistics over the whole table. Errors name the file and line as :meth:`load` does.
        """
        return ProbeStore.read(path, rubric_ids, example_ids, on_record=on_record)


def iter_records(path: str | Path):
    """The records of a probe table file, one at a time; a bad line is a DataError naming it."""
    for _, rec in _numbered_records(path):
        yield rec


def _numbered_records(path: str | Path):
    for line_no, row in read_jsonl(path):
        try:
            yield line_no, ProbeRecord.from_dict(row)
        except KeyError as exc:
            raise DataError("missing required field", path=path, line=line_no,
                            field=str(exc.args[0])) from None
        except (TypeError, ValueError) as exc:
            raise DataError(f"invalid probe record: {exc}", path=path, line=line_no) from None


@dataclass
class ProbeBlock:
    """Probe records as arrays (a columnar reader's row group): row ``t`` is example ``example_ids[example_codes[t]]``,
    rubric ``rubric_ids[rubric_codes[t]]``, ``n_answers[t]`` answers whose values and probabilities are the first
    entries of ``values[t]`` and ``raw[t]`` (zero-padded), and ``ok[t]`` as :attr:`ProbeRecord.ok`."""

    example_ids: list[str]
    example_codes: np.ndarray
    rubric_ids: list[str]
    rubric_codes: np.ndarray
    n_answers: np.ndarray
    values: np.ndarray
    raw: np.ndarray
    ok: np.ndarray


class ProbeStore:
    """The probes of some rubrics on many examples, held as arrays (one cell per (example, rubric)).

    What :meth:`ProbeTable.arrays` reads from the records, kept without the records: per cell the
    last record's unnormalised answer probabilities (``raw``, zero-padded to the widest scale in
    the file), its answer values (an index into the distinct scales seen) and whether it was read
    (``ok``). About 8 bytes per answer per cell, against about 1.2 KB per :class:`ProbeRecord`, so
    a million texts x 20 rubrics fit in memory; :meth:`arrays` gives the :class:`ProbeArrays` of
    any rows (a chunk of texts at a time), equal to ``table.arrays(ids, rubric_ids)``.

    ``example_ids``: the examples held, in the order first seen in the file (or as asked for);
    ``meta``: the table's manifest; ``n_records``: lines read.
    """

    _CHUNK = 1 << 15  # records buffered before they are written into the arrays

    def __init__(self, rubric_ids: Sequence[str], example_ids: Sequence[str] = (), meta: Mapping[str, Any] | None = None,
                 *, fixed: bool = False) -> None:
        self.rubric_ids = list(rubric_ids)
        self._col: dict[str, int] = {}
        for r in self.rubric_ids:
            self._col.setdefault(r, len(self._col))
        self.example_ids: list[str] = []
        self._row: dict[str, int] = {}
        for e in example_ids:
            if e not in self._row:
                self._row[e] = len(self.example_ids)
                self.example_ids.append(e)
        self._fixed = fixed  # only the given examples are held
        self.meta = dict(meta or {})
        self.n_records = 0
        self.k = 1  # widest scale of any record in the file (as ProbeTable.arrays pads)
        self._scales: dict[tuple[float, ...], int] = {}
        self._scale_list: list[tuple[float, ...]] = []
        n = max(len(self.example_ids), 16)
        n_r = len(self._col)
        self._raw = np.zeros((n, n_r, 1))
        self._scale = np.full((n, n_r), -1, dtype=np.int32)  # -1: no record for the cell
        self._ok = np.zeros((n, n_r), dtype=bool)
        self._buffer: list[tuple[int, int, int, bool, list[float]]] = []

    @classmethod
    def read(cls, path: str | Path, rubric_ids: Sequence[str], example_ids: Sequence[str] | None = None, *,
             on_record: Any = None) -> ProbeStore:
        """See :meth:`ProbeTable.scan`."""
        mpath = manifest_path(path)
        store = cls(rubric_ids, example_ids or (), read_json(mpath) if mpath.exists() else {},
                    fixed=example_ids is not None)
        for line_no, rec in _numbered_records(path):
            try:
                store.add(rec)
            except ValueError as exc:
                raise DataError(f"invalid probe record: {exc}", path=path, line=line_no) from None
            if on_record is not None:
                on_record(rec)
        store.flush()
        return store

    @classmethod
    def from_records(cls, records: Iterable[ProbeRecord], rubric_ids: Sequence[str],
                     example_ids: Sequence[str] | None = None) -> ProbeStore:
        store = cls(rubric_ids, example_ids or (), fixed=example_ids is not None)
        for rec in records:
            store.add(rec)
        store.flush()
        return store

    def __len__(self) -> int:
        return len(self.example_ids)

    def add(self, rec: ProbeRecord) -> None:
        """Take one record (a later record of the same cell replaces an earlier one)."""
        self.n_records += 1
        n = len(rec.answers)
        if n > self.k:
            self.k = n
        i = self._row.get(rec.example_id)
        if i is None:
            if self._fixed:
                return
            # every example in the file is held, also one with no probe of these rubrics (all absent)
            i = self._row[rec.example_id] = len(self.example_ids)
            self.example_ids.append(rec.example_id)
        j = self._col.get(rec.rubric_id)
        if j is None:
            return
        s = self._scale_id(tuple(rec.values))
        if len(rec.raw) != n or len(rec.values) != n:
            raise ValueError(f"record ({rec.example_id}, {rec.rubric_id}) has {n} answers, {len(rec.values)} values "
                             f"and {len(rec.raw)} probabilities")
        self._buffer.append((i, j, s, rec.ok, rec.raw))
        if len(self._buffer) >= self._CHUNK:
            self.flush()

    def _scale_id(self, values: tuple[float, ...]) -> int:
        s = self._scales.get(values)
        if s is None:
            s = self._scales[values] = len(self._scale_list)
            self._scale_list.append(values)
        return s

    def add_block(self, block: ProbeBlock) -> None:
        """Take many records at once: the same arrays as :meth:`add` of each row in order (a later row
        of a cell replaces an earlier one), without a record object per row."""
        m = len(block.ok)
        if m == 0:
            return
        self.flush()  # records added before come first
        self.n_records += m
        self.k = max(self.k, int(block.n_answers.max()))
        _, first = np.unique(block.example_codes, return_index=True)
        ex_row = np.full(len(block.example_ids), -1, dtype=np.int64)
        for code in block.example_codes[np.sort(first)].tolist():  # examples in order of first appearance
            i = self._row.get(block.example_ids[code])
            if i is None and not self._fixed:
                i = self._row[block.example_ids[code]] = len(self.example_ids)
                self.example_ids.append(block.example_ids[code])
            ex_row[code] = -1 if i is None else i
        rb_col = np.array([self._col.get(r, -1) for r in block.rubric_ids], dtype=np.int64)
        rows, cols = ex_row[block.example_codes], rb_col[block.rubric_codes]
        take = np.flatnonzero((rows >= 0) & (cols >= 0))
        self.flush()  # grow the arrays to the new examples and scale width
        if not take.size:
            return
        cells = rows[take] * self._raw.shape[1] + cols[take]
        _, first_rev = np.unique(cells[::-1], return_index=True)  # the last row of each cell
        keep = take[np.sort(len(take) - 1 - first_rev)]
        where = rows[keep] * self._raw.shape[1] + cols[keep]
        scale = np.column_stack([block.n_answers[keep], block.values[keep]])
        uniq, inverse = np.unique(scale, axis=0, return_inverse=True)
        ids = np.array([self._scale_id(tuple(row[1: 1 + int(row[0])])) for row in uniq.tolist()], dtype=np.int32)
        flat_raw = self._raw.reshape(-1, self._raw.shape[2])
        flat_raw[where] = 0.0
        flat_raw[where, : block.raw.shape[1]] = block.raw[keep]
        self._scale.reshape(-1)[where] = ids[inverse.reshape(-1)]
        self._ok.reshape(-1)[where] = block.ok[keep]

    def flush(self) -> None:
        """Write the buffered records into the arrays (grown as needed)."""
        buf, self._buffer = self._buffer, []
        rows_needed = len(self.example_ids)
        if rows_needed > self._raw.shape[0] or self.k > self._raw.shape[2]:
            n = max(self._raw.shape[0], rows_needed)
            if rows_needed > self._raw.shape[0]:
                n = max(rows_needed, 2 * self._raw.shape[0])
            raw = np.zeros((n, self._raw.shape[1], self.k))
            raw[: self._raw.shape[0], :, : self._raw.shape[2]] = self._raw
            scale = np.full((n, self._scale.shape[1]), -1, dtype=np.int32)
            scale[: self._scale.shape[0]] = self._scale
            ok = np.zeros((n, self._ok.shape[1]), dtype=bool)
            ok[: self._ok.shape[0]] = self._ok
            self._raw, self._scale, self._ok = raw, scale, ok
        if not buf:
            return
        n_r = self._raw.shape[1]
        cells = np.fromiter((i * n_r + j for i, j, _, _, _ in buf), dtype=np.int64, count=len(buf))
        # the last record of each cell: unique over the reversed order keeps the last occurrence
        _, first_rev = np.unique(cells[::-1], return_index=True)
        keep = np.sort(len(buf) - 1 - first_rev)
        kept = [buf[t] for t in keep.tolist()]
        where = cells[keep]
        flat_raw = self._raw.reshape(-1, self._raw.shape[2])
        flat_raw[where] = 0.0
        sizes = np.fromiter((len(b[4]) for b in kept), dtype=np.int64, count=len(kept))
        for n in np.unique(sizes).tolist():
            pick = np.flatnonzero(sizes == n)
            flat_raw[where[pick], :n] = np.array([kept[t][4] for t in pick.tolist()], dtype=float).reshape(len(pick), n)
        self._scale.reshape(-1)[where] = np.fromiter((b[2] for b in kept), dtype=np.int32, count=len(kept))
        self._ok.reshape(-1)[where] = np.fromiter((b[3] for b in kept), dtype=bool, count=len(kept))

    def arrays(self, example_ids: Sequence[str] | None = None) -> ProbeArrays:
        """The :class:`ProbeArrays` of ``example_ids`` (default: all held) x the store's rubrics,
        equal to ``ProbeTable.arrays(example_ids, rubric_ids)`` on the table that was read. An id
        not held reads as an absent probe."""
        if self._buffer:
            self.flush()
        ex_ids = list(example_ids) if example_ids is not None else list(self.example_ids)
        rows = np.array([self._row.get(e, -1) for e in ex_ids], dtype=np.int64)
        cols = np.array([self._col[r] for r in self.rubric_ids], dtype=np.int64)
        k = self.k
        absent = rows < 0
        safe = np.where(absent, 0, rows)
        raw = self._raw[np.ix_(safe, cols)]
        if raw.shape[2] < k:
            raw = np.concatenate([raw, np.zeros((*raw.shape[:2], k - raw.shape[2]))], axis=2)
        scale = self._scale[np.ix_(safe, cols)]
        ok = self._ok[np.ix_(safe, cols)]
        if absent.any():
            raw[absent] = 0.0
            scale[absent] = -1
            ok[absent] = False
        table = np.zeros((len(self._scale_list) + 1, k))
        lens = np.zeros(len(self._scale_list) + 1, dtype=np.int64)
        for s, vals in enumerate(self._scale_list):
            table[s, : len(vals)] = vals
            lens[s] = len(vals)
        values = table[scale]  # scale -1 picks the last row: zeros, no answers
        mask = np.arange(k)[None, None, :] < lens[scale][..., None]
        mass = raw.sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            probs = np.where(mass[..., None] > 0, raw / mass[..., None], 0.0)
            expected = np.where(ok, (probs * values).sum(axis=2), np.nan)
        return ProbeArrays(ex_ids, list(self.rubric_ids), raw, probs, mass, expected, ok, mask)


def probe_health_markdown(health: Mapping[str, Mapping[str, int]], n_examples: int | None = None) -> str:
    """A markdown table of the rubrics with bounded, failed or absent probes ('' when none)."""
    rows = [(rid, h) for rid, h in health.items() if h.get("bounded") or h.get("failed") or h.get("absent")]
    if not rows:
        return ""
    n = n_examples if n_examples is not None else max(h.get("n", 0) for _, h in rows)
    of = f", of {n} examples" if n else ""
    lines = ["", f"### Probe health ({len(rows)} rubric(s) with bounded or failed probes{of})", "",
             "Bounded: an allowed answer was outside the backend's top-k (kept, below the bound). Failed or "
             "absent: no distribution; under select.max_failure_rate they score neutral.", "",
             "| rubric | bounded | failed | absent |", "|---|---|---|---|"]
    lines += [f"| `{rid}` | {h.get('bounded', 0)} | {h.get('failed', 0)} | {h.get('absent', 0)} |" for rid, h in rows]
    return "\n".join(lines) + "\n"
