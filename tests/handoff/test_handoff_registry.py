"""The hand-off format registry (issue 32): one Registry pattern for backends, generators and hand-off
formats; handoff core imports no tool module; export / import dispatch through the registry."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from rubric_induce.backends.registry import BACKENDS
from rubric_induce.cli import cli
from rubric_induce.core.registry import Registry
from rubric_induce.data import RubricSet
from rubric_induce.generation.registry import GENERATORS
from rubric_induce.handoff.registry import FORMATS


def test_backends_generators_and_formats_are_one_registry_pattern():
    assert all(isinstance(r, Registry) for r in (BACKENDS, GENERATORS, FORMATS))
    assert set(GENERATORS.names()) == {"rubicon", "spur", "autocalibrate", "contrastive"}
    assert GENERATORS.get("spur").params.__name__ == "RubiconParams"
    assert FORMATS.get("promptfoo").read is not None and FORMATS.get("inspect").read is None


@pytest.mark.parametrize("module", ["checks", "rubric_set_json", "llm_rubric_layout", "rubric_files"])
def test_our_formats_import_no_tool_module(module):
    import ast
    import importlib

    own = {"rubric_induce.handoff." + m for m in ("checks", "rubric_set_json", "llm_rubric_layout", "registry")}
    path = importlib.import_module(f"rubric_induce.handoff.{module}").__file__
    tree = ast.parse(open(path, encoding="utf-8").read())
    named = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    named |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    ours = sorted(m for m in named if m.startswith("rubric_induce.handoff"))
    assert set(ours) <= own, ours


def test_cli_format_choices_come_from_the_registry():
    from rubric_induce.cli.export import command as export_cmd
    from rubric_induce.cli.import_ import command as import_cmd

    def choices(cmd):
        return list(next(p for p in cmd.params if p.name == "fmt").type.choices)

    # "judgements" exports a run's held-out texts (data for calibrate-guarantee), not a rubric set, so it
    # is the one export choice outside the hand-off registry; import reads rubric sets only.
    assert choices(export_cmd) == [*FORMATS.names(), "judgements"]
    assert "judgements" not in FORMATS.names()
    assert choices(import_cmd) == ["auto", *FORMATS.names()]


def test_export_jsonl_gives_the_selected_pool_back(handoff_run, tmp_path):
    out = tmp_path / "selected.jsonl"
    res = CliRunner().invoke(cli, ["export", str(handoff_run), "--format", "jsonl", "--out", str(out)])
    assert res.exit_code == 0, res.output
    got, want = RubricSet.load(out), RubricSet.load(handoff_run / "selected.jsonl")
    assert [r.to_dict() for r in got] == [r.to_dict() for r in want]
    back = tmp_path / "back.jsonl"
    res = CliRunner().invoke(cli, ["import", str(out), "--out", str(back)])  # auto: a pool by its suffix
    assert res.exit_code == 0, res.output and [r.id for r in RubricSet.load(back)] == [r.id for r in want]


def test_import_of_an_inspect_module_says_what_to_import(handoff_run, tmp_path):
    module = tmp_path / "rubric_scorer.py"
    assert CliRunner().invoke(cli, ["export", str(handoff_run), "--format", "inspect", "--out", str(module)]).exit_code == 0
    res = CliRunner().invoke(cli, ["import", str(module), "--format", "inspect", "--out", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 2 and "holds no rubrics" in res.output
