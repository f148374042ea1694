"""`score` streams (issue 44): texts and probe tables read, scored and written a chunk at a time give
the bytes of the in-memory path (every text scored at once)."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner
from scattered_probes import scattered_probes

import rubric_induce.scoring.numbers as numbers
import rubric_induce.scoring.stream as stream
from rubric_induce.cli import cli
from rubric_induce.data.mapping import InputMapping
from rubric_induce.data.probes import ProbeTable
from rubric_induce.scoring.scorer import RubricScorer

TEXTS = ["USER: I need a table for two tonight.\nSYSTEM: Booked at 7 pm, confirmation sent.",
         "USER: Find me a flight to Boston.\nSYSTEM: Sorry, I cannot help with that.",
         "USER: What's the address?\nSYSTEM: Which place do you mean?",
         "USER: Cancel my order.\nSYSTEM: Done, it is cancelled and refunded."]


def _jsonl(results) -> bytes:
    """The rows as ``score --out x.jsonl`` writes them."""
    return "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in results).encode("utf-8")


@pytest.mark.slow
def test_streamed_probe_table_gives_the_bytes_of_the_in_memory_path(fake_run, tmp_path, monkeypatch):
    """10,000 texts, their probes scattered over the file, read into buckets of 4,096 texts and
    scored a chunk at a time: the same bytes as the whole table scored at once (its numbers computed
    a block of SCORE_CHUNK texts at a time); one network batch of every text, as before streaming,
    differs in the last float32 digits only. The table holds the probes of the selected rubrics and
    of one rubric the scorer does not ask (skipped on every read), not all 16 of the pool: a third
    of the lines to read, bucket and check, the same texts, chunks and buckets."""
    path = tmp_path / "probes.jsonl"
    selected = {r.id for r in RubricScorer.load(fake_run).rubrics}
    pool = sorted({rec.rubric_id for rec in ProbeTable.load(fake_run / "probes.jsonl").records})
    ids = scattered_probes(fake_run, path, 10_000, rubrics=selected | {min(set(pool) - selected)})
    monkeypatch.setattr(stream, "BUCKET_TEXTS", numbers.SCORE_CHUNK)  # three buckets
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["score", str(fake_run), "--probes", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "scored 10000 texts" in res.output and "answer check" in res.output
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".score-buckets-")]  # buckets removed
    scorer = RubricScorer.load(fake_run)
    table = ProbeTable.load(path)
    blocks = scorer.score_probes(table, sorted(ids))
    assert out.read_bytes() == _jsonl(blocks)
    assert any(r.errors for r in blocks) and all(r.prediction is not None for r in blocks)
    # every text in one network batch (the numbers before streaming): equal up to float32 rounding
    one_batch = scorer.predict_probes(table.arrays(example_ids=sorted(ids)), sorted(ids))
    np.testing.assert_allclose([r.prediction for r in blocks], one_batch, rtol=0, atol=1e-5)


def test_streamed_texts_give_the_bytes_of_the_in_memory_path(fake_run, tmp_path, monkeypatch):
    """`score --input` reads, probes and scores 7 texts at a time (chunks and network blocks of 7):
    the bytes of every text scored at once, CSV and JSONL, repeated rows included."""
    monkeypatch.setattr(numbers, "SCORE_CHUNK", 7)
    monkeypatch.setattr(stream, "SCORE_CHUNK", 7)
    rows = [{"key": f"k{i % 19}", "text": TEXTS[i % 19 % 4] + f" #{i % 19}"} for i in range(45)]  # a repeated row
    src = tmp_path / "texts.csv"
    with src.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, ["key", "text"])
        writer.writeheader()
        writer.writerows(rows)
    jl = tmp_path / "texts.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    scorer = RubricScorer.load(fake_run, backend="fake", cache=tmp_path / "c.sqlite")
    mapping = scorer.input_mapping().replace(id="key")
    whole = scorer.score(scorer.read(src, mapping))
    assert len(whole) == 45 and len({r.id for r in whole}) == 19
    for path in (src, jl):
        out = tmp_path / f"scores-{path.suffix[1:]}.jsonl"
        res = CliRunner().invoke(cli, ["score", str(fake_run), "--input", str(path), "--id-field", "key",
                                       "--backend", "fake", "--cache", str(tmp_path / "c.sqlite"), "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert out.read_bytes() == _jsonl(whole)
    monkeypatch.setattr(numbers, "SCORE_CHUNK", 10**9)  # one network batch: the same up to float32 rounding
    once = scorer.score(scorer.read(src, mapping))
    np.testing.assert_allclose([r.prediction for r in once], [r.prediction for r in whole], rtol=0, atol=1e-5)
    assert [r.netsat for r in once] == [r.netsat for r in whole]


def test_iter_load_chunks_are_the_rows_of_one_load(tmp_path):
    """InputMapping.iter_load: the examples of load, cut into chunks (a quoted cell over two lines
    included), and an error names the file's own line whichever chunk it falls in."""
    src = tmp_path / "t.csv"
    src.write_text('id,text\n1,"two\nlines"\n2,b\n3,c\n4,d\n5,e\n', encoding="utf-8")
    mapping = InputMapping(id="id")
    whole = mapping.load(src, unique=False)
    chunks = list(mapping.iter_load(src, unique=False, chunk_size=2))
    assert [len(c) for c in chunks] == [2, 2, 1]
    assert [e for c in chunks for e in c] == whole
    src.write_text("id,text\n1,a\n2,b\n3,\n", encoding="utf-8")
    with pytest.raises(Exception) as err:
        list(mapping.iter_load(src, unique=False, chunk_size=2))
    assert getattr(err.value, "line", None) == 4


def test_a_bad_line_fails_before_any_row_is_written(fake_run, tmp_path, monkeypatch):
    """A damaged probe line names the table's file and line, and nothing reaches --out, whichever
    bucket the line falls in."""
    path = tmp_path / "probes.jsonl"
    scattered_probes(fake_run, path, 30)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    selected = {r.id for r in RubricScorer.load(fake_run).rubrics}
    k = max(i for i, line in enumerate(lines) if json.loads(line)["rubric_id"] in selected)
    row = json.loads(lines[k])
    row["raw"] = row["raw"][:-1]  # fewer probabilities than answers
    lines[k] = json.dumps(row) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    monkeypatch.setattr(numbers, "SCORE_CHUNK", 4)
    monkeypatch.setattr(stream, "BUCKET_TEXTS", 8)
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["score", str(fake_run), "--probes", str(path), "--out", str(out)])
    assert res.exit_code == 2 and str(path) in res.output and f"line {k + 1}" in res.output, res.output
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".score-buckets-")]


def test_summary_columns_read_like_the_results(fake_run, tmp_path):
    """The summary lines after a streamed score read compact columns: the same answer check as the
    results give."""
    scorer = RubricScorer.load(fake_run)
    table = ProbeTable.load(fake_run / "probes.jsonl")
    results = scorer.score_probes(table, sorted({r.example_id for r in table.records}))
    column = np.array([np.nan if r.answer_surprise is None else r.answer_surprise for r in results])
    assert scorer.answer_shift(column) == scorer.answer_shift(results)
