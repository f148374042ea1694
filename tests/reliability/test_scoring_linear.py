"""Scoring and held-out evaluation read the probe table once, however many examples (issue 17).

Structural, not timed: a probe table whose record list counts how often it is walked, scored for
50 and for 500 examples, must be walked the same (small) number of times; and the results must
equal, bit for bit, those of the per-example path they replaced (a copy of it is kept below as
the reference: ``ProbeTable.arrays``' record loop and one ``unit_scores`` call per example).
"""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.data import AnswerScale, Example, Judgment, Rubric
from rubric_induce.data.probe_arrays import ProbeArrays
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.evaluation.heldout import score_heldout
from rubric_induce.scoring.scorer import RubricScorer
from rubric_induce.selection.scores import signs_from_polarity, unit_scores

N_RUBRICS = 6
JUDGES = ("ann", "bob", "cy", "dee")


class CountingList(list):
    """A record list that counts every walk over it (``for``, comprehensions, ``iter``)."""

    walks = 0

    def __iter__(self):
        CountingList.walks += 1
        return super().__iter__()


def make_rubrics() -> list[Rubric]:
    yes_no = AnswerScale(("no", "yes"), (0.0, 1.0))
    return [Rubric.create(f"rubric {j}", "SAT" if j % 2 == 0 else "DSAT",
                          scale=yes_no if j == 3 else AnswerScale.likert(1, 5)) for j in range(N_RUBRICS)]


def make_table(n: int, rubrics: list[Rubric], *, seed: int = 0, counting: bool = False) -> ProbeTable:
    """Seeded probes of ``n`` examples: some failed, some absent, one pair probed twice."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        for _j, rb in enumerate(rubrics):
            u = rng.random()
            if u < 0.02:  # absent: no record at all
                continue
            size = rb.scale.size
            raw = (rng.dirichlet(np.ones(size)) * rng.uniform(0.3, 1.0)).tolist()
            error = None
            if u < 0.04:
                raw, error = [0.0] * size, "no Rating: line"
            records.append(ProbeRecord(f"ex{i:04d}", rb.id, list(rb.scale.labels), list(rb.scale.values), raw,
                                       "score-only", "logprobs", "h", error=error))
    if n > 3:  # a pair probed twice: the last record counts
        first = records[7]
        records.append(ProbeRecord(first.example_id, first.rubric_id, first.answers, first.values,
                                   list(reversed(first.raw)), "score-only", "logprobs", "h"))
    return ProbeTable(CountingList(records) if counting else records, {})


def make_examples(n: int, seed: int = 0) -> list[Example]:
    rng = np.random.default_rng(seed + 1)
    out = []
    for i in range(n):
        who = rng.choice(len(JUDGES), size=2, replace=False)
        out.append(Example(id=f"ex{i:04d}", fields={"text": f"t{i}"}, labels={"sat": float(rng.integers(1, 6))},
                           judgments=tuple(Judgment(JUDGES[k], {"sat": float(rng.integers(1, 6))}) for k in who)))
    return out


# -- the per-example path before issue 17, kept as the reference ---------------------------------
def reference_arrays(table: ProbeTable, ex_ids, rb_ids) -> ProbeArrays:
    e_index = {e: i for i, e in enumerate(ex_ids)}
    r_index = {r: j for j, r in enumerate(rb_ids)}
    k = max((len(r.answers) for r in table.records), default=1)
    raw = np.zeros((len(ex_ids), len(rb_ids), k))
    mask = np.zeros((len(ex_ids), len(rb_ids), k), dtype=bool)
    values = np.zeros((len(ex_ids), len(rb_ids), k))
    ok = np.zeros((len(ex_ids), len(rb_ids)), dtype=bool)
    for rec in list.__iter__(table.records):
        i, j = e_index.get(rec.example_id), r_index.get(rec.rubric_id)
        if i is None or j is None:
            continue
        n = len(rec.answers)
        raw[i, j, :n] = rec.raw
        mask[i, j, :n] = True
        values[i, j, :n] = rec.values
        ok[i, j] = rec.ok
    mass = raw.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        probs = np.where(mass[..., None] > 0, raw / mass[..., None], 0.0)
        expected = np.where(ok, (probs * values).sum(axis=2), np.nan)
    return ProbeArrays(list(ex_ids), list(rb_ids), raw, probs, mass, expected, ok, mask)


def reference_netsat(table: ProbeTable, rubrics, ids, score: str = "expected") -> list[float | None]:
    """NetSAT as the old score_probes computed it: the table re-read for every example."""
    signs = signs_from_polarity(rubrics, len(rubrics))
    rb_ids = [r.id for r in rubrics]
    out = []
    for ex_id in ids:
        arr = reference_arrays(table, [ex_id], rb_ids)
        if not arr.ok.all():
            out.append(None)
            continue
        unit = unit_scores(arr, rubrics, example_ids=[ex_id], score=score)[0]
        out.append(float((unit * signs).sum()))
    return out


def assert_same_arrays(a: ProbeArrays, b: ProbeArrays) -> None:
    assert a.example_ids == b.example_ids and a.rubric_ids == b.rubric_ids
    for name in ("raw", "probs", "mass", "expected", "ok", "answer_mask"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape and x.dtype == y.dtype, name
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name


# -- structure: one read of the table, whatever the number of examples ----------------------------
@pytest.fixture
def arrays_builds(monkeypatch):
    """Counts ``ProbeTable.arrays`` calls (each is one read of the table)."""
    calls = []
    original = ProbeTable.arrays

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ProbeTable, "arrays", counted)
    return calls


def _walks(fn) -> int:
    CountingList.walks = 0
    fn()
    return CountingList.walks


@pytest.mark.parametrize("score_mode", ["expected", "argmax"])
def test_score_probes_reads_the_table_a_fixed_number_of_times(arrays_builds, score_mode):
    rubrics = make_rubrics()
    scorer = RubricScorer(rubrics, threshold=0.0, score_mode=score_mode)
    walks, builds = {}, {}
    for n in (50, 500):
        table = make_table(n, rubrics, counting=True)
        ids = [f"ex{i:04d}" for i in range(n)]
        arrays_builds.clear()
        walks[n] = _walks(lambda: scorer.score_probes(table, ids))  # noqa: B023 (called at once, in this iteration)
        builds[n] = len(arrays_builds)
    assert builds == {50: 1, 500: 1}
    assert walks[50] == walks[500] <= 2  # the record loop, and the longest answer scale


def test_evaluate_scoring_reads_the_table_once_for_all_judges(arrays_builds):
    pytest.importorskip("torch")
    rubrics = make_rubrics()
    cal = _calibrator(rubrics)
    scorer = RubricScorer(rubrics, threshold=0.0, calibrator=cal, question="sat", judges=list(cal.judges_))
    walks, builds = {}, {}
    for n in (50, 500):
        table = make_table(n, rubrics, counting=True)
        arrays_builds.clear()
        walks[n] = _walks(lambda: score_heldout(scorer, table, make_examples(n)))  # noqa: B023 (called at once, in this iteration)
        builds[n] = len(arrays_builds)
    assert builds == {50: 1, 500: 1}  # not once per judge, nor once per example
    assert walks[50] == walks[500] <= 2


# -- results: bit for bit the per-example path's --------------------------------------------------
def test_arrays_equal_the_record_loop():
    rubrics = make_rubrics()
    table = make_table(120, rubrics, seed=4)
    rb_ids = [r.id for r in rubrics]
    for ex_ids in ([f"ex{i:04d}" for i in range(120)], [f"ex{i:04d}" for i in range(119, -1, -3)] + ["absent"]):
        assert_same_arrays(table.arrays(ex_ids, rb_ids), reference_arrays(table, ex_ids, rb_ids))
        assert_same_arrays(table.arrays(ex_ids, rb_ids[::-1] + ["nope"]),
                           reference_arrays(table, ex_ids, rb_ids[::-1] + ["nope"]))
    default = table.arrays()
    assert_same_arrays(default, reference_arrays(table, default.example_ids, default.rubric_ids))


def test_take_equals_reading_the_table_again():
    rubrics = make_rubrics()
    table = make_table(80, rubrics, seed=5)
    rb_ids = [r.id for r in rubrics]
    whole = table.arrays([f"ex{i:04d}" for i in range(80)], rb_ids)
    subset = [f"ex{i:04d}" for i in (5, 70, 3)] + ["absent"]
    assert_same_arrays(whole.take(subset, rb_ids[2:] + ["nope"]), table.arrays(subset, rb_ids[2:] + ["nope"]))
    assert_same_arrays(whole.take(), whole)
    empty = whole.take([], rb_ids)
    assert empty.raw.shape == (0, N_RUBRICS, whole.raw.shape[2])


def test_a_repeated_id_gets_its_probes_every_time():
    rubrics = make_rubrics()
    table = make_table(10, rubrics, seed=6)
    ok_row = next(i for i in range(10) if table.arrays([f"ex{i:04d}"], [r.id for r in rubrics]).ok.all())
    ex = f"ex{ok_row:04d}"
    arr = table.arrays([ex, "ex0009", ex], [r.id for r in rubrics])
    assert np.array_equal(arr.raw[0], arr.raw[2]) and arr.ok[0].all() and arr.ok[2].all()
    res = RubricScorer(rubrics, threshold=0.0).score_probes(table, [ex, ex])
    assert res[0].netsat is not None and res[0].to_dict() == res[1].to_dict()


@pytest.mark.parametrize("score_mode", ["expected", "argmax"])
def test_netsat_equals_the_per_example_path(score_mode):
    rubrics = make_rubrics()
    table = make_table(300, rubrics, seed=7)
    ids = [f"ex{i:04d}" for i in range(300)] + ["never-probed"]
    scorer = RubricScorer(rubrics, threshold=1.0, score_mode=score_mode)
    res = scorer.score_probes(table, ids)
    expect = reference_netsat(table, rubrics, ids, score=score_mode)
    assert [r.netsat for r in res] == expect  # exact, not approximate
    assert any(v is None for v in expect) and any(v is not None for v in expect)
    for r, v in zip(res, expect):
        assert r.label == (None if v is None else int(v > 1.0))
        assert bool(r.errors) == (v is None)
    # the arrays of the table give the same results as the table
    arrays = table.arrays(ids[:-1], [r.id for r in rubrics])
    assert [r.to_dict() for r in scorer.score_probes(arrays, ids)] == [r.to_dict() for r in res]


def _calibrator(rubrics):
    from rubric_induce.calibration.calibrator import Calibrator
    from rubric_induce.calibration.data import from_probes

    examples = make_examples(60, seed=11)
    data = from_probes(make_table(60, rubrics, seed=11), examples, questions=["sat"],
                       rubric_ids=[r.id for r in rubrics], scales=[(1.0, 2.0, 3.0, 4.0, 5.0)])
    X, J, Y, kw = data.fit_args()
    return Calibrator(main_question="sat", hidden=(8, 8), pretrain_epochs=2, finetune_epochs=2, random_state=0,
                      n_threads=1).fit(X, J, Y, **kw)


def test_calibrated_scores_and_judges_equal_the_per_subset_path():
    pytest.importorskip("torch")
    rubrics = make_rubrics()
    cal = _calibrator(rubrics)
    scorer = RubricScorer(rubrics, threshold=0.5, calibrator=cal, question="sat", judges=list(cal.judges_))
    examples = make_examples(150, seed=2)
    table = make_table(150, rubrics, seed=2)
    results, judge_results = score_heldout(scorer, table, examples)
    assert [r.to_dict() for r in results] == [r.to_dict() for r in scorer.score_probes(table, examples)]
    assert [r.netsat for r in results] == reference_netsat(table, rubrics, [e.id for e in examples])
    assert set(judge_results) == set(JUDGES)
    for name, row in judge_results.items():  # as the stage did it: each judge's texts from the table
        rated = [ex for ex in examples if any(j.judge == name for j in ex.judgments)]
        alone = {r.id: r.to_dict() for r in scorer.score_probes(table, rated, judge=name)}
        assert len(row) == len(examples)
        for ex, r in zip(examples, row):
            assert (r is None) == (ex.id not in alone)
            if r is not None:
                assert r.to_dict() == alone[ex.id] and r.judge == name


def test_equal_texts_each_get_their_scores():
    """Equal texts share an id; the arrays used to fill only the last one's row, so the first came
    back as 'probe failed or missing'."""
    from rubric_induce.backends.fake import FakeBackend

    scorer = RubricScorer(make_rubrics(), threshold=0.0, backend=FakeBackend())
    res = scorer.score(["USER: hi\nSYSTEM: hello", "USER: bye", "USER: hi\nSYSTEM: hello"])
    assert res[0].id == res[2].id and not res[0].errors and res[0].netsat is not None
    assert res[0].to_dict() == res[2].to_dict()


def test_occlusion_in_batches_matches_one_batch(monkeypatch):
    """Drivers are computed in bounded batches; any batch size gives the one-batch effects (up to
    float32 rounding, which already varied with how many texts were scored together)."""
    pytest.importorskip("torch")
    import rubric_induce.scoring.numbers as scoring

    rubrics = make_rubrics()
    cal = _calibrator(rubrics)
    scorer = RubricScorer(rubrics, threshold=0.5, calibrator=cal, question="sat", judges=list(cal.judges_))
    table = make_table(40, rubrics, seed=3)
    ids = [f"ex{i:04d}" for i in range(40)]
    monkeypatch.setattr(scoring, "_OCCLUSION_ROWS", 10_000)  # one batch
    whole = scorer.score_probes(table, ids)
    monkeypatch.setattr(scoring, "_OCCLUSION_ROWS", 3 * (N_RUBRICS + 1) + 2)  # 3 texts per batch, a short last one
    batched = scorer.score_probes(table, ids)
    for a, b in zip(whole, batched):
        assert a.prediction == b.prediction and a.proba == b.proba and a.netsat == b.netsat
        ea = {d["rubric_id"]: d["prediction_effect"] for d in a.drivers}
        eb = {d["rubric_id"]: d["prediction_effect"] for d in b.drivers}
        assert ea.keys() == eb.keys()
        assert np.allclose([ea[k] for k in ea], [eb[k] for k in ea], rtol=0, atol=1e-6)
        assert any(v != 0 for v in ea.values())


def test_calibrated_scores_when_the_calibrator_is_wider_than_the_selected_rubrics():
    """A 0-10 rubric in the pool that selection left out made the calibrator's input 11 answers wide
    (the run pads every probe to the pool's widest scale) while the selected rubrics answer 1-5:
    `score` stopped with "X has feature shape (4, 5), the calibrator was fitted on (4, 11)"; the
    run's evaluation padded, scoring did not. Scoring now pads as the evaluation does."""
    pytest.importorskip("torch")
    import numpy as np

    from rubric_induce.calibration.calibrator import Calibrator
    from rubric_induce.calibration.data import from_probes

    rubrics = make_rubrics()
    examples = make_examples(60, seed=11)
    data = from_probes(make_table(60, rubrics, seed=11), examples, questions=["sat"],
                       rubric_ids=[r.id for r in rubrics], scales=[(1.0, 2.0, 3.0, 4.0, 5.0)])
    X, J, Y, kw = data.fit_args()
    wide = np.concatenate([X, np.zeros((*X.shape[:2], 6))], axis=2)  # as if an 11-point rubric was probed too
    cal = Calibrator(main_question="sat", hidden=(8, 8), pretrain_epochs=2, finetune_epochs=2, random_state=0,
                     n_threads=1).fit(wide, J, Y, **kw)
    assert cal.n_features_in_shape_[-1] == 11
    scorer = RubricScorer(rubrics, threshold=0.5, calibrator=cal, question="sat", judges=list(cal.judges_))
    examples = make_examples(5, seed=2)
    table = make_table(5, rubrics, seed=2)
    results = scorer.score_probes(table, examples)
    arr = table.arrays([e.id for e in examples], [r.id for r in rubrics])
    padded = np.concatenate([np.where(arr.ok[..., None], arr.raw, 0.0), np.zeros((5, len(rubrics), 6))], axis=2)
    assert [r.prediction for r in results] == pytest.approx(cal.predict(padded, list(cal.judges_)).tolist())
