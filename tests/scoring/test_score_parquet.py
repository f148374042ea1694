"""`score --probes FILE.parquet` (issue 44): the same probe table as JSONL and as Parquet gives the
same bytes, streamed through bucket files or not; a damaged Parquet table fails before any row."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from scattered_probes import scattered_probes

import rubric_induce.scoring.numbers as numbers
import rubric_induce.scoring.stream as stream
import rubric_induce.scoring.stream_parquet as stream_parquet
from rubric_induce.cli import cli
from rubric_induce.data import probes_parquet
from rubric_induce.data.probes_parquet import jsonl_to_parquet


def _score(run, probes, out, *extra) -> bytes:
    res = CliRunner().invoke(cli, ["score", str(run), "--probes", str(probes), "--out", str(out), *extra])
    assert res.exit_code == 0, res.output
    return out.read_bytes()


@pytest.mark.parametrize("suffix, extra", [("jsonl", ()), ("csv", ()), ("jsonl", ("--adaptive", "--budget", "2"))])
def test_parquet_probes_score_to_the_bytes_of_jsonl(fake_run, tmp_path, suffix, extra):
    parquet = jsonl_to_parquet(fake_run / "probes.jsonl", tmp_path / "probes.parquet", row_group=50)
    want = _score(fake_run, fake_run / "probes.jsonl", tmp_path / f"a.{suffix}", *extra)
    assert _score(fake_run, parquet, tmp_path / f"b.{suffix}", *extra) == want and want


def test_parquet_probes_through_bucket_files_score_to_the_bytes_of_jsonl(fake_run, tmp_path, monkeypatch):
    """120 texts, their probes scattered over the file, four buckets of 32 texts, chunks of 8, the
    table read 100 rows at a time: the bytes of the JSONL table read the same way; the bucket files
    are removed."""
    monkeypatch.setattr(numbers, "SCORE_CHUNK", 8)
    monkeypatch.setattr(stream, "BUCKET_TEXTS", 32)
    monkeypatch.setattr(stream_parquet, "BUCKET_TEXTS", 32)
    monkeypatch.setattr(probes_parquet, "READ_ROWS", 100)  # read 100 rows at a time, buckets of 100-row groups
    monkeypatch.setattr(stream_parquet, "READ_ROWS", 100)
    jsonl = tmp_path / "probes.jsonl"
    scattered_probes(fake_run, jsonl, 120, seed=1, fail_rate=0.01, random_ids=True)
    parquet = jsonl_to_parquet(jsonl, tmp_path / "probes.parquet", row_group=500)
    want = _score(fake_run, jsonl, tmp_path / "a.jsonl")
    assert _score(fake_run, parquet, tmp_path / "b.jsonl") == want
    assert len(want.splitlines()) == 120
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".score-buckets-")]


def test_a_calibrator_folder_scores_parquet_probes(fake_run, tmp_path):
    parquet = jsonl_to_parquet(fake_run / "probes.jsonl", tmp_path / "probes.parquet")
    folder = fake_run / "calibration"
    assert _score(folder, parquet, tmp_path / "b.jsonl") == _score(folder, fake_run / "probes.jsonl",
                                                                    tmp_path / "a.jsonl")


@pytest.mark.parametrize("bucket_texts", [10**6, 8])
def test_a_damaged_parquet_table_fails_before_any_row_naming_column_and_row(fake_run, tmp_path, monkeypatch,
                                                                             bucket_texts):
    monkeypatch.setattr(stream_parquet, "BUCKET_TEXTS", bucket_texts)
    table = pq.read_table(jsonl_to_parquet(fake_run / "probes.jsonl", tmp_path / "good.parquet"))
    raw = table.column("raw").to_pylist()
    raw[-2] = raw[-2][:-1]  # fewer probabilities than answers, in the last row group
    path = tmp_path / "probes.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("raw"), "raw", pa.array(raw, pa.list_(pa.float64()))),
                   path, row_group_size=40)
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["score", str(fake_run), "--probes", str(path), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert str(path) in res.output and "'raw'" in res.output and f"row {table.num_rows - 1}:" in res.output
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".score-buckets-")]
