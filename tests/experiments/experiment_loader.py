"""Import an experiment script (experiments/ is not a package) for its tests, and check the run
record every experiment writes."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("bench", "papers", "tools")  # how experiments/ is filed (experiments/_harness.py FOLDERS)


def experiment_path(name: str) -> Path:
    """``experiments/<folder>/<name>.py`` (the shared ``_*.py`` sit on top); ``name`` may carry its folder."""
    folders = [""] if "/" in name or name.startswith("_") else FOLDERS
    found = [p for folder in folders if (p := ROOT / "experiments" / folder / f"{name}.py").is_file()]
    if len(found) != 1:
        raise FileNotFoundError(f"experiment {name!r}: {len(found)} scripts under experiments/{{bench,papers,tools}}/")
    return found[0]


def load_experiment(name: str) -> ModuleType:
    """``experiments/<folder>/<name>.py`` as a module registered under its file name."""
    path = experiment_path(name)
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check_run_record(out: Path, name: str, **flags: Any) -> dict[str, Any]:
    """Parse ``manifest.json``, ``config.json`` and ``results.json``; check that they agree with each
    other and with the flags the run was given (``--backend fake`` and ``--set`` values); return the
    results.json ``results``."""
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert manifest["experiment"] == results["experiment"] == name
    assert manifest["config"] == results["config"] == config
    assert manifest["command"] == results["command"]
    assert manifest["command"].startswith(f"bash scripts/experiment.sh {name} --backend fake")
    assert config["out"] == str(out) and config["backend"] == "fake"
    assert {k: config[k] for k in flags} == flags
    usage = manifest["usage"]
    assert usage == results["usage"] and usage["calls"] > 0 and usage["prompt_tokens"] > 0
    assert usage["cache_hits"] <= usage["calls"] and usage["cost_usd"] == 0.0  # the fake backend is free
    assert manifest["runtime_s"] >= 0 and manifest["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    return results["results"]
