"""Which optional stages a run must skip because their package is not installed.

A base install (``pip install rubric-induce``, no extras) still runs ``rubric-induce run`` to a
report: de-duplication without ``sentence-transformers`` keeps the pool as generated, calibration
without ``torch`` leaves the artifact uncalibrated (NetSAT and the linear score still work), and the
report leaves its figures out without ``matplotlib``. Each skip is announced before the first LLM
call (preflight), again when the stage runs, recorded in the stage summary and listed in the report,
with the command that installs what is missing: never silent.
"""
from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["OPTIONAL_STAGES", "missing_packages", "skip_note", "skip_notes"]

# stage -> (packages it imports, pip extra that installs them, what is lost without them)
OPTIONAL_STAGES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "dedup": (("sentence_transformers",), "embed", "the pool is kept as generated (no near-duplicate is merged)"),
    "calibrate": (("torch", "safetensors", "sklearn"), "calibrate",
                  "no calibration network is fitted (scores are NetSAT and the linear score only)"),
}


def missing_packages(packages: tuple[str, ...]) -> list[str]:
    """The importable names among ``packages`` that this environment does not have."""
    return [p for p in packages if importlib.util.find_spec(p) is None]


def skip_note(stage: str, config: Any) -> str | None:
    """Why ``stage`` of a run with ``config`` will be skipped, or None when it runs as configured."""
    if stage not in OPTIONAL_STAGES or not getattr(getattr(config, stage), "enabled", False):
        return None
    packages, extra, lost = OPTIONAL_STAGES[stage]
    missing = missing_packages(packages)
    if not missing:
        return None
    names = " and ".join(repr(m.replace("_", "-")) for m in missing)
    what = f"package {names} is" if len(missing) == 1 else f"packages {names} are"
    return (f"{stage} skipped: the optional {what} not installed, so {lost}; "
            f"pip install 'rubric-induce[{extra}]' and rerun to add it")


def skip_notes(config: Any) -> list[str]:
    """Every optional stage this run will skip, with why (empty when all are installed or off)."""
    return [note for stage in OPTIONAL_STAGES if (note := skip_note(stage, config)) is not None]
