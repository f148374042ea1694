"""AutoCalibrate: sample plan, drafting, top-K revisit, refinement loop, levels, bad input."""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.backends.structured import GenerationError, GenerationStats
from rubric_induce.core.errors import DataError
from rubric_induce.core.stats import kendall as kendall_tau
from rubric_induce.core.templates import load_prompt
from rubric_induce.data import Example
from rubric_induce.generation.autocalibrate import (
    LEVEL_NAMES,
    ScoredCriterion,
    draft_criteria,
    draft_plan,
    expand_levels,
    generate_autocalibrate,
    refine_criteria,
    revisit,
)
from rubric_induce.generation.registry import GenerateContext

SMALL = dict(sample_sizes=(2, 3), trials=2, samples=2, refine_sizes=(1, 2), refine_trials=1, refine_samples=1)


def oracle_answers(good_word: str = "Refined"):
    """Probe distributions: criteria containing ``good_word`` read the score written in the text
    ("quality Q"); others answer at random (hash-seeded)."""
    def answers(messages, labels, prefix):
        text = messages[-1]["content"]
        q = re.search(r"quality (\d)", text)
        if good_word in text and q:
            return {lab: (0.9 if lab == q.group(1) else 0.025) for lab in labels}
        rng = np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16))
        p = rng.dirichlet(np.ones(len(labels)))
        return dict(zip(labels, p))
    return answers


def test_draft_plan_covers_sizes_trials_samples_and_is_seeded(likert_examples):
    plan = draft_plan(likert_examples, sample_sizes=(2, 4), trials=3, samples=2, seed=1)
    assert len(plan) == 2 * 3 * 2
    assert [(s.size, s.trial, s.sample) for s in plan[:4]] == [(2, 0, 0), (2, 0, 1), (2, 1, 0), (2, 1, 1)]
    assert all(len(s.example_ids) == s.size and len(set(s.example_ids)) == s.size for s in plan)
    # temperature samples share their few-shot set but not their seed
    assert plan[0].example_ids == plan[1].example_ids and plan[0].seed != plan[1].seed
    # Monte-Carlo trials draw different sets
    assert len({s.example_ids for s in plan if s.size == 4}) > 1
    again = draft_plan(likert_examples, sample_sizes=(2, 4), trials=3, samples=2, seed=1)
    assert again == plan
    assert draft_plan(likert_examples, sample_sizes=(2, 4), trials=3, samples=2, seed=2) != plan


def test_draft_plan_clips_sizes_and_notes_it(likert_examples):
    stats = GenerationStats()
    plan = draft_plan(likert_examples[:5], sample_sizes=(8,), trials=1, samples=1, stats=stats)
    assert len(plan[0].example_ids) == 5 and "clipped" in stats.notes[0]


def test_drafting_uses_temperature_and_shows_scored_examples(likert_examples, fake, scripted):
    plan = draft_plan(likert_examples, sample_sizes=(3,), trials=2, samples=2, seed=0)
    drafts = draft_criteria(likert_examples, fake, aspect="coherence", plan=plan, temperature=1.0)
    assert len(drafts) == 4
    chats = [c[1] for c in fake.calls]
    assert all(c["temperature"] == 1.0 and c["json_schema"] for c in chats)
    assert [c["seed"] for c in chats] == [s.seed for s in plan]
    prompt = scripted.prompts["draft"][0][-1]["content"]
    shown = plan[0].example_ids
    assert prompt.count("Human expert score:") == 3
    for eid in shown:
        ex = next(e for e in likert_examples if e.id == eid)
        assert ex.fields["text"] in prompt
    r = drafts[0]
    assert r.aspect == "coherence" and r.scale.labels == ("1", "2", "3", "4", "5")
    assert r.provenance["step"] == "draft" and r.provenance["source_example_ids"] == list(shown)
    assert r.provenance["prompt_hash"] == load_prompt("autocal_draft").hash
    assert r.text.endswith(r.provenance["criterion"])


def test_revisit_keeps_top_k_by_correlation(likert_examples, scripted):
    backend = FakeBackend(replies=scripted, answers=oracle_answers("Draft criterion number 2 "))
    drafts = draft_criteria(likert_examples, backend, aspect="coherence", sample_sizes=(2,), trials=4, samples=1)
    top = revisit(likert_examples, drafts, backend, label="coherence", top_k=2)
    assert len(top) == 2
    assert "Draft criterion number 2 " in top[0].rubric.text
    assert top[0].correlation == pytest.approx(1.0)
    assert top[0].correlation >= top[1].correlation
    everything = revisit(likert_examples, drafts, backend, label="coherence")
    assert len(everything) == len(drafts)
    assert [s.correlation for s in everything] == sorted((s.correlation for s in everything), reverse=True)
    kt = revisit(likert_examples, drafts, backend, label="coherence", top_k=1, metric="kendall")
    assert kt[0].rubric.id == top[0].rubric.id


def test_kendall_tau_matches_known_values():
    assert kendall_tau(np.array([1, 2, 3, 4]), np.array([1, 2, 3, 4])) == pytest.approx(1.0)
    assert kendall_tau(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1.0)
    assert kendall_tau(np.array([1, 2, 3]), np.array([1, 3, 2])) == pytest.approx(1 / 3)
    assert np.isnan(kendall_tau(np.array([1, 1, 1]), np.array([1, 2, 3])))


def test_refinement_shows_the_most_misaligned_examples(likert_examples, fake, scripted):
    from rubric_induce.data import Rubric

    rubric = Rubric.create("Rate the coherence: old criterion.", aspect="coherence",
                           provenance={"criterion": "old criterion text"})
    y = np.array([e.labels["coherence"] for e in likert_examples])
    preds = y.copy()
    preds[[3, 7]] = y[[3, 7]] + 3.5  # two examples far off
    kept = [ScoredCriterion(rubric, 0.5, preds)]
    refined = refine_criteria(likert_examples, kept, fake, aspect="coherence", sample_sizes=(2,), trials=2,
                              samples=2, misaligned_pool=2)
    prompts = [p[-1]["content"] for p in scripted.prompts["refine"]]
    assert len(prompts) == 4 and len(refined) == 4
    for prompt in prompts:
        assert "old criterion text" in prompt
        assert likert_examples[3].fields["text"] in prompt and likert_examples[7].fields["text"] in prompt
        assert "LLM score with the old criteria" in prompt
    assert all(r.provenance["parent_id"] == rubric.id and r.provenance["step"] == "refine" for r in refined)
    assert all(c[1]["temperature"] == 1.0 for c in fake.calls)


def test_full_loop_merges_refined_with_kept_drafts_and_returns_the_best(likert_examples, scripted):
    backend = FakeBackend(replies=scripted, answers=oracle_answers("Refined"))
    res = generate_autocalibrate(likert_examples, backend, aspect="coherence", top_k=3, **SMALL, context=GenerateContext(seed=4))
    # drafts are random under the oracle, the refined criteria are perfect: a refined one wins
    assert res.best.provenance["step"] == "refine"
    assert res.best.provenance["correlation"] == pytest.approx(1.0)
    assert len(res.pool) == 3 and res.pool.rubrics[0] == res.best
    corr = [r.provenance["correlation"] for r in res.pool]
    assert corr == sorted(corr, reverse=True)
    n_drafts = 2 * 2 * 2
    assert sum(1 for c in res.candidates if c.provenance["step"] == "draft") == n_drafts
    assert len(res.scores) == len(res.candidates)
    m = res.pool.manifest
    assert m["method"] == "autocalibrate" and m["settings"]["sample_sizes"] == [2, 3]
    assert set(m["prompts"]) == {"autocal_draft", "autocal_refine"}
    assert m["settings"]["metric"] == "spearman" and m["seed"] == 4


def test_zero_rounds_returns_top_drafts(likert_examples, fake):
    res = generate_autocalibrate(likert_examples, fake, aspect="coherence", top_k=2, rounds=0, **SMALL)
    assert all(r.provenance["step"] == "draft" for r in res.pool)


@pytest.mark.parametrize("levels", [4, 5])
def test_expand_levels(likert_examples, fake, levels):
    from rubric_induce.data import Rubric

    r = Rubric.create("Rate the coherence using: clear order.", aspect="coherence",
                      provenance={"criterion": "clear order"})
    out = expand_levels(r, fake, levels=levels)
    assert out.levels is not None and len(out.levels) == levels
    assert out.scale.labels == tuple(str(i) for i in range(1, levels + 1))
    assert out.provenance["levels"]["names"] == list(LEVEL_NAMES[levels])
    assert out.provenance["criterion"] == "clear order" and out.provenance["levels_from"] == r.id


def test_expand_levels_unparseable_raises(fake):
    from rubric_induce.data import Rubric

    bad = FakeBackend(replies=lambda m, **k: '{"1": "only one level described"}')
    with pytest.raises(GenerationError, match="level descriptors"):
        expand_levels(Rubric.create("Some criterion text."), bad, levels=4, retries=1)


def test_loop_with_levels(likert_examples, fake):
    res = generate_autocalibrate(likert_examples, fake, aspect="coherence", top_k=1, levels=4, **SMALL)
    assert res.best.levels is not None and len(res.best.levels) == 4
    assert "rubric_levels" in res.pool.manifest["prompts"]


# ---------------------------------------------------------------- bad input
def test_label_outside_scale_is_an_error(likert_examples, fake):
    bad = [*likert_examples, Example.create({"source": "a b", "text": "c d"}, {"coherence": 7.0}, id="bad")]
    with pytest.raises(DataError, match="outside the scale"):
        generate_autocalibrate(bad, fake, aspect="coherence", **SMALL)


def test_too_few_labelled_examples_is_an_error(likert_examples, fake):
    with pytest.raises(DataError, match="at least 3"):
        generate_autocalibrate(likert_examples[:2], fake, aspect="coherence", **SMALL)


def test_empty_text_skipped_and_counted(likert_examples, fake):
    empty = Example.create({"source": " ", "text": ""}, {"coherence": 3.0}, id="empty")
    res = generate_autocalibrate([empty, *likert_examples], fake, aspect="coherence", top_k=1, **SMALL)
    assert {"reason": "empty text", "example_id": "empty"} in res.stats.skipped
    assert res.pool.manifest["n_examples"] == len(likert_examples)


def test_a_blank_part_is_evidence_and_is_kept(likert_examples, fake):
    """One rule for every generator (generation.evidence): an example is skipped only when every
    shown field is blank; a blank source next to a text is kept (AutoCalibrate used to skip it)."""
    part = Example.create({"source": "", "text": "x y"}, {"coherence": 1.0}, id="part")
    res = generate_autocalibrate([part, *likert_examples], fake, aspect="coherence", top_k=1, **SMALL)
    assert not res.stats.skipped
    assert res.pool.manifest["n_examples"] == len(likert_examples) + 1


def test_unparseable_drafts_raise_instead_of_empty_pool(likert_examples):
    with pytest.raises(GenerationError, match="no criteria"):
        generate_autocalibrate(likert_examples, FakeBackend(replies=lambda m, **k: "??"), aspect="coherence",
                               retries=0, **SMALL)


def test_autocalibrate_is_cached_and_deterministic(likert_examples, tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    a = CachedBackend(FakeBackend(), cache)
    r1 = generate_autocalibrate(likert_examples, a, aspect="coherence", top_k=2, **SMALL)
    b = CachedBackend(FakeBackend(), cache)
    r2 = generate_autocalibrate(likert_examples, b, aspect="coherence", top_k=2, **SMALL)
    assert b.tally.calls == 0 and b.tally.cache_hits == a.tally.calls
    assert [r.to_dict() for r in r1.pool] == [r.to_dict() for r in r2.pool]
