"""Which texts to label next (rubric_induce.evaluation.suggest), and the weighted estimate that
labels drawn that way feed (unbiased, valid: checked by simulation)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import read_judgements
from rubric_induce.evaluation.estimate import estimate_judgements
from rubric_induce.evaluation.suggest import (
    SuggestParams,
    hashed_embeddings,
    suggest,
    suggest_calibration,
    suggest_estimate,
    suggest_threshold,
)


def _probs(p) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return np.column_stack([1 - p, p])


def test_estimate_draws_with_uncertainty_tied_probabilities() -> None:
    ids = [f"t{i}" for i in range(400)]
    p = np.linspace(0.01, 0.99, 400)
    found, pi = suggest_estimate(ids, _probs(p), [0, 1], 40, seed=3)
    assert pi.sum() == pytest.approx(40)
    assert pi[200] > pi[0]  # unsure (p near 0.5) more likely than sure
    assert 20 <= len(found) <= 60
    assert all(s.sampling_probability == pytest.approx(pi[int(s.id[1:])]) for s in found)
    assert all(s.weight == pytest.approx(1 / s.sampling_probability) for s in found)
    again, _ = suggest_estimate(ids, _probs(p), [0, 1], 40, seed=3)
    assert [s.id for s in again] == [s.id for s in found]  # seeded


def test_calibration_prefers_unsure_texts_that_are_not_near_copies() -> None:
    ids = ["a", "a2", "b", "c"]
    texts = ["the flight to paris was cancelled", "the flight to paris was cancelled", "refund my order please",
             "weather today"]
    p = [0.5, 0.5, 0.45, 0.97]
    got = suggest_calibration(ids, _probs(p), [0, 1], hashed_embeddings(texts), 2)
    assert [s.id for s in got] == ["a", "b"]  # a2 is a copy of a, c is sure
    labelled = hashed_embeddings(["the flight to paris was cancelled"])
    got = suggest_calibration(ids, _probs(p), [0, 1], hashed_embeddings(texts), 1, labelled_embeddings=labelled)
    assert [s.id for s in got] == ["b"]  # a is already covered by a labelled text


def test_threshold_lists_confidences_nearest_the_threshold() -> None:
    ids = ["x", "y", "z", "w"]
    got = suggest_threshold(ids, _probs([0.5, 0.8, 0.95, 0.1]), [0, 1], 0.85, 2)
    assert [s.id for s in got] == ["y", "w"]  # confidences 0.8 and 0.9


def test_threshold_on_the_guarantees_own_confidence() -> None:
    """A run's guarantee measures confidence its own way: those numbers decide, and a text without
    one (no evidence: never answered) is passed over."""
    ids = ["x", "y", "z", "w"]
    got = suggest(ids, _probs([0.5, 0.8, 0.95, 0.1]), [0, 1], SuggestParams(n=3, purposes=("threshold",),
                  threshold=0.85), confidence=[0.84, np.nan, 0.7, 0.99])
    assert [(s.id, s.confidence) for s in got] == [("x", 0.84), ("w", 0.99), ("z", 0.7)]
    with pytest.raises(DataError, match="3 confidences for 4 texts"):
        suggest_threshold(ids, _probs([0.5, 0.8, 0.95, 0.1]), [0, 1], 0.85, 2, confidence=[0.1, 0.2, 0.3])


@pytest.mark.parametrize("params,match", [
    (SuggestParams(n=0), "at least 1"), (SuggestParams(purposes=("everything",)), "purposes"),
    (SuggestParams(purposes=("threshold",)), "threshold"),
])
def test_bad_params(params, match) -> None:
    with pytest.raises(DataError, match=match):
        suggest(["a", "b"], _probs([0.3, 0.6]), [0, 1], params)


def test_hashed_embeddings_are_deterministic_unit_vectors() -> None:
    a = hashed_embeddings(["Hello world", "hello WORLD", "", "other words"])
    assert np.allclose(a[0], a[1]) and np.allclose(np.linalg.norm(a[[0, 3]], axis=1), 1.0)
    assert not a[2].any()


def _pool_file(tmp_path, y, p, drawn, pi, systems=None):
    lines = []
    for i in range(len(y)):
        row = {"id": f"t{i}", "judges": {"j": {"probs": [1 - p[i], p[i]]}}}
        if systems is not None:
            row["system"], row["group"] = systems[i], f"prompt{i // 2}"
        if drawn[i]:
            row["label"], row["sampling_probability"] = float(y[i]), float(pi[i])
        lines.append(json.dumps(row))
    path = tmp_path / "pool.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_labels_drawn_by_suggest_give_an_unbiased_valid_estimate(tmp_path) -> None:
    """A fixed pool whose judge is biased (+0.2) and whose uncertainty points at its errors:
    suggest's coins, labels on the drawn texts, estimate through the judgements file. Over 400
    draws the weighted estimate averages to the truth and its 90 % interval covers at nominal
    within Monte-Carlo error; the unweighted mean of the drawn labels is biased (it over-samples
    unsure texts)."""
    rng = np.random.default_rng(0)
    n = 600
    q = rng.random(n)
    y = (rng.random(n) < 0.1 + 0.6 * q).astype(float)
    p = np.clip(q + 0.2, 0.01, 0.99)
    truth = y.mean()
    ids = [f"t{i}" for i in range(n)]
    estimates, covered, naive_means = [], 0, []
    reps = 400
    for rep in range(reps):
        found, pi = suggest_estimate(ids, _probs(p), [0, 1], 40, seed=rep)
        drawn = np.zeros(n, dtype=bool)
        drawn[[int(s.id[1:]) for s in found]] = True
        row = estimate_judgements(read_judgements(_pool_file(tmp_path, y, p, drawn, pi)), "j")[0]
        assert row.weighted and row.n_labelled == drawn.sum()
        estimates.append(row.ppi.estimate)
        covered += row.ppi.low <= truth <= row.ppi.high
        naive_means.append(y[drawn].mean())
    spread = np.std(estimates) / np.sqrt(reps)
    assert abs(np.mean(estimates) - truth) < 4 * spread
    assert covered / reps >= 0.9 - 2 * np.sqrt(0.09 / reps)
    assert abs(np.mean(naive_means) - truth) > 4 * np.std(naive_means) / np.sqrt(reps)


def test_weighted_rows_per_system_and_refusals(tmp_path) -> None:
    rng = np.random.default_rng(1)
    n = 300
    y = (rng.random(n) < 0.5).astype(float)
    p = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.1, n), 0.01, 0.99)
    pi = np.full(n, 0.3)
    drawn = rng.random(n) < pi
    systems = ["A" if i % 2 else "B" for i in range(n)]
    rows = estimate_judgements(read_judgements(_pool_file(tmp_path, y, p, drawn, pi, systems)), "j", by="system")
    assert [r.what for r in rows] == ["all texts", "system = A", "system = B", "system = B minus A"]
    assert all(r.weighted for r in rows)
    assert rows[3].ppi.estimate == pytest.approx(rows[2].ppi.estimate - rows[1].ppi.estimate)
    assert all(0 <= r.ppi.low <= r.ppi.high <= 1 for r in rows[:3])
    # a labelled row without a probability among rows with one; a drawn row without a label; a bad probability
    text = (tmp_path / "pool.jsonl").read_text().splitlines()
    first = next(i for i, line in enumerate(text) if "sampling_probability" in line)
    for change, phrase in (
        (lambda r: r.pop("sampling_probability"), "cannot be mixed"),
        (lambda r: r.pop("label"), "has no label"),
        (lambda r: r.update(sampling_probability=0), r"in \(0, 1\]"),
    ):
        row = json.loads(text[first])
        change(row)
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join([*text[:first], json.dumps(row), *text[first + 1:]]) + "\n")
        with pytest.raises(DataError, match=phrase) as err:
            estimate_judgements(read_judgements(bad), "j")
        assert err.value.line == first + 1 and err.value.field == "sampling_probability"
