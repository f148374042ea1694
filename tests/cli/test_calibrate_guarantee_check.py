"""`calibrate-guarantee --judgements` saves and prints the half-split check with each guarantee (issue
42, "honest statements": how often a guarantee is issued and how often an issued one holds, on the
user's own texts): halves by group, `--check-draws` sets S (0 skips it), and a damaged check in a saved
file is exit 2 naming the field when the file is used."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from rubric_induce.cli import cli


def _invoke(*args) -> tuple[int, str]:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.output


def _write(path: Path, n: int = 120, seed: int = 0) -> Path:
    """Preference pairs in groups of three (one prompt, three pairs), judged by `big` (answer +
    confidence, right more often the surer it is)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        y = int(rng.random() < 0.5)
        conf = float(rng.uniform(0.5, 1.0))
        answer = y if rng.random() < 0.55 + 0.45 * conf else 1 - y
        rows.append({"id": f"t{i}", "label": y, "group": f"prompt-{i // 3}",
                     "judges": {"big": {"answer": answer, "confidence": round(conf, 4)}}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_check_is_printed_and_saved_with_each_guarantee(tmp_path):
    path = _write(tmp_path / "judged.jsonl")
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--target", "0.75",
                        "--check-draws", "50", "--out", tmp_path / "g.json")
    assert code == 0, out
    assert "half-split check, 50 refits on 60 of the 120 texts" in out
    check = json.loads((tmp_path / "g.json").read_text())["guarantees"][0]["resample"]
    assert check["draws"] == 50 and check["n"] == 120 and check["groups"] == 40 and check["half"] == 60
    assert 0.0 <= check["issued_share"] <= 1.0 and check["n_issued"] == round(check["issued_share"] * 50)
    # the same seed gives the same check; --check-draws 0 skips it
    code, _ = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--target", "0.75",
                      "--check-draws", "50", "--out", tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text())["guarantees"][0]["resample"] == check
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--target", "0.75",
                        "--check-draws", "0", "--out", tmp_path / "none.json")
    assert code == 0 and "half-split" not in out
    assert json.loads((tmp_path / "none.json").read_text())["guarantees"][0]["resample"] is None
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--check-draws", "-1")
    assert code == 2 and "check-draws" in out


def test_a_damaged_check_in_a_saved_file_is_exit_2_naming_the_field(tmp_path):
    path = _write(tmp_path / "judged.jsonl")
    code, out = _invoke("calibrate-guarantee", "--judgements", path, "--stages", "big", "--target", "0.75",
                        "--check-draws", "20", "--out", tmp_path / "g.json")
    assert code == 0, out
    doc = json.loads((tmp_path / "g.json").read_text())
    doc["guarantees"][0]["resample"]["conditional_violation"] = -0.5
    (tmp_path / "g.json").write_text(json.dumps(doc))
    code, out = _invoke("score", "--judgements", path, "--guarantee-file", tmp_path / "g.json")
    assert code == 2, out
    assert "resample.conditional_violation" in out and "Traceback" not in out
