"""Scoring in chunks (issue 35): iter_score_probes / iter_score and `score` written row by row give
the same results as scoring at once, on full and partial probe tables."""
from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.cli.score import RowWriter
from rubric_induce.data.probes import ProbeTable
from rubric_induce.scoring.guarantee import Guarantee
from rubric_induce.scoring.options import AdaptiveOptions
from rubric_induce.scoring.scorer import RubricScorer


@pytest.fixture(scope="module")
def scorer(fake_run):
    return RubricScorer.load(fake_run)


@pytest.fixture(scope="module")
def partial(fake_run, tmp_path_factory):
    """The run's probe table with some probes gone and one failed: texts without NetSAT, errors."""
    table = ProbeTable.load(fake_run / "probes.jsonl")
    recs = [r for k, r in enumerate(table.records) if k % 7 != 3]
    recs[5].error, recs[5].raw = "synthetic failure", [0.0] * len(recs[5].raw)
    path = tmp_path_factory.mktemp("partial") / "probes.jsonl"
    ProbeTable(recs, table.meta).save(path)
    return path


def _dicts(results):
    return [r.to_dict() for r in results]


@pytest.mark.parametrize("options", [{}, {"judge": "shared"}, {"aggregate": "max", "judge": None},
                                     {"adaptive": AdaptiveOptions(budget=2)}, {"answer_check": False},
                                     {"guarantee": Guarantee(target=0.8, delta=0.2, n=40, threshold=0.6,
                                                             coverage=0.5)}])
def test_chunks_give_the_results_of_one_call(scorer, fake_run, partial, options):
    if options.get("aggregate") == "max":
        options = {"aggregate": "max", "judge": list(scorer.judges[:2])}
    for path in (fake_run / "probes.jsonl", partial):
        table = ProbeTable.load(path)
        ids = sorted({r.example_id for r in table.records}) + ["never-probed"]
        whole = _dicts(scorer.score_probes(table, ids, **options))
        assert options.get("adaptive") or any(d.get("errors") for d in whole)  # the absent text at least
        store = ProbeTable.scan(path, [r.id for r in scorer.rubrics])
        for size in (1, 4, 1000):
            chunks = list(scorer.iter_score_probes(store, ids, chunk_size=size, **options))
            assert [len(c) for c in chunks[:-1]] == [size] * (len(chunks) - 1)
            assert [d for c in chunks for d in _dicts(c)] == whole  # bit for bit: same numbers, same order
        assert [d for c in scorer.iter_score_probes(table, ids, chunk_size=3, **options) for d in _dicts(c)] == whole


def test_live_scoring_in_chunks_equals_one_call(scorer):
    texts = [f"USER: book a table for {i}.\nSYSTEM: {'Done' if i % 3 else 'Sorry, no'}." for i in range(7)]
    scorer.backend = FakeBackend()
    try:
        whole = _dicts(scorer.score(texts))
        chunks = list(scorer.iter_score(texts, chunk_size=3))
        assert [len(c) for c in chunks] == [3, 3, 1]
        assert [d for c in chunks for d in _dicts(c)] == whole
    finally:
        scorer.backend = None


def test_chunk_size_and_options_are_checked(scorer, fake_run):
    store = ProbeTable.scan(fake_run / "probes.jsonl", [r.id for r in scorer.rubrics])
    from rubric_induce.core.errors import DataError, RubricInduceError

    with pytest.raises(RubricInduceError, match="chunk_size"):
        scorer.iter_score_probes(store, chunk_size=0)
    with pytest.raises(DataError, match="judge"):  # before any result is made
        scorer.iter_score_probes(store, judge="nobody")


def _reference(rows, fmt):
    """How `score` wrote --out before rows were streamed (all rows in memory)."""
    if fmt == "json":
        return json.dumps(rows, ensure_ascii=False, indent=1) + "\n"
    if fmt in ("csv", "tsv"):
        sink = io.StringIO(newline="")
        columns = list(dict.fromkeys(k for row in rows for k in row))
        writer = csv.writer(sink, delimiter="," if fmt == "csv" else "\t")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else json.dumps(row[c], ensure_ascii=False)
                             if isinstance(row.get(c), (list, dict)) else row.get(c) for c in columns])
        return sink.getvalue()
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "tsv"])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_row_writer_writes_what_the_whole_list_did(tmp_path, fmt, n):
    rows = [{"id": f"t{i}", "netsat": None if i == 1 else i / 3, "drivers": [{"a": "é\n,"}], **({"x": 1} if i else {})}
            for i in range(n)]
    out = tmp_path / f"out.{fmt}"
    writer = RowWriter(out)
    for row in rows:
        writer.write(row)
    assert not out.exists()  # nothing in place until it is finished
    writer.close()
    text = out.read_bytes().decode("utf-8")
    assert text == _reference(rows, fmt)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no spool or temporary file left


def test_row_writer_abort_keeps_the_old_file(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    writer = RowWriter(out)
    writer.write({"id": "new"})
    writer.abort()
    assert out.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_score_cli_on_a_partial_table_writes_the_rows_of_score_probes(fake_run, partial, tmp_path, scorer, suffix):
    out = tmp_path / f"scores.{suffix}"
    res = CliRunner().invoke(cli, ["score", str(fake_run), "--probes", str(partial), "--out", str(out)])
    assert res.exit_code == 0, res.output
    table = ProbeTable.load(partial)
    ids = sorted({r.example_id for r in table.records})
    rows = [r.to_dict() for r in scorer.score_probes(table, ids)]
    assert out.read_bytes().decode("utf-8") == _reference(rows, suffix)
    assert f"scored {len(ids)} texts" in res.output
    assert any(row["errors"] for row in rows)


def test_score_cli_error_leaves_no_file(fake_run, tmp_path):
    out = tmp_path / "scores.json"
    res = CliRunner().invoke(cli, ["score", str(fake_run), "--probes", str(fake_run / "probes.jsonl"),
                                   "--judge", "nobody", "--out", str(out)])
    assert res.exit_code == 2 and not list(tmp_path.iterdir())
