"""`rubric-induce plan` with its measured time estimate, and `run`'s warning before a long run (fake backend)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.pipeline import load_config
from rubric_induce.pipeline.timeplan import NO_LLM_SECONDS, long_run_check, time_run
from rubric_induce.probing.timing import LONG_RUN_ENV

pytestmark = pytest.mark.slow  # over about 1 s per file on 2 cores: CI runs it, plain pytest does not


def _doubles():
    """The fake clock and the clocked fake backend of tests/probing/test_plan_timing.py, loaded by path
    (a ``tests`` package installed in site-packages can shadow this tree's)."""
    spec = importlib.util.spec_from_file_location("plan_timing_doubles",
                                                  Path(__file__).resolve().parents[1] / "probing" / "test_plan_timing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ClockedFake, module.FakeClock


ClockedFake, FakeClock = _doubles()
STAGES = ["generate", "dedup", "probe", "select", "calibrate", "artifact", "evaluate", "feedback", "report"]


@pytest.fixture
def cfg_path(tmp_path, fake_run_config):
    path = tmp_path / "cfg.toml"
    path.write_text(fake_run_config + "\n[feedback]\nenabled = true\nmax_tokens = 100\nbudget = 400\n",
                    encoding="utf-8")
    return path


def _clocked(cfg_path):
    cfg = load_config(cfg_path)
    from rubric_induce.pipeline.context import RunContext

    texts = [e.fields["text"] for e in RunContext(cfg, cfg_path.parent / "unused").examples]
    clock = FakeClock()
    return cfg, clock, ClockedFake(clock, texts)


def test_time_run_estimates_every_stage_from_timed_calls(cfg_path, tmp_path):
    cfg, clock, backend = _clocked(cfg_path)
    out = tmp_path / "run"
    plan, timed = time_run(cfg, out=out, backend=backend, clock=clock)
    assert [s.name for s in timed.stages] == STAGES
    by = {s.name: s for s in timed.stages}
    # generate: the rubicon sample (3 + 3 texts), one call each, then ceil(6 x 2 / 3) summaries + 1 (planned_calls)
    gen = by["generate"]
    assert gen.seconds is not None and "about 11 chat call(s)" in gen.basis and "2 call(s) timed" in gen.basis
    # probe: the plan's pending calls (assumed pool: generate has not run), sized by the timed fit
    probe = by["probe"]
    assert f"{plan.to_make:,} call(s)" in probe.basis and "pool assumed" in probe.basis
    assert probe.seconds > plan.to_make * 0.1  # every later call costs 0.1 s on this clock, first calls more
    assert by["dedup"].basis == "disabled" and by["dedup"].seconds == 0
    assert by["select"].seconds == NO_LLM_SECONDS["select"]
    # feedback: per group (2 SAT, 2 DSAT rubrics) 2 x 10 evidence lines of 140 tokens in chunks of 400 - 300
    # tokens: 28 chunks each, then one summary over them
    assert by["feedback"].seconds > 0 and "about 57 chat call(s)" in by["feedback"].basis
    assert "at most 100 tokens" in by["feedback"].basis
    assert timed.total_s == pytest.approx(sum(s.seconds for s in timed.stages))
    assert timed.measured_s > 0 and timed.complete
    assert not out.exists() or not any(out.rglob("*.sqlite"))  # no call cache written or created


def test_probe_estimate_matches_the_probe_stage_on_the_same_clock(cfg_path, tmp_path):
    """After generate and dedup the plan is exact; the probe stage then takes what was estimated."""
    from rubric_induce.pipeline import run_pipeline

    cfg, clock, backend = _clocked(cfg_path)
    out = tmp_path / "run"
    run_pipeline(cfg, out=out, stop_after="dedup", echo=lambda m: None, backend=backend)
    _, timed = time_run(cfg, out=out, backend=backend, clock=clock)
    by = {s.name: s for s in timed.stages}
    assert by["generate"].done and by["dedup"].done and "pool assumed" not in by["probe"].basis
    t0 = clock.now
    run_pipeline(cfg, out=out, stop_after="probe", echo=lambda m: None, backend=backend)
    assert by["probe"].seconds == pytest.approx(clock.now - t0, rel=0.02)


def test_plan_command_prints_the_time_estimate_and_no_time_makes_no_call(cfg_path, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["plan", str(cfg_path), "--out", str(out), "--plan-json", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    assert "time estimate on fake/fake" in res.output
    for name in STAGES:
        assert f"\n  {name:<10} " in res.output
    doc = json.loads((tmp_path / "p.json").read_text())
    assert [s["name"] for s in doc["time"]["stages"]] == STAGES and doc["time"]["total_s"] >= 0
    assert not any(out.rglob("*.sqlite")) if out.exists() else True
    quiet = CliRunner().invoke(cli, ["plan", str(cfg_path), "--out", str(out), "--no-time"])
    assert quiet.exit_code == 0 and "time estimate" not in quiet.output and "probe plan:" in quiet.output


def test_long_run_check_warns_once_over_the_threshold(cfg_path, tmp_path, monkeypatch):
    monkeypatch.delenv(LONG_RUN_ENV, raising=False)
    cfg, clock, backend = _clocked(cfg_path)
    out = tmp_path / "run"
    line, timed = long_run_check(cfg, out=out, kinds=("fake",), backend=backend, minutes=0.5, clock=clock)
    assert timed is not None and timed.total_s > 30
    assert line.startswith("warning: this run is estimated at about") and "over 0.5 min" in line
    # above the estimate: no warning; another kind of backend (the CLI checks only the embedded model): nothing
    assert long_run_check(cfg, out=out, kinds=("fake",), backend=backend, minutes=timed.total_s, clock=clock)[0] is None
    assert long_run_check(cfg, out=out, backend=backend, minutes=0.5, clock=clock) == (None, None)
    monkeypatch.setenv(LONG_RUN_ENV, "0")
    assert long_run_check(cfg, out=out, kinds=("fake",), backend=backend, clock=clock) == (None, None)


def test_long_run_check_skips_a_small_run_and_a_finished_one(tmp_path, fake_run_config):
    from rubric_induce.pipeline import run_pipeline

    cfg_path = tmp_path / "nofeedback.toml"
    cfg_path.write_text(fake_run_config, encoding="utf-8")  # feedback off: probe is the last LLM stage
    cfg, clock, backend = _clocked(cfg_path)
    out = tmp_path / "run"
    # a 40-minute threshold: the fake run's prompts are far too short to be worth timing (no call is made)
    calls = len(backend.calls)
    assert long_run_check(cfg, out=out, kinds=("fake",), backend=backend, minutes=40, clock=clock) == (None, None)
    assert len(backend.calls) == calls
    run_pipeline(cfg, out=out, echo=lambda m: None, backend=backend, stop_after="probe")
    assert long_run_check(cfg, out=out, kinds=("fake",), backend=backend, minutes=0.01, clock=clock) == (None, None)
    # forcing the probe stage: its calls come from the run's cache (nothing to time) until the cache is gone
    assert long_run_check(cfg, out=out, kinds=("fake",), backend=backend, minutes=0.01, clock=clock,
                          force=("probe",)) == (None, None)
    (out / "llm_calls.sqlite").unlink()
    line, timed = long_run_check(cfg, out=out, kinds=("fake",), backend=backend, minutes=0.01, clock=clock,
                                 force=("probe",))
    assert line is not None and [s.name for s in timed.stages if s.done] == ["generate", "dedup"]


def test_run_on_the_fake_backend_prints_no_warning(cfg_path, tmp_path, monkeypatch):
    monkeypatch.setenv(LONG_RUN_ENV, "0.0001")
    res = CliRunner().invoke(cli, ["run", str(cfg_path), "--out", str(tmp_path / "run"), "--stop-after", "dedup"])
    assert res.exit_code == 0, res.output
    assert "estimated at about" not in res.output  # only the embedded model is checked before a run
