"""Resume does not trust damaged outputs (issue 17, item 5): stage markers record the sha256 of every file a
stage wrote; a rerun that finds one changed, truncated or missing reruns that stage (and says so) and
everything after it. Non-finite calibration weights or predictions are errors, never scores. And a run
killed with SIGKILL mid-probe on the embedded model resumes, losing no finished call."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from runconfigs import RES, probe_stage_calls, small_run_config

from rubric_induce.cli import EXIT_INPUT, cli
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.pipeline import STAGE_NAMES, run_pipeline
from rubric_induce.pipeline.folder import file_sha256

# A small fake-backend run with a calibration network (hand-written rubrics, no generation).
CONFIG = small_run_config(calibrate=True)


def _quiet(msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished run, copied by each test that changes it."""
    tmp = tmp_path_factory.mktemp("resume")
    cfg = tmp / "cfg.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    run_pipeline(cfg, out=tmp / "run", echo=_quiet)
    return cfg, tmp / "run"


@pytest.fixture
def run_copy(finished, tmp_path):
    cfg, run = finished
    shutil.copytree(run, tmp_path / "run")
    return cfg, tmp_path / "run"


def _rerun(cfg: Path, out: Path):
    said: list[str] = []
    result = run_pipeline(cfg, out=out, echo=said.append)
    return result, said



def _kill_when(proc: subprocess.Popen, ready, limit: float, who: str, not_started: str) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds (it must not end first, nor take over ``limit`` s)."""
    try:
        t0 = time.monotonic()
        while not ready():
            assert proc.poll() is None, f"{who} ended before the kill: {proc.stderr.read()}"
            assert time.monotonic() - t0 < limit, not_started
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

@pytest.mark.slow
def test_markers_record_the_sha256_of_every_output(finished):
    _, run = finished
    for name in STAGE_NAMES:
        marker = json.loads((run / "stages" / f"{name}.json").read_text())
        for rel, digest in marker["outputs"].items():
            assert file_sha256(run / rel) == digest, (name, rel)
    outputs = {name: json.loads((run / "stages" / f"{name}.json").read_text())["outputs"] for name in STAGE_NAMES}
    assert "probes.jsonl" in outputs["probe"] and "artifact.json" in outputs["artifact"]
    assert "calibration/weights.safetensors" in outputs["calibrate"] and "report.md" in outputs["report"]
    # the run's bookkeeping and the call cache are nobody's output; each file belongs to one stage
    every = [rel for o in outputs.values() for rel in o]
    assert len(every) == len(set(every))
    assert not {"manifest.json", "config.json", "llm_calls.sqlite", ".lock"} & set(every)


@pytest.mark.slow
def test_an_untouched_run_is_resumed_without_rerunning(run_copy):
    cfg, run = run_copy  # a copied run folder (markers hold relative paths) resumes as well
    result, said = _rerun(cfg, run)
    assert result.ran == [] and result.skipped == list(STAGE_NAMES)
    assert not any("changed or damaged" in line for line in said)


@pytest.mark.slow
def test_a_truncated_artifact_reruns_its_stage_and_the_later_ones(run_copy):
    cfg, run = run_copy
    good = (run / "artifact.json").read_bytes()
    (run / "artifact.json").write_bytes(good[: len(good) // 2])
    result, said = _rerun(cfg, run)
    assert "[artifact] output artifact.json changed or damaged since the stage finished; rerunning" in said
    assert result.skipped == ["generate", "dedup", "probe", "select", "calibrate"]
    assert result.ran == ["artifact", "evaluate", "feedback", "report"]
    assert (run / "artifact.json").read_bytes() == good
    assert _rerun(cfg, run)[0].ran == []  # and now it is trusted again


@pytest.mark.slow
def test_a_truncated_probe_table_is_reprobed_from_the_cache(run_copy):
    cfg, run = run_copy
    good = (run / "probes.jsonl").read_bytes()
    with (run / "probes.jsonl").open("r+b") as fh:
        fh.truncate(len(good) - 100)
    result, said = _rerun(cfg, run)
    assert any(line.startswith("[probe] output probes.jsonl changed or damaged") for line in said), said
    assert result.ran == list(STAGE_NAMES[2:])
    usage = result.manifest["stages"]["probe"]["usage"]
    assert usage["calls"] == 0 and usage["cache_hits"] == probe_stage_calls(run)  # nothing asked of the LLM again
    assert (run / "probes.jsonl").read_bytes() == good


@pytest.mark.slow
def test_an_edited_or_missing_output_is_noticed(run_copy):
    cfg, run = run_copy
    text = (run / "selected.jsonl").read_text()
    (run / "selected.jsonl").write_text(text.replace("a", "b", 1))  # same size, other content
    (run / "calibration" / "weights.safetensors").unlink()
    result, said = _rerun(cfg, run)
    assert any(line.startswith("[select] output selected.jsonl changed") for line in said), said
    assert result.ran[0] == "select" and "calibrate" in result.ran
    assert (run / "selected.jsonl").read_text() == text
    assert (run / "calibration" / "weights.safetensors").exists()


@pytest.mark.slow
def test_markers_without_hashes_still_resume(run_copy):
    """Run folders written before output hashes existed resume as before (outputs checked by existence)."""
    cfg, run = run_copy
    for name in STAGE_NAMES:
        path = run / "stages" / f"{name}.json"
        marker = json.loads(path.read_text())
        marker.pop("outputs")
        path.write_text(json.dumps(marker))
    assert _rerun(cfg, run)[0].ran == []


# -- why a stage reruns, guarantees added to artifact.json (issue 40, items 1 and 8) ---------------
@pytest.mark.slow
def test_each_rerun_stage_says_why(run_copy):
    """A changed config section, an earlier rerun, a stage that never ran and a marker written before the
    per-input record: each rerun stage says why in one line, and the manifest records it."""
    cfg, run = run_copy
    cfg.write_text(cfg.read_text().replace("n_sat = 2", "n_sat = 1"), encoding="utf-8")
    (run / "stages" / "evaluate.json").unlink()
    result, said = _rerun(cfg, run)
    assert result.ran[0] == "select"
    assert "[select] config [select] changed; rerunning" in said
    assert "[calibrate] select reran before it; rerunning" in said
    assert "[evaluate] running (never ran) ..." in said
    assert result.manifest["stages"]["select"]["reason"] == "config [select] changed"
    assert result.manifest["stages"]["evaluate"]["reason"] == "never ran"
    marker = json.loads((run / "stages" / "select.json").read_text())
    assert set(marker["inputs"]) == {"config", "data", "prompts", "previous"}
    for name in STAGE_NAMES:  # markers of an earlier version: no per-input record
        path = run / "stages" / f"{name}.json"
        doc = json.loads(path.read_text())
        doc.pop("inputs")
        path.write_text(json.dumps(doc))
    cfg.write_text(cfg.read_text().replace("n_sat = 1", "n_sat = 2"), encoding="utf-8")
    result, said = _rerun(cfg, run)
    assert any(line.startswith("[select] its fingerprint changed (") for line in said), said


@pytest.mark.slow
def test_a_disabled_stage_says_so_instead_of_running(run_copy):
    """feedback.enabled = false: no "[feedback] running ..." and "done in 0.0 s", but one line that says it is
    disabled (issue 40, item 8); the manifest marks it "disabled"."""
    cfg, run = run_copy
    result, said = _rerun_forced(cfg, run, "evaluate")
    assert "[feedback] disabled (feedback.enabled = false); skipped" in said
    assert not any(line.startswith(("[feedback] running", "[feedback] done")) for line in said), said
    assert result.disabled == ["feedback"]
    assert result.manifest["stages"]["feedback"]["status"] == "disabled"
    assert "[evaluate] --force evaluate; rerunning" in said and "[evaluate] running ..." in said


def _rerun_forced(cfg: Path, out: Path, stage: str):
    said: list[str] = []
    return run_pipeline(cfg, out=out, echo=said.append, force=(stage,)), said


@pytest.mark.slow
def test_guarantees_added_to_the_artifact_are_not_a_damaged_output(run_copy):
    """artifact.json with a guarantees list added after the artifact stage (as calibrate-guarantee writes it)
    is trusted, also under a marker written before the stage recorded its own keys."""
    from rubric_induce.data.jsonl import write_json

    cfg, run = run_copy
    for name in ("artifact",):  # a marker of an earlier version: no record of the keys it wrote
        path = run / "stages" / f"{name}.json"
        doc = json.loads(path.read_text())
        doc.pop("open_outputs", None)
        path.write_text(json.dumps(doc))
    art = run / "artifact.json"
    doc = json.loads(art.read_text())
    doc["guarantees"] = [{"target": 0.8, "delta": 0.1, "measure": "proba", "threshold": 0.5}]
    write_json(art, doc)
    result, said = _rerun(cfg, run)
    assert result.ran == [] and not any("changed or damaged" in line for line in said), said
    assert json.loads(art.read_text())["guarantees"][0]["target"] == 0.8


def test_hashing_streams_large_files(tmp_path):
    import hashlib

    big = tmp_path / "big.jsonl"
    block = os.urandom(1 << 20)
    with big.open("wb") as fh:
        for _ in range(20):
            fh.write(block)
    t0 = time.perf_counter()
    digest = file_sha256(big)
    assert digest == hashlib.sha256(block * 20).hexdigest()
    assert time.perf_counter() - t0 < 2.0  # 20 MiB; measured ~0.05 s


# -- non-finite weights and predictions ----------------------------------------------------------
def _poison(weights: Path, value: float = float("nan")) -> str:
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(weights))
    key = sorted(tensors)[0]
    arr = tensors[key].copy()
    arr.flat[0] = value
    tensors[key] = arr
    save_file(tensors, str(weights))
    return key


@pytest.mark.slow
def test_nan_weights_fail_to_load_naming_file_and_tensor(run_copy):
    from rubric_induce.calibration.artifacts import load_calibrator

    _, run = run_copy
    weights = run / "calibration" / "weights.safetensors"
    key = _poison(weights)
    with pytest.raises(DataError, match="NaN or infinite") as err:
        load_calibrator(run / "calibration")
    assert key in str(err.value) and str(weights) in str(err.value)
    res = CliRunner().invoke(cli, ["score", str(run), "--probes", str(run / "probes.jsonl")])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "NaN" in res.output and key in res.output and "prediction" not in res.output


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["drop judges", "hidden is text", "not JSON text", "a list"])
def test_a_damaged_calibrator_config_is_one_clean_error(run_copy, damage):
    _, run = run_copy
    path = run / "calibration" / "calibrator.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    if damage == "drop judges":
        del doc["judges"]
    elif damage == "hidden is text":
        doc["params"]["hidden"] = 7
    text = {"not JSON text": b"\xff\xfe{", "a list": b"[1, 2]"}.get(damage, json.dumps(doc).encode())
    path.write_bytes(text)
    res = CliRunner().invoke(cli, ["score", str(run), "--probes", str(run / "probes.jsonl")])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "Traceback" not in res.output and str(path) in res.output
    if damage == "drop judges":
        assert "judges" in res.output


@pytest.mark.slow
def test_nan_weights_in_a_run_are_refit_on_resume(run_copy):
    cfg, run = run_copy
    _poison(run / "calibration" / "weights.safetensors", float("inf"))
    result, said = _rerun(cfg, run)
    assert any(line.startswith("[calibrate] output calibration/weights.safetensors changed") for line in said)
    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(run)  # loads: the weights are finite again
    assert scorer.calibrator is not None


@pytest.mark.slow
def test_saving_non_finite_weights_is_refused(finished, tmp_path):
    from rubric_induce.calibration.artifacts import load_calibrator, save_calibrator

    _, run = finished
    cal = load_calibrator(run / "calibration")
    with __import__("torch").no_grad():
        next(cal.networks_[0].parameters()).fill_(float("nan"))
    with pytest.raises(RubricInduceError, match="not finite"):
        save_calibrator(cal, tmp_path / "cal")
    assert not (tmp_path / "cal").exists()


@pytest.mark.slow
def test_a_non_finite_prediction_is_an_error_not_a_score(finished):
    import torch

    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.scoring.scorer import RubricScorer

    _, run = finished
    scorer = RubricScorer.load(run)
    table = ProbeTable.load(run / "probes.jsonl")
    ids = sorted({r.example_id for r in table.records})[:3]
    assert all(np.isfinite(r.prediction) for r in scorer.score_probes(table, ids))
    with torch.no_grad():
        for net in scorer.calibrator.networks_:
            next(net.parameters()).fill_(float("nan"))
    with pytest.raises(RubricInduceError, match="non-finite prediction"):
        scorer.score_probes(table, ids)


# -- SIGKILL mid-probe on the embedded model -----------------------------------------------------
# KILL_TEXTS dialogues cut to 128 tokens x the rubrics the kill test writes (one SAT, one DSAT): 12 probes.
LOCAL = """
[run]
limit = {limit}
[data]
examples = "{examples}"
label = "sat"
[backend]
spec = "local"
[generate]
method = "none"
include = ["{rubrics}"]
[dedup]
enabled = false
[probe]
max_example_tokens = 128
[select]
n_sat = 1
n_dsat = 1
[calibrate]
enabled = false
[evaluate]
bootstrap = 50
# the direct judge's question (asked in the probe stage, after each held-out text's rubrics) is left out:
# this run counts rubric probes on the embedded model (the fake-backend kill test counts both)
direct_baseline = false
[report]
bootstrap = 50
figures = false
"""


def _cached_rows(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as con:
            return int(con.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
    except sqlite3.Error:
        return 0


def _whole_lines(path: Path) -> int:
    """Probe records a streamed probes file holds in full (a torn last line does not count)."""
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return 0
    n = 0
    for line in lines[:-1]:  # the part after the last newline is not a whole line
        json.loads(line)
        n += 1
    return n


#: Texts of the embedded-model kill test (x 2 rubrics, one SAT and one DSAT: 12 probes in all).
KILL_TEXTS = 6


@pytest.mark.local_model
@pytest.mark.slow
def test_kill_9_mid_probe_on_the_embedded_model_loses_nothing(tmp_path, embedded_model_path):
    from rubric_induce.data import RubricPool
    from rubric_induce.handoff import import_rubrics

    demo = list(import_rubrics(RES / "demo_uss_rubrics.json"))
    two = [r for r in demo if r.polarity == "SAT"][:1] + [r for r in demo if r.polarity == "DSAT"][:1]
    RubricPool(two).save(tmp_path / "rubrics.jsonl")
    cfg = tmp_path / "local.toml"
    cfg.write_text(LOCAL.format(examples=RES / "demo_uss_dialogues.jsonl", rubrics=tmp_path / "rubrics.jsonl",
                                limit=KILL_TEXTS), encoding="utf-8")
    out = tmp_path / "killed"
    n_probes, kill_at = KILL_TEXTS * len(two), 4  # killed after the 4th of 12 calls: some done, most not
    proc = subprocess.Popen([sys.executable, "-m", "rubric_induce.cli", "run", str(cfg), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _kill_when(proc, lambda: _cached_rows(out / "llm_calls.sqlite") >= kill_at, 300, "the run",
               "the probe stage did not start")
    saved = _cached_rows(out / "llm_calls.sqlite")
    on_disk = _whole_lines(out / "probes.jsonl")  # streamed as they finished (serial: one per call)
    assert kill_at <= saved < n_probes and saved - 1 <= on_disk <= saved

    # the same command (in this process: a second interpreter would only add its start-up): no stale lock,
    # no lost call
    resumed = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    assert resumed.exit_code == 0, resumed.output
    manifest = json.loads((out / "manifest.json").read_text())
    usage = manifest["stages"]["probe"]["usage"]
    summary = json.loads((out / "stages" / "probe.json").read_text())["summary"]
    assert manifest["status"] == "finished"
    assert summary["reused"] == on_disk and usage["cache_hits"] == saved - on_disk
    assert usage["calls"] == n_probes - saved

    reference = tmp_path / "uninterrupted"
    run_pipeline(cfg, out=reference, echo=_quiet, stop_after="probe")
    ref_usage = json.loads((reference / "manifest.json").read_text())["stages"]["probe"]["usage"]
    assert ref_usage["calls"] == n_probes and usage["calls"] < ref_usage["calls"]
    assert (out / "probes.jsonl").read_bytes() == (reference / "probes.jsonl").read_bytes()


# -- SIGKILL mid-probe on a concurrent backend: the streamed probes file ---------------------------
_KILLABLE = """
import sys
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.pipeline import run_pipeline
run_pipeline(sys.argv[1], out=sys.argv[2], backend=FakeBackend(delay=float(sys.argv[3]), max_concurrency=4),
             stop_after="probe", echo=lambda s: None)
"""


def _run_fake(cfg: Path, out: Path, delay: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _KILLABLE, str(cfg), str(out), str(delay)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_kill_9_mid_probe_streams_and_resumes_without_loss_or_repeat(tmp_path):
    """Probes reach probes.jsonl as they finish; after SIGKILL (and a torn last line) the same run
    keeps every whole record, takes calls that finished after it from the cache, repeats none."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    out, n_probes = tmp_path / "killed", 12 * 8
    proc = _run_fake(cfg, out, 0.03)
    _kill_when(proc, lambda: _whole_lines(out / "probes.jsonl") >= 20, 120, "the run", "the probe stage did not start")
    saved = _cached_rows(out / "llm_calls.sqlite")
    with (out / "probes.jsonl").open("ab") as fh:  # as if the kill had cut a record in half
        fh.write(b'{"example_id": "dlg-0001", "rubric_id": "rb-')
    on_disk = _whole_lines(out / "probes.jsonl")
    assert 20 <= on_disk <= saved < n_probes

    result, said = _rerun(cfg, out)
    assert result.manifest["status"] == "finished"
    summary, usage = result.summaries["probe"], result.manifest["stages"]["probe"]["usage"]
    assert summary["reused"] == on_disk  # every whole record kept, none probed again
    assert usage["cache_hits"] == saved - on_disk  # finished after the last record written: from the cache
    assert usage["calls"] == probe_stage_calls(out) - saved  # no finished call repeated
    assert any(f"resuming: {on_disk} probe(s) already on disk" in line for line in said)

    reference = tmp_path / "uninterrupted"
    run_pipeline(cfg, out=reference, backend=None, echo=_quiet, stop_after="probe")
    assert (out / "probes.jsonl").read_bytes() == (reference / "probes.jsonl").read_bytes()
    assert not (out / "stages" / "probe.partial.json").exists()


@pytest.mark.slow
def test_a_streamed_file_of_another_config_is_not_reused(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    out = tmp_path / "run"
    run_pipeline(cfg, out=out, echo=_quiet, stop_after="probe")
    (out / "stages" / "probe.json").unlink()  # as if killed; the partial marker names an old fingerprint
    (out / "stages" / "probe.partial.json").write_text('{"fingerprint": "0123456789abcdef"}')
    result, said = _rerun(cfg, out)
    assert result.summaries["probe"]["reused"] == 0 and not any("resuming:" in s for s in said)


# -- the standalone `probe` command streams its --out file too ---------------------------------------
_KILLABLE_PROBE = """
import sys
import rubric_induce.backends.fake as fake
slow = lambda *a, **k: fake.FakeBackend.__orig_init__(*a, **{**k, "delay": float(sys.argv[1]), "max_concurrency": 4})
fake.FakeBackend.__orig_init__ = fake.FakeBackend.__init__
fake.FakeBackend.__init__ = slow
from rubric_induce.cli import main
main(sys.argv[2:])
"""


def _probe_args(tmp_path: Path, out: Path) -> list[str]:
    from rubric_induce.data import Rubric, RubricPool

    rubrics = tmp_path / "rubrics.jsonl"
    if not rubrics.exists():
        RubricPool([Rubric.create(f"The assistant does thing number {k}.", "SAT" if k % 2 else "DSAT")
                    for k in range(6)]).save(rubrics)
    return ["probe", "--examples", str(RES / "demo_uss_dialogues.jsonl"), "--limit", "12", "--rubrics", str(rubrics),
            "--backend", "fake", "--cache", str(tmp_path / "calls.sqlite"), "--out", str(out), "--no-progress"]


@pytest.mark.slow
def test_kill_9_mid_probe_command_keeps_the_streamed_records_and_resumes(tmp_path):
    """`rubric-induce probe` wrote --out only at the end, so a killed probe lost every record; now
    records reach the file as they finish, and the same command again keeps them (no call repeated)."""
    out, n_probes = tmp_path / "probes.jsonl", 12 * 6
    args = _probe_args(tmp_path, out)
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE_PROBE, "0.03", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _kill_when(proc, lambda: _whole_lines(out) >= 15, 120, "probe", "probing did not start")
    on_disk = _whole_lines(out)
    assert 15 <= on_disk < n_probes
    assert (tmp_path / "probes.jsonl.partial.json").exists()
    saved = _cached_rows(tmp_path / "calls.sqlite")

    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert f"resuming: {on_disk} probe(s) already on disk are kept" in res.output
    assert f"LLM calls: {n_probes - saved} new, {saved - on_disk} cached" in res.output
    assert not (tmp_path / "probes.jsonl.partial.json").exists()
    reference = tmp_path / "reference.jsonl"
    ref_args = _probe_args(tmp_path, reference)
    ref_args[ref_args.index("--cache") + 1] = str(tmp_path / "other.sqlite")
    assert CliRunner().invoke(cli, ref_args).exit_code == 0
    assert out.read_bytes() == reference.read_bytes()
    # another job (other rubrics) into the same --out does not reuse the streamed records
    (tmp_path / "probes.jsonl.partial.json").write_text('{"fingerprint": "0123456789abcdef"}')
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0 and "resuming:" not in res.output
