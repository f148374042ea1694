"""Bad input to `rubric-induce compare` (issue 33, "Done when": bad pair input is covered by the reliability
suite): a pair with the same text on both sides, a label that names neither side, a missing side, and a
damaged Bradley-Terry head are each exit 2 with one `error:` line naming the file, the line (or record)
and the field, before any LLM call (no call cache is opened). A hypothesis pass damages every key of
the head file and finds no traceback."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_runner import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HEAD = "calibration/bradley_terry.json"
_N = int(os.environ.get("RUBRIC_INDUCE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize=_N <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])



def clean_error(rc: int, out: str, *phrases: str) -> None:
    assert rc == 2, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for phrase in phrases:
        assert phrase in out, f"{phrase!r} not in {out!r}"


def _rows(n: int = 6) -> list[dict]:
    return [{"input": f"Say {i}.", "output_1": f"{i}", "output_2": f"not {i}", "label": 1 + i % 2} for i in range(n)]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def run(pairwise_artifact, tmp_path) -> Path:
    """A private copy of the pairwise artifact, without a call cache (so none opened shows no LLM call)."""
    folder = tmp_path / "run"
    shutil.copytree(pairwise_artifact, folder, ignore=shutil.ignore_patterns("llm_calls.sqlite*"))
    return folder


def _no_call(run: Path) -> None:
    assert not (run / "llm_calls.sqlite").exists()


@pytest.mark.parametrize("kind, field", [("same", "output_2"), ("label", "label"), ("missing", "output_2"),
                                         ("empty", "output_1"), ("not_text", "input")])
def test_a_bad_pair_exits_2_naming_file_line_field(run, tmp_path, kind, field):
    rows = _rows()
    bad = rows[3]
    if kind == "same":
        bad["output_2"] = bad["output_1"]
    elif kind == "label":
        bad["label"] = "C"
    elif kind == "missing":
        del bad["output_2"]
    elif kind == "empty":
        bad["output_1"] = "   "
    else:
        bad["input"] = ["not", "text"]
    pairs = _jsonl(tmp_path / "pairs.jsonl", rows)
    clean_error(*invoke("compare", run, "--pairs", pairs), str(pairs), "line 4", f"field '{field}'")
    _no_call(run)


def test_chosen_equal_to_rejected_names_the_line(run, tmp_path):
    rows = [{"prompt": f"Say {i}.", "chosen": f"{i}", "rejected": f"not {i}"} for i in range(4)]
    rows[2]["rejected"] = rows[2]["chosen"]
    pairs = _jsonl(tmp_path / "prefs.jsonl", rows)
    clean_error(*invoke("compare", run, "--pairs", pairs), str(pairs), "line 3", "field 'rejected'", "same text")
    _no_call(run)


def test_a_bad_record_of_a_json_array_names_the_record(run, tmp_path):
    rows = _rows()
    rows[2]["label"] = 7
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps(rows), encoding="utf-8")
    clean_error(*invoke("compare", run, "--pairs", pairs), str(pairs), "record 2", "field 'label'")
    _no_call(run)


def test_a_bad_csv_row_names_the_line(run, tmp_path):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("input,output_1,output_2,label\nSay 1.,1,not 1,1\nSay 2.,2,2,2\n", encoding="utf-8")
    clean_error(*invoke("compare", run, "--pairs", pairs), str(pairs), "line 3", "field 'output_2'")


def test_an_empty_pair_file(run, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("", encoding="utf-8")
    clean_error(*invoke("compare", run, "--pairs", pairs), str(pairs), "no pairs")


@pytest.mark.parametrize("edit, field, phrase", [
    (lambda d: "{not json", None, "line 1"),
    (lambda d: {**d, "kind": "logistic"}, "kind", "not a saved Bradley-Terry head"),
    (lambda d: [d], "kind", "not a saved Bradley-Terry head"),
    (lambda d: {**d, "coef": [1.0, "x", 2.0]}, "params", "malformed"),
    (lambda d: {**d, "coef": [1.0, float("nan"), 2.0]}, "coef", "finite"),
    (lambda d: {**d, "coef": [[1.0, 2.0, 3.0]]}, "coef", "finite numbers"),
    (lambda d: {**d, "coef": [1.0, 2.0]}, "n_features_in", "weighs 2 features"),
    (lambda d: {k: v for k, v in d.items() if k != "params"}, "params", "malformed"),
    (lambda d: {**d, "params": {"l3": 1}}, "params", "malformed"),
    (lambda d: {**d, "judge_coef": [[1.0]], "judges": ["x"]}, "params", "malformed"),
    (lambda d: {**d, "log_nu": "big"}, "params", "malformed"),
    (lambda d: {**d, "intercept": 1e309}, "coef", "finite"),
])
def test_a_damaged_head_names_the_file_and_field(run, tmp_path, edit, field, phrase):
    path = run / HEAD
    doc = edit(json.loads(path.read_text(encoding="utf-8")))
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    pairs = _jsonl(tmp_path / "pairs.jsonl", _rows())
    clean_error(*invoke("compare", run, "--pairs", pairs), str(path), phrase,
                *([f"field '{field}'"] if field else []))
    _no_call(run)


@pytest.mark.parametrize("value, phrase", [("../../head.json", "outside the folder"), ("/etc/passwd", "absolute path"),
                                           ("calibration/missing.json", "missing.json"), (5, "Bradley-Terry head file")])
def test_the_artifact_names_a_head_it_cannot_use(run, tmp_path, value, phrase):
    doc = json.loads((run / "artifact.json").read_text(encoding="utf-8"))
    doc["pairwise_head"] = value
    (run / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    pairs = _jsonl(tmp_path / "pairs.jsonl", _rows())
    rc, out = invoke("compare", run, "--pairs", pairs)
    clean_error(rc, out, phrase)
    assert "pairwise_head" in out or "missing.json" in out
    _no_call(run)


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                    st.text(max_size=8), st.lists(st.floats(allow_nan=True), max_size=4),
                    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@pytest.mark.slow  # about 4 s for 60 examples on 2 cores
@FUZZ
@given(key=st.sampled_from(["kind", "version", "params", "n_features_in", "coef", "intercept", "log_nu", "judges",
                            "judge_coef"]), value=_VALUES, drop=st.booleans())
def test_fuzzed_head_is_a_clean_result_or_one_error(run, tmp_path, key, value, drop):
    path = run / HEAD
    doc = json.loads(path.read_text(encoding="utf-8"))
    original = path.read_text(encoding="utf-8")
    try:
        if drop:
            doc.pop(key, None)
        else:
            doc[key] = value
        path.write_text(json.dumps(doc), encoding="utf-8")
        pairs = _jsonl(tmp_path / "pairs.jsonl", _rows(2))
        rc, out = invoke("compare", run, "--pairs", pairs, "--out", tmp_path / "out.jsonl")
        assert rc in (0, 2), out
        if rc == 2:
            clean_error(rc, out, str(path))
        else:  # a change the head does not read (version, or a judge list with no offsets), or a harmless one
            rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
            assert all(0.0 <= r["p_a"] <= 1.0 for r in rows)
    finally:
        path.write_text(original, encoding="utf-8")
