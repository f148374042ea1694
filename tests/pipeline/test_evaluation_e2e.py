"""End to end on the fake backend over USS SGD (graded satisfaction, 3-5 judges per dialogue), with the
graded label as both the selection target and the calibration question (``data.label ==
calibrate.question``), with and without ``label_threshold``: no duplicate score rows, the report
renders (also through ``rubric-induce report RUN``), and evaluation.md says what evaluation.json says."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.core.mdtext import md_text
from rubric_induce.evaluation.score_table import read_scores
from rubric_induce.pipeline import run_pipeline

pytestmark = pytest.mark.slow  # two pipeline runs, about 10 s on 2 cores

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"

CONFIG = """
[run]
seed = 0
limit = 40

[data]
dataset = "uss-sgd"
data_root = "{root}"
label = "satisfaction"
{threshold}

[backend]
spec = "fake"

[generate]
method = "none"
include = ["{rubrics}"]

[dedup]
enabled = false

[select]
{select}
n_sat = 2
n_dsat = 2

[calibrate]
question = "satisfaction"
options = {{ hidden = [4, 4], finetune_epochs = 5, pretrain = false }}

[evaluate]
bootstrap = 50

[report]
bootstrap = 50
figures = false
"""

VARIANTS = {
    "threshold": ("label_threshold = 3.0", ""),   # binary selection target satisfaction >= 3
    "graded": ("", 'method = "topk"'),            # the graded label itself, top-K selection
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def uss_run(request, tmp_path_factory, shared_data_root):
    threshold, select = VARIANTS[request.param]
    tmp = tmp_path_factory.mktemp(f"uss-{request.param}")
    cfg = tmp / "cfg.toml"
    cfg.write_text(CONFIG.format(root=shared_data_root.as_posix(), threshold=threshold, select=select,
                                 rubrics=(RES / "demo_uss_rubrics.json").as_posix()), encoding="utf-8")
    result = run_pipeline(cfg, out=tmp / "out", echo=lambda m: None)
    return request.param, result.out


def _table_rows(md: str, heading: str) -> list[list[str]]:
    """The body rows of the first markdown table under ``heading``."""
    section = md.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # header and separator


def _num(cell: str) -> float | None:
    m = re.match(r"-?\d+\.\d+", cell)
    return None if m is None else float(m.group())


def test_score_rows_are_unique_and_the_report_renders(uss_run):
    variant, out = uss_run
    rows = read_scores(out / "scores.jsonl")  # raised "duplicate row ... aspect 'satisfaction'" before
    cells = {(r.aspect, r.system) for r in rows}
    # the direct judge ([evaluate] direct_baseline) rates the calibrated question: one row per text too
    expect = {("satisfaction", "calibrated"), ("satisfaction", "netsat"), ("satisfaction", "direct")}
    if variant == "threshold":
        expect.add(("satisfaction>=3", "netsat"))
        assert {r.human for r in rows if r.aspect == "satisfaction>=3"} <= {0.0, 1.0}
    assert cells == expect
    report = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("## Pipeline", "## Selected rubrics", "## Held-out headline", "## Scores: `scores.jsonl`"):
        assert heading in report
    assert "human ceiling (each judge vs the mean of the others)" in report
    res = CliRunner().invoke(cli, ["report", str(out), "--no-figures", "--bootstrap", "50"])
    assert res.exit_code == 0, res.output
    again = (out / "report.md").read_text(encoding="utf-8")
    head = report.split("## Scores")[0]
    assert again.split("## Scores")[0] == head  # the same opening, re-rendered from the run's files


def test_evaluation_md_agrees_with_evaluation_json(uss_run):
    variant, out = uss_run
    md = (out / "evaluation.md").read_text(encoding="utf-8")
    ev = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))
    assert ev["question"] == "satisfaction"
    # calibrated table: the systems, then the constant baseline
    cal_rows = {r[0].split(" (")[0]: r for r in _table_rows(md, "## Calibrated prediction of 'satisfaction'")}
    for name in ("calibrated", "netsat"):
        assert _num(cal_rows[name][1]) == pytest.approx(ev["calibrated"][name]["pearson"], abs=5e-4)
        assert _num(cal_rows[name][2]) == pytest.approx(ev["calibrated"][name]["spearman"], abs=5e-4)
    assert _num(cal_rows["calibrated"][4]) == pytest.approx(ev["calibrated"]["calibrated"]["rmse"], abs=5e-4)
    const = ev["baselines"]["constant"]
    assert cal_rows["constant"][1] == "undefined" and const["pearson"] is None
    assert _num(cal_rows["constant"][4]) == pytest.approx(const["rmse"], abs=5e-4)
    assert f"training mean {const['mean']:.3f}" in md
    # per judge: every listed judge's numbers, and the pooled row
    judges = ev["judges"]
    assert judges["question"] == "satisfaction" and judges["n_judges"] >= 3
    by_name = {r["judge"]: r for r in judges["rows"]}
    table = _table_rows(md, "## Per judge: 'satisfaction'")
    assert len(table) == sum(r["shown"] for r in judges["rows"]) + 1
    for cells in table:
        row = judges["pooled"] if cells[0] == "all judges (pooled)" else by_name[cells[0].rstrip("*")]
        assert int(cells[1]) == row["n"]
        assert _num(cells[2]) == pytest.approx(row["calibrated"]["pearson"], abs=5e-4)
        assert _num(cells[4]) == pytest.approx(row["calibrated"]["rmse"], abs=5e-4)
        assert _num(cells[5]) == pytest.approx(row["netsat"]["pearson"], abs=5e-4)
        assert _num(cells[7]) == pytest.approx(row["constant"]["rmse"], abs=5e-4)
        assert _num(cells[8]) == pytest.approx(row["ceiling"]["pearson"], abs=5e-4)
        assert int(cells[10]) == row["ceiling"]["n"]
    assert judges["texts_with_2plus_judges"] > 0 and judges["pooled"]["ceiling"]["n"] > 0
    if variant == "threshold":
        maj = ev["baselines"]["majority"]
        heading = f"## NetSAT and the selected threshold ({md_text(repr('satisfaction>=3'))})"  # as evaluation.md escapes it
        metrics = {r[0]: r for r in _table_rows(md, heading)}
        assert _num(metrics["Accuracy"][1]) == pytest.approx(100 * ev["selection"]["accuracy"], abs=0.05)
        assert _num(metrics["Accuracy"][2]) == pytest.approx(100 * maj["accuracy"], abs=0.05)
        assert _num(metrics["F1"][2]) == pytest.approx(100 * maj["f1"], abs=0.05)
        flagged = any("majority-class baseline" in w for w in ev["warnings"])
        assert flagged == (ev["selection"]["accuracy"] <= maj["accuracy"])
    else:
        assert "majority" not in ev["baselines"] and "## NetSAT and the selected threshold" not in md
    # the probe checks ran over the probed pool
    assert ev["probes"]["n_rubrics"] >= 4 and "## Probe checks" in md
    assert all(w.split(":")[0] in md for w in ev["warnings"])
