"""ProbeTable.scan / ProbeStore: a probe table read line by line into arrays (issue 35), equal to
ProbeTable.arrays on the same file, in a fraction of the memory."""
from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data.probes import ProbeRecord, ProbeStore, ProbeTable

FIELDS = ("raw", "probs", "mass", "expected", "ok", "answer_mask")


def _rec(ex: str, rb: str, raw, *, error=None, values=None) -> ProbeRecord:
    n = len(raw)
    values = values if values is not None else [float(v) for v in range(1, n + 1)]
    return ProbeRecord(ex, rb, [str(int(v)) for v in values], values, list(raw), "likert", "logprobs", "h",
                       error=error)


def _messy_table() -> ProbeTable:
    """Duplicates (the last one wins, with a narrower scale than the first), a failed probe, an
    absent pair, a rubric nobody asks for with the widest scale, an example with only that rubric."""
    rng = np.random.default_rng(3)
    recs = []
    for i in range(7):
        for rb in ("r1", "r2", "r3"):
            if (i, rb) == (2, "r2"):
                continue  # absent
            recs.append(_rec(f"e{i}", rb, rng.random(5)))
    recs.append(_rec("e1", "r1", [0.0] * 5, error="no rating line"))  # a failed rerun replaces a read probe
    recs.append(_rec("e3", "r3", [0.2, 0.7], values=[0.0, 1.0]))  # the last record of (e3, r3): two answers
    recs.append(_rec("e4", "r9", rng.random(7)))  # a rubric not asked for, with the widest scale
    recs.append(_rec("e9", "r9", rng.random(3)))  # an example with no probe of the asked rubrics
    return ProbeTable(recs, {"n": 1})


@pytest.mark.parametrize("rubrics", [["r1", "r2", "r3"], ["r3", "r1"], ["r2", "r2", "r1"]])
def test_scan_gives_the_same_arrays_as_the_table(tmp_path, rubrics):
    table = _messy_table()
    path = table.save(tmp_path / "probes.jsonl")
    store = ProbeTable.scan(path, rubrics)
    assert store.example_ids == list(dict.fromkeys(r.example_id for r in table.records))  # e9 too
    assert store.meta["n"] == 1 and store.n_records == len(table)
    for ids in (None, ["e3", "e0", "nope", "e3", "e9"], []):
        want = table.arrays(ids if ids is not None else store.example_ids, rubrics)
        got = store.arrays(ids)
        assert got.example_ids == want.example_ids and got.rubric_ids == want.rubric_ids
        for f in FIELDS:
            assert getattr(got, f).shape == getattr(want, f).shape, f
            assert np.array_equal(getattr(got, f), getattr(want, f), equal_nan=True), f


def test_scan_of_some_examples_and_records_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(ProbeStore, "_CHUNK", 4)  # flushes mid-file: duplicates across and within chunks
    table = _messy_table()
    path = table.save(tmp_path / "probes.jsonl")
    seen = []
    store = ProbeTable.scan(path, ["r1", "r3"], ["e5", "e1", "e3", "absent"], on_record=seen.append)
    assert store.example_ids == ["e5", "e1", "e3", "absent"] and len(seen) == len(table)
    want = table.arrays(["e5", "e1", "e3", "absent"], ["r1", "r3"])
    for f in FIELDS:
        assert np.array_equal(getattr(store.arrays(), f), getattr(want, f), equal_nan=True), f
    assert not store.arrays().ok[1, 0] and store.arrays().ok[2, 1]  # e1/r1 failed last; e3/r3 read
    same = ProbeStore.from_records(table.records, ["r1", "r3"], ["e5", "e1", "e3", "absent"])
    for f in FIELDS:
        assert np.array_equal(getattr(same.arrays(), f), getattr(want, f), equal_nan=True), f


def test_scan_names_the_file_and_line_of_a_bad_record(tmp_path):
    good = json.dumps(_rec("e0", "r1", [0.5, 0.5]).to_dict())
    missing = tmp_path / "missing.jsonl"
    missing.write_text(good + "\n" + json.dumps({"example_id": "e1", "rubric_id": "r1"}) + "\n")
    with pytest.raises(DataError, match=r"missing.jsonl.*line 2.*answers"):
        ProbeTable.scan(missing, ["r1"])
    short = tmp_path / "short.jsonl"
    row = _rec("e1", "r1", [0.5, 0.5]).to_dict()
    row["raw"] = [0.5]
    short.write_text(good + "\n\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"short.jsonl.*line 3.*2 answers, 2 values and 1 probabilities"):
        ProbeTable.scan(short, ["r1"])


def test_scan_holds_arrays_not_records(tmp_path):
    rng = np.random.default_rng(0)
    table = ProbeTable([_rec(f"e{i}", f"r{j}", rng.random(5)) for i in range(200) for j in range(10)])
    path = table.save(tmp_path / "probes.jsonl")
    del table

    def held(fn) -> int:
        tracemalloc.start()
        kept = fn()
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del kept
        return size

    rubrics = [f"r{j}" for j in range(10)]
    ProbeTable.scan(path, rubrics)  # first calls allocate caches that stay (imports, the json decoder)
    loaded = held(lambda: ProbeTable.load(path))
    scanned = held(lambda: ProbeTable.scan(path, rubrics))
    assert scanned * 5 < loaded, (scanned, loaded)  # about 1.2 KB a record against under 100 bytes a probe
