"""`run` on a CSV with [data.mapping], then a two-field set scored from every input shape (fake backend)."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError
from rubric_induce.data import Example, write_examples
from rubric_induce.data.mapping import InputMapping
from rubric_induce.pipeline import run_pipeline
from rubric_induce.scoring.scorer import RubricScorer

_RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"

MAPPING_TOML = """
[data]
examples = "dialogues.csv"
label = "sat"

[data.mapping]
id = "dialogue_id"
text = { context = "opening", response = "rest" }
labels = { sat = "good" }
judges = { annotator1 = { satisfaction = "a1" }, annotator2 = { satisfaction = "a2" }, annotator3 = { satisfaction = "a3" } }
"""

NEW = [{"context": "USER: I need a table for two tonight, please.",
        "response": "SYSTEM: Booked at 7 pm, \"confirmation\" sent.\nUSER: Thanks!"},
       {"context": "USER: Find me a flight to Boston.", "response": "SYSTEM: Sorry, I cannot help, with that."}]


def _config(fake_run_config: str) -> str:
    return re.sub(r"\[data\]\n(?:.*\n)*?(?=\n\[)", MAPPING_TOML.strip() + "\n", fake_run_config, count=1)


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory, fake_run_config):
    tmp = tmp_path_factory.mktemp("mapping_run")
    rows = []
    for line in (_RES / "demo_uss_dialogues.jsonl").read_text(encoding="utf-8").splitlines():
        ex = Example.from_dict(json.loads(line))
        opening, _, rest = ex.fields["text"].partition("\n")
        judges = {j.judge: j.labels["satisfaction"] for j in ex.judgments}
        rows.append({"dialogue_id": ex.id, "opening": opening, "rest": rest, "good": int(ex.labels["sat"]),
                     "a1": judges.get("annotator1", ""), "a2": judges.get("annotator2", ""),
                     "a3": judges.get("annotator3", "")})
    with (tmp / "dialogues.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    cfg = tmp / "cfg.toml"
    cfg.write_text(_config(fake_run_config), encoding="utf-8")
    result = run_pipeline(cfg, out=tmp / "run", echo=lambda m: None, stop_after="artifact")
    return tmp, tmp / "run", result


@pytest.mark.slow
def test_run_reads_a_csv_through_the_mapping(csv_run):
    tmp, run, _ = csv_run
    art = json.loads((run / "artifact.json").read_text(encoding="utf-8"))
    assert art["fields"] == ["context", "response"]
    assert art["input"] == {"text": {"context": "opening", "response": "rest"}, "id": "dialogue_id"}
    scorer = RubricScorer.load(run)
    assert scorer.calibrator is not None and set(scorer.judges) >= {"annotator1", "annotator2"}
    from rubric_induce.data.probes import ProbeTable

    ids = {r.example_id for r in ProbeTable.load(run / "probes.jsonl").records}
    rows = list(csv.DictReader((tmp / "dialogues.csv").read_text(encoding="utf-8").splitlines()))
    assert ids == {r["dialogue_id"] for r in rows[:24]}  # the mapped id column; run.limit = 24


def _ids_and_netsat(results):
    return [round(r.netsat, 9) for r in results]


@pytest.mark.slow
def test_a_two_field_set_scores_every_input_shape_alike(csv_run):
    tmp, run, _ = csv_run
    scorer = RubricScorer.load(run)
    base = _ids_and_netsat(scorer.score(NEW))                                       # {field: text} dicts
    assert all(r.netsat is not None for r in scorer.score(NEW))
    nested = [{"id": f"n{i}", "fields": t} for i, t in enumerate(NEW)]
    assert _ids_and_netsat(scorer.score(nested)) == base                            # nested example dicts
    assert _ids_and_netsat(scorer.score([Example.create(t) for t in NEW])) == base  # Examples
    columns = [{"key": f"c{i}", "opening": t["context"], "rest": t["response"]} for i, t in enumerate(NEW)]
    m = InputMapping(id="key", text={"context": "opening", "response": "rest"})
    res = scorer.score(scorer.to_examples(columns, mapping=m))                      # your columns + a mapping
    assert _ids_and_netsat(res) == base and [r.id for r in res] == ["c0", "c1"]
    with pytest.raises(DataError) as err:                                           # one string, two fields
        scorer.score("USER: hi\nSYSTEM: hello")
    assert err.value.field == "texts[0]" and "context, response" in err.value.message
    # files: flat JSONL with the run's columns, nested JSONL, CSV with other columns
    flat = tmp / "new.jsonl"
    flat.write_text("".join(json.dumps({"dialogue_id": f"f{i}", "opening": t["context"], "rest": t["response"]})
                            + "\n" for i, t in enumerate(NEW)), encoding="utf-8")
    write_examples(tmp / "new_nested.jsonl", [Example.create(t, id=f"n{i}") for i, t in enumerate(NEW)])
    with (tmp / "new.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", "prompt", "answer"])
        w.writerows([[f"c{i}", t["context"], t["response"]] for i, t in enumerate(NEW)])
    runner = CliRunner()
    for args, ids in (([str(flat)], ["f0", "f1"]), ([str(tmp / "new_nested.jsonl")], ["n0", "n1"]),
                      ([str(tmp / "new.csv"), "--id-field", "row", "--map", "context=prompt",
                        "--map", "response=answer"], ["c0", "c1"])):
        res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", *args])
        assert res.exit_code == 0, res.output
        rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
        assert [r["id"] for r in rows] == ids and [round(r["netsat"], 9) for r in rows] == base
    # --text-field cannot name two fields; --map must name one of the run's fields
    res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", str(tmp / "new.csv"),
                              "--text-field", "prompt"])
    assert res.exit_code == 2 and "--map FIELD=COLUMN" in res.output
    res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", str(tmp / "new.csv"),
                              "--map", "contxt=prompt"])
    assert res.exit_code == 2 and "did you mean 'context'" in res.output
    # a mapped column the file lacks: file, line and field named, exit 2
    res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", str(tmp / "new.csv")])
    assert res.exit_code == 2 and "new.csv, line 1, field 'opening'" in res.output and "columns: row, prompt" in res.output


@pytest.mark.slow
def test_bad_input_exits_2_before_any_llm_call(csv_run, fake_run_config, tmp_path):
    tmp, run, _ = csv_run
    as_jsonl = tmp_path / "dialogues.jsonl"
    as_jsonl.write_text((tmp / "dialogues.csv").read_text(encoding="utf-8"), encoding="utf-8")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(_config(fake_run_config).replace("dialogues.csv", "dialogues.jsonl"), encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "r"), "--check"])
    assert res.exit_code == 2 and "dialogues.jsonl, line 1, field 'data.mapping.format'" in res.output
    assert "looks like a CSV file" in res.output
    cfg.write_text(_config(fake_run_config).replace("dialogues.csv", str(tmp / "dialogues.csv"))
                   .replace('"rest"', '"rset"'), encoding="utf-8")
    res = runner.invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "field 'rset'" in res.output and "did you mean 'rest'" in res.output
    assert not (tmp_path / "r" / "llm_calls.sqlite").exists()
    res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", str(as_jsonl)])
    assert res.exit_code == 2 and "line 1" in res.output and "looks like a CSV file" in res.output


@pytest.mark.slow
def test_new_texts_without_the_runs_id_column_get_ids(csv_run, tmp_path):
    """The run mapped `id = "dialogue_id"`; scoring new texts that have no such column stopped with
    "missing column 'dialogue_id' ... (did you mean ...?)". A file without the column now gets ids
    as if none were mapped; a file that has it (or --id-field naming it) still needs every id."""
    _, run, _ = csv_run
    scorer = RubricScorer.load(run)
    plain = tmp_path / "plain.csv"
    with plain.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["opening", "rest"])
        w.writerows([[t["context"], t["response"]] for t in NEW])
    expected = [r.id for r in scorer.score(NEW)]
    assert [e.id for e in scorer.read(plain)] == expected  # the hash of the texts, as for dicts
    runner = CliRunner()
    res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", str(plain)])
    assert res.exit_code == 0, res.output
    assert [json.loads(ln)["id"] for ln in res.stdout.splitlines() if ln.startswith("{")] == expected
    res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", str(plain),
                              "--id-field", "dialogue_id"])
    assert res.exit_code == 2 and "field 'dialogue_id'" in res.output
    blank = tmp_path / "blank.csv"
    blank.write_text("dialogue_id,opening,rest\n,USER: hi,SYSTEM: hello\n", encoding="utf-8")
    res = runner.invoke(cli, ["score", str(run), "--backend", "fake", "--input", str(blank)])
    assert res.exit_code == 2 and "line 2, field 'dialogue_id': missing id" in res.output
