"""The Label Studio round trip on real exports: files a Label Studio 1.23.2 server exported from
rubric-induce's own hand-off (``label_studio_exports/README.md`` says how), in every format the
reader reads (JSON, JSON-MIN, CSV, TSV served as ``.csv``), finished tasks only and all tasks, read
back and checked against what the two annotators did (``plan.json``)."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import EXIT_INPUT, cli
from rubric_induce.core.errors import DataError
from rubric_induce.handoff.label_studio import DRAW_KEY, export_examples, read_export, tasks
from rubric_induce.handoff.label_studio_read import is_export

HERE = Path(__file__).parent / "label_studio_exports"
PLAN = json.loads((HERE / "plan.json").read_text(encoding="utf-8"))
FORMATS = ["json.json", "json_min.json", "csv.csv", "tsv.csv"]
EXPORTS = [f"{project}/{name.replace('.', suffix + '.')}" for project in ("run", "hostile") for name in FORMATS
           for suffix in ("", "-all-tasks")]


def _imported(project: str) -> dict[str, dict]:
    return {t["data"]["rubric_induce_id"]: t["data"]
            for t in json.loads((HERE / project / "imported-tasks.json").read_text(encoding="utf-8"))}


def _expected(project: str, all_tasks: bool) -> Counter:
    """(id, label, rater, sampling probability, reason) per completed annotation with a choice, and a
    drawn text nobody labelled as a record without a label where the export holds it."""
    data = _imported(project)
    out = Counter()
    for a in PLAN["projects"][project]["annotations"]:
        if a["choice"] is not None and not a["was_cancelled"]:
            rid = a["rubric_induce_id"]
            out[(rid, float(a["choice"]), str(a["user_id"]), data[rid].get("sampling_probability"), a["reason"])] += 1
    labelled = {k[0] for k in out}
    if all_tasks:
        for rid, d in data.items():
            if "sampling_probability" in d and rid not in labelled:
                out[(rid, None, None, d["sampling_probability"], None)] += 1
    return out


@pytest.mark.parametrize("name", EXPORTS)
def test_every_real_export_reads_back_what_was_annotated(name) -> None:
    project = name.split("/")[0]
    records = read_export(HERE / name, complete_draws=False)
    got = Counter((r.id, r.label, r.rater, r.sampling_probability, r.reason) for r in records)
    assert got == _expected(project, "all-tasks" in name)
    assert is_export(HERE / name)  # `estimate --labels` sends it to this reader, whatever the suffix


def test_the_annotators_become_raters_with_their_reasons() -> None:
    """Spelled out once, independently of plan.json: the run project's TSV export (served as .csv)."""
    by_id: dict[str, list] = {}
    for r in read_export(HERE / "run" / "tsv-all-tasks.csv"):
        by_id.setdefault(r.id, []).append((r.rater, r.label, r.reason))
    assert sorted(by_id["uss-sgd/87"]) == [("1", 2.0, None), ("2", 2.0, None)]  # both, alike
    assert sorted(by_id["uss-sgd/434"]) == [("1", 4.0, "clear success: booked and confirmed"),
                                            ("2", 3.0, 'too long, "but" fine;\nsecond line \u2713')]
    assert by_id["uss-sgd/89"] == [("2", 4.0, None)]  # the other annotator skipped it
    assert by_id["uss-sgd/285"] == [(None, None, None)]  # drawn, only a model prediction: no label
    # an empty submission, a comment without a choice, a skip, an untouched task: no label
    assert not {"uss-sgd/371", "uss-sgd/641", "uss-sgd/733", "uss-sgd/493"} & set(by_id)


@pytest.mark.parametrize("name", [f"run/{f}" for f in FORMATS])
def test_an_export_missing_a_drawn_text_is_refused(name) -> None:
    """The Export dialog's default (finished tasks) drops the drawn text nobody annotated: an estimate
    from it would be biased, so reading it for the estimate is refused, naming the file and the field."""
    with pytest.raises(DataError, match="4 of the 5 texts drawn") as err:
        read_export(HERE / name)
    assert err.value.field == DRAW_KEY and err.value.path == str(HERE / name)
    assert "download_all_tasks=true" in str(err.value)


def test_sampling_probabilities_survive_every_format_exactly() -> None:
    data = _imported("run")
    for name in FORMATS:
        recs = read_export(HERE / "run" / name.replace(".", "-all-tasks."))
        assert {r.id: r.sampling_probability for r in recs if r.sampling_probability is not None} == {
            rid: d["sampling_probability"] for rid, d in data.items() if "sampling_probability" in d}


@pytest.mark.parametrize("project", ["run", "hostile"])
def test_examples_for_a_rerun_agree_across_formats(project, tmp_path) -> None:
    """Every format gives the same examples, with the texts exactly as imported (newlines, $, markup)."""
    data = _imported(project)
    first = export_examples(HERE / project / "json.json", "sat")
    assert first and all(row["fields"] == {v: data[row["id"]][k] for k, v in data[row["id"]]["rubric_induce_fields"]
                                           .items()} for row in first)
    for name in FORMATS[1:]:
        assert export_examples(HERE / project / name, "sat") == first, name
    if project == "hostile":
        assert first[0]["fields"]["prompt"] == "Book a table for $2 at <Luigi's>?"
        assert first[0]["meta"] == {"reasons": {"1": 'a $reason with <markup> & "quotes"'}}


def test_our_tasks_reproduce_what_was_imported() -> None:
    """The hand-off code still writes the tasks the server imported (else these exports are stale)."""
    doc = json.loads((HERE / "hostile" / "imported-tasks.json").read_text(encoding="utf-8"))
    rows = [{"id": t["data"]["rubric_induce_id"], "purpose": t["data"]["purpose"], "prompt": t["data"]["prompt"],
             "response": t["data"]["response"]} for t in doc]
    assert tasks(rows, ["prompt", "response"]) == doc
    run = json.loads((HERE / "run" / "imported-tasks.json").read_text(encoding="utf-8"))
    drawn = [t["data"] for t in run if "sampling_probability" in t["data"]]
    assert len(drawn) == 5 and all(d[DRAW_KEY] == {"batch": drawn[0][DRAW_KEY]["batch"], "drawn": 5} for d in drawn)


def _edited(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (HERE / name).read_bytes().decode("utf-8")
    assert old in text
    out = tmp_path / Path(name).name
    out.write_bytes(text.replace(old, new, 1).encode("utf-8"))
    return out


@pytest.mark.parametrize("name,old,new,where", [
    ("hostile/csv.csv", '"1",12.5', '"great",12.5', (2, "label")),
    ("hostile/tsv.csv", '"1"\t12.5', '"great"\t12.5', (2, "label")),
    ("hostile/json_min.json", '"label": "1"', '"label": "great"', (None, "[0].label")),
    ("hostile/json.json", '"choices":["1"]', '"choices":["great"]', (None, "[0].annotations[0].result[0].value.choices")),
    ("run/csv-all-tasks.csv", "0.10", "1.10", (None, "sampling_probability")),
    ("hostile/json_min.json", '"annotator": 1', '"annotator": [1]', (None, "[0].annotator")),
])
def test_a_bad_cell_names_the_file_and_where(tmp_path, name, old, new, where) -> None:
    bad = _edited(tmp_path, name, old, new)
    with pytest.raises(DataError) as err:
        read_export(bad, complete_draws=False)
    line, field = where
    assert err.value.path == str(bad) and err.value.field == field
    if line is not None:
        assert err.value.line == line


@pytest.mark.slow
def test_estimate_reads_a_label_studio_csv_export(tmp_path) -> None:
    """`estimate --labels` takes the CSV export (it used to read it as a plain labels table); the
    finished-tasks export is refused with the reason, exit 2."""
    judged = tmp_path / "judged.jsonl"
    ids = list(_imported("run"))
    judged.write_text("".join(json.dumps({"id": i, "judges": {"j": {"probs": [0.2, 0.5, 0.3]}}}) + "\n" for i in ids)
                      + "".join(json.dumps({"id": f"x{k}", "judges": {"j": {"probs": [0.3, 0.4, 0.3]}}}) + "\n"
                                for k in range(40)))
    finished = tmp_path / "project-3-at-2026-11-28.csv"
    shutil.copy(HERE / "run" / "tsv.csv", finished)  # what the browser saves: a TSV named .csv
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(judged), "--scale", "2,3,4",
                                   "--labels", str(finished)])
    assert res.exit_code == EXIT_INPUT and "download_all_tasks=true" in res.output and str(finished) in res.output
    every = tmp_path / "all.csv"
    shutil.copy(HERE / "run" / "csv-all-tasks.csv", every)
    res = CliRunner().invoke(cli, ["estimate", "--judgements", str(judged), "--scale", "2,3,4", "--labels", str(every)])
    # every drawn text is there now; the one nobody labelled is refused by estimate itself
    assert res.exit_code == EXIT_INPUT and "drawn for the estimate" in res.output and "no label" in res.output
