"""Behaviour tests for the shared-dataset loaders, on the real data and on broken copies."""
from __future__ import annotations

import ast
import csv
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets import (
    DATASETS,
    LLM_RUBRIC_QUESTIONS,
    data_root,
    dataset_scales,
    load_dataset,
    load_fed,
    load_llm_rubric,
    load_qags,
    load_summeval,
    load_topical_chat,
    load_uss,
    parse_uss,
)
from rubric_induce.data.examples_io import check_labels


@pytest.fixture(scope="module")
def root(shared_data_root) -> Path:
    return shared_data_root


def _counts_by_group(examples):
    return Counter(ex.group for ex in examples)


# ---------------------------------------------------------------- data root


def test_data_root_explicit_missing_folder_is_an_error(tmp_path):
    with pytest.raises(DataError) as err:
        data_root(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(err.value)


def test_data_root_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIC_INDUCE_DATA", str(tmp_path))
    assert data_root() == tmp_path
    monkeypatch.setenv("RUBRIC_INDUCE_DATA", str(tmp_path / "missing"))
    with pytest.raises(DataError, match="RUBRIC_INDUCE_DATA"):
        data_root()


def test_loader_on_root_without_the_file_names_the_path(tmp_path):
    with pytest.raises(DataError) as err:
        load_summeval(tmp_path)
    assert err.value.path is not None and err.value.path.endswith("summeval_merged.jsonl")
    assert "file not found" in str(err.value)


def test_unknown_dataset_lists_known_names():
    with pytest.raises(DataError) as err:
        load_dataset("no-such-set")
    for name in ("summeval", "qags-xsum", "uss-ccpe", "fed-dialogue", "llm_rubric-real"):
        assert name in str(err.value)


def test_bad_option_values_are_refused(root):
    with pytest.raises(DataError, match="corpus"):
        load_uss(root, corpus="JDDC")
    with pytest.raises(DataError, match="subset"):
        load_qags(root, subset="gigaword")
    with pytest.raises(DataError, match="aspects"):
        load_summeval(root, aspects=("grammar",))


# ---------------------------------------------------------------- every dataset


@pytest.mark.slow
def test_every_registered_dataset_loads_fast_and_validates(root):
    start = time.perf_counter()
    sizes = {}
    for name in DATASETS:
        examples = load_dataset(name, root)
        sizes[name] = len(examples)
        ids = [ex.id for ex in examples]
        assert len(set(ids)) == len(ids), name
        assert all(ex.group for ex in examples), name
        assert all(ex.text.strip() for ex in examples), name
        scales = dataset_scales(name)
        for ex in examples:
            check_labels(ex.labels, scales)
    assert time.perf_counter() - start < 10
    assert sizes == {
        "summeval": 1600, "topical_chat": 360, "persona_chat": 300, "qags-cnndm": 235,
        "qags-xsum": 239, "llm_rubric-real": 223, "llm_rubric-synthetic": 250, "uss-sgd": 1000,
        "uss-mwoz": 1000, "uss-redial": 1000, "uss-ccpe": 500, "fed-turn": 375, "fed-dialogue": 125,
    }


# ---------------------------------------------------------------- SummEval


def test_summeval(root):
    examples = load_summeval(root)
    assert len(examples) == 1600
    groups = _counts_by_group(examples)
    assert len(groups) == 100 and set(groups.values()) == {16}
    raw = json.loads((root / "summeval" / "summeval_merged.jsonl").read_text().splitlines()[0])
    first = examples[0]
    assert first.id == f"{raw['doc_id']}/{raw['system_id']}"
    assert first.group == raw["doc_id"]
    assert first.fields["text"] == raw["summary"] and first.fields["source"] == raw["source"]
    assert first.labels == pytest.approx(raw["expert_avg"])
    with_raters = [ex for ex in examples if ex.judgments]
    assert len(with_raters) == 1200
    for ex in with_raters[:50]:
        assert [j.judge for j in ex.judgments] == ["expert1", "expert2", "expert3"]
        for aspect in ("coherence", "relevance"):
            mean = sum(j.labels[aspect] for j in ex.judgments) / 3
            assert mean == pytest.approx(ex.labels[aspect])
    assert {ex.meta["system_id"] for ex in examples if not ex.judgments} == {"M0", "M1", "M2", "M5"}


def test_summeval_options(root):
    examples = load_summeval(root, aspects=("fluency",), references=True, include_turkers=True)
    ex = next(e for e in examples if e.judgments)
    assert set(ex.labels) == {"fluency"}
    assert len(ex.judgments) == 8 and ex.judgments[-1].judge == "turker5"
    assert ex.fields["references"].count("\n\n") == 10


# ---------------------------------------------------------------- Topical-Chat / PersonaChat


def test_topical_chat_matches_unieval_means(root):
    examples = load_topical_chat(root)
    assert len(examples) == 360
    groups = _counts_by_group(examples)
    assert len(groups) == 60 and set(groups.values()) == {6}
    unieval = json.loads((root / "topical_chat_usr" / "unieval_topical_chat.json").read_text())
    names = {"understandability": "understandable", "naturalness": "natural",
             "coherence": "maintains_context", "engagingness": "engaging",
             "groundedness": "uses_knowledge", "overall": "overall"}
    for ex, row in zip(examples, unieval):
        assert ex.fields["text"] == row["system_output"].strip()
        for theirs, ours in names.items():
            assert ex.labels[ours] == pytest.approx(row["scores"][theirs], abs=1e-6)
    ex = examples[0]
    assert [j.judge for j in ex.judgments] == ["sm", "me", "er"]
    assert ex.judgments[2].labels["maintains_context"] == 1.0
    assert set(ex.fields) == {"context", "fact", "text"}


def test_persona_chat(root):
    examples = load_dataset("persona_chat", root)
    assert len(examples) == 300
    assert len(_counts_by_group(examples)) == 60
    raw = json.loads((root / "topical_chat_usr" / "usr_persona_chat.json").read_text())
    r = raw[3]["responses"][2]
    ex = next(e for e in examples if e.id == "persona_chat/3/2")
    assert ex.labels["overall"] == pytest.approx(sum(r["Overall"]) / 3)
    assert ex.meta["model"] == r["model"]


# ---------------------------------------------------------------- QAGS


@pytest.mark.parametrize("subset,n", [("cnndm", 235), ("xsum", 239)])
def test_qags_consistency_equals_unieval_aggregate(root, subset, n):
    examples = load_qags(root, subset=subset)
    assert len(examples) == n
    assert len(_counts_by_group(examples)) == n
    unieval = json.loads((root / "qags" / f"unieval_qags_{subset}.json").read_text())
    assert [ex.labels["consistency"] for ex in examples] == pytest.approx(
        [row["scores"]["consistency"] for row in unieval])
    if subset == "xsum":
        assert {ex.labels["consistency"] for ex in examples} == {0.0, 1.0}
    assert all(len(ex.judgments) >= 3 for ex in examples)


# ---------------------------------------------------------------- LLM-RUBRIC


def _tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_llm_rubric_real(root):
    data = load_llm_rubric(root, split="real")
    assert len(data.examples) == 223
    assert len(data.judges) == 13
    assert all(len(ex.judgments) == 1 for ex in data.examples)
    assert data.llm_probs.shape == (223, 9, 4) and data.llm_probs.dtype == np.float64
    assert not np.isnan(data.llm_probs).any() and data.has_llm_probs.all()
    assert (data.llm_probs[:, 8, 3] == 0).all()  # Q8 has 3 answers
    assert list(data.questions) == list(LLM_RUBRIC_QUESTIONS)
    ex = data.examples[0]
    assert ex.fields["text"].startswith("ASSISTANT: ") and "\nUSER: " in ex.fields["text"]
    # raw LLM values are kept exactly (no renormalisation)
    llm = _tsv(root / "llm_rubric/data/real_data/gpt-3.5-turbo-16k_real_evaluations_FIXED.tsv")
    row = next(r for r in llm if r["text_id"] == ex.id and r["criterion"] == "Q3")
    assert data.llm_probs[0, 3].tolist() == [float(row[f"answer{a}_prob"]) for a in range(1, 5)]


def test_llm_rubric_synthetic(root):
    data = load_llm_rubric(root, split="synthetic")
    assert len(data.examples) == 250
    assert len(data.judgments) == 743
    assert len(data.judges) == 24
    assert int(data.has_llm_probs.sum()) == 225
    assert np.isnan(data.llm_probs[~data.has_llm_probs]).all()
    assert data.with_llm_probs().llm_probs.shape == (225, 9, 4)
    assert not any(ex.meta["text_available"] for ex in data.examples)
    assert "not released" in data.examples[0].fields["text"]
    dropped = load_llm_rubric(root, split="synthetic", drop_unjudgeable=True)
    assert len(dropped.judgments) == 735 and len(dropped.meta["dropped_judgments"]) == 8


def test_llm_rubric_judges_shared_across_splits(root):
    real = load_llm_rubric(root, split="real")
    synth = load_llm_rubric(root, split="synthetic")
    assert set(real.judges) <= set(synth.judges)


def test_llm_rubric_q1_q2_swap_puts_not_applicable_zeros_in_q2_q5(root):
    """The no-reference system cannot be judged on the citation questions Q2-Q5 (answer 0).
    In the raw real file those zeros sit in columns Q1, Q3, Q4, Q5; after loading they must sit
    in Q2-Q5 in both splits, as in the synthetic file and the paper."""
    real = load_llm_rubric(root, split="real")
    synth = load_llm_rubric(root, split="synthetic")

    def zero_pattern(data, is_noref):
        pats = Counter()
        for ex in data.examples:
            if is_noref(ex):
                for j in ex.judgments:
                    pats[tuple(q for q in LLM_RUBRIC_QUESTIONS if j.labels[q] == 0)] += 1
        return pats

    expected = ("Q2", "Q3", "Q4", "Q5")
    real_pats = zero_pattern(real, lambda ex: ex.meta["dialogue_system"] == "0")
    synth_pats = zero_pattern(synth, lambda ex: ex.meta["dialogue_system"] == "V1")
    assert real_pats.most_common(1)[0] == (expected, 74)
    assert synth_pats.most_common(1)[0][0] == expected
    # and the raw file really has them in Q1: the loader swapped the column values
    raw = _tsv(root / "llm_rubric/data/real_data/human_judges_real_convs_FIXED_ANON.tsv")
    by_id = {ex.id: ex for ex in real.examples}
    for row in raw[:20]:
        labels = by_id[row["text_id"]].judgments[0].labels
        assert labels["Q1"] == float(row["Q2"]) and labels["Q2"] == float(row["Q1"])
        assert labels["Q0"] == float(row["Q0"]) and labels["Q3"] == float(row["Q3"])


# ---------------------------------------------------------------- USS


@pytest.mark.parametrize("corpus,n", [("SGD", 1000), ("MWOZ", 1000), ("ReDial", 1000), ("CCPE", 500)])
def test_uss_counts_and_both_classes(root, corpus, n):
    examples = load_uss(root, corpus=corpus)
    assert len(examples) == n
    classes = Counter(ex.labels["sat"] for ex in examples)
    assert set(classes) == {0.0, 1.0}
    for ex in examples:
        assert (ex.labels["satisfaction"] >= 3.0) == (ex.labels["sat"] == 1.0)
        assert 3 <= len(ex.judgments) <= 7


def test_uss_spot_check_first_sgd_dialogue(root):
    ex = load_dataset("uss-sgd", root)[0]
    assert ex.fields["text"].startswith("USER: What is the weather like on the March 4th?\n"
                                        "SYSTEM: In which city should I look?")
    assert ex.labels["satisfaction"] == pytest.approx((4 + 3 + 4) / 3)
    assert [j.labels["satisfaction"] for j in ex.judgments] == [4.0, 3.0, 4.0]
    assert ex.meta["line"] == 2


def test_uss_threshold_option(root):
    examples = load_uss(root, corpus="CCPE", binary_threshold=3.5)
    assert all((ex.labels["sat"] == 1.0) == (ex.labels["satisfaction"] >= 3.5) for ex in examples)


# ---------------------------------------------------------------- FED


def test_fed(root):
    turns = load_fed(root, level="turn")
    dialogues = load_fed(root, level="dialogue")
    assert len(turns) == 375 and len(dialogues) == 125
    raw = json.loads((root / "fed" / "fed_data.json").read_text())
    t0 = turns[0]
    assert t0.fields["text"] == raw[0]["response"]
    assert t0.labels["overall"] == pytest.approx(sum(raw[0]["annotations"]["Overall"]) / 5)
    assert t0.group == dialogues[0].group  # a turn is grouped with the dialogue it came from
    assert {ex.group for ex in turns} == {ex.group for ex in dialogues}
    d0 = dialogues[0]
    # "N/A (...)" answers are None in the judgment and left out of the mean
    er = [j.labels["error_recovery"] for j in d0.judgments]
    assert er.count(None) == 2
    assert d0.labels["error_recovery"] == pytest.approx(sum(v for v in er if v is not None) / 3)


# ---------------------------------------------------------------- broken copies


def _copy_root(tmp_path: Path, rel: str, text: str) -> Path:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _summeval_row(**over):
    row = {"doc_id": "d1", "system_id": "M0", "source": "An article.", "references": ["r"],
           "summary": "A summary.",
           "expert_avg": {"coherence": 3.0, "consistency": 4.0, "fluency": 5.0, "relevance": 2.0},
           "expert_annotations": None}
    row.update(over)
    return json.dumps(row)


def test_summeval_malformed_line_names_the_line(tmp_path):
    path = _copy_root(tmp_path, "summeval/summeval_merged.jsonl", _summeval_row() + "\n{oops\n")
    with pytest.raises(DataError) as err:
        load_summeval(tmp_path)
    assert err.value.path == str(path) and err.value.line == 2
    assert "line 2" in str(err.value) and "malformed JSON" in str(err.value)


def test_summeval_missing_field_and_out_of_scale_label(tmp_path):
    _copy_root(tmp_path, "summeval/summeval_merged.jsonl",
               _summeval_row() + "\n" + _summeval_row(system_id="M1", summary=None) + "\n")
    with pytest.raises(DataError) as err:
        load_summeval(tmp_path)
    assert (err.value.line, err.value.field) == (2, "summary")

    bad = {"coherence": 7.0, "consistency": 4.0, "fluency": 5.0, "relevance": 2.0}
    _copy_root(tmp_path, "summeval/summeval_merged.jsonl", _summeval_row(expert_avg=bad) + "\n")
    with pytest.raises(DataError) as err:
        load_summeval(tmp_path)
    assert (err.value.line, err.value.field) == (1, "expert_avg.coherence")
    assert "outside the declared scale" in str(err.value)

    _copy_root(tmp_path, "summeval/summeval_merged.jsonl", _summeval_row(summary="  ") + "\n")
    with pytest.raises(DataError, match="text is empty"):
        load_summeval(tmp_path)


def test_topical_chat_bad_rater_score_names_record_and_field(tmp_path):
    ctx = {"context": "hi", "fact": "f", "annotators": ["a", "b", "c"], "responses": [
        {"response": "hello", "model": "m", "Understandable": [1, 1, 1], "Natural": [3, 3, 3],
         "Maintains Context": [3, 3, 3], "Engaging": [3, 3, 3], "Uses Knowledge": [1, 1, 0],
         "Overall": [5, 9, 4]}]}
    path = _copy_root(tmp_path, "topical_chat_usr/usr_topical_chat.json", json.dumps([ctx]))
    with pytest.raises(DataError) as err:
        load_topical_chat(tmp_path)
    assert err.value.path == str(path)
    assert err.value.field == "responses[0].overall" and "record 0" in str(err.value)


def test_qags_bad_response(tmp_path):
    row = {"article": "A.", "summary_sentences": [
        {"sentence": "S.", "responses": [{"worker_id": 1, "response": "maybe"}]}]}
    _copy_root(tmp_path, "qags/mturk_xsum.jsonl", "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError) as err:
        load_qags(tmp_path, subset="xsum")
    assert err.value.line == 2
    assert err.value.field == "summary_sentences[0].responses[0].response"


def test_llm_rubric_out_of_scale_answer_names_line_and_column(tmp_path, root):
    src = root / "llm_rubric" / "data" / "real_data"
    dst = tmp_path / "llm_rubric" / "data" / "real_data"
    dst.mkdir(parents=True)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    human = dst / "human_judges_real_convs_FIXED_ANON.tsv"
    lines = human.read_text().splitlines()
    cells = lines[4].split("\t")
    cells[lines[0].split("\t").index("Q8")] = "4"  # Q8 is 1-3
    lines[4] = "\t".join(cells)
    human.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        load_llm_rubric(tmp_path, split="real")
    assert err.value.path == str(human) and err.value.line == 5 and err.value.field == "Q8"


USS_OK = "USER\thello\tINFORM\t3,3,3\nSYSTEM\thi there\tGREET\t\nUSER\tOVERALL\t\t2,3,2\n"


def test_uss_parse_small_file(tmp_path):
    path = _copy_root(tmp_path, "x.txt", USS_OK + "\n" + USS_OK.replace("2,3,2", "4,4,5"))
    examples = parse_uss(path)
    assert [ex.labels["sat"] for ex in examples] == [0.0, 1.0]
    assert examples[1].meta["line"] == 5


@pytest.mark.parametrize("text,line,field", [
    ("USER\thello\tINFORM\t3,3,3\nSYSTEM\thi\tGREET\t\n\nUSER\tOVERALL\t\t2,3,2\n", 2, "OVERALL"),
    ("USER\thello\tINFORM\t3,3,3\nSYSTEM\thi\n" "USER\tOVERALL\t\t2,3,2\n", 2, None),
    ("USER\thello\tINFORM\t3,x,3\nUSER\tOVERALL\t\t2,3,2\n", 1, "turn_satisfaction[1]"),
    ("USER\thello\tINFORM\t3\nUSER\tOVERALL\t\t2,9,2\n", 2, "OVERALL[1]"),
    ("BOT\thello\tINFORM\t3\nUSER\tOVERALL\t\t2,3,2\n", 1, "role"),
])
def test_uss_malformed_dialogue(tmp_path, text, line, field):
    _copy_root(tmp_path, "uss_user_satisfaction/SGD.txt", text)
    with pytest.raises(DataError) as err:
        load_uss(tmp_path, corpus="sgd")
    assert err.value.path.endswith("SGD.txt")
    assert err.value.line == line and err.value.field == field
    assert f"line {line}" in str(err.value)


def test_fed_bad_answer(tmp_path):
    rec = {"context": "User: hi", "response": "System: yo", "system": "Human",
           "annotations": {k: [1, 1] for k in ("Interesting", "Engaging", "Specific", "Relevant",
                                                "Correct", "Semantically appropriate",
                                                "Understandable", "Fluent", "Overall")}}
    rec["annotations"]["Fluent"] = [1, "great"]
    _copy_root(tmp_path, "fed/fed_data.json", json.dumps([rec]))
    with pytest.raises(DataError) as err:
        load_fed(tmp_path)
    assert err.value.field == "annotations.Fluent[1]" and "record 0" in str(err.value)


def test_unreadable_file(tmp_path):
    (tmp_path / "fed").mkdir()
    (tmp_path / "fed" / "fed_data.json").mkdir()  # a folder where the file should be
    with pytest.raises(DataError) as err:
        load_fed(tmp_path)
    assert err.value.path.endswith("fed_data.json")


# ---------------------------------------------------------------- tests use public API only


def test_data_tests_import_only_public_names():
    """The tests in tests/data reach the library only through public modules and names."""
    import importlib

    for test_file in sorted(Path(__file__).parent.glob("test_*.py")):
        tree = ast.parse(test_file.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rubric_induce"):
                assert not any(part.startswith("_") for part in node.module.split(".")), (test_file, node.module)
                public = getattr(importlib.import_module(node.module), "__all__", None)
                for alias in node.names:
                    assert not alias.name.startswith("_"), (test_file, alias.name)
                    if public is not None:
                        assert alias.name in public, (test_file, node.module, alias.name)
