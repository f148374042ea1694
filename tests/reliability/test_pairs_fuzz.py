"""Fuzz the pair readers: any JSON / JSONL / CSV content gives pairs or a DataError, never a traceback."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubric_induce.core.errors import DataError
from rubric_induce.data.pairs import PAIR_LAYOUTS, PairMapping, read_pairs

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
                     st.text(max_size=8))
_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                       max_leaves=6)
_keys = st.sampled_from(["input", "prompt", "output_1", "output_2", "label", "chosen", "rejected", "id", "x"])
_rows = st.lists(st.one_of(st.dictionaries(_keys, _values, max_size=6), _values), max_size=4)


def _read(path, layout):
    try:
        pairs = read_pairs(path, PairMapping(layout=layout))
    except DataError as exc:
        assert str(exc)
        return
    for p in pairs:
        assert p.preferred in ("A", "B", "tie") and p.response_a.strip() != p.response_b.strip()


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, layout=st.sampled_from(PAIR_LAYOUTS))
def test_fuzz_json_rows(tmp_path, rows, layout):
    path = tmp_path / "f.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    _read(path, layout)
    jl = tmp_path / "f.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _read(jl, layout)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200), ext=st.sampled_from([".json", ".jsonl", ".csv", ".tsv"]))
def test_fuzz_raw_bytes(tmp_path, data, ext):
    path = tmp_path / ("f" + ext)
    path.write_bytes(data)
    _read(path, "auto")


_map_keys = st.sampled_from(["format", "layout", "id", "prompt", "a", "b", "label", "label_values", "chosen",
                             "rejected", "judges", "subset", "seed", "other"])


@settings(max_examples=150, deadline=None)
@given(table=st.dictionaries(_map_keys, _values, max_size=4))
def test_fuzz_pair_mapping_table(table):
    """A [data.mapping] table for pairs: a PairMapping or a DataError naming the field, never a traceback."""
    try:
        PairMapping.from_mapping(table, source="cfg.toml")
    except DataError as exc:
        assert exc.field and exc.path == "cfg.toml"
