"""Run the stages in order, skip the ones already finished with the same inputs, keep a manifest.

Resuming: a stage is done when its marker ``stages/<name>.json`` exists, its fingerprint (the
stage's config sections, the prompt templates it uses, the data hash and the previous stage's
fingerprint) is unchanged and every file it wrote still has the sha256 its marker recorded; a
stage whose output changed or was damaged reruns (and says so), and so does every later one.
LLM calls go through the run's SQLite cache, so a stage interrupted half-way (crash, Ctrl-C,
SIGKILL) redoes only the calls it had not finished; the probe stage also streams its records to
``probes.jsonl`` and resumes from them (see :func:`.stages.probe`), and a probe stage that finished
with failed calls (``call_errors`` in its summary) is run again on the next run, which probes only
those. The manifest is rewritten after every stage and on interruption.

The run folder (see :mod:`.folder`): one run at a time holds its lock; a non-empty folder that is
not a run's is refused before anything is written; a rerun stage replaces or removes only files
that the run wrote.

Secrets: ``manifest.json``, ``config.json`` and the stage markers are written through
:func:`~rubric_induce.backends.redact.redact_obj` (a ``user:pass@`` or ``?api_key=`` in a backend URL
becomes ``***``), and the fingerprints hash the redacted config. The usage of a stage (per stage
and in total) includes the served backend's fault counters (retries, 429s, 5xx, timeouts,
connection errors, bad replies, failed calls, seconds waited); a stage that had faults says so in
one line, and a failed or interrupted stage keeps the usage it had.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_induce import __version__
from rubric_induce.backends.base import fault_summary
from rubric_induce.backends.redact import redact_obj, redact_spec
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.safepaths import inside_folder
from rubric_induce.data.jsonl import jsonable
from rubric_induce.data.jsonl import write_json as _write_json
from rubric_induce.pipeline.config import RunConfig, load_config
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.folder import (
    RunLock,
    changed_files,
    check_cache_location,
    check_run_folder,
    damaged_outputs,
    file_sha256,
    hash_outputs,
    snapshot,
)
from rubric_induce.pipeline.stages import STAGE_NAMES, STAGES, Stage

__all__ = ["RunResult", "run_pipeline", "run_dir_for", "preflight", "check_run_dir"]


@dataclass
class RunResult:
    out: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    summaries: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def report(self) -> Path:
        return self.out / "report.md"


def write_json(path: Path, doc: Any) -> Path:
    """``doc`` as JSON at ``path``, with credentials in URLs redacted (every run-folder record)."""
    return _write_json(path, redact_obj(doc))


def _redacted_config(cfg: RunConfig) -> dict[str, Any]:
    """The config as written and hashed: no credential of a backend URL in it."""
    return redact_obj(cfg.to_dict())


def run_dir_for(config: RunConfig, out: str | Path | None = None) -> Path:
    """``out``, else ``[run] out``, else ``runs/<config file stem>`` (relative to the working directory;
    ``~`` expanded)."""
    if out is not None:
        return Path(out).expanduser()
    if config.run.out:
        return Path(config.run.out).expanduser()
    stem = Path(config.source).stem if config.source else "run"
    return Path("runs") / stem


def check_run_dir(config: RunConfig, run_dir: Path, *, out: str | Path | None = None) -> Path:
    """Checks of the run folder, before anything is written: it is absent, empty or a run's folder, and
    the call cache lies inside it unless ``[run] external_cache`` says otherwise. Returns the cache path."""
    check_run_folder(run_dir, field=None if out is not None else "run.out")
    return check_cache_location(config.backend.cache, run_dir, external_ok=config.run.external_cache,
                                source=config.source)


def preflight(ctx: RunContext) -> None:
    """Checks that need the data, done before any LLM call so a long run cannot fail late on them.

    ``run --check`` runs exactly this (after loading the config and the data), nothing less and
    nothing more, so it refuses what a run would refuse before paying for its first LLM call."""
    from rubric_induce.core.errors import DataError
    from rubric_induce.pipeline.config import with_config_line

    try:
        _preflight(ctx)
    except DataError as exc:  # a config setting named: add the line that sets it
        raise with_config_line(exc, ctx.config.source) from None


def _preflight(ctx: RunContext) -> None:
    from rubric_induce.core.errors import DataError
    from rubric_induce.data.labels import check_binary
    from rubric_induce.pipeline.checks import check_run_inputs
    from rubric_induce.pipeline.optional import skip_notes

    cfg = ctx.config
    for note in skip_notes(cfg):  # announced before the first LLM call, not discovered after it
        ctx.echo(f"note: {note}")
    from rubric_induce.probing.plan import check_logprobs_support

    # a reasoning model (gpt-5, o1/o3/o4) returns no logprobs: refuse before generate pays for calls
    check_logprobs_support(cfg.backend.spec.split("/", 1)[-1], cfg.probe.estimator, source=cfg.source)
    _ = cfg.task_resolved  # reads a description file now: a missing one fails before any LLM call
    if ctx.pairwise:  # pairs: read (a bad row stops here), split, and enough training preferences
        from rubric_induce.pipeline.pairwise_stages import preflight_pairs

        check_run_inputs(ctx, calibrate=False)
        preflight_pairs(ctx)
        return
    if cfg.probe.pairwise:
        raise DataError("the pairwise probe compares the two responses of a pair; it needs [data] kind = "
                        "\"pairwise\"", path=cfg.source, field="probe.pairwise")
    check_run_inputs(ctx)  # fields, calibrate question and answers, against the examples
    needs_binary = cfg.generate.method in ("rubicon", "spur") or cfg.select.method != "topk"
    if needs_binary and not ctx.binary:
        check_binary(ctx.y, label=cfg.data.label, both_classes=False, path=cfg.source, field="data.label_threshold",
                     fix="set data.label_threshold (label >= T counts as positive), or use "
                         "generate.method = 'autocalibrate' with select.method = 'topk'")
    if ctx.binary and len(set(ctx.y.tolist())) < 2:  # every example in one class: the label, not the split
        only = "positive" if ctx.y.size and ctx.y[0] == 1 else "negative"
        if cfg.data.label_threshold is not None:
            from rubric_induce.data.labels import labels_from_examples

            raw = labels_from_examples(ctx.examples, cfg.data.label)
            raise DataError(f"with label_threshold {cfg.data.label_threshold:g} every one of the {ctx.y.size} examples "
                            f"is {only} (label {cfg.data.label!r} runs from {raw.min():g} to {raw.max():g}): "
                            "choose a threshold inside that range", path=cfg.source, field="data.label_threshold")
        raise DataError(f"every one of the {ctx.y.size} examples is {only} on label {cfg.data.label!r}: selection "
                        "needs positive and negative examples", path=cfg.source, field="data.label")
    if ctx.binary and len(set(ctx.y[ctx.split[0]].tolist())) < 2:
        raise DataError("the training split holds one class only; use more examples or a smaller run.test_size",
                        path=cfg.source, field="run.test_size")


def _sha(obj: Any) -> str:
    """Fingerprint by the cache's exact serialization (nothing is hashed by a truncated ``str``)."""
    from rubric_induce.backends.cache import canonical_json

    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:16]


def _prompt_hashes(names: tuple[str, ...]) -> dict[str, str]:
    from rubric_induce.core.templates import load_prompt

    out = {}
    for name in names:
        try:
            out[name] = load_prompt(name).hash
        except Exception:  # a template this install does not ship cannot change the result
            continue
    return out


def stage_fingerprint(stage: Stage, cfg: RunConfig, data_hash: str, previous: str) -> str:
    d = _redacted_config(cfg)
    d["run"].pop("external_cache", None)  # where the cache may lie changes no result
    d["task"] = cfg.task_resolved.to_dict()  # a description file's content, not only its name
    return _sha({"stage": stage.name, "config": {s: d[s] for s in stage.sections}, "data": data_hash,
                 "prompts": _prompt_hashes(stage.prompts), "previous": previous})


def _marker(out: Path, name: str) -> Path:
    return out / "stages" / f"{name}.json"


def read_marker(out: Path, name: str) -> dict[str, Any] | None:
    path = _marker(out, name)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _diff_usage(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {k: round(after.get(k, 0) - before.get(k, 0), 8) for k in after if isinstance(after.get(k), (int, float))}


def _stage_usage(stage: Stage, ctx: RunContext, before: dict[str, Any]) -> dict[str, Any]:
    """What the stage's LLM calls used; a stage that is not an LLM stage (dedup) shows usage only when
    it made calls (its optional LLM judge shares the run's tally)."""
    if not ctx.backend_opened:
        return {}
    usage = _diff_usage(before, ctx.usage())
    return usage if stage.uses_llm or any(usage.values()) else {}


def run_pipeline(
    config: RunConfig | str | Path,
    *,
    out: str | Path | None = None,
    backend: Any = None,
    stop_after: str | None = None,
    force: tuple[str, ...] = (),
    progress: bool = False,
    echo: Callable[[str], None] = print,
) -> RunResult:
    """Run (or resume) the whole pipeline described by ``config`` into a run directory.

    ``backend``: a Backend object to use instead of ``[backend] spec`` (tests, notebooks).
    ``stop_after``: stop after this stage. ``force``: rerun these stages (and everything after).
    """
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    if stop_after is not None and stop_after not in STAGE_NAMES:
        raise RubricInduceError(f"unknown stage {stop_after!r}; stages: {', '.join(STAGE_NAMES)}")
    for name in force:
        if name not in STAGE_NAMES:
            raise RubricInduceError(f"unknown stage {name!r}; stages: {', '.join(STAGE_NAMES)}")
    run_dir = run_dir_for(cfg, out)
    cache_path = check_run_dir(cfg, run_dir, out=out)
    if cfg.prices:  # the config's rates price this process's calls (run accounting) too
        from rubric_induce.backends.pricing import register_prices

        register_prices(cfg.prices)
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(run_dir):  # a second run on this folder fails at once, naming this one
        return _run_locked(cfg, run_dir, cache_path, backend=backend, stop_after=stop_after, force=force,
                           progress=progress, echo=echo)


def _run_locked(cfg: RunConfig, run_dir: Path, cache_path: Path, *, backend: Any, stop_after: str | None,
                force: tuple[str, ...], progress: bool, echo: Callable[[str], None]) -> RunResult:
    ctx = RunContext(cfg, run_dir, progress=progress, echo=echo, backend_override=backend)
    result = RunResult(run_dir)
    manifest = _start_manifest(cfg, run_dir)
    _write_manifest(run_dir, manifest, ctx)  # first: a folder this run wrote in is a run folder
    (run_dir / "stages").mkdir(exist_ok=True)
    write_json(run_dir / "config.json", {"source": cfg.source, **cfg.to_dict()})
    skip = _cache_files(cache_path, run_dir)
    previous = ""
    forced = False
    current = None
    current_stage: Stage | None = None
    before: dict[str, Any] = {}
    try:
        preflight(ctx)
        manifest["data"] = {"source": cfg.data.examples or cfg.data.dataset, "n_examples": len(ctx.examples),
                            "sha256": ctx.data_hash, "label": cfg.data.label,
                            "n_train": len(ctx.split[0]), "n_test": len(ctx.split[1])}
        if ctx.pairwise:
            manifest["data"].update(kind="pairwise", n_pairs=len(ctx.pairs), n_train_pairs=len(ctx.train_pairs),
                                    n_test_pairs=len(ctx.test_pairs))
        for stage in STAGES:
            current = stage.name
            fp = stage_fingerprint(stage, cfg, ctx.data_hash, previous)
            previous = fp
            forced = forced or stage.name in force
            marker = read_marker(run_dir, stage.name)
            done = (not forced and marker is not None and marker.get("fingerprint") == fp
                    and all((run_dir / o).exists() for o in stage.outputs))
            damaged = (damaged_outputs(run_dir, marker.get("outputs") or {}, source=_marker(run_dir, stage.name))
                       if done else [])
            retry = int((marker or {}).get("summary", {}).get("call_errors") or 0) if done else 0
            if retry:  # calls that failed for good last time: probe them again, keep the rest
                done = False
                echo(f"[{stage.name}] {retry} call(s) failed last time; retrying those (the rest is kept)")
            if damaged:
                done = False
                echo(f"[{stage.name}] output {', '.join(damaged)} changed or damaged since the stage finished; "
                     "rerunning")
            if done:
                result.skipped.append(stage.name)
                result.summaries[stage.name] = marker.get("summary", {})
                manifest["stages"][stage.name] = {**{k: marker[k] for k in ("seconds", "finished", "usage")
                                                     if k in marker}, "status": "done (resumed)"}
                echo(f"[{stage.name}] already done, skipped")
            else:
                forced = True  # everything after a rerun stage reruns too
                old_outputs = (marker or {}).get("outputs") or {}
                _marker(run_dir, stage.name).unlink(missing_ok=True)
                echo(f"[{stage.name}] running ...")
                manifest["stages"][stage.name] = {"status": "running"}
                # The report is the last stage and shows the manifest: it is written as finished.
                manifest["status"] = "finished" if stage.name == STAGE_NAMES[-1] else f"running {stage.name}"
                _write_manifest(run_dir, manifest, ctx)
                before, current_stage = ctx.usage(), stage
                ctx.stage_fingerprint = fp
                files_before = snapshot(run_dir, skip)
                t0 = time.perf_counter()
                summary = stage.run(ctx)
                seconds = round(time.perf_counter() - t0, 2)
                # the files this stage wrote, by content: a rerun trusts them only while unchanged
                outputs = hash_outputs(run_dir, [*changed_files(files_before, snapshot(run_dir, skip)),
                                                 *stage.outputs])
                _remove_stale(run_dir, old_outputs, outputs, source=_marker(run_dir, stage.name))
                usage = _stage_usage(stage, ctx, before)
                current_stage = None
                finished = datetime.now(UTC).isoformat(timespec="seconds")
                write_json(_marker(run_dir, stage.name), {"stage": stage.name, "fingerprint": fp, "seconds": seconds,
                                                          "finished": finished, "usage": usage,
                                                          "summary": jsonable(summary), "outputs": outputs})
                manifest["stages"][stage.name] = {"status": "done", "seconds": seconds, "finished": finished,
                                                  "usage": usage}
                result.ran.append(stage.name)
                result.summaries[stage.name] = summary
                echo(f"[{stage.name}] done in {seconds:.1f} s")
                faults = fault_summary(usage)
                if faults:
                    echo(f"[{stage.name}] {faults}")
            _write_manifest(run_dir, manifest, ctx)
            if stage.name == stop_after:
                break
        manifest["status"] = "finished" if stop_after in (None, STAGE_NAMES[-1]) else f"stopped after {stop_after}"
        current = None
    except KeyboardInterrupt:
        manifest["status"] = f"interrupted during {current}; rerun the same command to resume"
        if current:
            manifest["stages"][current] = {"status": "interrupted", **_partial_usage(current_stage, ctx, before)}
        raise
    except BaseException as exc:
        manifest["status"] = f"failed during {current}: {type(exc).__name__}: {exc}"
        if current:
            manifest["stages"][current] = {"status": "failed", **_partial_usage(current_stage, ctx, before)}
            faults = fault_summary(manifest["stages"][current].get("usage") or {})
            if faults:
                echo(f"[{current}] {faults}")
        raise
    finally:
        manifest["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        _write_manifest(run_dir, manifest, ctx)
        ctx.close()
        result.manifest = manifest
    return result


def _partial_usage(stage: Stage | None, ctx: RunContext, before: dict[str, Any]) -> dict[str, Any]:
    """The usage (calls, tokens, faults) of a stage that failed or was interrupted half-way."""
    if stage is None:
        return {}
    try:
        usage = _stage_usage(stage, ctx, before)
    except Exception:  # never hide the original error behind a bookkeeping one
        return {}
    return {"usage": usage} if usage else {}


def _cache_files(cache_path: Path, run_dir: Path) -> set[str]:
    """The call cache's files inside the run folder (SQLite and its journals): no stage's output."""
    try:
        rel = Path(cache_path).resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return set()
    return {rel + suffix for suffix in ("", "-wal", "-shm", "-journal")}


def _remove_stale(run_dir: Path, old: dict[str, str], new: dict[str, str], *, source: Path | None = None) -> None:
    """Remove the files a stage's previous run wrote and this run did not, when still as it wrote them
    (a file someone else put or changed there stays); folders left empty go too. Only inside the run
    folder: every name is checked before any file is removed (``source``: the marker they came from)."""
    root = Path(os.path.realpath(run_dir))
    paths = {name: inside_folder(run_dir, name, path=source, field="outputs") for name in old}
    kept = {Path(os.path.realpath(run_dir / name)) for name in new}
    for name, digest in old.items():
        path = paths[name]
        if name in new or path in kept or not path.is_file():
            continue
        try:
            if file_sha256(path) != digest:
                continue
            path.unlink()
        except OSError:
            continue
        parent = path.parent
        while parent != root and parent.is_relative_to(root):
            try:
                parent.rmdir()  # only when empty
            except OSError:
                break
            parent = parent.parent


def _start_manifest(cfg: RunConfig, run_dir: Path) -> dict[str, Any]:
    old = {}
    try:
        old = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        pass
    all_prompts = sorted({p for s in STAGES for p in s.prompts})
    return {
        "format": "rubric-induce-run", "format_version": 1,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "first_started": old.get("first_started") or old.get("started")
        or datetime.now(UTC).isoformat(timespec="seconds"),
        "status": "starting",
        "versions": _versions(),
        "config_file": cfg.source, "config_sha256": _sha(_redacted_config(cfg)),
        "backend": {"spec": redact_spec(cfg.backend.spec)}, "seed": cfg.run.seed,
        "prompts": _prompt_hashes(tuple(all_prompts)),
        "stages": {}, "usage": {},
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"rubric-induce": __version__, "python": platform.python_version(), "platform": sys.platform}
    for pkg in ("numpy", "torch", "llama_cpp_python", "sentence-transformers", "openai"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def _write_manifest(run_dir: Path, manifest: dict[str, Any], ctx: RunContext) -> None:
    if ctx.backend_opened:
        manifest["backend"] = {"spec": redact_spec(ctx.config.backend.spec), **ctx.backend.identity()}
    totals: dict[str, float] = {}
    for info in manifest["stages"].values():
        for k, v in (info.get("usage") or {}).items():
            totals[k] = round(totals.get(k, 0) + v, 8)
    manifest["usage"] = totals
    manifest["seconds"] = round(sum(i.get("seconds", 0) for i in manifest["stages"].values()), 2)
    write_json(run_dir / "manifest.json", manifest)
