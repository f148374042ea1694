"""The small run config the reliability suite builds on: the 8 hand-written demo rubrics on a few
demo dialogues, no generation, no dedup (about a second on the fake backend).

Imported as ``from runconfigs import small_run_config`` (pytest puts this folder on ``sys.path``
for the suite's test files, which have no ``__init__.py``).
"""
from __future__ import annotations

from pathlib import Path

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"

#: A calibration network small enough to train in a second, its 2-fold report and an adaptive model of one
#: member trained 20 epochs (the defaults, 5 folds and 5 members of 200 epochs, took 4-5 s of CPU a fit).
CALIBRATE = ('question = "satisfaction"\ncv_folds = 2\noptions = { hidden = [4, 4], finetune_epochs = 5, pretrain = false }'
             '\nadaptive_options = { epochs = 20, n_members = 1 }')


def small_run_config(spec: str = "fake", *, limit: int = 12, backend_extra: str = "", calibrate: bool = False,
                     bootstrap: int = 50, preset: bool = True, report: str = "") -> str:
    """The TOML text. ``backend_extra``: more ``[backend]`` lines; ``report``: ``[report]`` lines
    (e.g. ``figures = false``); ``calibrate``: train :data:`CALIBRATE` instead of switching it off."""
    task = '[task]\npreset = "uss"\n' if preset else ""
    return f"""[run]
seed = 0
limit = {limit}
{task}[data]
examples = "{(RES / 'demo_uss_dialogues.jsonl').as_posix()}"
label = "sat"
[backend]
spec = "{spec}"
{backend_extra}
[generate]
method = "none"
include = ["{(RES / 'demo_uss_rubrics.json').as_posix()}"]
[dedup]
enabled = false
[select]
n_sat = 2
n_dsat = 2
[calibrate]
{CALIBRATE if calibrate else "enabled = false"}
[evaluate]
bootstrap = {bootstrap}
{f"[report]{chr(10)}{report}" if report else ""}
"""


def probe_stage_calls(run_dir: Path) -> int:
    """The calls a finished run's probe stage asks: one per probe, plus the direct judge's question of
    each held-out text, asked right after that text's rubrics (``direct_probes.jsonl``, one line each)."""
    def lines(name: str) -> int:
        path = run_dir / name
        return sum(1 for line in path.open(encoding="utf-8") if line.strip()) if path.exists() else 0

    return lines("probes.jsonl") + lines("direct_probes.jsonl")
