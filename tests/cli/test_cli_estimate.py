"""``rubric-induce estimate``: rows from a judgements file, exit 2 naming file, line and field."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.cli import EXIT_INPUT, cli

# importing ppi-python takes about 3 s (numba, statsmodels): slow tier, imported only when a test runs
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _ppi_py():
    pytest.importorskip("ppi_py")


def _file(tmp_path, n=120, labelled=40):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        label = int(rng.random() < 0.6)
        p = float(np.clip(0.3 + 0.5 * label + rng.normal(0, 0.1), 0.01, 0.99))
        row = {"id": f"t{i}", "system": "A" if i % 2 else "B", "judges": {"j": {"probs": [1 - p, p]}}}
        if i < labelled:
            row["label"] = label
        rows.append(json.dumps(row))
    path = tmp_path / "judged.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_prints_rows_and_writes_json(tmp_path):
    path = _file(tmp_path)
    out = tmp_path / "est.json"
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(path), "--judge", "j", "--by", "system",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "all texts" in res.output and "system = A" in res.output and "no guarantee" in res.output
    data = json.loads(out.read_text())
    assert [r["what"] for r in data["rows"]] == ["all texts", "system = A", "system = B", "system = B minus A"]
    first = data["rows"][0]
    assert first["n_labelled"] == 40 and first["n_unlabelled"] == 80
    assert first["ppi"]["low"] <= first["ppi"]["estimate"] <= first["ppi"]["high"]
    assert first["naive"]["guarantee"] is False


@pytest.mark.parametrize("change,phrase", [
    (lambda rows: rows[:1] + ['{"id": "x", "label": 1, "judges": {"j": {"probs": [0.5]}}}'], "line 2"),
    (lambda rows: [r.replace('"label": 1', '"label": 7') for r in rows], "label"),
    (lambda rows: [json.dumps({k: v for k, v in json.loads(r).items() if k != "label"}) for r in rows], "at least 2 labelled"),
])
def test_bad_files_exit_2(tmp_path, change, phrase):
    path = _file(tmp_path)
    rows = path.read_text().splitlines()
    path.write_text("\n".join(change(rows)) + "\n")
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(path), "--judge", "j"])
    assert res.exit_code == EXIT_INPUT, res.output
    assert res.output.startswith("error: ") and phrase in res.output and str(path) in res.output


def test_unknown_judge_and_by_field_exit_2(tmp_path):
    path = _file(tmp_path)
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(path), "--judge", "nobody"])
    assert res.exit_code == EXIT_INPUT and "no judge 'nobody'" in res.output
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(path), "--judge", "j", "--by", "model"])
    assert res.exit_code == EXIT_INPUT and "'model'" in res.output
