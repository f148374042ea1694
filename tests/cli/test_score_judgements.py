"""`rubric-induce score --judgements FILE --guarantee-file G.json`: a guarantee fitted by
`calibrate-guarantee --judgements` answers or abstains a new, unlabelled judgements file (rows in
every `--out` format, the guarantee line); bad rows and options that belong to a run exit 2."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli


def _invoke(*args) -> tuple[int, str]:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.output


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pairs(n: int, seed: int, labelled: bool = True) -> list[dict]:
    """Preference pairs judged by `small` (probs, cost 1, right about 70 %) and `big` (answer +
    confidence, cost 20, right more often the surer it is)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        y = int(rng.random() < 0.5)
        conf = float(rng.uniform(0.5, 1.0))
        big = y if rng.random() < 0.6 + 0.4 * conf else 1 - y
        p = float(np.clip((0.75 if y else 0.25) + rng.normal(0, 0.2), 0.01, 0.99))
        row: dict = {"id": f"t{i}", "judges": {"small": {"probs": [round(1 - p, 4), round(p, 4)], "cost": 1},
                                               "big": {"answer": big, "confidence": round(conf, 4), "cost": 20}}}
        if labelled:
            row["label"] = y
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A cascade small -> big fitted at two targets, and a new unlabelled file of 40 texts (fitted once:
    the tests only read both files)."""
    tmp_path = tmp_path_factory.mktemp("fitted")
    judged = _write(tmp_path / "judged.jsonl", _pairs(300, seed=0))
    code, out = _invoke("calibrate-guarantee", "--judgements", judged, "--stages", "small,big",
                        "--target", "0.75", "--target", "0.8", "--out", tmp_path / "g.json")
    assert code == 0, out
    return tmp_path / "g.json", _write(tmp_path / "new.jsonl", _pairs(40, seed=1, labelled=False))


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_round_trip_answers_or_abstains_each_new_text(fitted, tmp_path, suffix):
    g, new = fitted
    out_path = tmp_path / f"scored{suffix}"
    code, out = _invoke("score", "--judgements", new, "--guarantee-file", g, "--guarantee", "0.75",
                        "--out", out_path)
    assert code == 0, out
    assert "cascade small -> big: agreement >= 0.75" in out and "of 40 texts" in out, out
    if suffix == ".csv":
        with out_path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        assert list(rows[0]) == ["id", "decision", "answer", "confidence", "by", "calls", "cost"]
        rows = [{**r, "calls": int(r["calls"]), "cost": float(r["cost"]), "by": r["by"] or None} for r in rows]
    elif suffix == ".json":
        rows = json.loads(out_path.read_text(encoding="utf-8"))
    else:
        rows = [json.loads(line) for line in out_path.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [f"t{i}" for i in range(40)]
    answered = [r for r in rows if r["decision"] == "answered"]
    assert answered and len(answered) < 40  # some texts answered, some abstained
    assert f"answered {len(answered)} of 40 texts, abstained {40 - len(answered)}" in out
    for r in rows:  # the cheap judge answers after one call (cost 1); the strong one after two (cost 21)
        expected = {"small": (1, 1.0), "big": (2, 21.0), None: (2, 21.0)}[r["by"]]
        assert (r["calls"], r["cost"]) == expected, r
        assert (r["by"] is None) == (r["decision"] == "abstained")


def test_several_records_need_guarantee_to_pick_one(fitted):
    g, new = fitted
    code, out = _invoke("score", "--judgements", new, "--guarantee-file", g)
    assert code == 2 and "several match: give --guarantee" in out, out
    code, out = _invoke("score", "--judgements", new, "--guarantee-file", g, "--guarantee", "0.9")
    assert code == 2 and "none matches" in out, out


def test_a_bad_row_exits_2_naming_file_line_and_field(fitted, tmp_path):
    g, _ = fitted
    rows = _pairs(5, seed=2, labelled=False)
    rows[3]["judges"]["small"]["probs"] = [0.5, "high"]
    bad = _write(tmp_path / "bad.jsonl", rows)
    code, out = _invoke("score", "--judgements", bad, "--guarantee-file", g, "--guarantee", "0.8")
    assert code == 2, out
    assert "bad.jsonl" in out and "line 4" in out and "probs" in out, out
    assert len(out.strip().splitlines()) == 1, out


def test_a_judge_the_guarantee_needs_is_missing(fitted, tmp_path):
    g, _ = fitted
    rows = [{"id": r["id"], "judges": {"small": r["judges"]["small"]}} for r in _pairs(5, seed=3, labelled=False)]
    code, out = _invoke("score", "--judgements", _write(tmp_path / "one.jsonl", rows), "--guarantee-file", g,
                        "--guarantee", "0.8")
    assert code == 2 and "big" in out, out


@pytest.mark.parametrize("extra, phrase", [
    (["--input", "{new}"], "--input"),
    (["--probes", "{new}"], "--probes"),
    (["--adaptive"], "--adaptive"),
    (["--judge", "small"], "--judge"),
    (["{tmp}"], "a run"),
])
def test_options_of_a_run_are_refused(fitted, tmp_path, extra, phrase):
    g, new = fitted
    extra = [a.format(new=new, tmp=tmp_path) for a in extra]
    code, out = _invoke("score", *extra, "--judgements", new, "--guarantee-file", g, "--guarantee", "0.8")
    assert code == 2 and "does not go with" in out and phrase in out, out


def test_judgements_and_guarantee_file_go_together(fitted):
    g, new = fitted
    code, out = _invoke("score", "--judgements", new, "--guarantee", "0.8")
    assert code == 2 and "go together" in out, out
    code, out = _invoke("score", "--guarantee-file", g)
    assert code == 2 and "go together" in out, out


def test_score_without_a_run_or_judgements_says_what_it_needs():
    code, out = _invoke("score", "--input", __file__)
    assert code == 2 and "ARTIFACT" in out and "--judgements" in out, out
