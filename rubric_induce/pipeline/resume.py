"""Which stages a rerun of ``run`` reruns, and why.

A stage is done when its marker ``stages/<name>.json`` exists, its fingerprint (the stage's config
sections, the prompt templates it uses, the data hash and the previous stage's fingerprint) is
unchanged, every output it must have exists and every file it wrote still has the sha256 its marker
recorded; a stage that is not done reruns, and so does every later one. :func:`plan_stages` decides
this for every stage before the first one runs (nothing a stage does changes the decision: a rerun
stage makes every later one rerun anyway), and gives each rerun stage its reasons in words: "never
ran", "--force select", "config [select] changed", "the data changed", "prompt template X changed",
"output X changed or damaged since the stage finished", "select reran before it".

The marker records the parts of the fingerprint (``inputs``: a hash per config section, the data
hash, the prompt hashes, the previous fingerprint), so that a changed fingerprint can be explained;
the fingerprint itself is computed as before, so run folders written before this record resume.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.backends.cache import canonical_json
from rubric_induce.backends.redact import redact_obj
from rubric_induce.core.templates import load_prompt
from rubric_induce.pipeline.config import RunConfig
from rubric_induce.pipeline.fitted import ARTIFACT, artifact_unchanged_but_added
from rubric_induce.pipeline.folder import damaged_outputs
from rubric_induce.pipeline.stages import STAGES, Stage

__all__ = ["StagePlan", "plan_stages", "stage_fingerprint", "stage_inputs", "read_marker", "marker_path",
           "prompt_hashes", "sha"]


def sha(obj: Any) -> str:
    """Fingerprint by the cache's exact serialization (nothing is hashed by a truncated ``str``)."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:16]


def prompt_hashes(names: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = load_prompt(name).hash
        except Exception:  # a template this install does not ship cannot change the result
            continue
    return out


def _fingerprint_parts(stage: Stage, cfg: RunConfig, data_hash: str, previous: str) -> dict[str, Any]:
    d = redact_obj(cfg.to_dict())
    d["run"].pop("external_cache", None)  # where the cache may lie changes no result
    d["task"] = cfg.task_resolved.to_dict()  # a description file's content, not only its name
    return {"stage": stage.name, "config": {s: d[s] for s in stage.sections}, "data": data_hash,
            "prompts": prompt_hashes(stage.prompts), "previous": previous}


def stage_fingerprint(stage: Stage, cfg: RunConfig, data_hash: str, previous: str) -> str:
    return sha(_fingerprint_parts(stage, cfg, data_hash, previous))


def stage_inputs(stage: Stage, cfg: RunConfig, data_hash: str, previous: str) -> tuple[str, dict[str, Any]]:
    """The stage's fingerprint and its parts as the marker records them (a hash per config section)."""
    parts = _fingerprint_parts(stage, cfg, data_hash, previous)
    inputs = {"config": {s: sha(v) for s, v in parts["config"].items()}, "data": sha(data_hash),
              "prompts": parts["prompts"], "previous": previous}
    return sha(parts), inputs


def marker_path(out: Path, name: str) -> Path:
    return out / "stages" / f"{name}.json"


def read_marker(out: Path, name: str) -> dict[str, Any] | None:
    path = marker_path(out, name)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError, IsADirectoryError):
        return None
    return doc if isinstance(doc, dict) else None


@dataclass
class StagePlan:
    """One stage's decision: rerun or not, and why (``reasons`` in words; empty when it is done)."""
    stage: Stage
    fingerprint: str
    inputs: dict[str, Any]
    marker: dict[str, Any] | None
    rerun: bool = False
    reasons: list[str] = field(default_factory=list)
    retry: int = 0  # the probe stage's calls that failed last time (retried; the rest is kept)

    @property
    def name(self) -> str:
        return self.stage.name

    @property
    def why(self) -> str:
        return "; ".join(self.reasons)


def plan_stages(cfg: RunConfig, data_hash: str, run_dir: Path, force: tuple[str, ...] = (),
                stages: tuple[Stage, ...] = STAGES) -> list[StagePlan]:
    """Every stage's decision, in order (see the module's docstring)."""
    plans: list[StagePlan] = []
    previous = ""
    earlier: str | None = None  # the first stage that reruns: every later one reruns after it
    forced = False
    for stage in stages:
        fp, inputs = stage_inputs(stage, cfg, data_hash, previous)
        previous = fp
        forced = forced or stage.name in force
        marker = read_marker(run_dir, stage.name)
        plan = StagePlan(stage, fp, inputs, marker)
        plan.reasons = _reasons(plan, run_dir, force, earlier, plans[-1].name if plans else None)
        if not plan.reasons:
            plan.retry = int((marker or {}).get("summary", {}).get("call_errors") or 0)
            if plan.retry:
                plan.reasons = [f"{plan.retry} call(s) failed last time; retrying those (the rest is kept)"]
        plan.rerun = bool(plan.reasons) or forced
        if plan.rerun and earlier is None:
            earlier = stage.name
        plans.append(plan)
    return plans


def _reasons(plan: StagePlan, run_dir: Path, force: tuple[str, ...], earlier: str | None,
             before: str | None) -> list[str]:
    stage, marker = plan.stage, plan.marker
    path = marker_path(run_dir, stage.name)
    if marker is None:
        return ["never ran"] if not path.exists() else [f"its marker stages/{stage.name}.json is unreadable"]
    reasons = []
    if stage.name in force:
        reasons.append(f"--force {stage.name}")
    if earlier is not None:
        reasons.append(f"{earlier} reran before it")
    if marker.get("fingerprint") != plan.fingerprint:
        reasons += _changed_inputs(marker.get("inputs"), plan.inputs, explained=earlier is not None, before=before)
    missing = [o for o in stage.outputs if not (run_dir / o).exists()]
    if missing:
        reasons.append(f"output {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing")
    if reasons:  # rerun anyway: no need to hash its outputs
        return reasons
    recorded = marker.get("outputs") or {}
    damaged = damaged_outputs(run_dir, recorded, source=path)
    # artifact.json with keys added after the stage (calibrate-guarantee's guarantees) is not damaged
    damaged = [d for d in damaged if not (d == ARTIFACT and artifact_unchanged_but_added(
        run_dir, recorded[d], (marker.get("open_outputs") or {}).get(ARTIFACT)))]
    if damaged:
        reasons.append(f"output {', '.join(damaged)} changed or damaged since the stage finished")
    return reasons


def _changed_inputs(old: Any, new: dict[str, Any], *, explained: bool, before: str | None) -> list[str]:
    """Which parts of a changed fingerprint changed, in words (an earlier rerun already explains a
    changed ``previous``)."""
    if not isinstance(old, dict):
        return [] if explained else ["its fingerprint changed (the config, the data, a prompt template or an earlier "
                                     "stage; its marker predates the per-input record)"]
    out = []
    old_cfg = old.get("config") if isinstance(old.get("config"), dict) else {}
    sections = [s for s, h in new["config"].items() if old_cfg.get(s) != h]
    if sections:
        out.append(f"config {', '.join(f'[{s}]' for s in sections)} changed")
    if old.get("data") != new["data"]:
        out.append("the data changed")
    old_prompts = old.get("prompts") if isinstance(old.get("prompts"), dict) else {}
    prompts = sorted(p for p in set(new["prompts"]) | set(old_prompts) if old_prompts.get(p) != new["prompts"].get(p))
    if prompts:
        out.append(f"prompt template(s) {', '.join(prompts)} changed")
    if not out and not explained:
        out.append(f"{before or 'the stage before it'} ran again since it did" if old.get("previous") != new["previous"]
                   else "its fingerprint changed")
    return out
