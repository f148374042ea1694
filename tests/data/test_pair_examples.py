"""Pairs as the examples a pairwise run probes, and `[data] kind = "pairwise"` parameters."""
from __future__ import annotations

import json

import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data.pair_examples import pair_examples, pairs_in
from rubric_induce.data.pairs import Pair, PairMapping
from rubric_induce.data.params import DataParams, load_examples, load_pairs


def test_each_pair_becomes_two_examples_labelled_by_the_preference():
    pairs = [Pair("p1", "Q1", "a1", "b1", "A", subset="s"), Pair("p2", "Q2", "a2", "b2", "B"),
             Pair("p3", "Q3", "a3", "b3", "tie")]
    ex = pair_examples(pairs, "pref")
    assert [e.id for e in ex] == ["p1/A", "p1/B", "p2/A", "p2/B", "p3/A", "p3/B"]
    assert [e.labels["pref"] for e in ex] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert list(ex[0].fields) == ["prompt", "response"] and ex[1].fields == {"prompt": "Q1", "response": "b1"}
    assert {e.group for e in ex[:2]} == {"p1"} and ex[0].meta == {"pair": "p1", "side": "A", "subset": "s"}
    assert [p.id for p in pairs_in(pairs, ex[2:4])] == ["p2"]


def test_shared_prefix_reads_under_the_data_root(tmp_path):
    (tmp_path / "llmbar").mkdir()
    rows = [{"input": f"q{i}", "output_1": f"x{i}", "output_2": f"y{i}", "label": 1 + i % 2} for i in range(3)]
    (tmp_path / "llmbar" / "d.json").write_text(json.dumps(rows), encoding="utf-8")
    d = DataParams(kind="pairwise", examples="shared:llmbar/d.json", data_root=str(tmp_path))
    assert d.examples_path() == tmp_path / "llmbar" / "d.json"
    pairs = load_pairs(d)
    assert [p.preferred for p in pairs] == ["A", "B", "A"]
    assert len(load_examples(d)) == 6
    assert len(load_pairs(d, limit=2)) == 2


def test_pairwise_params_take_a_pair_mapping_and_refuse_pointwise_ones():
    d = DataParams.from_mapping({"kind": "pairwise", "examples": "x.json", "mapping": {"layout": "ab", "a": "r1"}})
    assert isinstance(d.mapping, PairMapping) and d.pair_mapping().a == "r1" and d.input_mapping() is None
    with pytest.raises(DataError) as exc:
        DataParams.from_mapping({"kind": "pairwise", "dataset": "uss-sgd"})
    assert exc.value.field == "data.dataset"
    with pytest.raises(DataError) as exc:
        DataParams.from_mapping({"kind": "pairwise", "examples": "x.json", "scales": {"sat": [0, 1]}})
    assert exc.value.field == "data.scales"
    with pytest.raises(DataError) as exc:  # a pair-mapping key in a pointwise run: an unknown InputMapping key
        DataParams.from_mapping({"examples": "x.json", "mapping": {"layout": "ab"}})
    assert "layout" in str(exc.value)
    with pytest.raises(DataError) as exc:
        DataParams.from_mapping({"kind": "sideways"})
    assert exc.value.field == "data.kind"
