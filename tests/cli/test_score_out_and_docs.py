"""Issue 31, item 11: what ``score --out`` writes, generation's progress, and the docs that a new
user read (top_logprobs on a llama.cpp server, the bundled GGUF's path, dotted JSON paths)."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import rubric_induce
from rubric_induce.cli import cli
from rubric_induce.generation.registry import GenerateContext

ROOT = Path(rubric_induce.__file__).resolve().parents[1]
BACKENDS_GUIDE = (ROOT / "docs" / "guides" / "backends.md").read_text(encoding="utf-8")
DATA_GUIDE = (ROOT / "docs" / "guides" / "data.md").read_text(encoding="utf-8")
RES = ROOT / "rubric_induce" / "resources"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _artifact(tmp_path: Path) -> Path:
    """A scorer folder of two demo rubrics (no calibration) that the fake backend probes."""
    from rubric_induce.scoring.artifact import write_artifact

    folder = tmp_path / "run"
    folder.mkdir()
    rubrics = json.loads((RES / "demo_uss_rubrics.json").read_text(encoding="utf-8"))["rubrics"][:2]
    (folder / "selected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rubrics), encoding="utf-8")
    write_artifact(folder, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only"}, fields=["text"], backend="fake",
                   calibration=None, question=None)
    return folder


def _texts(tmp_path: Path) -> Path:
    path = tmp_path / "new.jsonl"
    path.write_text("".join(json.dumps({"id": f"n{i}", "text": f"USER: book a table for {i}\nSYSTEM: done"}) + "\n"
                            for i in range(3)), encoding="utf-8")
    return path


def _score(*args) -> str:
    res = CliRunner().invoke(cli, ["score", *map(str, args)])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("name, delimiter", [("scores.csv", ","), ("scores.TSV", "\t")])
def test_score_out_csv_writes_a_table_not_jsonl(tmp_path, name, delimiter):
    folder, texts, out = _artifact(tmp_path), _texts(tmp_path), tmp_path / name
    _score(folder, "--input", texts, "--out", out, "--cache", tmp_path / "c.sqlite")
    text = out.read_text(encoding="utf-8")
    assert not text.lstrip().startswith("{")
    rows = list(csv.DictReader(text.splitlines(), delimiter=delimiter))
    assert [r["id"] for r in rows] == ["n0", "n1", "n2"]
    assert {"netsat", "label", "distributions", "drivers"} <= set(rows[0])
    assert float(rows[0]["netsat"]) == pytest.approx(float(rows[0]["netsat"]))
    dists = json.loads(rows[0]["distributions"])  # nested values as JSON text
    assert len(dists) == 2 and all(len(p) == 5 for p in dists.values())


def test_score_out_json_is_an_array_and_jsonl_stays_jsonl(tmp_path):
    folder, texts = _artifact(tmp_path), _texts(tmp_path)
    _score(folder, "--input", texts, "--out", tmp_path / "s.json", "--cache", tmp_path / "c.sqlite")
    _score(folder, "--input", texts, "--out", tmp_path / "s.jsonl", "--cache", tmp_path / "c.sqlite")
    array = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text(encoding="utf-8").splitlines()]
    assert array == lines and len(lines) == 3


def test_score_help_names_the_out_formats():
    res = CliRunner().invoke(cli, ["score", "--help"])
    assert ".csv" in res.output and ".tsv" in res.output


# --------------------------------------------------------------------------------------------
# generation progress
# --------------------------------------------------------------------------------------------
def test_generation_without_bars_prints_calls_done_of_planned_and_elapsed(monkeypatch, capsys):
    from rubric_induce.backends.fake import FakeBackend
    from rubric_induce.core import progress
    from rubric_induce.data import Example
    from rubric_induce.generation.api import GenerateParams, generate

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)  # a line per step instead of one per 30 s
    examples = [Example.create({"text": f"USER: hi {i}\nSYSTEM: hello {i}"}, {"sat": i % 2}, id=f"e{i}")
                for i in range(6)]
    params = GenerateParams(method="rubicon", options={"top_k": 2, "batch_size": 3, "use_ds": False})
    generate(examples, FakeBackend(), params, context=GenerateContext(label="sat", progress=False))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("generate (rubicon): ")]
    assert lines, err
    planned = 6 + 4 + 1  # one per example, then at most 6 * 2 / 3 summarizing batches (+1 for rounding)
    assert re.fullmatch(rf"generate \(rubicon\): 1 of about {planned} calls, \d+s elapsed", lines[0])
    assert re.fullmatch(r"generate \(rubicon\): \d+ calls in \d+s", lines[-1])


def test_no_progress_line_before_the_interval(capsys):
    from rubric_induce.core.progress import heartbeat, progress_bar

    with heartbeat("generate", 10):
        bar = progress_bar(10, desc="x", enabled=False)
        for _ in range(10):
            bar.update()
    assert capsys.readouterr().err == ""  # a fast loop says nothing (30 s between lines)


# --------------------------------------------------------------------------------------------
# docs
# --------------------------------------------------------------------------------------------
def test_help_and_docs_agree_on_top_logprobs_for_a_llama_cpp_server():
    res = CliRunner().invoke(cli, ["probe", "--help"])
    helptext = " ".join(res.output.split())
    assert "a llama.cpp server takes 1000" in helptext
    for text in (README, BACKENDS_GUIDE):
        mentions = re.findall(r"top_logprobs[^\n]*", text)
        # the old claim: a server "takes 100" / "top_logprobs = 100" (a percentage is no claim)
        assert not [m for m in mentions if re.search(r"(?:accept\w*|take\w*|=|logprobs`?)\s+100\b(?!\s*%)", m)], mentions
    assert "a llama.cpp server accepted 1000" in BACKENDS_GUIDE and "top_logprobs = 1000" in BACKENDS_GUIDE


def test_served_model_guide_gives_a_command_that_prints_the_bundled_gguf(embedded_model_path):
    command = re.search(r'(python -c "from rubric_induce\.backends\.local import default_model_path; '
                        r'print\(default_model_path\(\)\)")', BACKENDS_GUIDE)
    assert command, "docs/guides/backends.md lost the command that prints the bundled GGUF's path"
    code = re.search(r'-c "(.*)"', command.group(1)).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT)}).stdout.strip()
    assert out.endswith(".gguf") and Path(out).is_file() and Path(out) == Path(embedded_model_path)


def test_data_guide_documents_dotted_paths_and_its_example_loads(tmp_path):
    from rubric_induce.data.mapping import InputMapping

    part = DATA_GUIDE.split("## Nested JSON: dotted paths")[1].split("\n## ")[0]
    row = json.loads(re.search(r"```json\n(.*?)\n```", part, re.DOTALL).group(1))
    toml = re.search(r"```toml\n(.*?)\n```", part, re.DOTALL).group(1)
    import tomllib

    mapping = InputMapping.from_mapping(tomllib.loads(toml)["data"]["mapping"])
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (ex,) = mapping.load(data, binary_label=None)
    assert ex.id == "a1" and ex.group == "t1"
    assert ex.fields == {"message": "How do I reset it?", "reply": "Click Forgot password."}
    assert ex.labels == {"helpful": 1.0}
