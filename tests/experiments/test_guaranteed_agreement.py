"""experiments/bench/guaranteed_agreement.py: runs on a folder of the LLMBar layout and writes the rows BENCHMARKS reads."""
from __future__ import annotations

import json

import numpy as np
import pytest
from experiment_loader import load_experiment

from rubric_induce.scoring.guarantee_draws import draw_record

KEYS = {"target", "delta", "coverage", "violation_rate", "test_violation_rate", "issued_share",
        "conditional_violation", "conditional_test_violation", "strong_share", "n_splits", "naive"}


def test_writes_results_per_setting_and_target(shared_data_root, tmp_path):
    exp = load_experiment("guaranteed_agreement")
    out = tmp_path / "out"
    assert exp.main(["--data-root", str(shared_data_root), "--subsets", "GPTOut", "--out", str(out),
                     "--splits", "5", "--targets", "0.8", "0.9", "--skip", "llm_rubric", "--planted-n", "200"]) == 0
    doc = json.loads((out / "results.json").read_text())
    rows = doc["results"]
    assert not doc["errors"]
    for r in rows:
        assert KEYS <= set(r), r["method"]
        assert r["n_splits"] == 5, (r["setting"], r["method"])  # a draw too small to fit is a draw, not skipped
    # every baseline that carries no guarantee is marked naive, and only those
    assert {r["method"] for r in rows if r["naive"]} == {"naive", "strong-alone"}
    for r in rows:
        if r["naive"]:
            assert r["issued_share"] is None and r["conditional_violation"] is None
            continue
        # a draw that issues nothing never violates: the marginal rate is the issued share times the conditional
        cond = r["conditional_violation"] or 0.0
        assert abs(r["violation_rate"] - r["issued_share"] * cond) < 1e-9
        assert (r["conditional_violation"] is None) == (r["issued_share"] == 0)
    # GPTOut at 0.9: 24 calibration texts, 29 needed at delta / 2: no draw issues a cascade guarantee
    bonf = next(r for r in rows
                if r["method"] == "cascade" and r["target"] == 0.9 and r["setting"].startswith("llmbar"))
    assert bonf["fit_failures"] == 5 and bonf["issued_share"] == 0.0 and bonf["violation_rate"] == 0.0
    settings = {r["setting"] for r in rows}
    assert "llmbar/GPTOut: ChatGPT -> GPT-4" in settings and "planted/cascade" in settings
    assert all(r["test_violation_rate"] is None for r in rows if r["setting"].startswith("planted"))
    table = (out / "results.md").read_text()
    assert "issued share" in table and "violation when issued" in table and "test-half violation" in table


def test_violation_counts_the_whole_labelled_set_and_only_issued_guarantees():
    """A split's violation is judged on every labelled text answered at its thresholds; one that
    issues nothing does not violate, but it also does not count towards the issued guarantees."""
    exp = load_experiment("guaranteed_agreement")
    test = np.array([0, 1])
    answered = np.array([True, True, True, True])
    correct = np.array([True, True, False, False])  # test half all agree, the whole set only at 0.5
    rec = draw_record(True, answered, correct, 0.8, test, strong=0.5)
    assert rec["viol"] and not rec["test_viol"]
    none = draw_record(False, np.zeros(4, bool), correct, 0.8, test, strong=1.0)
    recs = [rec, none, none, draw_record(True, answered, np.ones(4, bool), 0.8, test, strong=0.5)]
    row = exp._row("s", "m", 0.8, 0.1, recs, 2, 2)
    assert row["violation_rate"] == 0.25 and row["issued_share"] == 0.5 and row["conditional_violation"] == 0.5
    assert row["test_violation_rate"] == 0.0 and row["n_issued"] == 2 and row["strong_share"] == 0.75
    assert row["agreement"] == 1.0  # the draws that answered nothing are left out, not counted as 0
    # a naive baseline issues no guarantee: no issued share nor violation when issued, the rates stand
    naive = exp._row("s", "naive", 0.8, 0.1, recs, 2, 2, naive=True)
    assert naive["issued_share"] is None and naive["conditional_violation"] is None and naive["n_issued"] is None
    assert naive["violation_rate"] == 0.25 and not naive["guaranteed"]


def _judgements(path, n=60, swap=True):
    """A small labelled file: a cheap judge right on 3 texts in 4 (its swapped order agrees with it
    on even texts), a strong judge right on all but every tenth."""
    rows = []
    for i in range(n):
        label = i % 2
        cheap = label if i % 4 else 1 - label
        row = {"id": f"t{i}", "label": label,
               "judges": {"cheap": {"answer": cheap, "confidence": 0.6 + 0.4 * (i % 4 != 0) * (i % 3) / 2},
                          "strong": {"answer": label if i % 10 else 1 - label, "confidence": 0.9}}}
        if swap:
            row["swap"] = {"cheap": [cheap, cheap if i % 2 == 0 else None]}
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_reads_judgements_files_named_and_by_stem(tmp_path):
    exp = load_experiment("guaranteed_agreement")
    mine, plain = _judgements(tmp_path / "mine.jsonl"), _judgements(tmp_path / "plain.jsonl", swap=False)
    out = tmp_path / "out"
    assert exp.main(["--judgements", f"ours={mine}", str(plain), "--cheap", "cheap", "--strong", "strong",
                     "--skip", "llm_rubric", "planted", "--splits", "4", "--targets", "0.8", "--out", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())["results"]
    assert {r["setting"] for r in rows} == {"ours: cheap -> strong", "plain: cheap -> strong"}
    methods = {s: {r["method"] for r in rows if r["setting"] == s} for s in {r["setting"] for r in rows}}
    assert "naive" in methods["ours: cheap -> strong"]  # from the rows' swap answers
    assert "naive" not in methods["plain: cheap -> strong"]  # no swap field: no consistency baseline
    naive = next(r for r in rows if r["method"] == "naive")
    # odd texts have one order only: inconsistent, sent to the strong judge
    assert naive["strong_share"] == pytest.approx(0.5, abs=0.2) and naive["n_cal"] == 30
    alone = next(r for r in rows if r["method"] == "strong-alone" and r["setting"].startswith("ours"))
    assert alone["agreement"] == pytest.approx(0.9, abs=0.05)  # the test halves of 54 right in 60


@pytest.mark.parametrize("damage, line, field", [
    (lambda rows: rows[:3] + [{**rows[3], "judges": {"cheap": {"answer": 0, "confidence": 1.5}}}] + rows[4:],
     4, "judges.cheap.confidence"),
    (lambda rows: rows[:6] + [{**rows[6], "swap": {"cheap": [0, 2]}}] + rows[7:], 7, "swap.cheap"),
    (lambda rows: rows[:1] + [{**rows[1], "swap": ["cheap"]}] + rows[2:], 2, "swap"),
])
def test_a_bad_judgements_file_is_exit_2_naming_file_line_and_field(tmp_path, capsys, damage, line, field):
    exp = load_experiment("guaranteed_agreement")
    path = _judgements(tmp_path / "bad.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in damage(rows)))
    out = tmp_path / "out"
    assert exp.main(["--judgements", str(path), "--cheap", "cheap", "--strong", "strong", "--skip", "llm_rubric",
                     "planted", "--splits", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and f"line {line}" in err and f"field '{field}'" in err
    assert not (out / "results.json").exists()  # nothing is run on a file that breaks the layout


def test_converting_in_process_gives_the_rows_of_the_converters_files(tmp_path):
    """Without --judgements the script converts LLMBar through experiments/tools/llmbar_judgements.py;
    passing that converter's files by name gives the same rows."""
    exp = load_experiment("guaranteed_agreement")
    tool = load_experiment("llmbar_judgements")
    data = _llmbar_folder(tmp_path / "data")
    written = tool.convert(data, ["Tiny"], tmp_path / "conv")
    common = ["--skip", "llm_rubric", "planted", "--splits", "3", "--targets", "0.8", "--cheap", "ChatGPT"]
    assert exp.main(["--data-root", str(data), "--subsets", "Tiny", "--out", str(tmp_path / "a"), *common]) == 0
    assert exp.main(["--judgements", f"llmbar/Tiny={written['Tiny']}", "--out", str(tmp_path / "b"), *common]) == 0
    a, b = (json.loads((tmp_path / d / "results.json").read_text()) for d in "ab")
    assert a["results"] == b["results"] and {r["setting"] for r in a["results"]} == {"llmbar/Tiny: ChatGPT -> GPT-4"}
    naive = next(r for r in a["results"] if r["method"] == "naive")
    assert naive["agreement"] is not None  # the converter's swap field carries the Swap orders


def _llmbar_folder(root):
    """Eight pairs of the LLMBar layout: GPT-4 (Swap) right on all, ChatGPT (Swap) consistent on even pairs."""
    folder = root / "Tiny"
    data = [{"input": f"q{i}", "output_1": "a", "output_2": "b", "label": 1 + i % 2} for i in range(8)]
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(data))
    for judge in ("GPT-4", "ChatGPT"):
        rows = []
        for i, d in enumerate(data):
            w = str(d["label"])
            other = w if judge == "GPT-4" or i % 2 == 0 else str(3 - int(w))
            rows.append({**d, "results": [{"swap = False": {"winner": w}, "swap = True": {"winner": other}}]})
        (folder / "evaluators" / judge / "Swap").mkdir(parents=True)
        (folder / "evaluators" / judge / "Swap" / "result.json").write_text(json.dumps(rows))
    return root
