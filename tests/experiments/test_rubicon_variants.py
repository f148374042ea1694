"""experiments/papers/rubicon_variants.py end to end on the fake backend: outputs, split hygiene, and numbers
that agree with the probes they were computed from."""
from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from experiment_loader import check_run_record, load_experiment

from rubric_induce.backends.structured import GenerationError
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.data import RubricPool
from rubric_induce.data.datasets import load_uss
from rubric_induce.data.probes import ProbeTable
from rubric_induce.evaluation.score_table import read_scores
from rubric_induce.selection.scores import unit_scores

rv = load_experiment("rubicon_variants")
SYSTEMS = {"RUBICON", "SPUR", "RUBICON -DS", "UCB (union pool)", "BruteForce (union pool)",
           "CorrectnessLoss (union pool)", "RUBICON (union pool)"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One fake run; the -CDP generator is made to fail, to check that a failed variant is reported."""
    run_report = importlib.import_module("rubric_induce.reporting.report")  # the module (the package exports the function)
    out = tmp_path_factory.mktemp("rubicon_variants")
    real_generate = rv.generate_rubicon

    def generate(*args, **kwargs):
        if kwargs.get("mode") == "rubicon" and kwargs.get("use_ds") and not kwargs.get("use_cdp"):
            raise GenerationError("rubicon generation produced no rubrics: scripted failure")
        return real_generate(*args, **kwargs)

    saved_report = run_report.render_run_report
    run_report.render_run_report = lambda *a, **k: None  # the generic report has its own tests
    rv.generate_rubicon = generate
    try:
        rv.main(["--backend", "fake", "--limit", "12", "--out", str(out), "--set", "progress=false",
                 "--set", "n_boot=50", "--set", "embedder=hashing", "--set", "gen_per_class=3"])
    finally:
        rv.generate_rubicon = real_generate
        run_report.render_run_report = saved_report
    return out


@pytest.fixture(scope="module")
def results(run):
    return json.loads((run / "results.json").read_text())["results"]


def _by_polarity(rubrics) -> dict[str, int]:
    return {p: sum(r.polarity == p for r in rubrics) for p in ("SAT", "DSAT")}


@pytest.mark.slow
def test_writes_every_output(run):
    """Every output parses; pools, de-duplication reports, probes and results agree on their counts."""
    res = check_run_record(run, "rubicon_variants", limit=12, n_boot=50, progress=False, embedder="hashing",
                           gen_per_class=3)
    assert (run / "rubicon_variants.png").read_bytes()[:4] == b"\x89PNG"
    union: set[str] = set()
    for key in ("rubicon", "spur", "no_ds"):
        info = res["variants"][key]
        raw = RubricPool.load(run / "pools" / f"{key}.jsonl")
        dedup = RubricPool.load(run / "pools" / f"{key}.dedup.jsonl")
        assert _by_polarity(raw) == info["n_generated"] and _by_polarity(dedup) == info["n_dedup"]
        assert {r.id for r in dedup} <= {r.id for r in raw}
        stats = dedup.manifest["dedup"]
        assert (stats["n_before"], stats["n_after"]) == (len(raw), len(dedup))
        report = (run / "pools" / f"{key}.dedup.report.md").read_text(encoding="utf-8")
        assert report.startswith("# De-duplication report\n")
        assert f"rubrics before: {len(raw)}, after: {len(dedup)} ({stats['n_merged_groups']} merged" in report
        assert report.count("\n## Group ") == stats["n_merged_groups"]
        union |= {r.id for r in dedup}
    # the scripted -CDP failure left no pool behind and is recorded as an error
    failed = res["variants"]["no_cdp"]
    assert "scripted failure" in failed["error"] and failed["n_generated"] == {"SAT": 0, "DSAT": 0}
    assert not (run / "pools/no_cdp.jsonl").exists()
    # one probe per (dialogue, rubric of the union pool), none failed
    table = ProbeTable.load(run / "probes.jsonl")
    assert {r.rubric_id for r in table.records} == union
    assert len({r.example_id for r in table.records}) == res["n_dialogues"] == 12
    assert len(table.records) == 12 * len(union) and table.n_errors == 0
    md = (run / "results.md").read_text(encoding="utf-8")
    assert md.startswith("# RUBICON Tables 1-3 on USS-SGD with backend `fake`")
    assert [line for line in md.splitlines() if line.startswith("## ")] == [
        "## Pools", "## Table 1: generators (selection by RUBICON's policy)",
        "## Table 2: ablation of domain sensitization (DS) and conversation design principles (CDP)",
        "## Table 3: selection policies on the union pool", "## Selected rubrics", "## Reading"]


@pytest.mark.slow
def test_split_is_balanced_disjoint_and_generation_uses_training_dialogues_only(results):
    test_ids = set(results["test_ids"])
    assert results["n_dialogues"] == 12 and results["n_test"] == 6 and results["n_train"] == 6
    gen = results["generation_examples"]
    assert len(gen) == 6 and not test_ids & set(gen)
    labels = {e.id: e.labels["sat"] for e in load_uss(corpus="SGD")}
    assert sum(labels[i] for i in test_ids) == 3  # stratified: half SAT in the held-out half
    assert sum(labels[i] for i in gen) == 3


@pytest.mark.slow
def test_score_table_has_one_netsat_per_held_out_dialogue_and_system(run, results):
    rows = read_scores(run / "scores.jsonl")
    assert {r.system for r in rows} == SYSTEMS
    assert {r.aspect for r in rows} == {"sat"}
    for system in SYSTEMS:
        mine = [r for r in rows if r.system == system]
        assert sorted(r.example_id for r in mine) == sorted(results["test_ids"])
        assert {r.human for r in mine} == {0.0, 1.0}
        assert all(r.group is None and r.threshold is not None and np.isfinite(r.score) for r in mine)


@pytest.mark.slow
def test_netsat_is_the_signed_sum_of_the_selected_rubrics_probes(run, results):
    table = ProbeTable.load(run / "probes.jsonl")
    pool = {r.id: r for r in RubricPool.load(run / "pools/rubicon.dedup.jsonl")}
    sel = results["systems"]["RUBICON"]["selection"]
    chosen = [pool[i] for i in sel["selected_ids"]]
    x = unit_scores(table, chosen, example_ids=results["test_ids"])
    expected = (x * np.array([1.0 if r.polarity == "SAT" else -1.0 for r in chosen])).sum(axis=1)
    by_id = {r.example_id: r.score for r in read_scores(run / "scores.jsonl") if r.system == "RUBICON"}
    assert np.allclose([by_id[i] for i in results["test_ids"]], expected)


@pytest.mark.slow
def test_reported_accuracy_matches_the_score_table(run, results):
    rows = read_scores(run / "scores.jsonl")
    for system, key in (("RUBICON", "systems"), ("SPUR", "systems")):
        mine = [r for r in rows if r.system == system]
        acc = np.mean([(r.score > r.threshold) == bool(r.human) for r in mine])
        assert results[key][system]["metrics"]["accuracy"]["value"] == pytest.approx(acc)
    ucb = [r for r in rows if r.system == "UCB (union pool)"]
    acc = np.mean([(r.score > r.threshold) == bool(r.human) for r in ucb])
    assert results["baselines"]["UCB"]["metrics"]["accuracy"]["value"] == pytest.approx(acc)


@pytest.mark.slow
def test_table3_selects_half_of_the_union_of_the_pools(run, results):
    pools = {}
    for key in ("rubicon", "spur", "no_ds"):
        pools.update({r.id: r for r in RubricPool.load(run / f"pools/{key}.dedup.jsonl")})
    n_sat = sum(r.polarity == "SAT" for r in pools.values())
    info = results["table3_pool"]
    assert (info["n_sat"], info["n_dsat"]) == (n_sat, len(pools) - n_sat)
    assert info["budgets"] == [max(1, n_sat // 2), max(1, (len(pools) - n_sat) // 2)]
    for policy in ("UCB", "BruteForce", "CorrectnessLoss", "RUBICON"):
        sel = results["baselines"][policy]["selection"]
        assert set(sel["selected_ids"]) <= set(pools)
        assert [sel["selected"]["SAT"], sel["selected"]["DSAT"]] == info["budgets"]
    assert rv.table3_budgets(0, 7, 0.5, 10, 10) == (0, 3)
    assert rv.table3_budgets(40, 1, 0.5, 10, 10) == (10, 1)
    with pytest.raises(RubricInduceError, match="table3_budget_share"):
        rv.table3_budgets(4, 4, 0.0, 10, 10)


@pytest.mark.slow
def test_markdown_puts_paper_and_our_rows_side_by_side_and_reports_the_failed_generator(run):
    md = (run / "results.md").read_text()
    for heading in ("## Table 1", "## Table 2", "## Table 3: selection policies on the union pool", "## Pools"):
        assert heading in md
    assert "| RUBICON | GPT-4 (paper) | 50 | 27.4 | 84 | 76 | 68.6 | 96 | 80 |" in md
    assert "| SPUR | GPT-4 (paper) | 50 | 3 | 28 |" in md
    assert "| **RUBICON** | backend `fake`, USS | 6 |" in md
    assert "| **RUBICON -CDP** | backend `fake`, USS | 6 | no rubrics generated |" in md
    assert "**RUBICON -CDP** produced no rubrics at all" in md
    assert "Bing Copilot rubrics are not available" in md


def test_select_dialogues_is_balanced_and_refuses_too_few():
    examples = load_uss(corpus="SGD")
    picked = rv.select_dialogues(examples, 10, seed=3)
    assert len(picked) == 10 and sum(e.labels["sat"] for e in picked) == 5
    assert [e.id for e in picked] == [e.id for e in rv.select_dialogues(examples, 10, seed=3)]
    with pytest.raises(RubricInduceError, match="at least 4"):
        rv.select_dialogues(examples, 3, seed=0)


def test_hashing_embedder_is_unit_norm_and_lexical():
    emb = rv.HashingEmbedder().encode(["The user repeats the date.", "the user REPEATS the date",
                                       "Assistant books a table"])
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0)
    assert emb[0] @ emb[1] == pytest.approx(1.0)
    assert emb[0] @ emb[2] < 0.5


def test_unknown_variant_or_baseline_is_refused(tmp_path):
    with pytest.raises(RubricInduceError, match="unknown variant"):
        rv.main(["--backend", "fake", "--out", str(tmp_path), "--set", 'variants=["rubicon", "gpt5"]'])
    with pytest.raises(RubricInduceError, match="unknown selection baseline"):
        rv.build_selector("Random", 1, 1, {"score": "expected", "seed": 0})
