"""Issue 31, item 6: a number or a boolean written as a string in a config is an error naming the field.

``n_sat = "2"`` was read as 2: a config that says ``"2"`` (a quoted TOML string) probably came
from a template or a tool that quotes everything, and some of its other values may be wrong in
ways that do not parse. Every int, float and bool parameter of every section (and of the
method options tables) now refuses a string, naming the field and saying to drop the quotes.
The command line still parses its text (``--hidden 4,4``).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import rubric_induce
from rubric_induce.cli import cli

DEMO = Path(rubric_induce.__file__).resolve().parent / "resources" / "demo_uss_dialogues.jsonl"


def set_key(text: str, section: str, key: str, value: str) -> str:
    """The config ``text`` with ``key = value`` in ``[section]`` (replaced or added)."""
    header = f"[{section}]\n"
    if header not in text:
        text += f"\n{header}"
    start = text.index(header) + len(header)
    nxt = re.search(r"^\[", text[start:], flags=re.MULTILINE)
    end = start + nxt.start() if nxt else len(text)
    body = text[start:end]
    line = re.compile(rf"^{re.escape(key)}\s*=.*$", flags=re.MULTILINE)
    body = line.sub(f"{key} = {value}", body) if line.search(body) else f"{key} = {value}\n{body}"
    return text[:start] + body + text[end:]


def check(tmp_path: Path, fake_run_config: str, section: str, key: str, value: str) -> tuple[int, str]:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(set_key(fake_run_config, section, key, value), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(cfg), "--check"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


@pytest.mark.parametrize("section, key, value, field, hint", [
    ("select", "n_sat", '"2"', "select.n_sat", "write 2 without quotes"),
    ("select", "max_failure_rate", '"0.1"', "select.max_failure_rate", "write 0.1 without quotes"),
    ("run", "seed", '"0"', "run.seed", "write 0 without quotes"),
    ("run", "limit", '"24"', "run.limit", "write 24 without quotes"),
    ("evaluate", "bootstrap", '"100"', "evaluate.bootstrap", "write 100 without quotes"),
    ("probe", "samples", '"3"', "probe.samples", "write 3 without quotes"),
    ("probe", "temperature", '"1"', "probe.temperature", "write 1.0 without quotes"),
    ("backend", "timeout", '"30"', "backend.timeout", "write 30.0 without quotes"),
    ("dedup", "enabled", '"false"', "dedup.enabled", "write false without quotes"),
    ("calibrate", "enabled", '"true"', "calibrate.enabled", "write true without quotes"),
    ("select", "n_dsat", '"two"', "select.n_dsat", "expected an integer, got 'two'"),
])
def test_a_quoted_number_or_boolean_names_the_field(tmp_path, fake_run_config, section, key, value, field, hint):
    rc, out = check(tmp_path, fake_run_config, section, key, value)
    assert rc == 2, out
    assert out.count("error:") == 1 and "cfg.toml" in out and f"'{field}'" in out and hint in out, out


@pytest.mark.parametrize("section, key, value, field", [
    ("generate", "options", '{ top_k = "2", batch_size = 3, max_new = 2 }', "generate.options.top_k"),
    ("select", "options", '{ alpha = "0.5" }', "select.options.alpha"),
    ("calibrate", "options", '{ hidden = [4, 4], finetune_epochs = "5", pretrain = false }',
     "calibrate.options.finetune_epochs"),
    ("calibrate", "options", '{ hidden = ["4", "4"], finetune_epochs = 5, pretrain = false }',
     "calibrate.options.hidden"),
    ("calibrate", "options", '{ hidden = [4, 4], finetune_epochs = 5, pretrain = "false" }',
     "calibrate.options.pretrain"),
])
def test_quoted_numbers_in_options_tables_name_the_field(tmp_path, fake_run_config, section, key, value, field):
    rc, out = check(tmp_path, fake_run_config, section, key, value)
    assert rc == 2, out
    assert out.count("error:") == 1 and field in out, out


def test_the_unquoted_values_pass(tmp_path, fake_run_config):
    rc, out = check(tmp_path, fake_run_config, "select", "n_sat", "2")
    assert rc == 0 and "config OK" in out, out


def test_the_command_line_still_parses_its_text():
    from rubric_induce.calibration.api import CalibrateParams
    from rubric_induce.generation.api import AutoCalibrateParams

    assert AutoCalibrateParams.from_kwargs({"sample_sizes": "4,6", "scale": "1,5"}).sample_sizes == (4, 6)
    assert AutoCalibrateParams.from_kwargs({"scale": "1,5"}).scale == (1, 5)
    assert CalibrateParams.from_kwargs({"question": "q"}).question == "q"
