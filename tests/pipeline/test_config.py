"""Run-config validation: every mistake names the file, the field and (for syntax) the line."""
from __future__ import annotations

import pytest

from rubric_induce.core.errors import DataError
from rubric_induce.pipeline import load_config


def test_valid_config_loads_with_defaults(write_config):
    cfg = load_config(write_config())
    assert cfg.data.label == "sat" and cfg.backend.spec == "fake"
    assert cfg.probe.style == "score-only" and cfg.dedup.enabled is False
    assert cfg.calibrate.options["hidden"] == [4, 4]
    assert cfg.run.test_size == 0.5


@pytest.mark.parametrize("text, field, needle", [
    ("[selct]\nn_sat = 1\n", "selct", "did you mean 'select'"),
    ("[feedback]\nbudgett = 2000\n", "feedback.budgett", "did you mean 'budget'"),
    ("[feedback]\nbudget = 'lots'\n", "feedback.budget", "expected an integer"),
    ("[feedback]\nbudget = 10\n", "feedback.budget", "at least 64"),
    ("[probe]\nstyle = 'vibes'\n", "probe.style", "unknown value 'vibes'"),
    ("[evaluate]\nenabled = 'yes'\n", "evaluate.enabled", "expected true or false"),
])
def test_bad_keys_and_values_name_the_field(write_config, text, field, needle):
    path = write_config(text)
    with pytest.raises(DataError) as err:
        load_config(path)
    assert err.value.field == field
    assert needle in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("old, new, field, needle", [
    ('method = "rubicon"', 'method = "rubikon"', "generate.method", "did you mean 'rubicon'"),
    ("top_k = 2,", "topk = 2,", "generate.options.topk", "unknown option"),
    ("n_sat = 2", "n_sat = 0\n", "select", None),
    ("finetune_epochs = 5", "finetune_epochz = 5", "calibrate.options.finetune_epochz", "unknown option"),
    ("hidden = [4, 4]", "hidden = [4]", "calibrate.options.hidden", "two positive sizes"),
    ('label = "sat"', 'label = "sat"\ndataset = "uss-sgd"', "data", "exactly one"),
    ("demo_uss_dialogues.jsonl", "nope.jsonl", "data.examples", "not found"),
])
def test_semantic_errors(write_config, base_config, old, new, field, needle):
    CONFIG = base_config
    assert old in CONFIG
    path = write_config(base=CONFIG.replace(old, new, 1))
    if new == "n_sat = 0\n":
        path.write_text(CONFIG.replace("n_sat = 2\nn_dsat = 2", "n_sat = 0\nn_dsat = 0"), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_config(path)
    assert err.value.field == field
    if needle:
        assert needle in str(err.value)


def test_toml_syntax_error_has_line_number(write_config, base_config):
    CONFIG = base_config
    path = write_config("[dedup2\nthreshold = 0.9\n")
    with pytest.raises(DataError) as err:
        load_config(path)
    assert err.value.line == CONFIG.count("\n") + 1
    assert "invalid TOML" in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_config(tmp_path / "absent.toml")


def test_relative_paths_resolve_against_the_config_folder(tmp_path, base_config):
    CONFIG = base_config
    (tmp_path / "data").mkdir()
    src = CONFIG.split("examples = ")[1].split("\n")[0].strip('"')
    (tmp_path / "data" / "ex.jsonl").write_text(open(src, encoding="utf-8").read(), encoding="utf-8")
    text = CONFIG.replace(f'examples = "{src}"', 'examples = "data/ex.jsonl"')
    path = tmp_path / "cfg.toml"
    path.write_text(text, encoding="utf-8")
    cfg = load_config(path)
    assert cfg.resolve(cfg.data.examples) == tmp_path / "data" / "ex.jsonl"


def test_yaml_config(tmp_path, base_config):
    CONFIG = base_config
    yaml = pytest.importorskip("yaml")
    import tomllib

    raw = tomllib.loads(CONFIG)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert load_config(path).select.n_sat == 2
    path.write_text("run: [unclosed\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_config(path)
    assert err.value.line == 2 and "invalid YAML" in str(err.value)  # the parser gives up at the end
