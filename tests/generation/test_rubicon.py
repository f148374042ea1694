"""RUBICON extraction and summarization, SPUR mode, provenance, bad input, caching."""
from __future__ import annotations

import hashlib

import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.backends.structured import GenerationError, GenerationStats
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt, prompts_dir
from rubric_induce.data import Example, RubricPool
from rubric_induce.generation.registry import GenerateContext
from rubric_induce.generation.rubicon import (
    Pattern,
    balanced_sample,
    extract_patterns,
    generate_rubicon,
    generate_spur,
    rubicon_prompts,
    split_binary,
    summarize_rubrics,
)

DOMAIN = "A restaurant booking assistant that finds tables and confirms reservations."
USS = TaskParams(preset="uss")  # RUBICON's user-satisfaction wording


def system(messages) -> str:
    return next((m["content"] for m in messages if m["role"] == "system"), "")


def test_extraction_top_k_per_example_with_polarity(dialogues, fake, scripted):
    pos, neg = split_binary(dialogues, "sat")
    assert [e.id for e in pos] == ["d0", "d2", "d4"] and [e.id for e in neg] == ["d1", "d3", "d5"]
    pats = extract_patterns(pos, fake, polarity="SAT", domain=DOMAIN, top_k=2, task=USS)
    assert len(pats) == 6
    assert all(p.polarity == "SAT" for p in pats)
    assert [p.example_id for p in pats] == ["d0", "d0", "d2", "d2", "d4", "d4"]
    prompt = scripted.prompts["extract"][0]
    assert "labelled positive" in prompt[-1]["content"] and "top 2 satisfaction" in prompt[-1]["content"]
    dpats = extract_patterns(neg, fake, polarity="DSAT", domain=DOMAIN, top_k=1, task=USS)
    assert len(dpats) == 3 and all(p.polarity == "DSAT" for p in dpats)
    assert "dissatisfaction" in scripted.prompts["extract"][-1][-1]["content"]


def test_extraction_caps_at_top_k_and_counts_extra(dialogues):
    backend = FakeBackend(replies=lambda m, **k: '{"patterns": ["The user asks twice.", '
                                                 '"The bot replies slowly.", "The bot says goodbye."]}')
    stats = GenerationStats()
    pats = extract_patterns(dialogues[:1], backend, polarity="SAT", use_ds=False, top_k=2, stats=stats)
    assert len(pats) == 2 and stats.rejected == {"beyond top_k": 1}


@pytest.mark.parametrize("use_ds,use_cdp", [(True, True), (True, False), (False, True), (False, False)])
def test_ds_and_cdp_blocks_switch_on_and_off(dialogues, fake, scripted, use_ds, use_cdp):
    generate_rubicon(dialogues, fake, use_ds=use_ds, use_cdp=use_cdp, top_k=1, context=GenerateContext(domain=DOMAIN if use_ds else None))
    ext, summ = system(scripted.prompts["extract"][0]), system(scripted.prompts["summarize"][0])
    assert (DOMAIN in ext) is use_ds and (DOMAIN in summ) is use_ds
    assert ("Conversational responsibility" in ext) is use_cdp
    assert ("Grice" in summ) is use_cdp
    assert "Grice" not in ext and "Conversational responsibility" not in summ


def test_ds_without_domain_is_a_clear_error(dialogues, fake):
    with pytest.raises(RubricInduceError, match="domain"):
        generate_rubicon(dialogues, fake, context=GenerateContext(domain=None))


def test_summarization_grows_the_pool_and_shows_earlier_rubrics(fake, scripted):
    patterns = [Pattern(f"Pattern number {i} here.", "SAT", f"e{i // 3}") for i in range(7)]
    new = summarize_rubrics(patterns, fake, polarity="SAT", use_ds=False, batch_size=3, max_new=2)
    prompts = [p[-1]["content"] for p in scripted.prompts["summarize"]]
    assert len(prompts) == 3  # ceil(7 / 3) batches
    assert len(new) == 6 and len({r.id for r in new}) == 6  # every batch adds fresh rubrics
    assert "(none yet)" in prompts[0]
    # batch i is shown every rubric made by batches < i
    for i, prompt in enumerate(prompts):
        for r in new[: 2 * i]:
            assert r.text in prompt
        for r in new[2 * i:]:
            assert r.text not in prompt
    # the patterns of a batch are in its prompt; provenance points back to them
    assert "Pattern number 6 here." in prompts[2]
    assert new[-1].provenance["source_patterns"] == ["Pattern number 6 here."]
    assert new[-1].provenance["source_example_ids"] == ["e2"]
    assert [r.provenance["batch"] for r in new] == [0, 0, 1, 1, 2, 2]
    assert all(r.polarity == "SAT" and r.provenance["step"] == "summarize" for r in new)
    assert "single verb" in prompts[0]


def test_summarization_rejects_repeats_of_existing_rubrics():
    backend = FakeBackend(replies=lambda m, **k: '{"rubrics": ["The bot confirms the booking.", '
                                                 '"the bot confirms the booking", "The bot greets the user."]}')
    stats = GenerationStats()
    pats = [Pattern("Booking was confirmed by the bot.", "SAT", "e0")] * 4
    new = summarize_rubrics(pats, backend, polarity="SAT", use_ds=False, batch_size=2, max_new=3, stats=stats)
    assert [r.text for r in new] == ["The bot confirms the booking.", "The bot greets the user."]
    assert stats.rejected["duplicate"] == 4  # 1 in batch 0, 3 in batch 1


def test_generate_rubicon_provenance_and_manifest(dialogues, fake):
    pool = generate_rubicon(dialogues, fake, top_k=2, batch_size=4, max_new=3, context=GenerateContext(domain=DOMAIN, seed=11, task=USS))
    assert len(pool.by_polarity("SAT")) > 0 and len(pool.by_polarity("DSAT")) > 0
    hashes = {n: t.hash for n, t in rubicon_prompts().items()}
    for r in pool:
        p = r.provenance
        assert p["method"] == "rubicon" and p["model"] == "fake/fake" and p["seed"] == 11
        assert p["use_ds"] is True and p["use_cdp"] is True and p["top_k"] == 2 and p["batch_size"] == 4
        assert p["prompt_hash"] == hashes["rubicon_summarize"]
        assert p["prompt_hashes"]["rubicon_extract"] == hashes["rubicon_extract"]
        assert p["prompt_hashes"]["rubicon_ds"] == hashes["rubicon_ds"]
        assert p["source_example_ids"]
    sat_sources = {e for r in pool.by_polarity("SAT") for e in r.provenance["source_example_ids"]}
    assert sat_sources <= {"d0", "d2", "d4"}
    m = pool.manifest
    assert m["method"] == "rubicon" and m["seed"] == 11 and m["domain"] == DOMAIN
    assert m["settings"]["use_ds"] is True and m["settings"]["max_new"] == 3
    assert set(m["prompts"]) == {"rubicon_extract", "rubicon_ds", "rubicon_cdp_extract",
                                 "rubicon_cdp_summarize", "rubicon_summarize"}
    assert m["n_examples"] == {"positive": 3, "negative": 3}
    assert m["n_patterns"] == {"SAT": 6, "DSAT": 6}
    assert m["stats"]["n_failures"] == 0
    assert m["task"] == USS.to_dict()


def test_generic_task_has_no_conversation_blocks_by_default(dialogues, fake, scripted):
    """Without a task, CDP (conversation design principles) is off and no satisfaction wording
    or booking example reaches any prompt; the task's class names do."""
    task = TaskParams(description="Whether the reply completes the booking.", positive="complete",
                      negative="incomplete")
    pool = generate_rubicon(dialogues, fake, top_k=1, context=GenerateContext(task=task))
    assert pool.manifest["settings"]["use_cdp"] is False and pool.manifest["domain"] == task.description
    texts = [m["content"] for step in ("extract", "summarize") for p in scripted.prompts[step] for m in p]
    assert texts and not any("satisf" in t or "before booking" in t or "repeats a request" in t for t in texts)
    assert not any("Conversational responsibility" in t or "Grice" in t for t in texts)
    assert any('labelled "complete"' in t for t in texts) and any('labelled "incomplete"' in t for t in texts)


def test_ablation_switches_reach_manifest(dialogues, fake):
    pool = generate_rubicon(dialogues, fake, use_ds=False, use_cdp=False, top_k=1)
    assert pool.manifest["settings"]["use_ds"] is False and pool.manifest["domain"] is None
    assert set(pool.manifest["prompts"]) == {"rubicon_extract", "rubicon_summarize"}
    assert all(r.provenance["use_cdp"] is False for r in pool)


def test_spur_mode_keeps_a_fixed_size_set(dialogues, fake, scripted):
    pool = generate_spur(dialogues, fake, spur_size=3, top_k=2, batch_size=2)
    # 3 examples x 2 patterns = 6 patterns per polarity -> 3 batches, each rewriting the set
    assert len(scripted.prompts["spur"]) == 6
    assert len(pool.by_polarity("SAT")) == 3 and len(pool.by_polarity("DSAT")) == 3
    # the set was replaced, not grown: only the last update's rubrics remain
    assert {r.provenance["batch"] for r in pool} == {2}
    assert all(r.provenance["method"] == "spur" and r.provenance["step"] == "spur_update" for r in pool)
    last_prompt = scripted.prompts["spur"][2][-1]["content"]
    assert "Update 2 rubric 0 holds." in last_prompt  # each batch sees the current set
    assert pool.manifest["method"] == "spur" and pool.manifest["settings"]["spur_size"] == 3
    assert "spur_update" in pool.manifest["prompts"]


def test_spur_truncates_oversized_updates():
    backend = FakeBackend(replies=lambda m, **k: '{"rubrics": ["Rubric one is here.", "Rubric two is here.", '
                                                 '"Rubric three is here."]}')
    from rubric_induce.generation.rubicon import spur_update

    stats = GenerationStats()
    out = spur_update([Pattern("The pattern text.", "DSAT", "e")], backend, polarity="DSAT", n_rubrics=2,
                      stats=stats)
    assert len(out) == 2 and stats.rejected["beyond spur_size"] == 1


# ---------------------------------------------------------------- bad input
def test_no_positive_examples_is_an_error(dialogues, fake):
    neg = [e for e in dialogues if e.labels["sat"] == 0]
    with pytest.raises(DataError, match="no positive examples"):
        generate_rubicon(neg, fake, context=GenerateContext(domain=DOMAIN))


def test_no_negative_examples_is_an_error(dialogues, fake):
    pos = [e for e in dialogues if e.labels["sat"] == 1]
    with pytest.raises(DataError, match="no negative examples"):
        generate_rubicon(pos, fake, context=GenerateContext(domain=DOMAIN))


def test_graded_label_needs_threshold(dialogues, fake):
    with pytest.raises(DataError, match="not binary"):
        generate_rubicon(dialogues, fake, context=GenerateContext(label="satisfaction", domain=DOMAIN))
    pool = generate_rubicon(dialogues, fake, top_k=1, context=GenerateContext(label="satisfaction", label_threshold=3.0, domain=DOMAIN))
    assert pool.manifest["n_examples"] == {"positive": 3, "negative": 3}


def test_empty_texts_are_skipped_and_counted(dialogues, fake):
    bad = Example.create({"text": "   "}, {"sat": 1}, id="empty")
    pool = generate_rubicon([bad, *dialogues], fake, top_k=1, context=GenerateContext(domain=DOMAIN))
    skipped = pool.manifest["stats"]["skipped"]
    assert skipped == [{"reason": "empty text", "example_id": "empty"}]
    assert all("empty" not in r.provenance["source_example_ids"] for r in pool)


def test_only_empty_texts_is_an_error(fake):
    exs = [Example.create({"text": ""}, {"sat": i % 2}, id=f"x{i}") for i in range(4)]
    with pytest.raises(DataError, match="no positive examples.*4 skipped"):
        generate_rubicon(exs, fake, context=GenerateContext(domain=DOMAIN))


def test_unparseable_replies_are_counted_not_silent(dialogues):
    def replies(messages, **params):
        user = messages[-1]["content"]
        if '"patterns"' in user and "d0" not in user and "for 2" in user:
            return "I cannot answer that."  # example d0 never parses
        if '"patterns"' in user:
            return '{"patterns": ["The user gets what they asked for."]}'
        return '{"rubrics": ["The assistant completes the booking."]}'

    backend = FakeBackend(replies=replies)
    pool = generate_rubicon(dialogues, backend, top_k=1, retries=1, context=GenerateContext(domain=DOMAIN))
    stats = pool.manifest["stats"]
    assert stats["n_failures"] == 1 and stats["retries"] >= 1
    assert stats["failures"][0]["step"] == "extract" and stats["failures"][0]["context"]["example_id"] == "d0"
    assert len(pool) >= 1


def test_all_replies_unparseable_raises_instead_of_empty_pool(dialogues):
    backend = FakeBackend(replies=lambda m, **k: "sorry")
    with pytest.raises(GenerationError, match="no rubrics"):
        generate_rubicon(dialogues, backend, top_k=1, retries=0, context=GenerateContext(domain=DOMAIN))


# ---------------------------------------------------------------- determinism and caching
def test_same_inputs_and_seed_hit_the_cache_and_give_the_same_pool(dialogues, tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    first = CachedBackend(FakeBackend(), cache)
    pool1 = generate_rubicon(dialogues, first, top_k=2, batch_size=3, context=GenerateContext(domain=DOMAIN, seed=5))
    assert first.tally.calls > 0 and first.tally.cache_hits == 0
    second = CachedBackend(FakeBackend(), cache)
    pool2 = generate_rubicon(dialogues, second, top_k=2, batch_size=3, context=GenerateContext(domain=DOMAIN, seed=5))
    assert second.tally.calls == 0 and second.tally.cache_hits == first.tally.calls
    assert [r.to_dict() for r in pool1] == [r.to_dict() for r in pool2]
    # a different seed makes different requests
    third = CachedBackend(FakeBackend(), cache)
    generate_rubicon(dialogues, third, top_k=2, batch_size=3, context=GenerateContext(domain=DOMAIN, seed=6))
    assert third.tally.calls > 0


def test_pool_round_trips_with_provenance(dialogues, fake, tmp_path):
    pool = generate_rubicon(dialogues, fake, top_k=1, context=GenerateContext(domain=DOMAIN))
    path = pool.save(tmp_path / "rubric_pools" / "p.jsonl")
    loaded = RubricPool.load(path)
    assert [r.to_dict() for r in loaded] == [r.to_dict() for r in pool]
    assert loaded.manifest["prompts"] == pool.manifest["prompts"]
    assert loaded.manifest["n_rubrics"] == len(pool)


def test_balanced_sample_is_seeded_and_balanced(dialogues):
    a = balanced_sample(dialogues, "sat", 2, seed=1)
    b = balanced_sample(dialogues, "sat", 2, seed=1)
    assert [e.id for e in a] == [e.id for e in b]
    assert sum(e.labels["sat"] for e in a) == 2 and len(a) == 4


def test_prompt_templates_exist_and_have_hashes(tmp_path):
    """Each generation template's hash is the content hash of its file (sha256 of the text, first
    12 hex digits), so provenance and cache keys change exactly when the template does."""
    for name in ("rubicon_extract", "rubicon_summarize", "spur_update", "rubicon_ds", "rubicon_cdp_extract",
                 "rubicon_cdp_summarize", "autocal_draft", "autocal_refine", "rubric_levels", "dedup_judge"):
        path = prompts_dir() / f"{name}.txt"
        text = path.read_text(encoding="utf-8")
        assert load_prompt(name).hash == hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], name
        # a one-character edit (in a copy: loaded templates are cached by path) changes the hash
        copy = tmp_path / f"{name}.txt"
        copy.write_text(text + " ", encoding="utf-8")
        edited = hashlib.sha256((text + " ").encode("utf-8")).hexdigest()[:12]
        assert load_prompt(name, tmp_path).hash == edited != load_prompt(name).hash
