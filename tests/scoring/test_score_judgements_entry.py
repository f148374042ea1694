"""The scoring stage's entry for judges' outputs without a run: ``rubric_induce.scoring.score_judgements``
(a run's rubrics go through ``RubricScorer``), on a file path or on judgements already read."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rubric_induce import scoring
from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import judgements_from_arrays
from rubric_induce.scoring.judgements_guarantee import FitSpec, fit_judgements_guarantee


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """200 labelled pairs judged by `big` (right where confident) and the guarantee fitted on them."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(200):
        y = int(rng.random() < 0.5)
        conf = float(rng.uniform(0.5, 1.0))
        answer = y if rng.random() < conf else 1 - y
        rows.append({"id": f"t{i}", "label": y, "judges": {"big": {"answer": answer, "confidence": round(conf, 4)}}})
    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    g = fit_judgements_guarantee(scoring.read_judgements(path), ["big"], target=0.8,
                                 spec=FitSpec(kind="guarantee"))
    gpath = tmp_path / "judged.guarantees.json"
    gpath.write_text(json.dumps({"guarantees": [g.to_dict()]}))
    return path, gpath


def test_the_package_exports_one_entry_per_kind_of_input():
    assert {"RubricScorer", "score_judgements", "read_judgements"} <= set(scoring.__all__)
    assert scoring.score_judgements.__module__ == "rubric_induce.scoring.judgements_apply"
    doc = scoring.__doc__
    assert "RubricScorer" in doc and "score_judgements" in doc and "judgements file" in doc


def test_a_path_and_judgements_already_read_score_alike(tmp_path):
    path, gpath = _files(tmp_path)
    g, by_path = scoring.score_judgements(path, gpath)
    _, by_object = scoring.score_judgements(scoring.read_judgements(path), gpath)
    assert by_path == by_object and len(by_path) == 200
    assert g.issued and {r["decision"] for r in by_path} == {"answered", "abstained"}


def test_judgements_on_another_scale_are_refused(tmp_path):
    _, gpath = _files(tmp_path)
    graded = judgements_from_arrays([1.0, 2.0], {"big": np.eye(3)[[0, 1]]}, scale=(1.0, 2.0, 3.0))
    with pytest.raises(DataError, match="scale"):
        scoring.score_judgements(graded, gpath)
