"""Guarantees read back from a hand-edited or damaged artifact, and odd calibration data: a DataError
naming the field, never a traceback or a silently wrong threshold."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.core.errors import DataError
from rubric_induce.scoring.guarantee import Guarantee, fit_guarantee
from rubric_induce.scoring.selective import resolve_guarantee

GOOD = {"target": 0.9, "delta": 0.1, "n": 50, "threshold": 0.7, "coverage": 0.5, "measure": "proba",
        "tolerance": 0.0, "agreement": 0.95, "upper_error": 0.09, "answered": 25, "tested": 3}
ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=5), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2),
                                                                                         st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(GOOD) + ["extra", "method"]), ANY, max_size=8),
       st.booleans())
def test_from_dict_gives_a_valid_guarantee_or_a_data_error(changes, on_good):
    doc = {**GOOD, **changes} if on_good else changes
    try:
        g = Guarantee.from_dict(doc)
    except DataError as exc:
        assert exc.field and exc.field.startswith("guarantee")
        return
    assert 0 < g.target < 1 and 0 < g.delta < 1 and 0 <= g.coverage <= 1
    assert g.threshold is None or np.isfinite(g.threshold)
    g.answers(np.linspace(0, 1, 5))  # usable


@pytest.mark.parametrize("bad", [{"threshold": "0.7"}, {"target": "0.9"}, {"coverage": 2}, {"measure": "vibes"},
                                 {"n": -1}, {"delta": True}])
def test_tampered_artifact_guarantee_is_a_data_error(tmp_path, bad):
    path = tmp_path / "artifact.json"
    path.write_text(json.dumps({"format": "rubric-induce-scorer", "guarantees": [{**GOOD, **bad}]}))
    with pytest.raises(DataError) as exc:
        g = resolve_guarantee(0.9 if "target" not in bad else {"target": 0.9}, path)
        Guarantee.from_dict(g.to_dict())
    assert "guarantee" in (exc.value.field or "")


def test_guarantees_not_a_list_is_a_data_error(tmp_path):
    path = tmp_path / "artifact.json"
    path.write_text(json.dumps({"guarantees": {"target": 0.9}}))
    with pytest.raises(DataError) as exc:
        resolve_guarantee(0.9, path)
    assert exc.value.field == "guarantees"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True), st.booleans()), min_size=0, max_size=60))
def test_fit_on_odd_confidences_never_answers_a_nan(rows):
    c = np.array([r[0] for r in rows], dtype=float)
    ok = np.array([r[1] for r in rows], dtype=bool)
    try:
        g = fit_guarantee(c, ok, target=0.8, delta=0.1)
    except DataError as exc:
        assert exc.field == "labels" and "needed" in str(exc)
        return
    assert not g.answers(np.array([np.nan])).any()
    assert g.threshold is None or np.isfinite(g.threshold)
