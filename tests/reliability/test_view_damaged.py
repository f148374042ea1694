"""Issue 31, items 6, 7 and 10 (the viewer): `rubric-induce view` on a damaged or hostile run folder.

A run folder travels between people. `view` on one whose files were damaged (a type swapped, a key
missing, truncated JSON, bytes that are not UTF-8, huge numbers, NaN, nesting too deep) either
writes the page with the damaged part noted as unreadable (exit 0) or, when the manifest itself is
not a run's, exits 2 with one ``error:`` line naming the file; never a traceback. A received
``config.json`` cannot make the page embed a file outside the run folder unless the user says so
(``--allow-outside``), and a symlink in the folder cannot either.

The fuzz damages one file of a real fake-backend run at a time; the explicit cases below are the
tracebacks it found on the code before the fix.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubric_induce.cli import cli
from rubric_induce.pipeline import run_pipeline

_N = int(os.environ.get("RUBRIC_INDUCE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize=_N <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

HOSTILE = [None, True, "x", "", "\u202eevil", 0, -1, 10 ** 400, 1e308, float("nan"), float("inf"), [], {},
           ["a", 1], {"a": {"b": None}}, [{"id": 3}]]


# --------------------------------------------------------------------------------------------
# the run folder
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, fake_run_config) -> Path:
    """A complete fake run whose examples file lies inside the run folder (so `view` reads it
    without --allow-outside and damage to it is exercised too)."""
    tmp = tmp_path_factory.mktemp("view-damaged")
    cfg = tmp / "cfg.toml"
    cfg.write_text(fake_run_config.replace("limit = 24", "limit = 16\ntest_size = 0.5")
                   + "\n[evaluate]\nbootstrap = 20\n[feedback]\nenabled = true\nbudget = 200\n"
                   + "[report]\nfigures = false\n", encoding="utf-8")
    out = run_pipeline(cfg, out=tmp / "run", echo=lambda m: None).out
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    shutil.copy(config["data"]["examples"], out / "examples.jsonl")
    config["data"]["examples"] = str(out / "examples.jsonl")
    (out / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return out


def _copy(run_folder: Path, tmp: Path) -> Path:
    run = tmp / "run"
    if run.exists():
        shutil.rmtree(run)
    shutil.copytree(run_folder, run, symlinks=True)
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    config["data"]["examples"] = str(run / "examples.jsonl")
    (run / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return run


def _view(run: Path, *args: str):
    """`rubric-induce view RUN --out PAGE`, in-process: (result, page path)."""
    page = run.parent / "page.html"
    page.unlink(missing_ok=True)
    return CliRunner().invoke(cli, ["view", str(run), "--out", str(page), *args]), page


def _page_data(page: Path) -> dict:
    m = re.search(r'<script id="view-data" type="application/json">(.*?)</script>',
                  page.read_text(encoding="utf-8"), re.S)
    assert m, "the page has no data"
    return json.loads(m.group(1))


def _no_traceback(res, page: Path, name: str) -> dict | None:
    """Exit 0 with a page, or exit 2 with one error line naming ``name``; the page's data if any."""
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        raise AssertionError("".join(traceback.format_exception(res.exception)))
    assert res.exit_code in (0, 2), res.output
    if res.exit_code == 2:
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and Path(name).name in lines[0], res.output
        return None
    return _page_data(page)


def _files(run_folder: Path) -> list[str]:
    return sorted(str(p.relative_to(run_folder)) for p in run_folder.rglob("*")
                  if p.is_file() and p.suffix in (".json", ".jsonl", ".md") and p.name != "report.md")


# --------------------------------------------------------------------------------------------
# the fuzz
# --------------------------------------------------------------------------------------------

def _walk(data, value, depth: int) -> list:
    """A path of keys / indexes into ``value``, up to ``depth`` deep."""
    path: list = []
    while depth > 0 and isinstance(value, (dict, list)) and value:
        key = data.draw(st.sampled_from(sorted(value) if isinstance(value, dict) else range(len(value))))
        path.append(key)
        value = value[key]
        depth -= 1
    return path


def _set(root, path: list, op: str, new):
    if not path:
        return new
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    if op == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return root


def _damage_json(data, text: str) -> str:
    value = json.loads(text)
    op = data.draw(st.sampled_from(["replace", "replace", "delete"]))
    path = _walk(data, value, data.draw(st.integers(0, 5)))
    if op == "delete" and not path:
        op = "replace"
    return json.dumps(_set(value, path, op, data.draw(st.sampled_from(HOSTILE))))  # NaN, Infinity as Python writes them


def _damage(data, path: Path) -> None:
    raw = path.read_bytes()
    how = data.draw(st.sampled_from(["structure", "structure", "structure", "truncate", "bytes", "empty",
                                     "deep", "remove"]))
    if how == "remove":
        path.unlink()
        return
    if how == "truncate":
        path.write_bytes(raw[:data.draw(st.integers(0, max(len(raw) - 1, 0)))])
    elif how == "bytes":
        at = data.draw(st.integers(0, len(raw)))
        path.write_bytes(raw[:at] + b"\xff\xfe\x80" + raw[at:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    elif path.suffix == ".json":
        path.write_text(_damage_json(data, raw.decode("utf-8")), encoding="utf-8")
    elif path.suffix == ".jsonl":
        lines = raw.decode("utf-8").splitlines()
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = _damage_json(data, lines[i])
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:  # Markdown
        path.write_text(raw.decode("utf-8") + "\n| x | `rb-00` | nan | \u202e |\n", encoding="utf-8")


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_view_of_a_run_folder_with_one_damaged_file_never_ends_in_a_traceback(run_folder, tmp_path, data):
    run = _copy(run_folder, tmp_path)
    name = data.draw(st.sampled_from(_files(run_folder)))
    _damage(data, run / name)
    res, page = _view(run)
    got = _no_traceback(res, page, name)
    if got is not None:
        json.dumps(got, allow_nan=False)  # plain JSON in the page


# --------------------------------------------------------------------------------------------
# the cases the fuzz found (each a traceback before the fix)
# --------------------------------------------------------------------------------------------

def _edit(run: Path, name: str, change) -> None:
    path = run / name
    value = json.loads(path.read_text(encoding="utf-8"))
    new = change(value)
    path.write_text(json.dumps(value if new is None else new), encoding="utf-8")


def _edit_line(run: Path, name: str, change, line: int = 0) -> None:
    path = run / name
    lines = path.read_text(encoding="utf-8").splitlines()
    value = json.loads(lines[line])
    new = change(value)
    lines[line] = json.dumps(value if new is None else new)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _usage_as_strings(manifest: dict) -> None:
    for info in manifest["stages"].values():
        info["usage"] = {"calls": "3", "cost_usd": "0.1"}


def _stage(run: Path) -> str:
    return min(p.name for p in (run / "stages").glob("*.json"))


CASES = {
    "manifest backend is a string": lambda r: _edit(r, "manifest.json", lambda m: m.update(backend="fake")),
    "manifest data is a list": lambda r: _edit(r, "manifest.json", lambda m: m.update(data=[1])),
    "manifest stage usage counts are strings": lambda r: _edit(r, "manifest.json", _usage_as_strings),
    "manifest stages is a list": lambda r: _edit(r, "manifest.json", lambda m: m.update(stages=["probe"])),
    "stage marker is a list": lambda r: _edit(r, f"stages/{_stage(r)}", lambda m: [m]),
    "config data is a string": lambda r: _edit(r, "config.json", lambda c: c.update(data="x")),
    "config source is a number": lambda r: _edit(r, "config.json", lambda c: c.update(source=5)),
    "config feedback is a list": lambda r: _edit(r, "config.json", lambda c: c.update(feedback=[1])),
    "pool row without id": lambda r: _edit_line(r, "pool.jsonl", lambda row: row.pop("id")),
    "pool row is a string": lambda r: _edit_line(r, "pool.jsonl", lambda row: "rubric"),
    "selected row without text": lambda r: _edit_line(r, "selected.jsonl", lambda row: row.pop("text")),
    "selected row with an unhashable merged id": lambda r: _edit_line(
        r, "selected.jsonl", lambda row: row.update(provenance={"dedup_merged": [["rb-1"]]})),
    "selected row with a bad scale": lambda r: _edit_line(r, "selected.jsonl", lambda row: row.update(scale="1-5")),
    "selected manifest dropped ids are objects": lambda r: _edit(
        r, "selected.manifest.json", lambda m: m.update(dropped_missing_probes=[{"id": 1}])),
    "selected manifest probe health is a list": lambda r: _edit(
        r, "selected.manifest.json", lambda m: m.update(probe_health=[1])),
    "pool manifest stats is a list": lambda r: _edit(r, "pool.manifest.json", lambda m: m.update(stats=[1])),
    "test scores without id": lambda r: _edit(r, "test_scores.json", lambda t: [{"x": 1}, 5]),
    "evaluation judges is a list": lambda r: _edit(r, "evaluation.json", lambda e: e.update(judges=[1])),
    "evaluation judge rows are strings": lambda r: _edit(
        r, "evaluation.json", lambda e: e.update(judges={"rows": ["a"], "pooled": 3})),
    "feedback groups is a list": lambda r: _edit(r, "feedback.json", lambda f: f.update(groups=[1])),
    "feedback group is a string": lambda r: _edit(r, "feedback.json", lambda f: f.update(groups={"SAT": "x"})),
    "feedback.md alone is not UTF-8": lambda r: ((r / "feedback.json").unlink(),
                                                (r / "feedback.md").write_bytes(b"# feedback \xff\xfe")),
    "dedup report is not UTF-8": lambda r: (r / "dedup_report.md").write_bytes(b"| x | \xff |"),
    "evaluation.json nested too deeply": lambda r: (r / "evaluation.json").write_text("[" * 100_000 + "]" * 100_000),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_file_gives_a_page_with_a_note_not_a_traceback(run_folder, tmp_path, case):
    run = _copy(run_folder, tmp_path)
    CASES[case](run)
    res, page = _view(run)
    data = _no_traceback(res, page, "")
    assert res.exit_code == 0 and data is not None
    json.dumps(data, allow_nan=False)


@pytest.mark.slow
def test_evaluation_parts_of_the_wrong_shape_are_left_out_of_the_headline(run_folder, tmp_path):
    """The page loops over the headline's warnings and reads each calibrated entry's fields: a
    number there, or a null entry, would stop its script (the page was built, exit 0, but blank)."""
    run = _copy(run_folder, tmp_path)
    _edit(run, "evaluation.json", lambda e: e.update(warnings=5, calibrated={"calibrated": None}, selection="x"))
    _, page = _view(run)
    head = _page_data(page)["headline"]
    assert "warnings" not in head and "calibrated" not in head and "selection" not in head


@pytest.mark.slow
@pytest.mark.parametrize("content, where", [
    (b'{"format": "rubric-induce-run", "stages": {', "line 1"),
    (b'{"format":\n "rubric-induce-run",\n \xff}', "not UTF-8"),
    (b'["rubric-induce-run"]', "field 'format'"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
])
def test_a_damaged_manifest_exits_2_naming_it(run_folder, tmp_path, content, where):
    run = _copy(run_folder, tmp_path)
    (run / "manifest.json").write_bytes(content)
    res, page = _view(run)
    assert res.exit_code == 2 and res.exception is None or isinstance(res.exception, SystemExit)
    line = res.output.strip()
    assert "\n" not in line and line.startswith("error: ") and "manifest.json" in line and where in line, line
    assert not page.exists()


@pytest.mark.slow
def test_a_damaged_file_is_named_in_the_page_notes(run_folder, tmp_path):
    run = _copy(run_folder, tmp_path)
    (run / "evaluation.json").write_text('{"selection": {"accuracy": 0.5},', encoding="utf-8")
    _, page = _view(run)
    notes = _page_data(page)["notes"]
    assert any(n.startswith("evaluation.json could not be read (line 1: not valid JSON") for n in notes), notes


# --------------------------------------------------------------------------------------------
# item 7: files outside the run folder are not read unless asked
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_received_config_naming_a_file_outside_the_folder_is_not_read(run_folder, tmp_path):
    run = _copy(run_folder, tmp_path)
    secret = tmp_path / "secret.jsonl"
    shutil.copy(run / "examples.jsonl", secret)
    text = json.loads(secret.read_text(encoding="utf-8").splitlines()[0])["fields"]
    marker = next(iter(text.values()))[:40]
    _edit(run, "config.json", lambda c: c["data"].update(examples=str(secret)))
    res, page = _view(run)
    assert res.exit_code == 0, res.output
    data = _page_data(page)
    assert marker not in page.read_text(encoding="utf-8")
    assert all(t["text"] == "" for t in data["texts"])
    assert any("outside the run folder" in n and "--allow-outside" in n for n in data["notes"]), data["notes"]
    assert "note: Texts are not shown" in res.output and "--allow-outside" in res.output  # said on stderr too
    res, page = _view(run, "--allow-outside")  # the user asks: the texts are shown
    assert res.exit_code == 0 and all(t["text"] for t in _page_data(page)["texts"])


@pytest.mark.slow
def test_a_relative_path_climbing_out_of_the_folder_is_not_read(run_folder, tmp_path):
    run = _copy(run_folder, tmp_path)
    shutil.copy(run / "examples.jsonl", tmp_path / "outside.jsonl")
    (run / "cfg").mkdir()
    (run / "cfg" / "c.toml").write_text("", encoding="utf-8")

    def climb(config: dict) -> None:
        config["source"] = str(run / "cfg" / "c.toml")
        config["data"]["examples"] = "../../outside.jsonl"

    _edit(run, "config.json", climb)
    res, page = _view(run)
    assert res.exit_code == 0, res.output
    data = _page_data(page)
    assert all(t["text"] == "" for t in data["texts"])
    assert any("outside.jsonl, outside the run folder" in n for n in data["notes"]), data["notes"]


@pytest.mark.slow
def test_a_symlinked_examples_file_pointing_outside_is_not_read(run_folder, tmp_path):
    run = _copy(run_folder, tmp_path)
    secret = tmp_path / "secret.jsonl"
    shutil.move(run / "examples.jsonl", secret)
    (run / "examples.jsonl").symlink_to(secret)
    res, page = _view(run)
    assert res.exit_code == 0, res.output
    assert all(t["text"] == "" for t in _page_data(page)["texts"])


@pytest.mark.slow
def test_a_symlinked_run_file_pointing_outside_is_not_embedded(run_folder, tmp_path):
    run = _copy(run_folder, tmp_path)
    secret = tmp_path / "notes.md"
    secret.write_text("TOP-SECRET-LINE\n", encoding="utf-8")
    (run / "feedback.json").unlink()
    (run / "feedback.md").unlink()
    (run / "feedback.md").symlink_to(secret)
    res, page = _view(run)
    assert res.exit_code == 0, res.output
    assert "TOP-SECRET-LINE" not in page.read_text(encoding="utf-8")
    assert any(n.startswith("feedback.md could not be read (it points outside the run folder")
               for n in _page_data(page)["notes"])


@pytest.mark.slow
def test_the_page_forbids_forms_and_base_urls(run_folder, tmp_path):
    _, page = _view(_copy(run_folder, tmp_path))
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page.read_text(encoding="utf-8"))
    assert csp and "form-action 'none'" in csp.group(1) and "base-uri 'none'" in csp.group(1)
    assert "default-src 'none'" in csp.group(1)


@pytest.mark.slow
def test_a_string_source_example_ids_is_a_list_of_one_id(run_folder, tmp_path):
    run = _copy(run_folder, tmp_path)
    _edit_line(run, "selected.jsonl", lambda row: row["provenance"].update(source_example_ids="ex-1"))
    first = json.loads((run / "selected.jsonl").read_text(encoding="utf-8").splitlines()[0])["id"]
    pool = (run / "pool.jsonl").read_text(encoding="utf-8").splitlines()
    other = next(i for i, line in enumerate(pool) if json.loads(line)["id"] != first and
                 json.loads(line)["id"] not in (run / "selected.jsonl").read_text(encoding="utf-8"))
    _edit_line(run, "pool.jsonl", lambda row: row.update(provenance={"source_example_ids": {"a": 1}}), line=other)
    _, page = _view(run)
    data = _page_data(page)
    assert data["rubrics"][0]["provenance"]["source_example_ids"] == ["ex-1"]
    row = next(r for r in data["not_selected"] if r["id"] == json.loads(pool[other])["id"])
    assert "source_example_ids" not in row["provenance"]


@pytest.mark.slow
def test_bidi_controls_in_the_run_name_are_shown_not_applied(run_folder, tmp_path):
    from rubric_induce.reporting.viewer import render_view, visible_bidi

    assert visible_bidi("a\u202eb\u2066c\u200f") == "a\u27e8U+202E\u27e9b\u27e8U+2066\u27e9c\u27e8U+200F\u27e9"
    page = render_view({"summary": {"run": "run\u202egpj.exe"}})
    title = re.search(r"<title>(.*)</title>", page).group(1)
    assert "\u202e" not in title and "\u27e8U+202E\u27e9" in title


# --------------------------------------------------------------------------------------------
# item 10: the stage table of a finished run
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_page_the_run_wrote_shows_the_report_stage_done(run_folder):
    data = _page_data(run_folder / "view.html")
    status = {st["name"]: st["status"] for st in data["summary"]["stages"]}
    assert status["report"] == "done" and "running" not in status.values(), status
