"""experiments/_harness.py: config layering and the errors a mistyped key gets."""
from __future__ import annotations

import json

import pytest
from experiment_loader import load_experiment

harness = load_experiment("_harness")
DEFAULTS = {"limit": 3, "aspects": ["coherence"], "n_boot": 100}


def start(tmp_path, *argv, config=None):
    path = tmp_path / "c.toml"
    path.write_text(config or "")
    return harness.start("demo", "doc", DEFAULTS, argv=["--config", str(path), "--out", str(tmp_path / "run"), *argv])


def test_flags_override_config_which_overrides_defaults(tmp_path):
    exp, _ = start(tmp_path, "--limit", "7", "--set", "n_boot=5", config="limit = 4\naspects = ['fluency']\n")
    assert exp.config["limit"] == 7 and exp.config["n_boot"] == 5 and exp.config["aspects"] == ["fluency"]
    assert exp.config["cache"].endswith("llm_calls.sqlite")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["n_boot"] == 5


def test_mistyped_set_key_is_an_error_with_a_suggestion(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        start(tmp_path, "--set", "n_bot=5")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown config key(s) 'n_bot' (did you mean 'n_boot'?)" in err
    assert not (tmp_path / "run").exists()  # nothing written for a typo


def test_mistyped_key_in_the_config_file_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        start(tmp_path, config="aspect = ['fluency']\n")
    assert "'aspect' (did you mean 'aspects'?)" in capsys.readouterr().err


def test_common_keys_are_accepted_everywhere(tmp_path):
    exp, _ = start(tmp_path, "--set", 'data_root="/nowhere"', config="seed = 3\nbackend = 'fake'\n")
    assert exp.config["data_root"] == "/nowhere" and exp.config["seed"] == 3


def test_finish_records_the_command_that_reruns_it(tmp_path):
    exp, _ = start(tmp_path, "--limit", "2", "--set", 'aspects=["a b"]')
    path = exp.finish({"x": 1}, "# Title\n\nbody")
    text = path.read_text()
    assert text.startswith("# Title\n\nbody\n\nRuntime ")
    command = f"bash scripts/experiment.sh demo --config {tmp_path / 'c.toml'} --out {tmp_path / 'run'} --limit 2 --set 'aspects=[\"a b\"]'"
    assert f"Reproduce: `{command}`" in text
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["command"] == command and manifest["config"]["limit"] == 2
    assert json.loads((tmp_path / "run" / "results.json").read_text())["results"] == {"x": 1}


def test_set_value_of_the_wrong_type_is_refused_like_a_config_value(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        start(tmp_path, "--set", 'n_boot="many"')
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "n_boot" in err and "expected an integer" in err


def tool_parser(out_file=False):
    """A script with its own flags, as the benchmarks and data tools are (parser + begin)."""
    ap = harness.parser("demo_tool", "doc", out_file=out_file)
    ap.add_argument("--texts", type=int, default=10)
    ap.add_argument("--limit", type=float, default=5.0, help="seconds (replaces the shared --limit)")
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--mode", choices=("a", "b"), default="a")
    return ap


def test_a_tool_takes_the_shared_flags_and_records_its_own(tmp_path):
    out = tmp_path / "run"
    exp, args = harness.begin(tool_parser(), ["--out", str(out), "--texts", "3", "--set", "mode=b",
                                              "--set", "fast=true", "--seed", "7"])
    assert (args.texts, args.mode, args.fast, args.limit) == (3, "b", True, 5.0)  # --set reached the script
    config = json.loads((out / "config.json").read_text())
    assert config == exp.config and config["out"] == str(out) and config["seed"] == 7
    assert (config["texts"], config["mode"], config["fast"], config["limit"]) == (3, "b", True, 5.0)
    assert json.loads((out / "manifest.json").read_text())["command"].startswith("bash scripts/experiment.sh demo_tool")
    assert exp.close({"n": 1}, exit_code=1) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["exit_code"] == 1 and json.loads((out / "results.json").read_text())["results"] == {"n": 1}


def test_a_flag_written_on_the_command_line_beats_set(tmp_path):
    _, args = harness.begin(tool_parser(), ["--out", str(tmp_path), "--set", "texts=4", "--texts", "9"])
    assert args.texts == 9


@pytest.mark.parametrize("setting, message", [("txets=4", "unknown config key(s) 'txets'"),
                                              ("texts=\"many\"", "config key 'texts'"),
                                              ("mode=c", "'c' is not one of"),
                                              ("fast=1", "expected true or false")])
def test_a_tool_refuses_a_bad_setting_like_a_bad_flag(tmp_path, capsys, setting, message):
    with pytest.raises(SystemExit) as exc:
        harness.begin(tool_parser(), ["--out", str(tmp_path), "--set", setting])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_data_tool_keeps_its_run_record_beside_the_file_it_writes(tmp_path):
    out = tmp_path / "judgements.jsonl"
    exp, args = harness.begin(tool_parser(out_file=True), ["--out", str(out)])
    assert args.out == out and not out.exists()  # the tool writes it; the record sits beside it
    assert exp.out == tmp_path / "judgements.jsonl.run" and (exp.out / "config.json").is_file()
