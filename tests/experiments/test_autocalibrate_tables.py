"""experiments/papers/autocalibrate_tables.py end to end on the fake backend: splits, files, table layout."""
from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from experiment_loader import check_run_record, load_experiment

from rubric_induce.core import stats
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.data import Example, RubricPool
from rubric_induce.data.probes import ProbeTable
from rubric_induce.evaluation.score_table import read_scores

ac = load_experiment("autocalibrate_tables")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # The generic run report has its own tests; skipping its figures keeps this file fast.
    run_report = importlib.import_module("rubric_induce.reporting.report")  # the module (the package exports the function)
    out = tmp_path_factory.mktemp("autocalibrate")
    saved = run_report.render_run_report
    run_report.render_run_report = lambda *a, **k: None
    try:
        ac.main(["--backend", "fake", "--limit", "4", "--out", str(out), "--set", "progress=false",
                 "--set", "n_boot=50", "--set", "induction=6", "--set", 'summeval_aspects=["coherence", "fluency"]'])
    finally:
        run_report.render_run_report = saved
    return out


@pytest.mark.slow
def test_writes_every_output(run):
    """Every output parses; each aspect's pool holds its final criterion, and each dataset's probes
    cover its held-out examples times the distinct rubrics of its aspects."""
    res = check_run_record(run, "autocalibrate_tables", limit=4, n_boot=50, induction=6, progress=False,
                           summeval_aspects=["coherence", "fluency"])
    assert (run / "autocalibrate_spearman.png").read_bytes()[:4] == b"\x89PNG"
    assert set(res["calibration"]) == {"summeval/coherence", "summeval/fluency", "qags-cnndm/consistency",
                                       "qags-xsum/consistency"}
    rubric_ids: dict[str, set[str]] = {}
    for key, calib in res["calibration"].items():
        dataset, aspect = key.split("/")
        assert calib["pool"] == f"pools/{dataset}_{aspect}.jsonl"
        pool = RubricPool.load(run / calib["pool"])
        final = calib["rubric_ids"]["refined" if calib["final_step"] == "refine" else "drafted"]
        assert [r.id for r in pool] == [final] and pool.manifest["n_rubrics"] == 1
        (rubric,) = pool
        assert rubric.provenance["method"] == "autocalibrate" and rubric.provenance["step"] == calib["final_step"]
        assert rubric.text == calib["rubric_texts"]["refined"]  # the final criterion is what "refined" reports
        assert rubric.provenance["correlation"] == pytest.approx(calib["induction_corr"]["refined"])
        rubric_ids.setdefault(dataset, set()).update(calib["rubric_ids"].values())
    for dataset, split in res["splits"].items():
        table = ProbeTable.load(run / "probes" / f"{dataset}.jsonl")
        assert {r.example_id for r in table.records} == set(split["held_out_ids"])
        assert {r.rubric_id for r in table.records} == rubric_ids[dataset]
        assert len(table.records) == split["held_out"] * len(rubric_ids[dataset])
        assert table.n_errors == split["probe_errors"] == 0
    md = (run / "results.md").read_text(encoding="utf-8")
    assert [line for line in md.splitlines() if line.startswith("## ")] == [
        "## Table 2 layout: SummEval, summary-level Spearman ρ / Kendall τ (held-out)",
        "## Table 4 layout: QAGS, dataset-level Pearson r / Spearman ρ / Kendall τ (held-out)",
        "## Table 5 layout: ablations (OG = refined, -Crit = no criteria, -Rfi = drafted)",
        "## All correlations with 95% bootstrap intervals (held-out)",
        "## Williams tests: refined criterion against the others (dataset-level Pearson, one-sided)",
        "## Criteria", "## Reading"]


@pytest.mark.slow
def test_held_out_only_and_split_by_document(run):
    res = json.loads((run / "results.json").read_text())["results"]
    rows = read_scores(run / "scores.jsonl")
    for dataset, split in res["splits"].items():
        assert not set(split["induction_ids"]) & set(split["held_out_ids"])
        scored = {r.example_id for r in rows if r.aspect.startswith(dataset + "/")}
        assert scored == set(split["held_out_ids"])
    se = res["splits"]["summeval"]
    # whole articles: 6 induction examples round up to one article of 16, 4 held-out to one more
    assert (se["induction"], se["held_out"], se["induction_docs"], se["held_out_docs"]) == (16, 16, 1, 1)
    assert res["splits"]["qags-xsum"]["held_out"] == 4 and res["splits"]["qags-xsum"]["induction"] == 6


@pytest.mark.slow
def test_three_systems_per_aspect_and_correct_correlations(run):
    rows = read_scores(run / "scores.jsonl")
    assert {r.system for r in rows} == set(ac.SYSTEMS)
    assert {r.aspect for r in rows} == {"summeval/coherence", "summeval/fluency", "qags-cnndm/consistency",
                                        "qags-xsum/consistency"}
    assert all((r.group is None) == r.aspect.startswith("qags") for r in rows)
    qags = [r for r in rows if r.aspect.startswith("qags") and r.scale is not None]
    assert qags and all(r.scale == (0.0, 1.0) and 0 <= r.score <= 1 for r in qags)
    res = json.loads((run / "results.json").read_text())["results"]
    for cell in res["correlations"]:
        sel = [r for r in rows if r.aspect == cell["aspect"] and r.system == cell["system"]]
        pred, human = np.array([r.score for r in sel]), np.array([r.human for r in sel])
        assert cell["dataset_spearman"] == pytest.approx(stats.dataset_level(pred, human, "spearman").value,
                                                         nan_ok=True)
    calib = res["calibration"]["summeval/coherence"]
    assert calib["rubric_texts"]["no-criteria"] == "Rate the coherence of the text."
    assert calib["rubric_texts"]["refined"].startswith("Rate the coherence of the text using these criteria:")
    assert calib["n_drafts"] >= 1 and calib["final_step"] in ("draft", "refine")


@pytest.mark.slow
def test_markdown_tables(run):
    md = (run / "results.md").read_text()
    for title in ("Table 2 layout", "Table 4 layout", "Table 5 layout", "Williams"):
        assert title in md
    assert "| AutoCalibrate | GPT-4-32K (paper) | 0.740 | 0.744 | 0.663 | 0.662 | 0.662 | 0.662 |" in md
    ours = [line for line in md.splitlines() if ac.OUR_MODEL in line and line.startswith("| refined |")]
    assert len(ours) == 2  # Table 2 and Table 4 rows
    t5 = [line for line in md.splitlines() if line.startswith("| qags-cnndm/consistency | dataset |")]
    assert len(t5) == 2 and "0.744 | 0.649 | 0.724" in t5[0]


def test_split_by_group_is_disjoint_seeded_and_whole():
    exs = [Example.create({"text": f"t{d}{i}"}, {"x": 1.0}, id=f"d{d}/{i}", group=f"d{d}")
           for d in range(10) for i in range(4)]
    ind, ev = ac.split_by_group(exs, 5, 8, seed=1)
    assert len(ind) == 8 and len(ev) == 8  # two documents each (4 per document)
    assert not {e.group for e in ind} & {e.group for e in ev}
    assert [e.id for e in ind] == [e.id for e in ac.split_by_group(exs, 5, 8, seed=1)[0]]
    _, rest = ac.split_by_group(exs, 5, None, seed=1)
    assert len(rest) == 32
    with pytest.raises(RubricInduceError, match="no documents left"):
        ac.split_by_group(exs, 40, None, seed=0)
