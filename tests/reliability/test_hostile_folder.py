"""A run folder from someone else can do no harm (issue 31, items 1 and 2).

Run folders, artifacts and batch folders travel between people. A file name read from a stage
marker, a manifest, an artifact or a batch manifest is resolved (symbolic links included) and must
stay inside the folder; a symbolic link planted in the folder may not lead a write or a removal
outside it; the lock file is never written through a link. Each case below plants something in a
real run folder (a fake-backend run) and checks that the command exits 2 with one line naming the
file (and field), and that every file outside the folder is still there, byte for byte, with its
modification time.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from runconfigs import small_run_config

from rubric_induce.cli import EXIT_INPUT, cli
from rubric_induce.core.errors import DataError
from rubric_induce.pipeline import run_pipeline
from rubric_induce.pipeline.folder import LOCK_NAME, RunLock, file_sha256

CONFIG = small_run_config()


def _quiet(msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished fake-backend run (about a second), copied by every test that plants something."""
    tmp = tmp_path_factory.mktemp("hostile")
    cfg = tmp / "cfg.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    run_pipeline(cfg, out=tmp / "run", echo=_quiet)
    return cfg, tmp / "run"


@pytest.fixture
def run(finished, tmp_path):
    cfg, src = finished
    shutil.copytree(src, tmp_path / "run", symlinks=True)
    return cfg, tmp_path / "run"


@pytest.fixture
def victims(tmp_path) -> Path:
    """Files outside the run folder that nothing may change: a note, and one in a folder of its own."""
    folder = tmp_path / "victims"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes: do not lose\n", encoding="utf-8")
    (folder / "sub" / "keep.txt").write_text("alone in its folder\n", encoding="utf-8")
    return folder


def _state(folder: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every entry under ``folder`` (links not followed): its bytes (None for a folder or link) and mtime."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        data = p.read_bytes() if p.is_file() and not p.is_symlink() else None
        out[p.relative_to(folder).as_posix()] = (data, st.st_mtime_ns)
    out["."] = (None, folder.stat().st_mtime_ns)
    return out


def _refused(res, *words: str) -> str:
    """The command exited 2 with one line that holds every one of ``words``."""
    assert res.exit_code == EXIT_INPUT, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "Traceback" not in res.output
    return lines[0]


def _marker(run: Path, stage: str) -> Path:
    return run / "stages" / f"{stage}.json"


def _plant_outputs(run: Path, stage: str, names: dict[str, str]) -> None:
    """Add ``names`` to a stage marker's outputs, and make the stage rerun (another fingerprint)."""
    path = _marker(run, stage)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["outputs"].update(names)
    doc["fingerprint"] = "planted"
    path.write_text(json.dumps(doc), encoding="utf-8")


def _link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


# -- item 1: names in stage markers ------------------------------------------------------------------
@pytest.mark.parametrize("form", ["../victims/notes.txt", "stages/../../victims/notes.txt", "absolute",
                                  "../victims/sub/keep.txt"])
def test_a_marker_naming_a_file_outside_the_run_folder_is_refused_and_nothing_is_touched(run, victims, form):
    """Today the next run deletes the named file (and its emptied folder), and exits 0."""
    cfg, out = run
    victim = victims / ("sub/keep.txt" if "keep" in form else "notes.txt")
    name = str(victim) if form == "absolute" else form
    _plant_outputs(out, "generate", {name: file_sha256(victim)})
    outside, inside = _state(victims), _state(out)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    _refused(res, str(_marker(out, "generate")), "field 'outputs'", repr(name),
             "absolute path" if form == "absolute" else "outside")
    assert _state(victims) == outside
    assert _state(out) == inside  # refused before anything was written


def test_run_check_refuses_the_same_marker(run, victims):
    cfg, out = run
    _plant_outputs(out, "dedup", {"../victims/notes.txt": file_sha256(victims / "notes.txt")})
    outside = _state(victims)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out), "--check"])
    _refused(res, str(_marker(out, "dedup")), "field 'outputs'")
    assert _state(victims) == outside


def test_marker_outputs_that_are_not_an_object_are_an_input_error(run):
    cfg, out = run
    path = _marker(out, "select")
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["outputs"] = ["selected.jsonl"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    _refused(res, str(path), "field 'outputs'")


def test_stale_outputs_are_checked_before_any_is_removed(tmp_path, victims):
    """The runner's own removal refuses a name outside the folder before it removes anything."""
    from rubric_induce.pipeline.runner import _remove_stale

    (tmp_path / "run").mkdir()
    mine = tmp_path / "run" / "old.txt"
    mine.write_text("old output\n")
    old = {"old.txt": file_sha256(mine), "../victims/notes.txt": file_sha256(victims / "notes.txt")}
    outside = _state(victims)
    with pytest.raises(DataError) as err:
        _remove_stale(tmp_path / "run", old, {}, source=tmp_path / "run" / "stages" / "x.json")
    assert err.value.field == "outputs" and "outside" in str(err.value)
    assert mine.exists() and _state(victims) == outside


# -- item 2: links planted in the folder -------------------------------------------------------------
@pytest.mark.parametrize("target", ["outside", "inside"])
def test_a_linked_lock_file_is_never_written_through(run, victims, target):
    """Today the lock's target (a file outside, or the run's own manifest) is truncated to 0 bytes."""
    cfg, out = run
    victim = victims / "notes.txt" if target == "outside" else out / "manifest.json"
    before = victim.read_bytes()
    _link(out / LOCK_NAME, victim)
    outside = _state(victims)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out)])
    _refused(res, str(out / LOCK_NAME), "link")
    assert victim.read_bytes() == before and _state(victims) == outside


def test_the_lock_does_not_open_a_link(tmp_path, victims):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_NAME).symlink_to(victims / "notes.txt")
    outside = _state(victims)
    with pytest.raises(DataError, match="symbolic link"):
        RunLock(tmp_path / "run").acquire()
    assert _state(victims) == outside


@pytest.mark.parametrize("name,force", [("stages", "generate"), ("calibration", "calibrate"),
                                        ("shards", "probe")])
def test_a_linked_folder_in_the_run_folder_is_refused(run, victims, name, force):
    """Today markers are written into the linked folder (stages), and a calibrator's files in it are
    deleted (calibration); any link leading outside is refused."""
    cfg, out = run
    target = victims / name
    if (out / name).is_dir():
        shutil.copytree(out / name, target)
    else:
        target.mkdir()
    for fname in ("calibrator.json", "report.md", "metrics.json"):
        (target / fname).write_text(f"the victim's {fname}\n", encoding="utf-8")
    _link(out / name, target)
    outside = _state(victims)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out), "--force", force])
    _refused(res, str(out / name), "symbolic link", "outside")
    assert _state(victims) == outside


@pytest.mark.parametrize("name", ["manifest.json", "probes.jsonl", "stages/probe.json", "llm_calls.sqlite",
                                  "selected.jsonl", "pool.jsonl"])
def test_a_linked_file_in_the_run_folder_is_refused(run, victims, name):
    """A run's file replaced by a link to a copy outside (the call cache is written through today)."""
    cfg, out = run
    target = victims / Path(name).name
    shutil.copy2(out / name, target)
    _link(out / name, target)
    outside = _state(victims)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out), "--force", "probe"])
    _refused(res, str(out / name), "symbolic link", "outside")
    assert _state(victims) == outside


def test_a_dangling_link_is_refused(run, victims):
    """A link to a file that does not exist yet would be created outside by an append."""
    cfg, out = run
    _link(out / "probes.jsonl", victims / "new.jsonl")
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(out), "--force", "probe"])
    _refused(res, str(out / "probes.jsonl"), "symbolic link")
    assert not (victims / "new.jsonl").exists()


def test_a_link_that_stays_inside_the_run_folder_is_fine(run):
    """Not a defect today: the guard against refusing too much (links inside, a run folder reached
    through a link of the user's own)."""
    cfg, out = run
    (out / "notes").mkdir()
    (out / "notes" / "latest.md").symlink_to(out / "report.md")
    alias = out.parent / "alias"
    alias.symlink_to(out)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(alias), "--force", "report"])
    assert res.exit_code == 0, res.output
    assert "[report] done" in res.output and (out / "notes" / "latest.md").is_symlink()


def test_report_writes_no_figure_through_a_linked_folder(run, victims):
    _, out = run
    (victims / "figures").mkdir()
    _link(out / "figures", victims / "figures")
    outside = _state(victims)
    res = CliRunner().invoke(cli, ["report", str(out)])
    _refused(res, str(out / "figures"), "symbolic link")
    assert _state(victims) == outside


def test_report_reads_no_marker_named_outside_by_the_manifest(run, victims):
    _, out = run
    (victims / "secret.json").write_text(json.dumps({"summary": {"password": "hunter2"}}), encoding="utf-8")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest["stages"]["../../victims/secret"] = {"status": "done"}
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    res = CliRunner().invoke(cli, ["report", str(out)])
    _refused(res, str(out / "manifest.json"), "field 'stages'", "outside")
    assert "hunter2" not in (out / "report.md").read_text(encoding="utf-8")


# -- artifacts -----------------------------------------------------------------------------------------
def _plant_artifact(out: Path, **fields) -> None:
    path = out / "artifact.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc.update(fields)
    path.write_text(json.dumps(doc), encoding="utf-8")


@pytest.mark.parametrize("form", ["../victims/selected.jsonl", "absolute"])
def test_an_artifact_naming_rubrics_outside_is_refused(run, victims, form):
    """Today ``score`` and ``export`` read the rubric file the artifact names, wherever it is."""
    _, out = run
    shutil.copy2(out / "selected.jsonl", victims / "selected.jsonl")
    shutil.copy2(out / "selected.manifest.json", victims / "selected.manifest.json")
    name = str(victims / "selected.jsonl") if form == "absolute" else form
    _plant_artifact(out, rubrics=name)
    outside = _state(victims)
    why = "absolute path" if form == "absolute" else "outside"
    res = CliRunner().invoke(cli, ["score", str(out), "--probes", str(out / "probes.jsonl")])
    _refused(res, str(out / "artifact.json"), "field 'rubrics'", why)
    res = CliRunner().invoke(cli, ["export", str(out), "--format", "json", "--out", str(out.parent / "x.json")])
    _refused(res, str(out / "artifact.json"), "field 'rubrics'", why)
    assert not (out.parent / "x.json").exists() and _state(victims) == outside


def test_an_artifact_naming_a_calibrator_outside_is_refused(run, victims):
    from rubric_induce.scoring.scorer import RubricScorer

    _, out = run
    (victims / "cal").mkdir()
    _plant_artifact(out, calibration="../victims/cal")
    with pytest.raises(DataError) as err:
        RubricScorer.load(out)
    assert err.value.field == "calibration" and "outside" in str(err.value)


@pytest.mark.slow  # imports torch
def test_a_calibrator_naming_weights_outside_is_refused(tmp_path, victims):
    pytest.importorskip("torch")
    from rubric_induce.calibration.artifacts import CONFIG_NAME, load_calibrator

    folder = tmp_path / "cal"
    folder.mkdir()
    config = {"format": "rubric-induce-calibrator", "format_version": 1, "weights": "../victims/notes.txt",
              "params": {}, "question_names": [], "scales": [], "main_question_index": 0, "judges": [],
              "input_shape": [1], "n_members": 1}
    (folder / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_calibrator(folder)
    assert err.value.field == "weights" and ("outside" in str(err.value) or "file in this folder" in str(err.value))


def test_score_does_not_open_a_linked_call_cache(run, victims, tmp_path):
    """``score`` on a run folder uses its call cache; a planted link would have it write elsewhere."""
    _, out = run
    shutil.copy2(out / "llm_calls.sqlite", victims / "calls.sqlite")
    _link(out / "llm_calls.sqlite", victims / "calls.sqlite")
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "n1", "text": "User: hi\nSystem: hello, how can I help?"}) + "\n")
    outside = _state(victims)
    res = CliRunner().invoke(cli, ["score", str(out), "--input", str(texts), "--backend", "fake"])
    _refused(res, "llm_calls.sqlite", "outside")
    assert _state(victims) == outside


# -- batch folders -------------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["index", "files.file"])
def test_a_batch_manifest_naming_files_outside_is_refused(tmp_path, victims, field):
    from rubric_induce.batch.export import MANIFEST, read_manifest

    folder = tmp_path / "batch"
    folder.mkdir()
    doc = {"format": "rubric-induce-batch", "backend": {"kind": "openai", "model": "gpt-4o-mini"}, "index": "index.jsonl",
           "files": [{"file": "requests-000.jsonl"}]}
    if field == "index":
        doc["index"] = "../victims/notes.txt"
    else:
        doc["files"] = [{"file": str(victims / "notes.txt")}]
    (folder / MANIFEST).write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_manifest(folder)
    assert err.value.field in (field, "files[0].file")
    assert any(w in str(err.value) for w in ("outside", "absolute", "a file name in the export folder"))


def test_view_reads_no_marker_named_outside_by_the_manifest(run, victims):
    """A stage name in the manifest that climbs out names no file the viewer reads: only markers on
    disk in stages/ are read, so the outside file's content reaches neither the page nor the output."""
    _, out = run
    (victims / "secret.json").write_text(json.dumps({"summary": {"password": "hunter2"}}), encoding="utf-8")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest["stages"]["../../victims/secret"] = {"status": "done"}
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    res = CliRunner().invoke(cli, ["view", str(out)])
    assert res.exit_code in (0, 2), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "hunter2" not in res.output
    assert "hunter2" not in (out / "view.html").read_text(encoding="utf-8")


# -- the helper itself, fuzzed ---------------------------------------------------------------------------
_PARTS = ["..", ".", "a", "b", "out", "in", "", "/", "~", "a/../..", "\\..", "%2e%2e"]


def test_inside_folder_never_names_a_place_outside(tmp_path_factory):
    """Any name made of these parts (with a link leading out and one staying in) resolves inside the
    folder or is a DataError naming the file and field; never another exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rubric_induce.core.safepaths import inside_folder

    base = tmp_path_factory.mktemp("fuzz")
    root = base / "run"
    (root / "a" / "b").mkdir(parents=True)
    (base / "elsewhere").mkdir()
    (root / "out").symlink_to(base / "elsewhere")
    (root / "in").symlink_to(root / "a")
    real_root = root.resolve()

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.sampled_from(_PARTS), min_size=1, max_size=6), st.booleans())
    def check(parts, absolute):
        name = ("/" if absolute else "") + "/".join(parts)
        try:
            got = inside_folder(root, name, path="m.json", field="outputs")
        except DataError as exc:
            assert exc.path == "m.json" and exc.field == "outputs"
            return
        assert got == real_root or got.is_relative_to(real_root), (name, got)

    check()


def test_saving_a_calibrator_removes_nothing_through_a_linked_folder(tmp_path, victims):
    """A calibrator folder (``calibrate --out``, a run's ``calibration/``) whose ``adaptive/`` is a link:
    today the earlier save's files are removed from the folder it points to."""
    from rubric_induce.calibration.adaptive import ADAPTIVE_CONFIG, ADAPTIVE_DIR
    from rubric_induce.calibration.api import remove_saved

    (victims / "models").mkdir()
    (victims / "models" / ADAPTIVE_CONFIG).write_text("{}\n", encoding="utf-8")
    (victims / "models" / "adaptive.npz").write_bytes(b"weights")
    folder = tmp_path / "cal"
    folder.mkdir()
    (folder / ADAPTIVE_DIR).symlink_to(victims / "models")
    outside = _state(victims)
    with pytest.raises(DataError, match="symbolic link"):
        remove_saved(folder)
    assert _state(victims) == outside


def test_ingest_writes_no_retry_file_through_a_planted_link(tmp_path, victims, examples, rubrics):
    """A received batch folder with ``retry-requests.jsonl.tmp`` linked to a file elsewhere: today the
    retry lines overwrite that file; now the link is replaced."""
    pytest.importorskip("openai")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "batch"))
    from _engine import Engine, backend, run_requests

    from rubric_induce.backends.cache import CachedBackend, CallCache
    from rubric_induce.batch.export import export_batch, ingest_results
    from rubric_induce.probing.api import ProbeParams
    from rubric_induce.probing.calls import probe_calls

    cache = CallCache(tmp_path / "c.sqlite")
    be = CachedBackend(backend(Engine()), cache)
    calls = probe_calls(examples, rubrics, be, ProbeParams())
    export = export_batch(calls, be, tmp_path / "b")
    run_requests(export.files[0], tmp_path / "out.jsonl", fail={calls[0].key})
    (tmp_path / "b" / "retry-requests.jsonl.tmp").symlink_to(victims / "notes.txt")
    outside = _state(victims)
    report = ingest_results([tmp_path / "out.jsonl"], tmp_path / "b", cache)
    cache.close()
    assert _state(victims) == outside
    assert [json.loads(x)["custom_id"] for x in report.retry_file.read_text().splitlines()] == [calls[0].key]
    assert not report.retry_file.is_symlink()


def test_an_artifact_task_description_file_is_never_read(run, victims):
    """An artifact holds its task description as text (``run`` writes it so); one given as ``@FILE``
    is refused by ``score`` and ``export`` alike, inside the folder or not: before, a file anywhere
    (e.g. a key) was read and sent in every probe prompt to the artifact's endpoint."""
    _, out = run
    doc = json.loads((out / "artifact.json").read_text(encoding="utf-8"))
    task = dict(doc.get("task") or {})
    (out / "task.md").write_text("Rate the assistant's replies in booking dialogues.\n", encoding="utf-8")
    for description in ("@../victims/notes.txt", "@task.md"):
        _plant_artifact(out, task={**task, "description": description})
        for args in (["score", str(out), "--probes", str(out / "probes.jsonl")],
                     ["export", str(out), "--format", "inspect", "--out", str(out.parent / "scorer.py")]):
            res = CliRunner().invoke(cli, args)
            _refused(res, str(out / "artifact.json"), "field 'task.description'", "never reads")
        assert not (out.parent / "scorer.py").exists()


# -- temporaries beside batch-run's files ------------------------------------------------------------
def test_a_planted_temporary_link_is_replaced_not_written_through(tmp_path, victims):
    """batch-run's summary and its result-file compaction write a fixed-name ``.tmp`` beside the file;
    a link planted under that name in a received output folder is removed, its target left alone."""
    from rubric_induce.batch.files import resume_results
    from rubric_induce.core.safepaths import replace_with_text

    outside = _state(victims)
    summary = tmp_path / "out" / "batch-run-summary.json"
    summary.parent.mkdir()
    summary.with_name(summary.name + ".tmp").symlink_to(victims / "notes.txt")
    replace_with_text(summary, "{}\n")
    assert summary.read_text(encoding="utf-8") == "{}\n" and not summary.with_name(summary.name + ".tmp").exists()
    results = tmp_path / "out" / "requests-000.results.jsonl"
    good = {"custom_id": "a", "response": {"status_code": 200, "body": {}}}
    results.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\nnot json\n", encoding="utf-8")
    results.with_name(results.name + ".tmp").symlink_to(victims / "notes.txt")
    resume_results(results)  # drops the repeated and the damaged line: compacts through the temporary
    assert _state(victims) == outside
    assert results.read_text(encoding="utf-8").count("\n") == 1
