"""The converters in experiments/tools/: LLMBar verdicts and LLM-RUBRIC's network as judgements files."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rubric_induce.data.judgements import read_judgements

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f"tool_{name}", ROOT / "experiments" / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"tool_{name}"] = module
    spec.loader.exec_module(module)
    return module


llmbar = _tool("llmbar_judgements")
llm_rubric = _tool("llm_rubric_judgements")


def _entry(w1: str, w2: str, scores: tuple[int, int] | None = None) -> dict:
    e = {"swap = False": {"winner": w1}, "swap = True": {"winner": w2}}
    if scores:
        e["score_1"], e["score_2"] = [str(scores[0])], [str(scores[1])]
    return e


def _folder(root: Path) -> Path:
    """Three pairs (gold 1, 2, 1); GPT-4 with Swap and Rating, ChatGPT with Swap only."""
    folder = root / "Tiny"
    data = [{"input": f"q{i}", "output_1": "a", "output_2": "b", "label": g} for i, g in enumerate((1, 2, 1))]
    (folder).mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(data))
    verdicts = {("GPT-4", "Swap"): [_entry("1", "1"), _entry("2", "2"), _entry("1", "2")],
                ("GPT-4", "Rating"): [_entry("1", "1", (9, 3)), _entry("2", "2", (2, 8)), _entry("2", "1", (5, 5))],
                ("ChatGPT", "Swap"): [_entry("1", "2"), _entry("2", "2"), _entry("", "")]}
    for (judge, strategy), entries in verdicts.items():
        (folder / "evaluators" / judge / strategy).mkdir(parents=True)
        rows = [{**d, "results": [e]} for d, e in zip(data, entries)]
        (folder / "evaluators" / judge / strategy / "result.json").write_text(json.dumps(rows))
    return folder


def test_llmbar_converter_labels_answers_and_ties(tmp_path: Path) -> None:
    _folder(tmp_path / "data")
    written = llmbar.convert(tmp_path / "data", ["Tiny"], tmp_path / "out")
    jd = read_judgements(written["Tiny"])
    assert jd.ids == ["Tiny-0", "Tiny-1", "Tiny-2"] and jd.groups == jd.ids
    assert jd.label.tolist() == [0.0, 1.0, 0.0]  # gold 1 -> 0 (first preferred), gold 2 -> 1
    gpt4 = jd.judge("GPT-4")
    # pair 0: all four verdicts for output 1, margin 6/9 -> confidence 1 - 0.05 * (1 - 6/9)
    assert gpt4.answer[0] == 0 and gpt4.confidence[0] == pytest.approx(1 - 0.05 / 3, abs=1e-6)
    assert gpt4.answer[1] == 1  # all for output 2
    assert gpt4.probs[2].tolist() == [0.5, 0.5]  # two for each: no answer
    chat = jd.judge("ChatGPT")
    assert chat.probs[0].tolist() == [0.5, 0.5] and chat.answer[1] == 1 and chat.confidence[1] == 1.0
    assert not chat.present[2]  # no verdict at all: the judge is left out of that row
    assert [e["subset"] for e in jd.extra] == ["Tiny"] * 3
    # each judge's Swap verdicts in both orders, on the file's 0/1 scale (null: none given)
    assert [e["swap"]["ChatGPT"] for e in jd.extra] == [[0, 1], [1, 1], [None, None]]
    assert [e["swap"]["GPT-4"] for e in jd.extra] == [[0, 0], [1, 1], [0, 1]]


def test_llmbar_raw_files_are_read_by_the_converter_alone() -> None:
    """The converter owns LLMBar's raw layout; the guaranteed-agreement bench reads judgements files."""
    bench = (ROOT / "experiments" / "bench" / "guaranteed_agreement.py").read_text(encoding="utf-8")
    assert "result.json" not in bench and "read_judgements" in bench
    assert callable(llmbar.load_llmbar_judge) and callable(llmbar.judge_view)


def test_llmbar_converter_bad_gold_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path / "data")
    data = json.loads((folder / "dataset.json").read_text())
    data[1]["label"] = 3
    (folder / "dataset.json").write_text(json.dumps(data))
    assert llmbar.main(["--data-root", str(tmp_path / "data"), "--subsets", "Tiny", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "dataset.json" in err and "label" in err and "record 1" in err


@pytest.mark.parametrize("damage, field", [
    (lambda rows: "[{\"results\": ", None),  # malformed JSON
    (lambda rows: json.dumps(rows[:2]), None),  # a record short
    (lambda rows: json.dumps([rows[0], {**rows[1], "results": []}, rows[2]]), "results"),
    (lambda rows: json.dumps([rows[0], rows[1], {**rows[2], "results": [{"swap = True": "2"}]}]),
     "results.swap = True"),
])
def test_llmbar_converter_damaged_verdicts_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      damage, field) -> None:
    folder = _folder(tmp_path / "data")
    path = folder / "evaluators" / "GPT-4" / "Rating" / "result.json"
    path.write_text(damage(json.loads(path.read_text())))
    assert llmbar.main(["--data-root", str(tmp_path / "data"), "--subsets", "Tiny", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "Rating/result.json" in err and len(err.splitlines()) == 1
    if field:
        assert field in err


@pytest.mark.slow
def test_llmbar_converter_on_the_released_verdicts(tmp_path: Path, shared_data_root: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "tools" / "llmbar_judgements.py"),
                           "--data-root", str(shared_data_root / "llmbar"), "--out", str(out), "--limit", "5"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pooled = read_judgements(out / "pooled.jsonl")
    assert pooled.n == 15 and set(pooled.judge_names) == {"GPT-4", "ChatGPT", "LLaMA2", "PaLM2", "Falcon"}
    assert pooled.judge("GPT-4").present.all()
    gold = json.loads((shared_data_root / "llmbar" / "Natural" / "dataset.json").read_text())[:5]
    assert read_judgements(out / "Natural.jsonl").label.tolist() == [g["label"] - 1.0 for g in gold]


def test_llm_rubric_rows_one_per_dialogue_with_rater_labels(tmp_path: Path) -> None:
    pred = {"probs": np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.0, 0.0, 0.5, 0.5]]),
            "scale": [1.0, 2.0, 3.0, 4.0], "y": np.array([4.0, np.nan, 2.0]),
            "text": ["d1", "d2", "d3"], "rater": ["7", "7", "22"], "best": {}}
    path = tmp_path / "j.jsonl"
    from rubric_induce.data.judgements import write_judgements
    write_judgements(path, llm_rubric.rows_from(pred, "test"))
    jd = read_judgements(path)
    assert jd.scale == (1.0, 2.0, 3.0, 4.0) and jd.ids == ["d1", "d2", "d3"] and jd.groups == jd.ids
    assert jd.rater_labels == [(4.0,), (), (2.0,)]
    assert np.isnan(jd.label[1]) and jd.label[[0, 2]].tolist() == [4.0, 2.0]  # a not-applicable rating: unlabelled
    assert jd.judge("llm-rubric").probs[2].tolist() == [0.0, 0.0, 0.5, 0.5]


@pytest.mark.slow
def test_llm_rubric_converter_end_to_end(tmp_path: Path, shared_data_root: Path) -> None:
    # shared_data_root: the converter reads the shared data where every test finds it (missing: skip, or fail in CI)
    out = tmp_path / "lr.jsonl"
    assert llm_rubric.main(["--out", str(out), "--trials", "0", "--seeds", "1"]) == 0
    jd = read_judgements(out)
    assert jd.n == 223 and jd.labelled.sum() >= 200 and jd.scale == (1.0, 2.0, 3.0, 4.0)
    assert np.allclose(jd.judge("llm-rubric").probs.sum(axis=1), 1.0)
    assert "0 optuna trials" in jd.extra[0]["network"]


@pytest.mark.parametrize("tool", ["llmbar_judgements", "llm_rubric_judgements"])
def test_tools_run_from_the_repo_root_without_pythonpath(tool: str) -> None:
    proc = subprocess.run([sys.executable, f"experiments/tools/{tool}.py", "--help"], capture_output=True, text=True,
                          cwd=ROOT, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and "--out" in proc.stdout, proc.stderr
