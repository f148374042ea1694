"""Issue 31, item 6 (score): a damaged scorer artifact, or damaged texts to score, is one clean error.

``artifact.json``, the selected rubric file, ``calibration/calibrator.json`` and the adaptive
model's config travel with run folders; a wrong type, a missing key, NaN or a huge number, a list
where an object goes, a rubric id the set does not hold, or a weights file named outside the
folder ended in a traceback. Each is now exit code 2 with one ``error:`` line naming the file and
the field, checked when the artifact is loaded, before any text is read or any LLM call made. A
hypothesis pass damages every key of those files (and the ``--input`` texts) and finds no
traceback.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import pytest
from cli_runner import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rubric_induce

RES = Path(rubric_induce.__file__).resolve().parent / "resources"
DEMO = RES / "demo_uss_dialogues.jsonl"
_N = int(os.environ.get("RUBRIC_INDUCE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize=_N <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])



def clean_error(rc: int, out: str, *phrases: str) -> None:
    assert rc == 2, out
    assert out.count("error:") == 1, out
    for phrase in phrases:
        assert phrase in out, f"{phrase!r} not in {out!r}"


def edit_json(path: Path, dotted: str, value=None, *, drop: bool = False) -> None:
    """Set (or drop) ``a.b.0.c`` in the JSON file at ``path``."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    target, parts = doc, dotted.split(".")
    for p in parts[:-1]:
        target = target[int(p)] if isinstance(target, list) else target[p]
    last = int(parts[-1]) if isinstance(target, list) else parts[-1]
    if drop:
        del target[last]
    else:
        target[last] = value
    path.write_text(json.dumps(doc), encoding="utf-8")  # NaN / Infinity as JSON writes them


# --------------------------------------------------------------------------------------------
# a small uncalibrated artifact (fast): artifact.json and the selected rubric file
# --------------------------------------------------------------------------------------------
@pytest.fixture
def small(tmp_path):
    from rubric_induce.scoring.artifact import write_artifact

    folder = tmp_path / "run"
    folder.mkdir()
    rubrics = json.loads((RES / "demo_uss_rubrics.json").read_text(encoding="utf-8"))["rubrics"][:2]
    (folder / "selected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rubrics), encoding="utf-8")
    write_artifact(folder, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only", "estimator": "logprobs"},
                   fields=["text"], backend="fake", calibration=None, question=None,
                   extra={"input": {"text": {"text": "text"}, "id": "id"}})
    texts = tmp_path / "new.jsonl"
    texts.write_text("".join(json.dumps({"id": f"n{i}", "text": f"USER: hi {i}\nSYSTEM: hello"}) + "\n"
                             for i in range(3)), encoding="utf-8")
    return folder, texts


def score_small(folder: Path, texts: Path) -> tuple[int, str]:
    return invoke("score", folder, "--input", texts, "--cache", folder / "c.sqlite")


@pytest.mark.parametrize("key, value, phrase", [
    ("threshold", "0.5", "finite number or null"),           # a wrong type
    ("threshold", float("nan"), "finite number or null"),    # NaN
    ("label_threshold", 1e309, "finite number or null"),     # Infinity (json writes it)
    ("format_version", "1", "an integer"),
    ("format_version", 10 ** 30, "newer than this library"),  # huge
    ("probe", ["style"], "an object"),                        # a list where an object goes
    ("probe", {"style": "essay"}, "unknown value 'essay'"),
    ("probe", {"n_samples": "3"}, "write 3 without quotes"),
    ("probe", {"stlye": "score-only"}, "did you mean 'style'"),
    ("fields", "text", "a list of field names"),
    ("judges", {"a": 1}, "a list of judge names"),
    ("score_mode", 3, "'expected' or 'argmax'"),
    ("task", ["uss"], "an object"),
    ("task", {"preset": 5}, "task.preset"),
    ("input", {"text": 5}, "input.text"),
    ("input", {"columns": "x"}, "input.columns"),
    ("backend", ["fake"], "a backend spec"),
    ("rubrics", 7, "the name of the selected rubric file"),
    ("rubrics", "../../outside.jsonl", "outside the folder"),
    ("rubrics", "/etc/passwd", "an absolute path"),
    ("rubrics", "missing.jsonl", "is missing"),
    ("rubrics", "sel\x00ected.jsonl", "expected a file name inside the folder"),
    ("rubrics", "x" * 300 + ".jsonl", "not a usable file name"),
    ("calibration", {"dir": "calibration"}, "calibration folder"),
    ("calibration", "../../elsewhere", "outside the folder"),
])
def test_a_damaged_artifact_json_names_the_file_and_field(small, key, value, phrase):
    folder, texts = small
    edit_json(folder / "artifact.json", key, value)
    rc, out = score_small(folder, texts)
    clean_error(rc, out, "artifact.json", phrase)
    field = "input" if key == "input" else ("task" if key == "task" else key)
    assert f"field '{field}" in out, out


@pytest.mark.parametrize("backend, options, field", [
    ("nonsense", {}, "field 'backend'"),
    ("local//etc/passwd", {}, "field 'backend'"),      # issue 40, A8: exit 2 (was 1), nothing loaded
    ("local//tmp", {}, "field 'backend'"),             # a folder
    ("local//no/such/model.gguf", {}, "field 'backend'"),
    ("openai-compatible/m@http://127.0.0.1:9/v1", {"timeout": "x"}, "field 'backend_options.timeout'"),
    ("openai-compatible/m@http://127.0.0.1:9/v1", {"extra_body": {"model": "x"}},
     "field 'backend_options.extra_body.model'"),
])
def test_a_bad_backend_or_backend_option_in_the_artifact_names_it(small, backend, options, field):
    folder, texts = small
    edit_json(folder / "artifact.json", "backend", backend)
    edit_json(folder / "artifact.json", "backend_options", options)
    clean_error(*score_small(folder, texts), "artifact.json", field)


def test_a_missing_rubrics_key_and_a_list_document_name_the_file(small):
    folder, texts = small
    edit_json(folder / "artifact.json", "rubrics", drop=True)
    clean_error(*score_small(folder, texts), "artifact.json", "field 'rubrics'", "is missing")
    (folder / "artifact.json").write_text("[1, 2]", encoding="utf-8")
    clean_error(*score_small(folder, texts), "artifact.json", "field 'format'")


def test_an_artifact_task_description_naming_a_file_is_not_read(small, tmp_path):
    folder, texts = small
    secret = tmp_path / "secret.txt"
    secret.write_text("my secret notes", encoding="utf-8")
    edit_json(folder / "artifact.json", "task", {"description": f"@{secret}"})
    rc, out = score_small(folder, texts)
    clean_error(rc, out, "artifact.json", "task.description")
    assert "my secret notes" not in out


@pytest.mark.parametrize("row, phrase", [
    ({"text": "The user is happy.", "polarity": "SAT", "scale": "likert"}, "selected.jsonl"),
    ({"text": "The user is happy.", "polarity": "SAT", "provenance": "x"}, "selected.jsonl"),
    ({"text": "The user is happy.", "polarity": "GOOD"}, "selected.jsonl"),
    ({"polarity": "SAT"}, "selected.jsonl"),
])
def test_a_damaged_selected_rubric_file_names_it(small, row, phrase):
    folder, texts = small
    (folder / "selected.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    clean_error(*score_small(folder, texts), phrase)


def test_a_selected_manifest_with_a_string_threshold_names_it(small):
    folder, texts = small
    edit_json(folder / "artifact.json", "threshold", drop=True)  # then the set's own threshold is used
    (folder / "selected.manifest.json").write_text(json.dumps({"threshold": "high"}), encoding="utf-8")
    clean_error(*score_small(folder, texts), "selected.manifest.json", "field 'threshold'")


# --------------------------------------------------------------------------------------------
# a calibrated run (calibrator and adaptive model)
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def calibrated(tmp_path_factory, fake_run_config):
    tmp = tmp_path_factory.mktemp("calibrated")
    data = tmp / "ex.jsonl"
    data.write_text("".join(DEMO.read_text(encoding="utf-8").splitlines(keepends=True)[:24]), encoding="utf-8")
    cfg = tmp / "cfg.toml"
    cfg.write_text(fake_run_config.replace(f'"{DEMO}"', f'"{data}"'), encoding="utf-8")
    rc, out = invoke("run", cfg, "--out", tmp / "run", "--stop-after", "artifact")
    assert rc == 0, out
    return tmp / "run"


def copy_run(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("llm_calls.sqlite*", ".lock"))
    return dest


CAL = "calibration/calibrator.json"
ADA = "calibration/adaptive/adaptive.json"


@pytest.mark.slow
@pytest.mark.parametrize("file, key, value, phrase", [
    (CAL, "weights", "../../../etc/passwd", "field 'weights'"),   # a weights file outside the folder
    (CAL, "weights", 5, "field 'weights'"),
    (CAL, "weights", "weights.bin", "field 'weights'"),
    (CAL, "weights", "w\x00.npz", "field 'weights'"),
    (CAL, "weights", "w" * 300 + ".npz", "field 'weights'"),
    (CAL, "format_version", "x", "field 'format_version'"),
    (CAL, "input_shape", [10 ** 12], "field 'input_shape'"),
    (CAL, "input_shape", "3", "field 'input_shape'"),
    (CAL, "scales", [[1, float("nan")]], "field 'scales'"),
    (CAL, "main_question_index", 7, "field 'main_question_index'"),
    (CAL, "n_members", 10 ** 9, "field 'n_members'"),
    (CAL, "params.hidden", [100000, 100000], "field 'params.hidden'"),  # no gigabyte allocation
    (CAL, "params", ["hidden"], "field 'params'"),
    (CAL, "judges", "annotator1", "field 'judges'"),
    (CAL, "input_names", {"a": 1}, "field 'input_names'"),
    (CAL, "params.head", "sigmoidal", "calibrator config is damaged"),
    # the other aspects' heads a several-aspect run lists (issue 40, item 9)
    (CAL, "extra.aspects", "satisfaction", "field 'extra.aspects'"),
    (CAL, "extra.aspects", [{"question": "q", "folder": "../../../etc"}], "field 'extra.aspects[0].folder'"),
    (CAL, "extra.aspects", [{"question": "q", "folder": "."}], "field 'extra.aspects[0].question'"),
    (CAL, "extra.aspects", [{"question": 5, "folder": "aspects/1-q"}], "field 'extra.aspects[0]'"),
    (ADA, "weights", "../weights.safetensors", "field 'weights'"),
    (ADA, "input_widths", [10 ** 9], "adaptive-model config is damaged"),
    (ADA, "params.answer_hidden", [10 ** 6, 10 ** 6], "field 'params.answer_hidden'"),
    (ADA, "class_freq", "x", "adaptive-model config is damaged"),
])
def test_a_damaged_calibration_config_names_the_file_and_field(calibrated, tmp_path, file, key, value, phrase):
    run = copy_run(calibrated, tmp_path / "run")
    edit_json(run / file, key, value)
    rc, out = invoke("score", run, "--probes", run / "probes.jsonl")
    clean_error(rc, out, Path(file).name, phrase)


@pytest.mark.slow
def test_a_calibrator_naming_rubrics_the_set_lacks_is_a_clean_error(calibrated, tmp_path):
    """The selected set and the calibrator's inputs must name the same rubrics."""
    run = copy_run(calibrated, tmp_path / "run")
    names = json.loads((run / CAL).read_text(encoding="utf-8"))["input_names"]
    edit_json(run / CAL, "input_names", ["rb-not-in-the-set"] + names[1:])
    clean_error(*invoke("score", run, "--probes", run / "probes.jsonl"), "calibrator.json", "field 'input_names'",
                "'rb-not-in-the-set' is in one only")
    run2 = copy_run(calibrated, tmp_path / "run2")
    lines = (run2 / "selected.jsonl").read_text(encoding="utf-8").splitlines()
    (run2 / "selected.jsonl").write_text(lines[0] + "\n", encoding="utf-8")  # one rubric left
    clean_error(*invoke("score", run2, "--probes", run2 / "probes.jsonl"), "calibrator.json", "field 'input_names'",
                "the selected set holds 1")
    run3 = copy_run(calibrated, tmp_path / "run3")
    (run3 / "selected.jsonl").write_text("\n".join(lines[::-1]) + "\n", encoding="utf-8")  # another order
    clean_error(*invoke("score", run3, "--probes", run3 / "probes.jsonl"), "in another order")
    run4 = copy_run(calibrated, tmp_path / "run4")
    edit_json(run4 / ADA, "input_names", ["rb-elsewhere"] + names[1:])
    clean_error(*invoke("score", run4, "--probes", run4 / "probes.jsonl"), "adaptive.json", "field 'input_names'")


# --------------------------------------------------------------------------------------------
# fuzz
# --------------------------------------------------------------------------------------------
names = st.sampled_from(["text", "sat", "id", "hidden", "weights", "", "x", "../x", "0", "a\x00b", "x" * 300,
                         "/", "weights.npz", "@/etc/hostname"])
scalars = (st.none() | st.booleans() | st.integers(-3, 10) | st.sampled_from([0.5, 1e308, -0.0, 10 ** 30])
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6) | names)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(names | st.text(max_size=4), c,
                                                                                   max_size=3), max_leaves=8)


def _paths(node, prefix: str = "") -> list[str]:
    """Every dotted path into a JSON document (objects and lists), the document's keys first."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for k, v in items:
        p = f"{prefix}{k}"
        out.append(p)
        if len(out) < 400:
            out += _paths(v, p + ".")
    return out


def _damage(draw, path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    paths = _paths(doc)
    for _ in range(draw(st.integers(1, 3))):
        if not paths:
            break
        key = draw(st.sampled_from(paths))
        try:
            if draw(st.integers(0, 4)) == 0:
                edit_json(path, key, drop=True)
            else:
                edit_json(path, key, copy.deepcopy(draw(values)))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        paths = _paths(json.loads(path.read_text(encoding="utf-8")))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_fuzz_damaged_run_artifacts_never_trace_back(calibrated, tmp_path_factory, data):
    run = copy_run(calibrated, tmp_path_factory.mktemp("fz") / "run")
    target = data.draw(st.sampled_from(["artifact.json", CAL, ADA, "selected.manifest.json", "selected.jsonl"]))
    if target == "selected.jsonl":
        lines = (run / target).read_text(encoding="utf-8").splitlines()
        i = data.draw(st.integers(0, len(lines) - 1))
        row = json.loads(lines[i])
        one = run / "row.json"
        one.write_text(json.dumps(row), encoding="utf-8")
        _damage(data.draw, one)
        lines[i] = one.read_text(encoding="utf-8")
        (run / target).write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        _damage(data.draw, run / target)
    rc, out = invoke("score", run, "--probes", run / "probes.jsonl")
    assert rc in (0, 2), out
    if rc == 2:
        assert out.count("error:") == 1, out


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_fuzz_damaged_artifact_json_and_texts_never_trace_back(tmp_path_factory, data):
    from rubric_induce.scoring.artifact import write_artifact

    folder = tmp_path_factory.mktemp("fz") / "run"
    folder.mkdir()
    rubrics = json.loads((RES / "demo_uss_rubrics.json").read_text(encoding="utf-8"))["rubrics"][:2]
    (folder / "selected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rubrics), encoding="utf-8")
    write_artifact(folder, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only", "estimator": "logprobs"},
                   fields=["text"], backend="fake", calibration=None, question=None,
                   extra={"input": {"text": {"text": "text"}, "id": "id"}})
    if data.draw(st.booleans()):
        _damage(data.draw, folder / "artifact.json")
    rows = data.draw(st.lists(st.fixed_dictionaries({"id": values, "text": values}) | values, min_size=1, max_size=3))
    raw = "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")
    if data.draw(st.integers(0, 3)) == 0:
        raw = data.draw(st.binary(max_size=40)) + raw
    texts = folder / data.draw(st.sampled_from(["new.jsonl", "new.csv", "new.json"]))
    texts.write_bytes(raw)
    out_name = data.draw(st.sampled_from([None, "o.csv", "o.jsonl", "o.json"]))
    extra = ["--out", folder / out_name] if out_name else []
    rc, out = invoke("score", folder, "--input", texts, "--cache", folder / "c.sqlite", *extra)
    assert rc in (0, 2), out
    if rc == 2:
        assert out.count("error:") == 1, out
