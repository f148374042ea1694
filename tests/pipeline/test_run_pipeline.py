"""`rubric-induce run` end to end on the fake backend: every stage, resume, crash recovery, manifest."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.core.errors import BackendError
from rubric_induce.data import RubricPool, RubricSet
from rubric_induce.data.mapping import read_examples
from rubric_induce.data.probes import ProbeTable
from rubric_induce.pipeline import STAGE_NAMES, load_config, run_pipeline
from rubric_induce.pipeline import stages as stage_mod
from rubric_induce.selection.scores import labels_from_examples, unit_scores
from rubric_induce.selection.split import group_split

FAST = "\n[evaluate]\nbootstrap = 50\n"
# For the tests that rerun from select to the report: every fit file trained as little as that takes (a
# 2-fold report, one adaptive member of 20 epochs; the defaults are 5 folds, 5 members of 200), no figures.
RERUN_EXTRA = FAST + "[report]\nfigures = false\n"


def _light(config: str) -> str:
    assert config.count("pretrain = false }") == 1, config
    return config.replace("pretrain = false }", "pretrain = false }\ncv_folds = 2\n"
                                                "adaptive_options = { epochs = 20, n_members = 1 }")
RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


def _quiet(msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def finished_run(fake_full_run):
    """One complete fake run shared by the read-only tests: the session's ``fake_full_run``
    (tests/conftest.py; feedback on, report figures off)."""
    return fake_full_run.out.parent, fake_full_run


def test_every_stage_runs_and_writes_its_outputs(finished_run):
    _, result = finished_run
    out = result.out
    assert result.ran == list(STAGE_NAMES) and result.skipped == []
    for name in ("pool.jsonl", "pool.dedup.jsonl", "probes.jsonl", "selected.jsonl", "artifact.json",
                 "calibration/calibrator.json", "scores.jsonl", "evaluation.md", "feedback.md", "report.md"):
        assert (out / name).exists(), name
    for name in STAGE_NAMES:
        marker = json.loads((out / "stages" / f"{name}.json").read_text())
        assert marker["stage"] == name and len(marker["fingerprint"]) == 16
    pool = [json.loads(line) for line in (out / "pool.jsonl").read_text().splitlines()]
    methods = {r["provenance"].get("method") for r in pool}
    assert "manual" in methods and len(methods) >= 2  # induced and hand-written rubrics mixed
    sel = json.loads((out / "selected.manifest.json").read_text())
    assert sel["n_rubrics"] == 4 and isinstance(sel["threshold"], float)
    assert sel["threshold"] == pytest.approx(result.summaries["select"]["threshold"])


def test_manifest_records_versions_data_usage_and_timings(finished_run):
    _, result = finished_run
    m = json.loads((result.out / "manifest.json").read_text())
    assert m["status"] == "finished"
    assert m["versions"]["rubric-induce"] and m["versions"]["python"]
    assert m["backend"]["kind"] == "fake" and m["seed"] == 0
    assert len(m["data"]["sha256"]) == 64 and m["data"]["n_examples"] == 24
    assert m["data"]["n_train"] + m["data"]["n_test"] == 24
    assert set(m["prompts"]) >= {"probe_score_only", "rubicon_extract"}
    assert all(len(h) == 12 for h in m["prompts"].values())
    assert set(m["stages"]) == set(STAGE_NAMES)
    assert all(s["status"] == "done" and s["seconds"] >= 0 for s in m["stages"].values())
    probe_usage = m["stages"]["probe"]["usage"]
    assert probe_usage["calls"] > 0 and probe_usage["prompt_tokens"] > 0
    assert m["usage"]["prompt_tokens"] >= probe_usage["prompt_tokens"]
    assert "cost_usd" in m["usage"]


def test_evaluate_scores_match_the_scorer(finished_run):
    from rubric_induce.evaluation.score_table import read_scores
    from rubric_induce.scoring.scorer import RubricScorer

    _, result = finished_run
    rows = read_scores(result.out / "scores.jsonl")
    netsat = {r.example_id: r.score for r in rows if r.system == "netsat" and r.aspect == "sat"}
    assert len(netsat) == 12
    scorer = RubricScorer.load(result.out)
    test_scores = json.loads((result.out / "test_scores.json").read_text())
    for rec in test_scores:
        assert rec["netsat"] == pytest.approx(netsat[rec["id"]])
        assert rec["label"] == int(rec["netsat"] > scorer.threshold)
    # the direct judge rates the calibrated question too ([evaluate] direct_baseline, on by default)
    assert {r.system for r in rows if r.aspect == "satisfaction"} == {"calibrated", "netsat", "direct"}


def test_rerun_skips_everything(finished_run, tmp_path):
    tmp, result = finished_run
    out = tmp_path / "out"
    shutil.copytree(result.out, out)   # the shared run stays as it was
    again = run_pipeline(tmp / "cfg.toml", out=out, echo=_quiet)
    assert again.ran == [] and again.skipped == list(STAGE_NAMES)
    assert json.loads((out / "manifest.json").read_text())["status"] == "finished"


@pytest.mark.slow
def test_changed_stage_config_reruns_from_that_stage(write_config, tmp_path, fake_run_config):
    CONFIG = _light(fake_run_config)
    first = run_pipeline(write_config(RERUN_EXTRA, base=CONFIG), out=tmp_path / "out", echo=_quiet,
                         stop_after="select")
    assert first.ran == ["generate", "dedup", "probe", "select"]
    changed = write_config(RERUN_EXTRA, base=CONFIG.replace("n_sat = 2", "n_sat = 1"))
    second = run_pipeline(changed, out=tmp_path / "out", echo=_quiet)
    assert second.skipped == ["generate", "dedup", "probe"]
    assert second.ran[0] == "select" and second.ran[-1] == "report"
    assert json.loads((tmp_path / "out" / "selected.manifest.json").read_text())["n_rubrics"] == 3


@pytest.mark.slow
def test_crash_between_stages_resumes_after_the_last_finished_one(write_config, tmp_path, monkeypatch,
                                                                  fake_run_config):
    cfg = write_config(RERUN_EXTRA, base=_light(fake_run_config))
    real = stage_mod.STAGES

    def boom(ctx):
        raise RuntimeError("simulated crash in select")

    crashing = tuple(s if s.name != "select" else type(s)(s.name, boom, s.sections, s.outputs) for s in real)
    monkeypatch.setattr("rubric_induce.pipeline.runner.STAGES", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_pipeline(cfg, out=tmp_path / "out", echo=_quiet)
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["status"].startswith("failed during select") and m["stages"]["select"]["status"] == "failed"
    assert not (tmp_path / "out" / "stages" / "select.json").exists()
    monkeypatch.setattr("rubric_induce.pipeline.runner.STAGES", real)
    resumed = run_pipeline(cfg, out=tmp_path / "out", echo=_quiet)
    assert resumed.skipped == ["generate", "dedup", "probe"] and resumed.ran[0] == "select"


class _DiesAfter(FakeBackend):
    """A fake model that fails (like a killed process) after ``n`` answer calls."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def answer_logprobs(self, *args, **kwargs):
        if self.left <= 0:
            raise BackendError("simulated crash mid-probe")
        self.left -= 1
        return super().answer_logprobs(*args, **kwargs)


@pytest.mark.slow
def test_crash_mid_probe_loses_no_finished_call(write_config, tmp_path):
    cfg = load_config(write_config(FAST))
    out = tmp_path / "out"
    with pytest.raises(BackendError, match="mid-probe"):
        run_pipeline(cfg, out=out, backend=_DiesAfter(30), echo=_quiet)
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"].startswith("failed during probe")
    counting = FakeBackend()
    resumed = run_pipeline(cfg, out=out, backend=counting, echo=_quiet)
    assert resumed.skipped == ["generate", "dedup"] and "probe" in resumed.ran
    probe_stage = json.loads((out / "stages" / "probe.json").read_text())
    # the 30 probes answered before the crash come back from the streamed probes file (or the cache)
    assert probe_stage["usage"]["cache_hits"] + probe_stage["summary"]["reused"] == 30
    n_pool = sum(1 for _ in (out / "pool.dedup.jsonl").open())
    n_direct = resumed.summaries["evaluate"]["direct"]["asked"]  # the direct judge: one call per held-out text
    assert n_direct > 0
    assert len([c for c in counting.calls if c[0] == "answer_logprobs"]) == 24 * n_pool - 30 + n_direct


def test_keyboard_interrupt_marks_the_manifest(write_config, tmp_path, monkeypatch):
    cfg = write_config(FAST)
    real = stage_mod.STAGES

    def interrupt(ctx):
        raise KeyboardInterrupt

    patched = tuple(s if s.name != "dedup" else type(s)(s.name, interrupt, s.sections, s.outputs) for s in real)
    monkeypatch.setattr("rubric_induce.pipeline.runner.STAGES", patched)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "out")])
    assert res.exit_code == 130 and "rerun the same command to resume" in res.output
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["status"].startswith("interrupted during dedup")
    assert (tmp_path / "out" / "stages" / "generate.json").exists()


@pytest.mark.slow
def test_cli_run_force_and_check(write_config, tmp_path):
    cfg = write_config(FAST)
    runner = CliRunner()
    res = runner.invoke(cli, ["run", str(cfg), "--check"])
    assert res.exit_code == 0 and "config OK: 24 examples (12 train / 12 held out)" in res.output
    res = runner.invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "o"), "--stop-after", "probe"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "o"), "--force", "probe",
                              "--stop-after", "probe"])
    assert res.exit_code == 0 and "[probe] running" in res.output and "[dedup] already done" in res.output
    res = runner.invoke(cli, ["run", str(cfg), "--force", "nonsense"])
    assert res.exit_code != 0 and "is not one of" in res.output


def test_cli_run_reports_config_errors_cleanly(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[data]\nexamples = 'x.jsonl'\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(bad)])
    assert res.exit_code != 0
    assert "data.examples" in res.output and "not found" in res.output and "Traceback" not in res.output


@pytest.mark.slow
def test_non_binary_label_needs_threshold_or_topk(write_config, tmp_path, fake_run_config):
    CONFIG = fake_run_config
    from rubric_induce.core.errors import DataError

    cfg = write_config(FAST, base=CONFIG.replace('label = "sat"', 'label = "satisfaction"'))
    with pytest.raises(DataError, match="label_threshold"):
        run_pipeline(cfg, out=tmp_path / "out", echo=_quiet)
    ok = write_config(FAST, name="ok.toml", base=CONFIG.replace('label = "sat"', 'label = "satisfaction"\n'
                                                                 'label_threshold = 3.0'))
    res = run_pipeline(ok, out=tmp_path / "out2", echo=_quiet, stop_after="select")
    assert res.ran == ["generate", "dedup", "probe", "select"]
    summary = res.summaries["select"]
    out = tmp_path / "out2"
    chosen = RubricSet.load(out / "selected.jsonl")
    assert chosen.manifest["label"] == "satisfaction" and chosen.manifest["label_threshold"] == 3.0
    # the budgets are filled from the deduplicated pool: 2 SAT + 2 DSAT
    assert summary["selected"] == len(chosen) == 4
    assert sorted(r.polarity for r in chosen) == ["DSAT", "DSAT", "SAT", "SAT"]
    assert {r.id for r in chosen} <= {r.id for r in RubricPool.load(out / "pool.dedup.jsonl")}
    # The threshold is RUBICON's midpoint of the class-mean NetSATs on the training split, with
    # satisfaction >= 3 as the positive class; recompute it from the saved probes.
    examples = read_examples(RES / "demo_uss_dialogues.jsonl")[:24]
    y = labels_from_examples(examples, "satisfaction", 3.0)
    raw = np.array([e.labels["satisfaction"] for e in examples])
    assert set(raw.tolist()) - {0.0, 1.0} and 0 < y.sum() < len(y)  # a real scale, both classes after it
    train, _ = group_split(examples, y, test_size=load_config(ok).run.test_size, random_state=0)
    train_ids = [examples[i].id for i in train]
    signs = np.array([1.0 if r.polarity == "SAT" else -1.0 for r in chosen])
    net = unit_scores(ProbeTable.load(out / "probes.jsonl"), list(chosen), example_ids=train_ids) @ signs
    yt = y[train].astype(bool)
    expect = (net[yt].mean() + net[~yt].mean()) / 2
    assert chosen.threshold == pytest.approx(expect) and summary["threshold"] == pytest.approx(expect)
    assert summary["train_delta_netsat"] == pytest.approx(net[yt].mean() - net[~yt].mean())
    assert summary["train_delta_netsat"] > 0  # the selected set separates the thresholded classes
