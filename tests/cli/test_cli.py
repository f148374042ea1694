"""The CLI: help everywhere, probe end to end on the fake backend, env vars, clear errors."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli, main
from rubric_induce.data import RubricPool, write_examples
from rubric_induce.data.probes import ProbeTable


@pytest.fixture
def files(tmp_path, examples, rubrics):
    ex_path = write_examples(tmp_path / "ex.jsonl", examples)
    rb_path = RubricPool(rubrics).save(tmp_path / "rb.jsonl")
    return ex_path, rb_path


def _all_commands(group):
    yield []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        yield [name]


def test_help_on_every_command():
    runner = CliRunner()
    for path in _all_commands(cli):
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output
    assert {"probe", "generate", "dedup", "select", "calibrate", "score", "datasets"} <= set(cli.list_commands(click.Context(cli)))


def test_probe_writes_probes_manifest_and_report(tmp_path, files, examples, rubrics):
    ex_path, rb_path = files
    out = tmp_path / "run" / "probes.jsonl"
    args = ["probe", "--examples", str(ex_path), "--rubrics", str(rb_path), "--backend", "fake",
            "--cache", str(tmp_path / "c.sqlite"), "--out", str(out), "--label", "sat"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    table = ProbeTable.load(out)
    assert len(table) == len(examples) * len(rubrics)
    manifest = json.loads((tmp_path / "run" / "probes.manifest.json").read_text())
    assert manifest["usage"]["calls"] == len(table) and manifest["prompt"]["hash"]
    report = (tmp_path / "run" / "probes.report.md").read_text()
    assert "# Probe report" in report and rubrics[0].id in report and "sat=1" in report
    # A rerun is served entirely from the cache.
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and f"0 new, {len(table)} cached" in again.output


def test_backend_from_env_var(tmp_path, files, monkeypatch):
    ex_path, rb_path = files
    monkeypatch.setenv("RUBRIC_INDUCE_BACKEND", "fake")
    monkeypatch.setenv("RUBRIC_INDUCE_CACHE", str(tmp_path / "env.sqlite"))
    result = CliRunner().invoke(cli, ["probe", "--examples", str(ex_path), "--rubrics", str(rb_path),
                                      "--out", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output
    assert "fake/fake" in result.output and (tmp_path / "env.sqlite").exists()


def test_sampling_estimator_from_cli(tmp_path, files):
    ex_path, rb_path = files
    result = CliRunner().invoke(cli, ["probe", "--examples", str(ex_path), "--rubrics", str(rb_path),
                                      "--backend", "fake", "--no-cache", "--style", "analyze-rate",
                                      "--estimator", "sampling", "--samples", "3",
                                      "--out", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output
    rec = ProbeTable.load(tmp_path / "p.jsonl").records[0]
    assert rec.n_samples == 3 and rec.estimator == "sampling"


def test_bad_examples_file_names_file_line_and_field(tmp_path, files, capsys):
    _, rb_path = files
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"fields": {"text": "ok"}}\n{"fields": {"text": ""}}\n')
    with pytest.raises(SystemExit) as exit_info:
        main(["probe", "--examples", str(bad), "--rubrics", str(rb_path), "--backend", "fake",
              "--no-cache", "--out", str(tmp_path / "p.jsonl")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line 2" in err and "fields.text" in err
    assert not (tmp_path / "p.jsonl").exists()


def test_unknown_backend_is_a_clear_error(tmp_path, files, capsys):
    ex_path, rb_path = files
    with pytest.raises(SystemExit) as exit_info:
        main(["probe", "--examples", str(ex_path), "--rubrics", str(rb_path), "--backend", "gpt5",
              "--no-cache", "--out", str(tmp_path / "p.jsonl")])
    assert exit_info.value.code == 2
    assert "unknown backend" in capsys.readouterr().err


def test_examples_xor_dataset(tmp_path, files):
    _, rb_path = files
    result = CliRunner().invoke(cli, ["probe", "--rubrics", str(rb_path), "--backend", "fake",
                                      "--out", str(tmp_path / "p.jsonl")])
    assert result.exit_code != 0 and "exactly one of" in result.output
