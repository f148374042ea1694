"""A small run config over the bundled demo dialogues, for the fake backend."""
from __future__ import annotations

from pathlib import Path

import pytest

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"

CONFIG = f"""
[run]
seed = 0
limit = 24

[data]
examples = "{RES / 'demo_uss_dialogues.jsonl'}"
label = "sat"

[backend]
spec = "fake"

[generate]
method = "rubicon"
domain = "@{RES / 'demo_uss_domain.txt'}"
per_class = 3
include = ["{RES / 'demo_uss_rubrics.json'}"]
options = {{ top_k = 2, batch_size = 3, max_new = 2 }}

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 2

[calibrate]
question = "satisfaction"
options = {{ hidden = [4, 4], finetune_epochs = 5, pretrain = false }}
"""


@pytest.fixture
def base_config() -> str:
    return CONFIG


@pytest.fixture
def write_config(tmp_path):
    def write(extra: str = "", name: str = "cfg.toml", base: str = CONFIG) -> Path:
        path = tmp_path / name
        path.write_text(base + extra, encoding="utf-8")
        return path
    return write
