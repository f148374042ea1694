"""RubricScorer and `rubric-induce score` on a finished fake run."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.scoring.scorer import RubricScorer

TEXTS = ["USER: I need a table for two tonight.\nSYSTEM: Booked at 7 pm, confirmation sent.",
         "USER: Find me a flight to Boston.\nSYSTEM: Sorry, I cannot help with that.",
         "USER: What's the address?\nSYSTEM: Which place do you mean?"]


@pytest.fixture(scope="module")
def run_dir(fake_run):
    """The session's calibrated fake run (tests/conftest.py), read only."""
    return fake_run


def test_score_texts_gives_every_part(run_dir):
    scorer = RubricScorer.load(run_dir)
    assert scorer.calibrator is not None and scorer.threshold is not None and len(scorer.rubrics) == 4
    results = scorer.score(TEXTS)
    assert [r.id for r in results] == [r.id for r in scorer.score(TEXTS)]  # stable ids
    for r in results:
        assert set(r.distributions) == {rb.id for rb in scorer.rubrics}
        assert all(abs(sum(d) - 1) < 1e-6 for d in r.distributions.values())
        assert r.label == int(r.netsat > r.threshold)
        signed = sum(d["netsat_contribution"] for d in r.drivers)
        assert signed == pytest.approx(r.netsat)
        assert r.scale[0] <= r.prediction <= r.scale[-1] and r.uncertainty > 0
        assert sum(r.proba) == pytest.approx(1.0)
        effects = [abs(d["prediction_effect"]) for d in r.drivers]
        assert effects == sorted(effects, reverse=True)  # strongest driver first
        assert r.question == "satisfaction"
    scorer.close()


def test_judges_unseen_named_and_trusted(run_dir):
    scorer = RubricScorer.load(run_dir)
    judges = scorer.judges
    assert len(judges) >= 2
    one = scorer.score(TEXTS, judge=judges[0])
    unseen = scorer.score(TEXTS, judge="shared")  # an unseen judge: the shared weights, asked for by name
    mean = scorer.score(TEXTS, judge=judges[:2])
    top = scorer.score(TEXTS, judge=judges[:2], aggregate="max")
    a = np.array([r.prediction for r in scorer.score(TEXTS, judge=judges[0])])
    b = np.array([r.prediction for r in scorer.score(TEXTS, judge=judges[1])])
    assert np.allclose([r.prediction for r in mean], (a + b) / 2)
    assert np.allclose([r.prediction for r in top], np.maximum(a, b))
    assert not np.allclose([r.prediction for r in one], [r.prediction for r in unseen])
    scorer.close()


def test_scoring_probes_needs_no_backend_and_matches(run_dir):
    from rubric_induce.data.probes import ProbeTable

    offline = RubricScorer.load(run_dir)
    table = ProbeTable.load(run_dir / "probes.jsonl")
    ids = sorted({r.example_id for r in table.records})[:5]
    res = offline.score_probes(table, ids)
    assert offline._backend is None  # no model was opened
    assert [r.id for r in res] == ids
    # NetSAT is the signed sum of the saved probes' [0, 10] scores of the selected rubrics
    from rubric_induce.selection.scores import unit_scores

    signs = np.array([1.0 if rb.polarity == "SAT" else -1.0 for rb in offline.rubrics])
    expect = unit_scores(table, offline.rubrics, example_ids=ids) @ signs
    assert np.allclose([r.netsat for r in res], expect)
    for r in res:
        assert r.label == int(r.netsat > offline.threshold)
        assert r.scale[0] <= r.prediction <= r.scale[-1] and sum(r.proba) == pytest.approx(1.0)


def test_failed_probe_is_reported_not_hidden(run_dir):
    def answers(messages, labels, prefix):
        if "Boston" in messages[-1]["content"]:
            return {}  # no mass on any answer: the probe fails
        return {"5": 0.5, "1": 0.5}
    scorer = RubricScorer.load(run_dir, backend=FakeBackend(answers=answers), cache=False)
    res = scorer.score(TEXTS)
    assert res[1].netsat is None and res[1].label is None and len(res[1].errors) == 4
    assert res[0].netsat is not None and not res[0].errors


def test_load_errors(tmp_path, run_dir):
    with pytest.raises(DataError, match="artifact.json"):
        RubricScorer.load(tmp_path)
    bad = tmp_path / "artifact.json"
    bad.write_text(json.dumps({"format": "something-else"}), encoding="utf-8")
    with pytest.raises(DataError, match="not a rubric-induce scorer"):
        RubricScorer.load(bad)
    scorer = RubricScorer.load(run_dir, backend=None)
    scorer.backend = None  # no endpoint either
    with pytest.raises(RubricInduceError, match="no backend"):
        scorer.score(["hi"])
    with pytest.raises(DataError, match="cannot score"):
        RubricScorer.load(run_dir).to_examples([3])


def test_score_cli_jsonl_and_csv(run_dir, tmp_path):
    jl = tmp_path / "in.jsonl"
    jl.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    res = runner.invoke(cli, ["score", str(run_dir), "--input", str(jl), "--out", str(out), "--backend", "fake"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["t0", "t1", "t2"]
    assert all({"netsat", "label", "prediction", "uncertainty", "drivers", "distributions"} <= set(r) for r in rows)
    csv = tmp_path / "in.csv"
    csv.write_text("id,transcript\n" + "".join(f'c{i},"{t}"\n' for i, t in enumerate(TEXTS)), encoding="utf-8")
    res = runner.invoke(cli, ["score", str(run_dir), "--input", str(csv), "--text-field", "transcript",
                              "--backend", "fake", "--trusted", "annotator1,annotator2"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [r["id"] for r in rows] == ["c0", "c1", "c2"] and rows[0]["judge"] == ["annotator1", "annotator2"]
    # bad input names the file, line and field
    jl.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "txt": "typo"}\n', encoding="utf-8")
    res = runner.invoke(cli, ["score", str(run_dir), "--input", str(jl), "--backend", "fake"])
    assert res.exit_code != 0 and "line 2" in res.output and "'text'" in res.output
    res = runner.invoke(cli, ["score", str(run_dir), "--input", str(csv), "--backend", "fake"])
    assert res.exit_code == 2 and "missing column 'text'" in res.output and "--text-field" in res.output
