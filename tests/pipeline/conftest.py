"""Helpers to write variants of the shared fake-run config (see tests/conftest.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def base_config(fake_run_config) -> str:
    return fake_run_config


@pytest.fixture
def write_config(tmp_path, fake_run_config):
    def write(extra: str = "", name: str = "cfg.toml", base: str | None = None) -> Path:
        path = tmp_path / name
        path.write_text((fake_run_config if base is None else base) + extra, encoding="utf-8")
        return path
    return write


_RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"
#: Texts in :func:`embedded_run`: the shortest demo dialogues (about half the tokens of the first 12).
EMBEDDED_RUN_TEXTS = 12
#: Each text cut to this many tokens for the probes (:func:`embedded_run` and the texts its tests probe
#: with the run's settings): the model evaluates about half the tokens; the probe counts do not change.
EMBEDDED_TEXT_TOKENS = 128


def shortest_demo_rows() -> list[dict]:
    """The demo dialogues (rows of ``demo_uss_dialogues.jsonl``), shortest first (ties in file order)."""
    rows = [json.loads(line) for line in (_RES / "demo_uss_dialogues.jsonl").read_text().splitlines() if line]
    return sorted(rows, key=lambda r: len(json.dumps(r["fields"])))


@pytest.fixture(scope="session")
def demo_rows_shortest_first() -> list[dict]:
    """:func:`shortest_demo_rows`: the first ``EMBEDDED_RUN_TEXTS`` are :func:`embedded_run`'s texts."""
    return shortest_demo_rows()


@pytest.fixture(scope="session")
def embedded_run(tmp_path_factory, embedded_model_path):
    """One short `rubric-induce run` on the real embedded model (the 12 shortest demo dialogues,
    :func:`shortest_demo_rows`, cut to ``EMBEDDED_TEXT_TOKENS``, and the 8 hand-written rubrics), shared by the local-model tests:
    ``(config, run folder, the CLI's result)``. Tests that change the run copy it first.

    One calibration fit, without the cross-validated report, the adaptive model or report figures:
    they were most of the fixture's time, do not depend on the backend, and none of these tests reads
    them (the fake-backend runs check them)."""
    from click.testing import CliRunner

    from rubric_induce.cli import cli

    tmp = tmp_path_factory.mktemp("embedded")
    examples = tmp / "dialogues.jsonl"
    examples.write_text("".join(json.dumps(r) + "\n" for r in shortest_demo_rows()[:EMBEDDED_RUN_TEXTS]),
                        encoding="utf-8")
    cfg = tmp / "local.toml"
    cfg.write_text(f"""
[data]
examples = "{examples}"
label = "sat"
[backend]
spec = "local"
[generate]
method = "none"
include = ["{_RES / 'demo_uss_rubrics.json'}"]
[dedup]
enabled = false
[probe]
max_example_tokens = {EMBEDDED_TEXT_TOKENS}
[select]
n_sat = 2
n_dsat = 2
[calibrate]
question = "satisfaction"
options = {{ hidden = [4, 4], finetune_epochs = 10, pretrain = false }}
cv_folds = 0
adaptive = false
[evaluate]
bootstrap = 100
[report]
bootstrap = 100
figures = false
""", encoding="utf-8")
    out = tmp / "run"
    return cfg, out, CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
