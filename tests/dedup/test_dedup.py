"""De-duplication with the real packaged all-MiniLM-L6-v2 model on a pool with planted paraphrases."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.data import Rubric, RubricPool
from rubric_induce.dedup import dedup
from rubric_induce.dedup.api import group_by_similarity

PLANTED = [
    ("The assistant confirms the booking details.", "SAT"),              # 0  rep of group A
    ("The user thanks the assistant at the end.", "SAT"),                 # 1
    ("The assistant confirms the details of the booking.", "SAT"),        # 2  paraphrase of 0
    ("The user repeats the same request.", "DSAT"),                       # 3  rep of group B
    ("The user has to repeat the same request.", "DSAT"),                 # 4  paraphrase of 3
    ("The assistant confirms the booking details.", "DSAT"),              # 5  same text, other polarity
    ("The assistant gives a wrong phone number.", "DSAT"),                # 6
    ("The user must repeat the same request again.", "DSAT"),             # 7  paraphrase of 3
    ("The assistant offers alternative restaurants.", "SAT"),             # 8
]


@pytest.fixture(scope="module")
def embedder():
    # imported here, not at module level: sentence-transformers (with transformers) costs about 6 s
    # of CPU to import, which collection would pay even when these slow tests are deselected
    pytest.importorskip("sentence_transformers")
    from rubric_induce.core.embeddings import SentenceEmbedder

    return SentenceEmbedder()


@pytest.fixture
def pool() -> RubricPool:
    return RubricPool([Rubric.create(t, p, provenance={"method": "test"}) for t, p in PLANTED],
                      {"method": "test"})


@pytest.mark.slow
def test_planted_paraphrases_are_merged_and_distinct_rubrics_kept(pool, embedder):
    res = dedup(pool, threshold=0.85, embedder=embedder)
    kept = [r.text for r in res.pool]
    assert len(res.pool) == 6
    merged = {g.representative.text: sorted(m.rubric.text for m in g.members) for g in res.merged_groups}
    assert merged == {
        "The assistant confirms the booking details.": ["The assistant confirms the details of the booking."],
        "The user repeats the same request.": ["The user has to repeat the same request.",
                                               "The user must repeat the same request again."],
    }
    # representative = first in pool order; pool order is preserved
    assert kept == [PLANTED[i][0] for i in (0, 1, 3, 5, 6, 8)]
    # same text with the other polarity is never merged
    assert [r.polarity for r in res.pool if r.text == PLANTED[0][0]] == ["SAT", "DSAT"]
    for g in res.merged_groups:
        assert all(m.similarity >= 0.85 and m.via == "embedding" for m in g.members)
    rep = res.pool[0]
    assert rep.provenance["dedup_merged"] == [pool[2].id] and rep.provenance["method"] == "test"
    assert res.pool.manifest["dedup"]["n_before"] == 9 and res.pool.manifest["dedup"]["n_after"] == 6
    assert res.pool.manifest["method"] == "test"


@pytest.mark.slow
def test_report_lists_every_merged_group_with_similarities(pool, embedder):
    res = dedup(pool, threshold=0.85, embedder=embedder)
    md = res.report_markdown
    assert "rubrics before: 9, after: 6" in md
    assert md.count("## Group") == 2
    for g in res.merged_groups:
        assert g.representative.id in md
        for m in g.members:
            assert m.rubric.text in md and f"{m.similarity:.3f}" in md


@pytest.mark.slow
def test_deterministic_and_threshold_monotone(pool, embedder):
    a = dedup(pool, threshold=0.85, embedder=embedder)
    b = dedup(pool, threshold=0.85, embedder=embedder)
    assert [r.id for r in a.pool] == [r.id for r in b.pool] and a.report_markdown == b.report_markdown
    strict = dedup(pool, threshold=0.99, embedder=embedder)
    loose = dedup(pool, threshold=0.5, borderline=0.5, embedder=embedder)
    assert len(loose.pool) <= len(a.pool) <= len(strict.pool)


@pytest.mark.slow
def test_llm_judge_merges_borderline_pairs_only(pool, embedder):
    judge = FakeBackend(replies=lambda m, **k: '{"same": true, "reason": "both about the same thing"}')
    res = dedup(pool, threshold=0.85, embedder=embedder, judge_backend=judge, borderline=0.3)
    info = res.pool.manifest["dedup"]["llm_judge"]
    assert info["judged"] >= 1 and info["merged"] == info["judged"]
    assert len(res.pool) < 6
    llm_members = [m for g in res.groups for m in g.members if m.via == "llm"]
    assert llm_members and all(m.similarity < 0.85 for m in llm_members)
    assert "LLM judged" in res.report_markdown
    # every judged pair had a cosine inside the band
    for _, call in judge.calls:
        assert "Rubric A:" in call["messages"][-1]["content"]
    no = FakeBackend(replies=lambda m, **k: '{"same": false, "reason": "different"}')
    res_no = dedup(pool, threshold=0.85, embedder=embedder, judge_backend=no, borderline=0.3)
    assert len(res_no.pool) == 6


def test_greedy_leader_does_not_chain():
    import numpy as np

    # 0~1 and 1~2 similar, 0 and 2 not: 2 must not join 0's group through 1
    sim = np.array([[1.0, 0.9, 0.5], [0.9, 1.0, 0.9], [0.5, 0.9, 1.0]])
    reps, leader = group_by_similarity(sim, 0.85)
    assert reps == [0, 2] and leader.tolist() == [0, 0, 2]


@pytest.mark.slow
def test_bad_threshold_and_unknown_override_are_errors(embedder):
    from rubric_induce.core.errors import DataError

    with pytest.raises(DataError, match="dedup.threshold"):
        dedup([Rubric.create("The user waits."), Rubric.create("The user leaves.")], threshold=1.5, embedder=embedder)
    with pytest.raises(TypeError, match="no field 'treshold'.*did you mean 'threshold'"):
        dedup([Rubric.create("The user waits.")], treshold=0.9, embedder=embedder)


@pytest.mark.slow
def test_overrides_apply_over_params(pool, embedder):
    from rubric_induce.dedup import DedupParams

    loose = dedup(pool, DedupParams(threshold=0.99), threshold=0.5, borderline=0.5, embedder=embedder)
    assert loose.summary() == dedup(pool, threshold=0.5, borderline=0.5, embedder=embedder).summary()
    assert len(loose.pool) < len(dedup(pool, threshold=0.99, embedder=embedder).pool)


@pytest.mark.slow
def test_dedup_cli(pool, tmp_path):
    pytest.importorskip("sentence_transformers")
    from rubric_induce.cli import cli

    path = pool.save(tmp_path / "pool.jsonl")
    res = CliRunner().invoke(cli, ["dedup", "--pool", str(path), "--threshold", "0.85"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "9 -> 6 rubrics" in res.output
    out = RubricPool.load(tmp_path / "pool.dedup.jsonl")
    assert len(out) == 6
    report = (tmp_path / "pool.dedup.report.md").read_text()
    assert "## Group 1" in report
    manifest = json.loads((tmp_path / "pool.dedup.manifest.json").read_text())
    assert manifest["dedup"]["threshold"] == 0.85
