"""experiments/papers/llm_rubric_table1.py: the per-question table (LLM-RUBRIC Table 3), on a slice of the
released data with tiny networks."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from experiment_loader import ROOT, load_experiment  # noqa: E402

from rubric_induce.calibration.calibrator import Calibrator  # noqa: E402
from rubric_induce.calibration.data import from_llm_rubric  # noqa: E402

lr = load_experiment("llm_rubric_table1")
QUESTIONS = [f"Q{i}" for i in range(9)]


@pytest.fixture(scope="module")
def sliced(shared_data_root):
    from rubric_induce.data.datasets.llm_rubric import load_llm_rubric

    syn = from_llm_rubric(load_llm_rubric(shared_data_root, "synthetic"))
    real = from_llm_rubric(load_llm_rubric(shared_data_root, "real"))
    # Every 5th synthetic dialogue (45, about 150 judgments) and every 6th real one (38).
    return syn.subset_texts(np.arange(0, len(syn.text_ids), 5)), real.subset_texts(np.arange(0, len(real.text_ids), 6))


def tiny(**kw) -> Calibrator:
    return Calibrator(main_question="Q0", hidden=(4, 4), pretrain_epochs=1, finetune_epochs=1, n_threads=1, **kw)


@pytest.mark.slow  # 27 tiny fits (9 questions x 3 networks): about 5 s of CPU
def test_prints_a_row_per_question_with_its_baselines(sliced, capsys):
    syn, real = sliced
    metrics = lr.per_question_section(syn, real, tiny(), [0], n_permutations=20)
    out = capsys.readouterr().out
    assert list(metrics) == QUESTIONS
    for q in QUESTIONS:
        assert list(metrics[q]) == list(lr.PER_QUESTION_SYSTEMS)
        assert metrics[q]["LLM-RUBRIC"]["n"] == np.isfinite(real.target(q)).sum() > 0
    pearson, rmse = out.split("\nPearson:\n")[1].split("\nRMSE:\n")
    for table in (pearson, rmse):
        lines = [ln for ln in table.splitlines() if ln.startswith("|")]
        header, rows = lines[0], lines[2:]
        assert [r.split(" |")[0] for r in rows] == [f"| {q} {lr.PAPER_QUESTION_NAMES[q]}" for q in QUESTIONS]
        assert all(r.count("|") == header.count("|") for r in rows)  # no cell missing
        for name in lr.PER_QUESTION_SYSTEMS:
            assert f" {name} |" in header
    # The paper's Table 3 figures sit in their question's row.
    q6 = next(ln for ln in rmse.splitlines() if ln.startswith("| Q6 "))
    q0 = next(ln for ln in pearson.splitlines() if ln.startswith("| Q0 "))
    assert "| 1.726 / — |" in q6 and "| 0.143 / 0.350 |" in q0


@pytest.mark.slow  # pre-training and a fine-tune per question head: about 3 s
def test_each_question_is_fine_tuned_on_its_own_head(sliced):
    syn, real = sliced
    preds = lr.question_predictions("Q8", tiny(), syn, real, [0, 1])
    X, J, Y, kw = syn.fit_args()
    own = [Calibrator(**{**tiny().get_params(), "main_question": "Q8", "random_state": s}).fit(X, J, Y, **kw)
           .predict(real.row_X, judge_ids=real.row_judge) for s in (0, 1)]
    np.testing.assert_allclose(preds["LLM-RUBRIC"], np.mean(own, axis=0))
    assert set(preds["Random"]) <= {1.0, 2.0, 3.0}  # Q8's scale is 1-3
    assert np.nanmax(preds["Argmax LLM Qi"]) <= 3 and np.nanmax(preds["LLM-RUBRIC"]) <= 3
    q8 = syn.input_names.index("Q8")
    p = real.row_X[:, q8, :3]
    expected = (p / p.sum(axis=1, keepdims=True)) @ np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(preds["Expected LLM Qi"], expected)
    # Q0's row is Table 1's: the same networks and baselines as the Q0 rows.
    q0 = lr.question_predictions("Q0", tiny(), syn, real, [0])
    np.testing.assert_array_equal(q0["LLM-RUBRIC"], lr.fit_predict(tiny(random_state=0), syn, real))
    np.testing.assert_array_equal(q0["Expected LLM Qi"], lr.ExpectedLLM(question=0).predict(real.row_X))
    assert not np.allclose(q0["LLM-RUBRIC"], preds["LLM-RUBRIC"])


def test_unknown_question_is_a_one_line_usage_error(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "experiments" / "papers" / "llm_rubric_table1.py"), "--per-question-only",
                          "--trials", "0", "--questions", "Q0,Q9", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    assert "--questions: unknown question(s) Q9" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow  # the whole data, default-size networks, two questions
def test_per_question_only_command(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "experiments" / "papers" / "llm_rubric_table1.py"), "--per-question-only",
                          "--trials", "0", "--seeds", "1", "--questions", "Q0,Q8", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "no search (--trials 0)" in res.stdout and "### Per question" in res.stdout
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("| Q")]
    assert [r.split(" ")[1] for r in rows] == ["Q0", "Q8"] * 2
    assert "Table 1, real dialogues" not in res.stdout  # only the per-question table
    config = json.loads((tmp_path / "config.json").read_text())  # the harness's run record
    assert config["questions"] == "Q0,Q8" and config["trials"] == 0 and config["out"] == str(tmp_path)
    assert json.loads((tmp_path / "manifest.json").read_text())["exit_code"] == 0
