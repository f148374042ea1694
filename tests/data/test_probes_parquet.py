"""A probe table as Parquet (issue 44): the same records and the same ProbeStore arrays as the JSONL
table, and a damaged or mis-typed file named with its column and row."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rubric_induce.data.probes_parquet as probes_parquet
from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.data.probes import ProbeRecord, ProbeTable
from rubric_induce.data.probes_parquet import (
    ParquetProbeWriter,
    jsonl_to_parquet,
    load_probe_table,
    parquet_example_ids,
    scan_probes,
)

LIKERT = (["1", "2", "3", "4", "5"], [1.0, 2.0, 3.0, 4.0, 5.0])
YES_NO = (["yes", "no"], [1.0, 0.0])


def _records(seed: int = 0) -> list[ProbeRecord]:
    """Records of 40 texts x 4 rubrics in a shuffled order: two scales, failed probes, a cell probed
    twice (the later record counts), a rubric probed on a few texts only, and every optional field set somewhere."""
    rng = np.random.default_rng(seed)
    recs = []
    for t in range(40):
        for j in range(4 if t % 9 else 3):
            answers, values = YES_NO if j == 2 else LIKERT
            raw = rng.random(len(answers)).tolist()
            recs.append(ProbeRecord(f"text-{t:02d}", f"r{j}", list(answers), list(values), raw, "direct", "logprobs",
                                    f"h{j}"))
    rng.shuffle(recs)
    recs[3].error, recs[3].raw, recs[3].call_failed = "timeout", [0.0] * len(recs[3].raw), True
    recs[5].bound, recs[5].bounded, recs[5].truncated, recs[5].example_tokens = 0.01, ["1"], True, 900
    recs[7].n_samples, recs[7].forced_answer, recs[7].analysis = 5, True, "An analysis."
    recs[8].pack_position, recs[8].pack_size, recs[8].pack_seed, recs[8].order = 1, 4, 7, "AB"
    for k, at in ((10, 12), (20, len(recs))):  # a cell probed again in the same batch, and in a later one
        again = recs[k]
        recs.insert(at, ProbeRecord(again.example_id, again.rubric_id, again.answers, again.values,
                                    [0.5] * len(again.raw), "direct", "logprobs", again.prompt_hash))  # it counts
    return recs


@pytest.fixture()
def both(tmp_path):
    """The same table as JSONL (with its manifest) and as Parquet (row groups of 37 rows)."""
    jsonl = tmp_path / "probes.jsonl"
    ProbeTable(_records(), {"backend": "fake", "seed": 3}).save(jsonl)
    return jsonl, jsonl_to_parquet(jsonl, tmp_path / "probes.parquet", row_group=37)


def test_parquet_reads_back_the_records_and_the_manifest(both):
    jsonl, parquet = both
    a, b = ProbeTable.load(jsonl), load_probe_table(parquet)
    assert [r.to_dict() for r in b.records] == [r.to_dict() for r in a.records]
    assert b.meta == a.meta and b.meta["seed"] == 3
    assert sorted(parquet_example_ids(parquet)) == sorted({r.example_id for r in a.records})
    assert pq.ParquetFile(parquet).num_row_groups == 5


@pytest.mark.parametrize("rubrics", [["r0", "r1", "r2", "r3"], ["r3", "nope", "r2"]])
@pytest.mark.parametrize("ids", [None, ["text-05", "text-38", "absent", "text-05"]])
def test_parquet_store_holds_the_arrays_of_the_jsonl_store(both, monkeypatch, rubrics, ids):
    """Read 50 rows at a time: a cell probed twice in one batch and in two batches."""
    monkeypatch.setattr(probes_parquet, "READ_ROWS", 50)
    jsonl, parquet = both
    a, b = ProbeTable.scan(jsonl, rubrics, ids), scan_probes(parquet, rubrics, ids)
    assert b.example_ids == a.example_ids and (b.k, b.n_records, b.meta) == (a.k, a.n_records, a.meta)
    want, got = a.arrays(ids), b.arrays(ids)
    for name in ("raw", "probs", "mass", "ok", "answer_mask", "expected"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert not got.ok.all() and got.ok.any()


def _write(path, table: pa.Table) -> None:
    pq.write_table(table, path, row_group_size=20)


def _good_table(tmp_path) -> pa.Table:
    path = jsonl_to_parquet(_save(tmp_path), tmp_path / "good.parquet")
    return pq.read_table(path)


def _save(tmp_path):
    return ProbeTable(_records()).save(tmp_path / "src.jsonl")


def _error(path) -> DataError:
    with pytest.raises(DataError) as err:
        scan_probes(path, ["r0"])
    return err.value


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    bad = tmp_path / "probes.parquet"
    bad.write_text('{"example_id": "a"}\n', encoding="utf-8")
    err = _error(bad)
    assert err.path == str(bad) and "not a readable Parquet file" in err.message


def test_a_missing_column_is_named(tmp_path):
    path = tmp_path / "p.parquet"
    _write(path, _good_table(tmp_path).drop_columns(["raw"]))
    err = _error(path)
    assert (err.path, err.field) == (str(path), "raw") and "missing" in err.message


def test_a_column_of_the_wrong_type_is_named(tmp_path):
    table = _good_table(tmp_path)
    path = tmp_path / "p.parquet"
    _write(path, table.set_column(table.schema.get_field_index("raw"), "raw",
                                  pa.array(["0.5"] * table.num_rows)))
    err = _error(path)
    assert (err.path, err.field) == (str(path), "raw") and "expected list<item: double>" in err.message


@pytest.mark.parametrize("column, row", [("example_id", 45), ("values", 3), ("raw", 61)])
def test_a_bad_row_is_named_with_its_column_and_row(tmp_path, monkeypatch, column, row):
    """A null id, a short list of values, a null probability: the file, the column and the row
    (1-based, over the whole file, read 16 rows at a time: these rows lie in later batches too)."""
    monkeypatch.setattr(probes_parquet, "READ_ROWS", 16)
    table = _good_table(tmp_path)
    cells = table.column(column).to_pylist()
    if column == "example_id":
        cells[row - 1] = None
    elif column == "values":
        cells[row - 1] = cells[row - 1][:-1]
    else:
        cells[row - 1] = [None, *cells[row - 1][1:]]
    field = table.schema.field(column).with_nullable(True)
    path = tmp_path / "p.parquet"
    _write(path, table.set_column(table.schema.get_field_index(column), field, pa.array(cells, field.type)))
    err = _error(path)
    assert (err.path, err.field) == (str(path), column) and err.message.startswith(f"row {row}:"), err


def test_without_pyarrow_the_error_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    with pytest.raises(MissingDependencyError, match="pyarrow.*rubric-induce\\[parquet\\]"):
        scan_probes(tmp_path / "p.parquet", ["r0"])
    assert isinstance(scan_probes(_save(tmp_path), ["r0"]).example_ids, list)  # JSONL needs no pyarrow


def test_a_failed_write_leaves_no_file(tmp_path):
    src = tmp_path / "src.jsonl"
    src.write_text('{"example_id": "a"}\n', encoding="utf-8")
    with pytest.raises(DataError):
        jsonl_to_parquet(src, tmp_path / "out.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.jsonl"]
    with ParquetProbeWriter(tmp_path / "empty.parquet") as writer:
        writer.write([])
    assert load_probe_table(tmp_path / "empty.parquet").records == []


@pytest.mark.slow  # writes and reads an 80 MB table: about 5 s
def test_reading_a_table_holds_a_row_group_not_the_whole_file(tmp_path):
    """The checked batches of a 400-row-group table (80 MB), read one after the other: pyarrow holds about a
    row group and its checks (9 MB), not the file (pre-buffered reads held all of it, growing with the read)."""
    from rubric_induce.data.probes_parquet import READ_ROWS, iter_parquet_tables

    one = pq.read_table(jsonl_to_parquet(_save(tmp_path), tmp_path / "one.parquet"))
    block = pa.concat_tables([one] * (READ_ROWS // one.num_rows + 1)).slice(0, READ_ROWS)
    path = tmp_path / "big.parquet"
    with pq.ParquetWriter(path, block.schema, compression="none") as writer:
        for _ in range(400):
            writer.write_table(block, row_group_size=READ_ROWS)
    size = path.stat().st_size
    pool = pa.default_memory_pool()
    base, grown, n = pool.bytes_allocated(), 0, 0
    for _, table in iter_parquet_tables(path):
        grown, n = max(grown, pool.bytes_allocated() - base), n + table.num_rows
        del table
    assert n == 400 * READ_ROWS
    assert grown < size / 4, (grown, size)
