"""The CLI's contract, command by command: exit 2 for input and config errors, 1 for failures while
running, one ``error:`` line and never a traceback; options take their defaults and help from the
stages' parameter classes, the same classes a run config's sections are."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import MISSING, fields

import click
import pytest
from click.testing import CliRunner

from rubric_induce.calibration.api import CalibrateParams
from rubric_induce.cli import COMMANDS, EXIT_FAILURE, EXIT_INPUT, cli
from rubric_induce.data import RubricPool, write_examples
from rubric_induce.dedup.api import DedupParams
from rubric_induce.feedback.api import FeedbackParams
from rubric_induce.generation.api import AutoCalibrateParams, RubiconParams
from rubric_induce.pipeline.config import SECTIONS, RunConfig
from rubric_induce.probing.api import ProbeParams
from rubric_induce.reporting.report import ReportParams
from rubric_induce.selection.api import SelectParams


@pytest.fixture
def files(tmp_path, examples, rubrics):
    ex = write_examples(tmp_path / "ex.jsonl", examples)
    rb = RubricPool(rubrics).save(tmp_path / "rb.jsonl")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[data]\nexamples = "{ex}"\n[backend]\nspec = "fake"\n[generate]\nmethod = "none"\n'
                   f'include = ["{rb}"]\n'
                   # six 0/1 examples cannot train a calibrator: run --check says so before any LLM call
                   '[calibrate]\nenabled = false\n', encoding="utf-8")
    empty = tmp_path / "empty"
    empty.mkdir()
    return {"ex": str(ex), "rb": str(rb), "cfg": str(cfg), "tmp": tmp_path, "empty": str(empty)}


def _input_errors(f) -> dict[str, tuple[list[str], str]]:
    """One bad invocation per command and a phrase its message must contain."""
    ex, rb, tmp = f["ex"], f["rb"], f["tmp"]
    return {
        "run": ([f["cfg"], "--limit", "2"], "run.limit"),
        "generate": (["--examples", ex, "--no-ds", "--top-k", "0", "--backend", "fake", "--no-cache"], "top_k"),
        "dedup": (["--pool", rb, "--threshold", "1.5"], "dedup.threshold"),
        "probe": (["--examples", ex, "--rubrics", rb, "--samples", "0", "--backend", "fake", "--out",
                   str(tmp / "p.jsonl")], "probe.samples"),
        "select": (["--examples", ex, "--rubrics", rb, "--probes", rb, "--n-sat", "0", "--n-dsat", "0",
                    "--out", str(tmp / "s")], "n_sat + n_dsat"),
        "calibrate": (["--dataset", "llm_rubric", "--cv-folds", "1", "--out", str(tmp / "c")], "cv_folds"),
        "score": ([f["empty"]], "exactly one of --input"),
        "report": ([f["empty"]], "nothing to report"),
        "feedback": (["--probes", rb, "--rubrics", rb, "--examples", ex, "--budget", "10", "--backend", "fake",
                      "--out", str(tmp / "f.md")], "feedback.budget"),
        "export": (["--rubrics", ex, "--out", str(tmp / "x.json")], ex),
        "import": ([ex, "--out", str(tmp / "y.jsonl")], ex),
        "datasets": (["extra-arg"], "unexpected extra argument"),
        "view": ([f["empty"]], "not a rubric-induce run directory"),
        "plan": ([f["cfg"], "--shard", "3/2"], "i must lie between 1 and n"),
        "ingest": ([ex, "--batch-dir", f["empty"], "--cache", str(tmp / "c.sqlite")], "manifest.json"),
        "cache": (["merge", ex, "-o", ex], "one of the inputs"),
        "batch-run": ([ex, "--endpoint", "ftp://127.0.0.1/v1", "-o", str(tmp / "b")], "--endpoint"),
        "calibrate-guarantee": ([f["empty"], "--labels", ex, "--target", "1.5"], "target"),
        "compare": ([f["empty"], "--pairs", ex], "artifact.json"),
        "estimate": (["--judgements", ex, "--judge", "x"], "judges"),
        "suggest": (["--judgements", ex, "--judge", "x"], "judges"),
    }


def test_every_command_has_an_input_error_case(files):
    assert set(_input_errors(files)) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_input_errors_exit_2_with_one_clear_line(files, name):
    args, phrase = _input_errors(files)[name]
    res = CliRunner().invoke(cli, [name, *args])
    assert res.exit_code == EXIT_INPUT, (name, res.output, res.exception)
    assert phrase in res.output, res.output
    assert "Traceback" not in res.output
    assert res.output.lstrip().lower().startswith(("error:", "usage:")), res.output


def test_a_failure_while_running_exits_1(files):
    res = CliRunner().invoke(cli, ["probe", "--examples", files["ex"], "--rubrics", files["rb"], "--backend",
                                   "local/no-such-model.gguf", "--out", str(files["tmp"] / "p.jsonl")])
    assert res.exit_code == EXIT_FAILURE and res.output.startswith("error: ") and "not found" in res.output


@pytest.mark.slow
def test_the_installed_entry_point_keeps_the_convention(files):
    """The real ``main`` (what the console script runs): no traceback, the same exit codes."""
    bad = subprocess.run([sys.executable, "-m", "rubric_induce.cli", "dedup", "--pool", files["rb"],
                          "--threshold", "1.5"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == EXIT_INPUT and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("error: ") and "dedup.threshold" in bad.stderr
    ok = subprocess.run([sys.executable, "-m", "rubric_induce.cli", "run", files["cfg"], "--check"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "config OK" in ok.stdout, ok.stderr


def _option(command: click.Command, dest: str) -> click.Option:
    return next(p for p in command.params if p.name == dest)


@pytest.mark.parametrize("command_name, params_cls, prefix", [
    ("probe", ProbeParams, ""), ("dedup", DedupParams, ""), ("select", SelectParams, ""),
    ("calibrate", CalibrateParams, ""), ("feedback", FeedbackParams, ""), ("report", ReportParams, ""),
    ("generate", RubiconParams, ""), ("generate", AutoCalibrateParams, "ac_"),
])
def test_options_take_default_and_help_from_the_parameter_class(command_name, params_cls, prefix):
    command = cli.get_command(click.Context(cli), command_name)
    shared = {"temperature", "max_example_chars", "draft_temperature", "refine_temperature", "question"}
    checked = 0
    for f in fields(params_cls):
        meta = f.metadata["rubric_induce"]
        if meta["hidden"] or f.name in shared or f.default is MISSING:
            continue
        opt = _option(command, prefix + f.name)
        default = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
        assert opt.default == default, (command_name, f.name)
        assert opt.help == meta["help"]
        checked += 1
    assert checked >= 2


def test_run_config_sections_are_the_stage_parameter_classes():
    cfg = RunConfig()
    assert {name: type(getattr(cfg, name)) for name in SECTIONS} == SECTIONS
    assert SECTIONS["probe"] is ProbeParams and SECTIONS["select"] is SelectParams
    # one default each, wherever it is read (these two used to differ between the CLI and a config)
    assert cfg.select.n_sat == _option(cli.get_command(click.Context(cli), "select"), "n_sat").default == 10
    assert cfg.feedback.budget == _option(cli.get_command(click.Context(cli), "feedback"), "budget").default == 1500


def test_an_unwritable_output_path_is_an_input_error_not_a_traceback(files):
    blocker = files["tmp"] / "a-file"
    blocker.write_text("x", encoding="utf-8")
    res = CliRunner().invoke(cli, ["export", "--rubrics", files["rb"], "--out", str(blocker / "sub" / "x.json")])
    assert res.exit_code == EXIT_INPUT and res.output.startswith("error: ") and "a-file" in res.output
