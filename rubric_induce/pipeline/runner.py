"""Run the stages in order, skip the ones already finished with the same inputs, keep a manifest.

Resuming: a stage is done when its marker ``stages/<name>.json`` exists, its fingerprint (the
stage's config sections, the prompt templates it uses, the data hash and the previous stage's
fingerprint) is unchanged and every file it wrote still has the sha256 its marker recorded; a
stage that is not done reruns, and so does every later one (see :mod:`.resume`). A resumed run says
why each stage reruns ("never ran", "config [select] changed", "output probes.jsonl changed or
damaged since the stage finished", "select reran before it", ...), and the manifest records it
(``stages.<name>.reason``). A stage the config turns off (``feedback.enabled = false``) says
"disabled", not "running". Work fitted on top of the run (``calibrate-guarantee``'s guarantees in
``artifact.json``) is kept or, when a rerun would rewrite what it was fitted on, the run refuses
unless ``--force`` says so (see :mod:`.fitted`). LLM calls go through the run's SQLite cache, so a stage interrupted half-way (crash, Ctrl-C,
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
from rubric_induce.backends.pricing import register_prices
from rubric_induce.backends.redact import redact_obj, redact_spec
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.safepaths import inside_folder
from rubric_induce.data.jsonl import jsonable
from rubric_induce.data.jsonl import write_json as _write_json
from rubric_induce.data.labels import check_binary, labels_from_examples
from rubric_induce.pipeline.checks import check_run_inputs
from rubric_induce.pipeline.config import RunConfig, load_config, with_config_line
from rubric_induce.pipeline.context import RunContext
from rubric_induce.pipeline.fitted import ARTIFACT, own_record, read_fitted, strip_additions
from rubric_induce.pipeline.folder import (
    RunLock,
    changed_files,
    check_cache_location,
    check_run_folder,
    file_sha256,
    hash_outputs,
    snapshot,
)
from rubric_induce.pipeline.optional import skip_notes
from rubric_induce.pipeline.pairwise_stages import preflight_pairs
from rubric_induce.pipeline.resume import (
    StagePlan,
    marker_path,
    plan_stages,
    prompt_hashes,
    read_marker,
    sha,
    stage_fingerprint,
)
from rubric_induce.pipeline.stages import STAGE_NAMES, STAGES, Stage
from rubric_induce.probing.plan import check_logprobs_support

__all__ = ["RunResult", "run_pipeline", "run_dir_for", "preflight", "check_run_dir", "stage_fingerprint",
           "read_marker"]


@dataclass
class RunResult:
    """What :func:`run_pipeline` did.

    Attributes:
        out: The run directory.
        ran: The stages run, in order.
        skipped: The stages skipped (done before, inputs unchanged).
        summaries: Each stage's summary, by stage name.
        manifest: The run manifest (``manifest.json``).
        disabled: The stages the config turns off (listed in ``ran`` or ``skipped`` too).
    """

    out: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    summaries: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)  # stages the config turns off (in ran or skipped too)

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
    try:
        _preflight(ctx)
    except DataError as exc:  # a config setting named: add the line that sets it
        raise with_config_line(exc, ctx.config.source) from None


def _preflight(ctx: RunContext) -> None:
    cfg = ctx.config
    for note in skip_notes(cfg):  # announced before the first LLM call, not discovered after it
        ctx.echo(f"note: {note}")

    # a reasoning model (gpt-5, o1/o3/o4) returns no logprobs: refuse before generate pays for calls
    check_logprobs_support(cfg.backend.spec.split("/", 1)[-1], cfg.probe.estimator, source=cfg.source)
    _ = cfg.task_resolved  # reads a description file now: a missing one fails before any LLM call
    if ctx.pairwise:  # pairs: read (a bad row stops here), split, and enough training preferences

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
            raw = labels_from_examples(ctx.examples, cfg.data.label)
            raise DataError(f"with label_threshold {cfg.data.label_threshold:g} every one of the {ctx.y.size} examples "
                            f"is {only} (label {cfg.data.label!r} runs from {raw.min():g} to {raw.max():g}): "
                            "choose a threshold inside that range", path=cfg.source, field="data.label_threshold")
        raise DataError(f"every one of the {ctx.y.size} examples is {only} on label {cfg.data.label!r}: selection "
                        "needs positive and negative examples", path=cfg.source, field="data.label")
    if ctx.binary and len(set(ctx.y[ctx.split[0]].tolist())) < 2:
        raise DataError("the training split holds one class only; use more examples or a smaller run.test_size",
                        path=cfg.source, field="run.test_size")


def _marker(out: Path, name: str) -> Path:
    return marker_path(out, name)


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

    A resumed run says why each stage reruns (see :mod:`.resume`). Guarantees and cascades fitted
    into ``artifact.json`` by ``calibrate-guarantee`` survive a rerun that leaves what they were
    fitted on unchanged; a rerun that would rewrite it refuses unless ``force`` names a stage at or
    before ``artifact`` (see :mod:`.fitted`).

    Args:
        config: A loaded config, or the path of a TOML (or YAML) config file.
        out: The run directory (default: ``[run] out``, else ``runs/<config file stem>``).
        backend: A Backend object to use instead of ``[backend] spec`` (tests, notebooks).
        stop_after: Stop after this stage.
        force: Rerun these stages (and everything after).
        progress: Draw progress bars.
        echo: Where the stage lines go (default: ``print``).

    Returns:
        The stages run, skipped and disabled, their summaries and the run manifest.

    Raises:
        DataError: Bad config or data, or a rerun that would discard fitted guarantees (exit 2).
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

        register_prices(cfg.prices)
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(run_dir):  # a second run on this folder fails at once, naming this one
        return _run_locked(cfg, run_dir, cache_path, backend=backend, stop_after=stop_after, force=force,
                           progress=progress, echo=echo)


@dataclass
class _Now:
    """The stage running now (for the usage of a stage that fails or is interrupted half-way)."""
    name: str | None = None
    stage: Stage | None = None
    before: dict[str, Any] = field(default_factory=dict)


class _Keeper:
    """What a run does with the work fitted on top of it (see :mod:`.fitted`)."""

    def __init__(self, run_dir: Path, force: tuple[str, ...], stop_after: str | None) -> None:
        marker = read_marker(run_dir, "artifact") or {}
        self.run_dir = run_dir
        self.fitted = read_fitted(run_dir, (marker.get("open_outputs") or {}).get(ARTIFACT))
        art = STAGE_NAMES.index("artifact")
        self.consent = any(STAGE_NAMES.index(f) <= art for f in force)
        self.last = min(art, STAGE_NAMES.index(stop_after) if stop_after else len(STAGE_NAMES))
        self.set_aside = False
        self.record: dict[str, Any] = {}

    @property
    def guarded(self) -> bool:
        return self.fitted is not None and self.fitted.has_work

    def check(self, plans: list[StagePlan]) -> None:
        """Refuse, before anything is written, a rerun of a stage before ``artifact`` that would leave the
        fitted work on rewritten files, unless ``--force`` allowed it."""
        first = next((i for i, p in enumerate(plans) if p.rerun), None)
        if not self.guarded or first is None or first >= STAGE_NAMES.index("artifact") or first > self.last:
            return
        if not self.consent:
            raise self.fitted.refusal(plans[first].name, plans[first].why)

    def before_stage(self, plan: StagePlan, echo: Callable[[str], None]) -> None:
        """A consented rerun of a stage before ``artifact``: the fitted keys are set aside now (no stale
        guarantee stays in the file) and written back after the artifact stage if their basis holds."""
        if (self.guarded and self.consent and not self.set_aside and plan.rerun
                and STAGE_NAMES.index(plan.name) < STAGE_NAMES.index("artifact")):
            strip_additions(self.fitted)
            self.set_aside = True
            self.record = {"discarded": self.fitted.describe(), "why": f"{plan.name} reran ({plan.why})"}
            echo(f"[{plan.name}] set aside {self.fitted.describe()} (--force): kept only if the artifact comes out "
                 "unchanged")

    def after_artifact(self, plan: StagePlan, echo: Callable[[str], None]) -> None:
        """After the artifact stage reran: keep the fitted keys (basis unchanged), discard them (allowed), or
        put artifact.json back and refuse."""
        if self.fitted is None:
            return
        what = self.fitted.describe()
        if self.fitted.settle(self.run_dir):
            self.record = {"kept": what}
            echo(f"[artifact] kept {what}: the artifact and the files it names are unchanged")
            return
        if not self.fitted.has_work:
            return
        if not (self.consent or self.set_aside):
            self.fitted.put_back()
            raise self.fitted.refusal("artifact", f"{plan.why}; it writes an artifact other than the one they were "
                                                  f"fitted on, so {ARTIFACT} is left as it was")
        self.record = {"discarded": what, "why": f"the artifact changed ({plan.why})"}
        echo(f"[artifact] discarded {what}: the artifact changed; fit them again with calibrate-guarantee")


def _run_locked(cfg: RunConfig, run_dir: Path, cache_path: Path, *, backend: Any, stop_after: str | None,
                force: tuple[str, ...], progress: bool, echo: Callable[[str], None]) -> RunResult:
    ctx = RunContext(cfg, run_dir, progress=progress, echo=echo, backend_override=backend)
    result = RunResult(run_dir)
    resumed = any((run_dir / "stages").glob("*.json")) if (run_dir / "stages").is_dir() else False
    keeper = _Keeper(run_dir, force, stop_after)
    plans: list[StagePlan] | None = None
    if keeper.guarded:  # decided before anything is written: a refused rerun leaves the folder as it was
        try:
            preflight(ctx)
            plans = plan_stages(cfg, ctx.data_hash, run_dir, force, STAGES)
            keeper.check(plans)
        except BaseException:
            ctx.close()
            raise
    manifest = _start_manifest(cfg, run_dir)
    _write_manifest(run_dir, manifest, ctx)  # first: a folder this run wrote in is a run folder
    (run_dir / "stages").mkdir(exist_ok=True)
    write_json(run_dir / "config.json", {"source": cfg.source, **cfg.to_dict()})
    skip = _cache_files(cache_path, run_dir)
    now = _Now()
    try:
        if plans is None:
            preflight(ctx)
            plans = plan_stages(cfg, ctx.data_hash, run_dir, force, STAGES)
        manifest["data"] = {"source": cfg.data.examples or cfg.data.dataset, "n_examples": len(ctx.examples),
                            "sha256": ctx.data_hash, "label": cfg.data.label,
                            "n_train": len(ctx.split[0]), "n_test": len(ctx.split[1])}
        if ctx.pairwise:
            manifest["data"].update(kind="pairwise", n_pairs=len(ctx.pairs), n_train_pairs=len(ctx.train_pairs),
                                    n_test_pairs=len(ctx.test_pairs))
        for plan in plans:
            now.name = plan.name
            if plan.rerun:
                _run_stage(plan, ctx, manifest, result, now, skip, keeper, resumed=resumed)
            else:
                _skip_stage(plan, ctx, manifest, result)
            _write_manifest(run_dir, manifest, ctx)
            if plan.name == stop_after:
                break
        manifest["status"] = "finished" if stop_after in (None, STAGE_NAMES[-1]) else f"stopped after {stop_after}"
        now.name = None
    except KeyboardInterrupt:
        manifest["status"] = f"interrupted during {now.name}; rerun the same command to resume"
        if now.name:
            manifest["stages"][now.name] = {"status": "interrupted", **_partial_usage(now.stage, ctx, now.before)}
        raise
    except BaseException as exc:
        manifest["status"] = f"failed during {now.name}: {type(exc).__name__}: {exc}"
        if now.name:
            manifest["stages"][now.name] = {"status": "failed", **_partial_usage(now.stage, ctx, now.before)}
            faults = fault_summary(manifest["stages"][now.name].get("usage") or {})
            if faults:
                echo(f"[{now.name}] {faults}")
        raise
    finally:
        if keeper.record:
            manifest["fitted"] = keeper.record
        manifest["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        _write_manifest(run_dir, manifest, ctx)
        ctx.close()
        result.manifest = manifest
    return result


def _skip_stage(plan: StagePlan, ctx: RunContext, manifest: dict[str, Any], result: RunResult) -> None:
    marker = plan.marker or {}
    result.skipped.append(plan.name)
    result.summaries[plan.name] = marker.get("summary", {})
    manifest["stages"][plan.name] = {**{k: marker[k] for k in ("seconds", "finished", "usage") if k in marker},
                                     "status": "done (resumed)"}
    off = plan.stage.off(ctx.config)
    if off:
        result.disabled.append(plan.name)
    ctx.echo(f"[{plan.name}] {f'disabled ({off}); ' if off else ''}already done, skipped")


def _run_stage(plan: StagePlan, ctx: RunContext, manifest: dict[str, Any], result: RunResult, now: _Now,
               skip: set[str], keeper: _Keeper, *, resumed: bool) -> None:
    """Run one stage: say why (a resumed run), run it, hash what it wrote, write its marker."""
    stage, run_dir, echo = plan.stage, ctx.out, ctx.echo
    off = stage.off(ctx.config)
    if resumed and not off and plan.reasons != ["never ran"]:
        echo(f"[{stage.name}] {plan.why}{'' if plan.retry else '; rerunning'}")
    keeper.before_stage(plan, echo)
    old_outputs = (plan.marker or {}).get("outputs") or {}
    old_marker = _read_bytes(_marker(run_dir, stage.name))
    _marker(run_dir, stage.name).unlink(missing_ok=True)
    if off:  # no "running" and "done in 0.0 s" for a stage the config turns off: it only clears old files
        echo(f"[{stage.name}] disabled ({off}); skipped")
        result.disabled.append(stage.name)
    else:
        echo(f"[{stage.name}] running{' (never ran)' if resumed and plan.reasons == ['never ran'] else ''} ...")
    manifest["stages"][stage.name] = {"status": "running", **({"reason": plan.why} if resumed else {})}
    # The report is the last stage and shows the manifest: it is written as finished.
    manifest["status"] = "finished" if stage.name == STAGE_NAMES[-1] else f"running {stage.name}"
    _write_manifest(run_dir, manifest, ctx)
    now.before, now.stage = ctx.usage(), stage
    ctx.stage_fingerprint = plan.fingerprint
    files_before = snapshot(run_dir, skip)
    t0 = time.perf_counter()
    summary = stage.run(ctx)
    seconds = round(time.perf_counter() - t0, 2)
    extra: dict[str, Any] = {}
    if stage.name == "artifact":  # the keys it wrote (others may add theirs), then the fitted work
        extra["open_outputs"] = {ARTIFACT: own_record(run_dir)}
        try:
            keeper.after_artifact(plan, echo)
        except DataError:
            if old_marker is not None:  # refused: the folder as it was
                _marker(run_dir, stage.name).write_bytes(old_marker)
            raise
    # the files this stage wrote, by content: a rerun trusts them only while unchanged
    outputs = hash_outputs(run_dir, [*changed_files(files_before, snapshot(run_dir, skip)), *stage.outputs])
    _remove_stale(run_dir, old_outputs, outputs, source=_marker(run_dir, stage.name))
    usage = _stage_usage(stage, ctx, now.before)
    now.stage = None
    finished = datetime.now(UTC).isoformat(timespec="seconds")
    write_json(_marker(run_dir, stage.name), {"stage": stage.name, "fingerprint": plan.fingerprint,
                                              "inputs": plan.inputs, "seconds": seconds, "finished": finished,
                                              "usage": usage, "summary": jsonable(summary), "outputs": outputs,
                                              **extra})
    info = {"status": "disabled" if off else "done", "seconds": seconds, "finished": finished, "usage": usage}
    if resumed:
        info["reason"] = plan.why
    if isinstance(summary, dict) and summary.get("warnings"):
        info["warnings"] = list(summary["warnings"])
    if isinstance(summary, dict) and summary.get("direct"):  # the direct-judge baseline: its prompt and counts
        info["direct"] = summary["direct"]
    manifest["stages"][stage.name] = info
    result.ran.append(stage.name)
    result.summaries[stage.name] = summary
    if not off:
        echo(f"[{stage.name}] done in {seconds:.1f} s")
    faults = fault_summary(usage)
    if faults:
        echo(f"[{stage.name}] {faults}")


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


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
        "config_file": cfg.source, "config_sha256": sha(_redacted_config(cfg)),
        "backend": {"spec": redact_spec(cfg.backend.spec)}, "seed": cfg.run.seed,
        "prompts": prompt_hashes(tuple(all_prompts)),
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
