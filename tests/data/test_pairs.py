"""Pair data: the three layouts as they ship, the pair mapping, and bad input naming file/line/field."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.data.pairs import Pair, PairMapping, read_pairs, split_shared_prefix

LLMBAR = Path(__file__).resolve().parents[2] / ".." / ".." / "shared" / "data" / "llmbar"
LLMBAR = LLMBAR if LLMBAR.is_dir() else Path("/work/shared/data/llmbar")


def _json(path: Path, rows: list) -> Path:
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_llmbar_layout_label_1_2(tmp_path):
    rows = [{"input": "Say hi", "output_1": "hi", "output_2": "bye", "label": 1},
            {"input": "Say bye", "output_1": "hi", "output_2": "bye", "label": 2}]
    pairs = read_pairs(_json(tmp_path / "d.json", rows), subset="S")
    assert [p.preferred for p in pairs] == ["A", "B"]
    assert pairs[0].prompt == "Say hi" and pairs[0].response_a == "hi" and pairs[0].response_b == "bye"
    assert pairs[0].subset == "S" and pairs[0].swapped is None
    assert [p.target for p in pairs] == [1, -1]


def test_ab_mapping_names_columns_and_judges_csv(tmp_path):
    path = tmp_path / "d.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["q", "left", "right", "win", "j1", "grp"])
        w.writerow(["Q1", "x", "y", "left", "right", "g"])
        w.writerow(["Q2", "x", "z", "same", "", "g"])
    mapping = PairMapping(prompt="q", a="left", b="right", label="win", subset="grp",
                          label_values={"left": "A", "right": "B", "same": "tie"}, judges={"j1": "j1"})
    pairs = read_pairs(path, mapping)
    assert [p.preferred for p in pairs] == ["A", "tie"]
    assert pairs[0].judges == {"j1": "B"} and pairs[1].judges == {}
    assert pairs[0].subset == "g"


def test_chosen_rejected_shuffled_with_recorded_seed(tmp_path):
    rows = [{"prompt": f"p{i}", "chosen": f"good {i}", "rejected": f"bad {i}"} for i in range(200)]
    path = _jsonl(tmp_path / "d.jsonl", rows)
    pairs = read_pairs(path)
    n_b = sum(p.preferred == "B" for p in pairs)
    assert 60 < n_b < 140, "position must not be the label"
    for p in pairs:
        chosen = p.response_b if p.swapped else p.response_a
        assert chosen.startswith("good") and p.preferred == ("B" if p.swapped else "A")
    # same seed, reversed file order: every pair lands the same way; another seed moves some
    again = {p.id: p.swapped for p in read_pairs(_jsonl(tmp_path / "r.jsonl", rows[::-1]))}
    assert again == {p.id: p.swapped for p in pairs}
    other = {p.id: p.swapped for p in read_pairs(path, PairMapping(seed=7))}
    assert other != again


def test_ultrafeedback_message_lists(tmp_path):
    msgs = lambda reply: [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": reply}]  # noqa: E731
    rows = [{"prompt": "Q?", "chosen": msgs("good"), "rejected": msgs("bad")}]
    (p,) = read_pairs(_jsonl(tmp_path / "d.jsonl", rows))
    assert {p.response_a, p.response_b} == {"Assistant: good", "Assistant: bad"}
    assert p.prompt == "Q?"


def test_hh_shared_prefix_split(tmp_path):
    base = "\n\nHuman: How do I bake bread?\n\nAssistant: Use flour.\n\nHuman: And then?\n\nAssistant:"
    rows = [{"chosen": base + " Knead and bake.", "rejected": base + " Kneel and pray."}]
    (p,) = read_pairs(_jsonl(tmp_path / "hh.jsonl", rows))
    assert p.prompt == base.strip()
    assert {p.response_a, p.response_b} == {"Knead and bake.", "Kneel and pray."}
    chosen = p.response_b if p.swapped else p.response_a
    assert chosen == "Knead and bake."


def test_split_shared_prefix_messages():
    a = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "A"}]
    b = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "B"}]
    assert split_shared_prefix(a, b) is not None
    assert split_shared_prefix("Human: x", "Human: y") is None


@pytest.mark.parametrize("row, field, words", [
    ({"input": "q", "output_1": "same", "output_2": "same ", "label": 1}, "output_2", "same text"),
    ({"input": "q", "output_1": "a", "output_2": "b", "label": 3}, "label", "neither side"),
    ({"input": "q", "output_1": "a", "label": 1}, "output_2", "missing"),
    ({"input": "q", "output_1": "a", "output_2": 5, "label": 1}, "output_2", "expected text"),
    ({"input": "q", "output_1": "a", "output_2": "b", "label": True}, "label", "expected a label"),
    ({"input": "q", "output_1": "a", "output_2": "b"}, "label", "missing"),
    ({"input": "", "output_1": "a", "output_2": "b", "label": 1}, "input", "empty"),
])
def test_bad_ab_rows_name_file_record_field(tmp_path, row, field, words):
    good = {"input": "q0", "output_1": "a", "output_2": "b", "label": 1}
    path = _json(tmp_path / "bad.json", [good, row])
    with pytest.raises(DataError) as exc:
        read_pairs(path)
    assert exc.value.field == field and exc.value.path == str(path)
    assert "record 1" in str(exc.value) and words in str(exc.value)


def test_bad_jsonl_line_numbers(tmp_path):
    rows = [{"prompt": "p", "chosen": "x", "rejected": "y"}, {"prompt": "p2", "chosen": "x", "rejected": "x"}]
    with pytest.raises(DataError) as exc:
        read_pairs(_jsonl(tmp_path / "bad.jsonl", rows))
    assert exc.value.line == 2 and exc.value.field == "rejected"


def test_hh_without_shared_prefix(tmp_path):
    rows = [{"chosen": "Human: a\n\nAssistant: b", "rejected": "totally different"}]
    with pytest.raises(DataError) as exc:
        read_pairs(_jsonl(tmp_path / "hh.jsonl", rows))
    assert exc.value.line == 1 and "shared" in str(exc.value)


def test_bad_mapping_and_missing_file(tmp_path):
    with pytest.raises(DataError) as exc:
        PairMapping(label_values={"x": "C"})
    assert exc.value.field == "data.mapping.label_values.x"
    with pytest.raises(DataError):
        read_pairs(tmp_path / "nope.json")
    with pytest.raises(DataError):
        read_pairs(_json(tmp_path / "empty.json", []))


def test_pair_roundtrip():
    p = Pair("1", "q", "a", "b", "tie", {"j": "A"}, "s", False)
    assert Pair.from_dict(p.to_dict()) == p
    with pytest.raises(DataError):
        Pair("1", "q", "a", "b", "C")


@pytest.mark.parametrize("subset, n", [("Natural", 100), ("GPTInst", 92), ("GPTOut", 47)])
def test_llmbar_as_shipped(subset, n):
    path = LLMBAR / subset / "dataset.json"
    if not path.exists():
        pytest.skip("shared LLMBar data not present")
    pairs = read_pairs(path, subset=subset)
    assert len(pairs) == n and len({p.id for p in pairs}) == n
    raw = json.loads(path.read_text())
    assert [p.preferred for p in pairs] == ["A" if r["label"] == 1 else "B" for r in raw]


def test_a_misspelt_dotted_column_suggests_the_full_path(tmp_path):
    """Issue 40, defect 8: a dotted column that is not in the row names the closest full dotted path."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"turn": {"prompt": "Say hi", "a": "hi", "b": "no"}, "label": 1}) + "\n",
                    encoding="utf-8")
    with pytest.raises(DataError, match=r"did you mean 'turn\.prompt'\?") as err:
        read_pairs(path, {"prompt": "turn.promt", "a": "turn.a", "b": "turn.b", "label": "label"})
    assert err.value.line == 1 and err.value.field == "turn.promt"
