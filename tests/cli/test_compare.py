"""`rubric-induce compare` (issue 33: `score`/`compare` work on new pairs): P(A > B) for each pair of a file in
any layout the pair reader knows, CSV / JSONL out, through the same path as `RubricScorer.compare`; and
`score` on a pairwise run (single responses, their strength) or a word on what to do instead."""
from __future__ import annotations

import csv
import json
import math
import shutil

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.scoring.scorer import RubricScorer

LLMBAR = [
    {"input": "Give 3 tips on sleep.", "output_1": "Here are 3 tips: keep a schedule, avoid screens, stay cool.",
     "output_2": "I like turtles.", "label": 1},
    {"input": "Say hi.", "output_1": "No.", "output_2": "Hi there!", "label": 2},
    {"input": "Name a prime number.", "output_1": "Seven.", "output_2": "I will not answer that."},  # no label
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _compare(run, pairs, *extra):
    return CliRunner().invoke(cli, ["compare", str(run), "--pairs", str(pairs), *map(str, extra)])


def test_compare_writes_one_row_per_pair_as_compare_pairs_gives(pairwise_artifact, tmp_path):
    pairs = _write(tmp_path / "pairs.jsonl", LLMBAR)
    out = tmp_path / "verdicts.jsonl"
    res = _compare(pairwise_artifact, pairs, "--out", out)
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    scorer = RubricScorer.load(pairwise_artifact)
    want = scorer.compare_pairs([r["input"] for r in LLMBAR], [r["output_1"] for r in LLMBAR],
                                [r["output_2"] for r in LLMBAR])
    assert [r["p_a"] for r in rows] == pytest.approx(list(want), abs=1e-12)
    for row, src in zip(rows, LLMBAR, strict=True):
        assert math.isclose(row["p_a"] + row["p_tie"] + row["p_b"], 1.0, abs_tol=1e-9)
        assert row["pick"] == ("A" if row["p_a"] >= row["p_b"] else "B")
        assert row["preferred"] == {1: "A", 2: "B", None: None}[src.get("label")]
        assert row["correct"] == (None if row["preferred"] is None else row["pick"] == row["preferred"])
    assert "compared 3 pair(s)" in res.output and "of 2 labelled non-tie pair(s)" in res.output


def test_compare_swapped_sides_swap_the_probability(pairwise_artifact, tmp_path):
    swapped = [{**r, "output_1": r["output_2"], "output_2": r["output_1"]} for r in LLMBAR]
    for r in swapped:
        r.pop("label", None)
    a = _compare(pairwise_artifact, _write(tmp_path / "a.jsonl", LLMBAR), "--out", tmp_path / "a.jsonl.out")
    b = _compare(pairwise_artifact, _write(tmp_path / "b.jsonl", swapped), "--out", tmp_path / "b.jsonl.out")
    assert a.exit_code == b.exit_code == 0, a.output + b.output
    pa = [json.loads(x)["p_a"] for x in (tmp_path / "a.jsonl.out").read_text().splitlines()]
    pb = [json.loads(x)["p_b"] for x in (tmp_path / "b.jsonl.out").read_text().splitlines()]
    assert pa == pytest.approx(pb, abs=1e-12)


def test_compare_csv_and_chosen_rejected_layout(pairwise_artifact, tmp_path):
    rows = [{"prompt": r["input"], "chosen": r["output_1"], "rejected": r["output_2"]} for r in LLMBAR]
    out = tmp_path / "verdicts.csv"
    res = _compare(pairwise_artifact, _write(tmp_path / "prefs.jsonl", rows), "--out", out)
    assert res.exit_code == 0, res.output
    with out.open(encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 3 and {"id", "p_a", "p_tie", "p_b", "pick", "preferred", "swapped", "p_chosen"} <= set(table[0])
    scorer = RubricScorer.load(pairwise_artifact)
    want = scorer.compare_pairs([r["prompt"] for r in rows], [r["chosen"] for r in rows], [r["rejected"] for r in rows])
    assert [float(t["p_chosen"]) for t in table] == pytest.approx(list(want), abs=1e-9)
    for t in table:  # the chosen side is where the label says
        assert t["preferred"] == ("B" if t["swapped"] == "True" else "A")


def test_compare_with_a_column_map(pairwise_artifact, tmp_path):
    rows = [{"q": r["input"], "left": r["output_1"], "right": r["output_2"]} for r in LLMBAR]
    path = tmp_path / "arena.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["q", "left", "right"])
        w.writeheader()
        w.writerows(rows)
    res = _compare(pairwise_artifact, path, "--map", "prompt=q", "--map", "a=left", "--map", "b=right")
    assert res.exit_code == 0, res.output
    res = _compare(pairwise_artifact, path, "--map", "answer=q")
    assert res.exit_code == 2 and "unknown role 'answer'" in res.output


def test_compare_refuses_a_pointwise_run(pairwise_artifact, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(pairwise_artifact, run)
    doc = json.loads((run / "artifact.json").read_text(encoding="utf-8"))
    doc.update(kind="pointwise", pairwise_head=None)
    (run / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    res = _compare(run, _write(tmp_path / "p.jsonl", LLMBAR))
    assert res.exit_code == 2
    assert "compare needs a pairwise run" in res.output and "field 'kind'" in res.output


def test_score_on_a_pairwise_run_says_what_it_reads(pairwise_artifact, tmp_path):
    """A pair file given to `score` is exit 2 saying score reads single responses and naming compare."""
    res = CliRunner().invoke(cli, ["score", str(pairwise_artifact), "--input", str(_write(tmp_path / "p.jsonl", LLMBAR))])
    assert res.exit_code == 2
    assert "pairwise run" in res.output and "rubric-induce compare" in res.output and "line 1" in res.output
    responses = _write(tmp_path / "r.jsonl", [{"input": r["input"], "reply": r["output_1"]} for r in LLMBAR])
    res = CliRunner().invoke(cli, ["score", str(pairwise_artifact), "--input", str(responses),
                                   "--map", "prompt=input", "--map", "response=reply"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 3 and all(isinstance(r["strength"], float) for r in rows)


def test_compare_is_listed_and_documented():
    res = CliRunner().invoke(cli, ["--help"])
    assert "compare" in res.output
    res = CliRunner().invoke(cli, ["compare", "--help"])
    assert res.exit_code == 0 and "--pairs" in res.output and "P(A > B)" in res.output
