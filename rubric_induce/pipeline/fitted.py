"""Work fitted on top of a finished run, and what a rerun of ``run`` does with it.

``rubric-induce calibrate-guarantee`` writes its guarantees (``guarantees``) and cascade records
(``cascades``) into the run's ``artifact.json``, next to the keys the artifact stage wrote. That work
was fitted on the artifact as it was (its rubrics, calibration network, Bradley-Terry head, probe
options, threshold), so a rerun of ``run`` treats it so:

* The artifact stage's marker records which keys it wrote and a hash of their values
  (``open_outputs``); ``artifact.json`` that differs only by keys added after the stage is not a
  damaged output, and the stage is not rerun for it.
* When a rerun would rewrite what that work was fitted on (an earlier stage reruns: the config, the
  data or an output changed), ``run`` refuses before anything is written, with exit 2, naming what it
  would discard and why, unless ``--force`` names a stage at or before ``artifact`` (then the
  fitted keys are set aside while the stages rerun).
* Whenever the artifact stage reruns, the *basis* of the fitted work (the artifact's own keys and the
  files they name: the rubric set, the calibration folder, the head) is compared before and after:
  unchanged, the fitted keys are written back; changed, they are discarded when ``--force`` allowed
  it, else ``artifact.json`` is put back as it was and the run stops with exit 2.

What happened is said in one line and recorded in ``manifest.json`` (``fitted``). Files that other
commands put into the run folder are never a stage's output, so a rerun leaves them (see
:func:`~rubric_induce.pipeline.runner.run_pipeline`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.safepaths import lies_inside
from rubric_induce.data.jsonl import atomic_write_text, write_json
from rubric_induce.pipeline.folder import hash_outputs
from rubric_induce.scoring.selective import CASCADES_KEY, GUARANTEES_KEY

__all__ = ["ARTIFACT", "FITTED_KEYS", "FittedWork", "read_fitted", "own_record", "artifact_unchanged_but_added",
           "strip_additions"]

ARTIFACT = "artifact.json"
#: The keys other commands add to artifact.json (what a marker without a key record counts as added).
FITTED_KEYS = (GUARANTEES_KEY, CASCADES_KEY)
#: The artifact's keys that name files of the run (what the fitted work was fitted on besides the keys).
_PATH_KEYS = ("rubrics", "calibration", "pairwise_head")


def _sha(obj: Any) -> str:
    """Hash of JSON values read from a file (sorted keys; a NaN a hostile file holds does not fail it)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _read_doc(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def own_record(run_dir: Path) -> dict[str, Any] | None:
    """What the artifact stage just wrote: its keys and a hash of their values (for its marker)."""
    doc = _read_doc(Path(run_dir) / ARTIFACT)
    return None if doc is None else {"keys": list(doc), "core": _sha(doc)}


def _own_keys(doc: dict[str, Any], record: Any) -> list[str]:
    if isinstance(record, dict) and isinstance(record.get("keys"), list):
        return [k for k in record["keys"] if isinstance(k, str)]
    return [k for k in doc if k not in FITTED_KEYS]  # a marker written before the record


def _core(doc: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    return {k: doc[k] for k in doc if k in keys}


def artifact_unchanged_but_added(run_dir: Path, recorded_sha: str, record: Any) -> bool:
    """Whether ``artifact.json`` holds exactly what the artifact stage wrote plus keys added after it
    (``record``: the marker's ``open_outputs`` entry; without one, the keys of :data:`FITTED_KEYS` are the
    added ones and the rest must serialize to the recorded sha256)."""
    doc = _read_doc(Path(run_dir) / ARTIFACT)
    if doc is None:
        return False
    keys = _own_keys(doc, record)
    if any(k not in doc for k in keys):
        return False
    core = _core(doc, keys)
    if isinstance(record, dict) and isinstance(record.get("core"), str):
        return _sha(core) == record["core"]
    text = json.dumps(core, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
    return hashlib.sha256(text.encode("utf-8")).hexdigest() == recorded_sha


def _basis(run_dir: Path, core: dict[str, Any]) -> str:
    """The artifact's own keys and the content of the files they name (inside the run folder)."""
    files: dict[str, str] = {}
    for key in _PATH_KEYS:
        name = core.get(key)
        if isinstance(name, str) and name.strip() and lies_inside(run_dir / name, run_dir):
            files.update(hash_outputs(run_dir, [name]))
    return _sha({"artifact": core, "files": files})


def _targets(records: list[Any]) -> str:
    seen = [r.get("target") for r in records if isinstance(r, dict)]
    shown = ", ".join(f"{t:g}" if isinstance(t, (int, float)) and not isinstance(t, bool) else "?" for t in seen)
    return f" (target {shown})" if shown else ""


@dataclass
class FittedWork:
    """The keys of ``artifact.json`` that the artifact stage did not write, as found before a rerun."""
    path: Path
    additions: dict[str, Any]
    raw: str    # artifact.json as it was (put back when a rerun may not discard the additions)
    basis: str  # what the additions were fitted on (see :func:`_basis`)

    @property
    def has_work(self) -> bool:
        """Whether any addition holds something (an empty list of guarantees is nothing to lose)."""
        return any(v not in (None, [], {}, "") for v in self.additions.values())

    def describe(self) -> str:
        """E.g. "3 guarantee(s) (target 0.8, 0.85, 0.9) and 1 cascade record(s) in artifact.json"."""
        parts = []
        for key, value in self.additions.items():
            if key == GUARANTEES_KEY and isinstance(value, list):
                parts.append(f"{len(value)} guarantee(s){_targets(value)}")
            elif key == CASCADES_KEY and isinstance(value, list):
                parts.append(f"{len(value)} cascade record(s){_targets(value)}")
            elif value not in (None, [], {}, ""):
                parts.append(f"key {key!r}")
        if not parts:
            parts = [f"key(s) {', '.join(map(repr, self.additions))}"]
        return f"{' and '.join(parts)} in {ARTIFACT}"

    def refusal(self, stage: str, why: str) -> DataError:
        """The error of a rerun that would discard the additions without ``--force``."""
        return DataError(f"this rerun would discard {self.describe()}, fitted on top of the run (calibrate-guarantee): "
                         f"the {stage} stage would rerun ({why}) and rewrite what they were fitted on; rerun with "
                         f"--force {stage} to discard them, or undo that change (copy the run folder first to keep "
                         "both)", path=self.path, field=GUARANTEES_KEY)

    def settle(self, run_dir: Path) -> bool:
        """After the artifact stage reran: write the additions back when their basis is unchanged
        (returns True), else leave the new artifact as it is (False)."""
        doc = _read_doc(Path(run_dir) / ARTIFACT)
        if doc is None or _basis(Path(run_dir), doc) != self.basis:
            return False
        write_json(Path(run_dir) / ARTIFACT, {**doc, **{k: v for k, v in self.additions.items() if k not in doc}})
        return True

    def put_back(self) -> None:
        """``artifact.json`` exactly as it was found."""
        atomic_write_text(self.path, self.raw)


def read_fitted(run_dir: Path, record: Any) -> FittedWork | None:
    """The additions in the run's ``artifact.json`` (``record``: the artifact marker's ``open_outputs``
    entry), or None when it has none (or no readable artifact)."""
    path = Path(run_dir) / ARTIFACT
    try:
        raw = path.read_text(encoding="utf-8")
        doc = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    keys = _own_keys(doc, record)
    additions = {k: v for k, v in doc.items() if k not in keys}
    if not additions:
        return None
    return FittedWork(path, additions, raw, _basis(Path(run_dir), _core(doc, keys)))


def strip_additions(fitted: FittedWork) -> None:
    """Set the additions aside (a consented rerun of an earlier stage: until the artifact is rewritten,
    no stale guarantee stays in the file)."""
    doc = _read_doc(fitted.path)
    if doc is not None:
        write_json(fitted.path, {k: v for k, v in doc.items() if k not in fitted.additions})
