"""The run folder (issue 17, item 2): one run at a time (an exclusive lock naming its holder), a non-empty
folder that is not a run's refused before anything is written, only the run's own files replaced, ``~``
expanded, and a call cache outside the run folder only when the config asks for it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from runconfigs import probe_stage_calls, small_run_config

from rubric_induce.cli import EXIT_FAILURE, EXIT_INPUT, cli
from rubric_induce.core.errors import DataError
from rubric_induce.pipeline import run_pipeline
from rubric_induce.pipeline.folder import LOCK_NAME, RunFolderBusyError, RunLock

# A small fake-backend run: hand-written rubrics, no generation, no calibration (about 1 s).
SMALL = small_run_config()

# `rubric-induce run` through the real entry point, with every fake backend slowed down by DELAY
# seconds per call, so that a test can act while the run is under way.
DRIVER = """
import sys
from rubric_induce.backends import fake

DELAY = float(sys.argv[1])
_init = fake.FakeBackend.__init__


def _slow_init(self, *args, **kwargs):
    kwargs.setdefault("delay", DELAY)
    _init(self, *args, **kwargs)


fake.FakeBackend.__init__ = _slow_init
from rubric_induce.cli import main

main(sys.argv[2:])
"""


def _quiet(msg: str) -> None:
    pass


def _config(tmp_path: Path, extra: str = "", name: str = "cfg.toml", base: str = SMALL) -> Path:
    path = tmp_path / name
    path.write_text(base + extra, encoding="utf-8")
    return path


def _cli(args: list[str], cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed entry point in a fresh process (PYTHONPATH and the rest of the environment pass on)."""
    return subprocess.run([sys.executable, "-m", "rubric_induce.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def _slow_run(tmp_path: Path, args: list[str], delay: float) -> subprocess.Popen:
    driver = tmp_path / "slow_driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    return subprocess.Popen([sys.executable, str(driver), str(delay), "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- a folder that is not a run's ------------------------------------------------------------------
def test_a_non_empty_folder_without_a_run_manifest_is_refused_and_left_untouched(tmp_path):
    cfg = _config(tmp_path)
    folder = tmp_path / "mine"
    (folder / "calibration").mkdir(parents=True)
    (folder / "report.md").write_text("my own report\n")
    (folder / "calibration" / "important.txt").write_text("keep me\n")
    before = _tree(folder)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(folder)])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "not a rubric-induce run folder" in res.output and str(folder) in res.output
    assert _tree(folder) == before  # not even a lock file
    assert not (folder / LOCK_NAME).exists()
    # `run --check` says the same, before any work
    check = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(folder), "--check"])
    assert check.exit_code == EXIT_INPUT and "not a rubric-induce run folder" in check.output


def test_a_file_as_run_folder_is_refused(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    with pytest.raises(DataError, match="is a file"):
        run_pipeline(_config(tmp_path), out=target, echo=_quiet)


def test_an_empty_folder_and_an_earlier_runs_folder_are_fine(tmp_path):
    cfg = _config(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    first = run_pipeline(cfg, out=empty, echo=_quiet, stop_after="probe")
    assert first.ran == ["generate", "dedup", "probe"]
    again = run_pipeline(cfg, out=empty, echo=_quiet)
    assert again.skipped == ["generate", "dedup", "probe"] and again.manifest["status"] == "finished"


def test_a_run_interrupted_before_its_first_stage_leaves_a_run_folder(tmp_path):
    """The manifest is the first file a run writes: even a run that failed in preflight can be rerun there."""
    bad = _config(tmp_path, base=SMALL.replace('label = "sat"', 'label = "sat"\nlabel_threshold = 9'))
    out = tmp_path / "out"
    with pytest.raises(DataError):
        run_pipeline(bad, out=out, echo=_quiet)
    assert json.loads((out / "manifest.json").read_text())["format"] == "rubric-induce-run"
    assert run_pipeline(_config(tmp_path), out=out, echo=_quiet).manifest["status"] == "finished"


# -- only the run's own files are replaced ---------------------------------------------------------------
# Calibrated, with every file a fit writes (network, 2-fold report and its figures, adaptive model), each
# trained as little as that takes: one adaptive member of 20 epochs (the default is 5 of 200), no report figures.
CALIBRATED = SMALL.replace("[calibrate]\nenabled = false",
                           '[calibrate]\nquestion = "satisfaction"\ncv_folds = 2\n'
                           'options = { hidden = [4, 4], finetune_epochs = 5, pretrain = false }\n'
                           'adaptive_options = { epochs = 20, n_members = 1 }') + "[report]\nfigures = false\n"


def test_calibration_files_are_removed_by_name(tmp_path):
    from rubric_induce.calibration.api import remove_saved

    for name in ("calibrator.json", "weights.safetensors", "metrics.json", "report.md", "reliability_q_1.png",
                 "important.txt"):
        (tmp_path / name).write_text(name)
    remove_saved(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["important.txt"]
    (tmp_path / "important.txt").unlink()
    remove_saved(tmp_path)
    assert not tmp_path.exists()  # an empty folder goes


@pytest.mark.slow
def test_a_rerun_replaces_only_files_the_run_wrote(tmp_path):
    cfg = _config(tmp_path, base=CALIBRATED)
    out = tmp_path / "out"
    run_pipeline(cfg, out=out, echo=_quiet)
    (out / "calibration" / "important.txt").write_text("keep me\n")
    (out / "notes.md").write_text("my notes\n")
    forced = run_pipeline(cfg, out=out, echo=_quiet, force=("calibrate",))
    assert "calibrate" in forced.ran
    fit = {"calibrator.json", "weights.safetensors", "metrics.json", "report.md", "adaptive"}
    assert fit <= {p.name for p in (out / "calibration").iterdir()}
    # switching calibration off removes the fit's files, not the user's
    off = run_pipeline(_config(tmp_path, "[report]\nfigures = false\n", base=SMALL, name="off.toml"), out=out,
                       echo=_quiet)
    assert "calibrate" in off.ran
    assert sorted(p.name for p in (out / "calibration").iterdir()) == ["important.txt"]
    assert (out / "calibration" / "important.txt").read_text() == "keep me\n"
    assert (out / "notes.md").read_text() == "my notes\n"
    assert not json.loads((out / "artifact.json").read_text())["calibration"]


def test_stale_outputs_go_only_while_unchanged(tmp_path):
    """A file a stage wrote before and no longer writes is removed, unless someone changed it since."""
    from rubric_induce.pipeline.folder import file_sha256
    from rubric_induce.pipeline.runner import _remove_stale

    (tmp_path / "sub").mkdir()
    for name in ("a.txt", "sub/b.txt", "c.txt"):
        (tmp_path / name).write_text(name)
    old = {name: file_sha256(tmp_path / name) for name in ("a.txt", "sub/b.txt", "c.txt")}
    (tmp_path / "c.txt").write_text("edited by hand")
    _remove_stale(tmp_path, old, {"a.txt": old["a.txt"]})
    assert (tmp_path / "a.txt").exists() and not (tmp_path / "sub").exists()
    assert (tmp_path / "c.txt").read_text() == "edited by hand"


# -- paths -------------------------------------------------------------------------------------
def test_tilde_is_expanded_in_out_and_cache(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    cfg = _config(tmp_path)
    res = run_pipeline(cfg, out="~/runs/a", echo=_quiet, stop_after="probe")
    assert res.out == home / "runs" / "a" and (home / "runs" / "a" / "probes.jsonl").exists()
    # [run] out, and a shared cache under ~ (outside the run folder: asked for explicitly)
    shared = SMALL.replace("[run]\n", '[run]\nout = "~/runs/b"\nexternal_cache = true\n').replace(
        'spec = "fake"', 'spec = "fake"\ncache = "~/cache/calls.sqlite"')
    res = run_pipeline(_config(tmp_path, base=shared, name="shared.toml"), echo=_quiet, stop_after="probe")
    assert res.out == home / "runs" / "b" and (home / "cache" / "calls.sqlite").exists()
    assert not (work / "~").exists() and not (home / "runs" / "b" / "~").exists()


@pytest.mark.parametrize("cache", ["../../outside.sqlite", "/tmp/rubric-induce-outside.sqlite"])
def test_a_cache_outside_the_run_folder_needs_the_explicit_flag(tmp_path, cache):
    cfg = _config(tmp_path, base=SMALL.replace('spec = "fake"', f'spec = "fake"\ncache = "{cache}"'))
    out = tmp_path / "deep" / "out"
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "backend.cache" in res.output and "external_cache = true" in res.output
    assert not out.exists()  # refused before anything was written
    inside = _config(tmp_path, base=SMALL.replace('spec = "fake"', 'spec = "fake"\ncache = "sub/../calls.sqlite"'),
                     name="inside.toml")
    assert run_pipeline(inside, out=tmp_path / "ok", echo=_quiet, stop_after="generate").ran == ["generate"]


def test_an_external_cache_is_used_when_asked_for(tmp_path):
    shared = tmp_path / "shared" / "calls.sqlite"
    base = SMALL.replace("[run]\n", "[run]\nexternal_cache = true\n").replace(
        'spec = "fake"', f'spec = "fake"\ncache = "{shared}"')
    cfg = _config(tmp_path, base=base)
    first = run_pipeline(cfg, out=tmp_path / "a", echo=_quiet, stop_after="probe")
    second = run_pipeline(cfg, out=tmp_path / "b", echo=_quiet, stop_after="probe")
    assert shared.exists() and not (tmp_path / "a" / "llm_calls.sqlite").exists()
    assert first.manifest["usage"]["calls"] > 0
    assert second.manifest["usage"]["calls"] == 0 and second.manifest["usage"]["cache_hits"] > 0
    # where the cache may lie changes no result: switching the flag keeps the stages done
    assert "external_cache" not in json.dumps(json.loads((tmp_path / "a" / "stages" / "generate.json").read_text()))


# -- the lock ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_second_run_fails_at_once_naming_the_holder(tmp_path):
    cfg = _config(tmp_path)
    out = tmp_path / "out"
    run_pipeline(cfg, out=out, echo=_quiet, stop_after="generate")
    before = _tree(out)
    with RunLock(out, command="test holder"):
        t0 = time.perf_counter()
        res = _cli(["run", str(cfg), "--out", str(out)])
        elapsed = time.perf_counter() - t0
        holder = json.loads((out / LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid() and holder["command"] == "test holder"
    assert res.returncode == EXIT_FAILURE, res.stderr
    assert f"run folder {out} is in use by pid {os.getpid()}" in res.stderr and "test holder" in res.stderr
    assert "Traceback" not in res.stderr
    assert elapsed < 30  # at once: no waiting for the holder (the bound covers a cold Python start)
    after = _tree(out)
    after.pop(LOCK_NAME, None)
    before.pop(LOCK_NAME, None)
    assert after == before  # the refused run wrote nothing
    assert (out / LOCK_NAME).read_text() == ""  # released: the holder is no longer named
    assert run_pipeline(cfg, out=out, echo=_quiet).manifest["status"] == "finished"


def test_the_lock_in_process(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with RunLock(out, command="one"):
        with pytest.raises(RunFolderBusyError, match=f"in use by pid {os.getpid()}"):
            RunLock(out).acquire()
        with pytest.raises(RunFolderBusyError):
            run_pipeline(_config(tmp_path), out=out, echo=_quiet)
    with RunLock(out):
        pass  # free again
    # a run that has just started holds the lock before it writes its manifest: busy, not "not a run folder"
    (out / "stages").mkdir()
    with RunLock(out, command="starting"):
        with pytest.raises(RunFolderBusyError, match="starting"):
            run_pipeline(_config(tmp_path), out=out, echo=_quiet)


def _wait_for(predicate, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    t0 = time.monotonic()
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended early (exit {proc.returncode}): {proc.stderr.read()}")
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out")
        time.sleep(0.05)


def _holder_pid(out: Path) -> int | None:
    try:
        return json.loads((out / LOCK_NAME).read_text() or "{}").get("pid")
    except (OSError, ValueError):
        return None


@pytest.mark.slow
def test_kill_9_leaves_no_stale_lock_and_the_rerun_resumes(tmp_path):
    """SIGKILL mid-probe: the operating system drops the lock, the next run takes the folder at once and
    replays the finished calls from the cache."""
    import sqlite3

    cfg = _config(tmp_path)
    out = tmp_path / "out"
    proc = _slow_run(tmp_path, [str(cfg), "--out", str(out)], delay=0.05)

    def cached_rows() -> int:
        try:
            with sqlite3.connect(f"file:{out / 'llm_calls.sqlite'}?mode=ro", uri=True, timeout=1) as con:
                return int(con.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
        except sqlite3.Error:
            return 0

    try:
        _wait_for(lambda: _holder_pid(out) == proc.pid, proc=proc)
        _wait_for(lambda: cached_rows() >= 10, proc=proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert _holder_pid(out) == proc.pid  # the dead holder's note is still there, its lock is not
    done_before = cached_rows()
    assert 10 <= done_before < 96
    rerun = run_pipeline(cfg, out=out, echo=_quiet)  # in-process: the killed run was the real entry point
    assert rerun.manifest["status"] == "finished"
    assert json.loads((out / "manifest.json").read_text())["status"] == "finished"
    probe_stage = json.loads((out / "stages" / "probe.json").read_text())
    # finished probes come back from the streamed probes file (reused) or from the call cache
    kept = probe_stage["usage"]["cache_hits"] + probe_stage["summary"]["reused"]
    assert kept >= done_before
    assert probe_stage["usage"]["calls"] == probe_stage_calls(out) - kept


@pytest.mark.slow
def test_two_concurrent_runs_on_one_folder_one_wins_and_the_folder_is_consistent(tmp_path):
    """Two runs with different configs started together on one folder: exactly one runs; the other
    fails at once naming it; the folder then holds the winner's run only (its rerun finds every stage done)."""
    cfg_a = _config(tmp_path, name="a.toml")
    cfg_b = _config(tmp_path, base=SMALL.replace("n_sat = 2\nn_dsat = 2", "n_sat = 1\nn_dsat = 1"), name="b.toml")
    out = tmp_path / "out"
    procs = {name: _slow_run(tmp_path, [str(cfg), "--out", str(out)], delay=0.04)
             for name, cfg in (("a", cfg_a), ("b", cfg_b))}
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        results[name] = (proc.returncode, stderr, proc.pid)
    codes = sorted(rc for rc, _, _ in results.values())
    assert codes == [0, EXIT_FAILURE], results
    winner = next(n for n, (rc, _, _) in results.items() if rc == 0)
    loser = "b" if winner == "a" else "a"
    assert f"is in use by pid {results[winner][2]}" in results[loser][1]
    winner_cfg = {"a": cfg_a, "b": cfg_b}[winner]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["config_file"] == str(winner_cfg)
    assert json.loads((out / "config.json").read_text())["source"] == str(winner_cfg)
    n_chosen = len((out / "selected.jsonl").read_text().splitlines())
    assert n_chosen == (4 if winner == "a" else 2)
    lines: list[str] = []
    run_pipeline(winner_cfg, out=out, echo=lines.append)  # in-process: the two runs above were the entry point
    assert sum("already done, skipped" in line for line in lines) == 9, lines
