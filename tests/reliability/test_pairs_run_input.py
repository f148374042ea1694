"""Bad pair input through `rubric-induce run --check` and `run` (issue 33): exit 2 with one line that
names the file, the line (JSONL) or record (JSON) and the field, before any LLM call."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import rubric_induce
from rubric_induce.cli import cli

RESOURCE = Path(rubric_induce.__file__).resolve().parent / "resources" / "llmbar_pairwise.toml"


def _rows(n: int = 8) -> list[dict]:
    return [{"input": f"Say {i}.", "output_1": f"{i}", "output_2": f"not {i}", "label": 1 + i % 2} for i in range(n)]


def _config(tmp_path: Path, data: Path, extra: str = "") -> Path:
    text = RESOURCE.read_text(encoding="utf-8").replace('spec = "local"', 'spec = "fake"')
    text = re.sub(r'^examples = .*$', f'examples = "{data.as_posix()}"', text, flags=re.M)
    text = re.sub(r'^out = .*$', f'out = "{(tmp_path / "run").as_posix()}"', text, flags=re.M)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(text + extra, encoding="utf-8")
    return cfg


def _jsonl(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _bad(kind: str) -> list[dict]:
    rows = _rows()
    if kind == "same":
        rows[4]["output_2"] = rows[4]["output_1"]
    elif kind == "label":
        rows[4]["label"] = 3
    elif kind == "missing":
        del rows[4]["output_2"]
    return rows


CASES = {"same": "output_", "label": "label", "missing": "output_2"}


@pytest.mark.parametrize("check", [True, False], ids=["check", "run"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_bad_pair_row_exits_2_naming_file_line_field(tmp_path, kind, check):
    data = _jsonl(tmp_path, _bad(kind))
    cfg = _config(tmp_path, data)
    res = CliRunner().invoke(cli, ["run", str(cfg), *(["--check"] if check else [])])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.strip().splitlines() if line.strip() and not line.startswith("[")]
    err = lines[-1]
    assert "Traceback" not in res.output
    assert str(data) in err and "line 5" in err and CASES[kind] in err, err
    assert not (tmp_path / "run" / "llm_calls.sqlite").exists()  # no LLM call was made (no cache opened)
    assert not (tmp_path / "run" / "pool.jsonl").exists()


def test_bad_record_of_a_json_array_names_the_record(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(_bad("label")), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(_config(tmp_path, path)), "--check"])
    assert res.exit_code == 2
    assert str(path) in res.output and "label" in res.output and "4" in res.output


def test_repeated_pair_id_exits_2(tmp_path):
    rows = _rows()
    for i, r in enumerate(rows):
        r["id"] = f"p{i}"
    rows[5]["id"] = "p1"
    res = CliRunner().invoke(cli, ["run", str(_config(tmp_path, _jsonl(tmp_path, rows))), "--check"])
    assert res.exit_code == 2
    assert "line 6" in res.output and "field 'id'" in res.output and "'p1'" in res.output


def test_a_training_split_without_preferences_exits_2(tmp_path):
    rows = _rows(4)
    for r in rows:
        r["label"] = "tie"
    res = CliRunner().invoke(cli, ["run", str(_config(tmp_path, _jsonl(tmp_path, rows))), "--check"])
    assert res.exit_code == 2 and "run.test_size" in res.output, res.output


def test_good_pairs_pass_the_check(tmp_path):
    res = CliRunner().invoke(cli, ["run", str(_config(tmp_path, _jsonl(tmp_path, _rows()))), "--check"])
    assert res.exit_code == 0, res.output
