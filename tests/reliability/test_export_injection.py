"""Issue 31, items 3 and 7: exports cannot be injected, and export / import round trips are exact.

* A run folder named ``x`` + three double quotes + newline + code made ``export --format inspect`` write a module that
  ran the code on import: every value from the run now enters generated Python as a literal.
* Hostile run names, aspect names and rubric texts (triple quotes, backslashes, newlines, template
  syntax, ``</script>``, ``--- ``, ``#``, bidi and control characters) go through every export format
  and come back exactly; the inspect module is imported in a subprocess and runs no payload.
* Rubric texts keep their newlines and spacing through the tool formats (they were collapsed while
  the id, computed from the collapsed text, stayed the same).
* Template syntax is escaped where the tool renders templates: promptfoo renders every assertion
  value with Nunjucks (checked here with Jinja2, which reads the same ``{{ "..." }}`` expressions),
  OpenAI graders substitute every ``{{ ... }}``.
* ``extra_body`` read from an artifact is not sent with the user's key (as for endpoints in #17).
* A hypothesis pass over export / import inputs finds no traceback: bad files exit 2 naming the file.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubric_induce.cli import cli
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.data import AnswerScale, Rubric, RubricSet
from rubric_induce.handoff import (
    deepeval_spec,
    export_json,
    export_llm_rubric,
    import_rubrics,
    llm_rubric_questions,
    openai_graders,
    prometheus_rubrics,
    promptfoo_config,
)

ROOT = Path(__file__).resolve().parents[2]
_N = int(os.environ.get("RUBRIC_INDUCE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize=_N <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

PAYLOAD = 'import pathlib; pathlib.Path(__file__).with_name("PWNED").write_text("ran")'
HOSTILE_NAMES = [
    'x"""\n' + PAYLOAD + '\n"""',
    "x'''\n" + PAYLOAD + "\n'''",
    'back\\slash\\"""\\',
    "{{ 7*7 }} {% for x in y %} {# c #}",
    "</script><script>alert(1)</script>",
    "--- \n# not a comment\n- [x](javascript:alert(1))",
    "bidi \u202eevil\u202c \u2066iso\u2069 \u200f",
    "ctrl \x01\x07\x1b[31m\x1f\x7f \x85 \u2028 \u2029 tab\tend",
]
HOSTILE_TEXTS = [
    'The reply says """\nimport os\n""" twice.',
    "Line one.\n\n   Indented   line two.\tTabbed.",
    "The reply quotes {{ secret }} and {% include 'x' %} and {# note #} verbatim.",
    'A backslash \\ and a "quote" and \'single\' </script>',
    "--- \n# heading\n| a | b |\n<img src=x onerror=alert(1)>",
    "Bidi \u202eTXET\u202c and \u2066isolate\u2069 marks.",
    '"Starts with a quote" and ends with one"',
    "Control \x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029 characters \x01\x02.",
    "{{{{ nested }}}} {{{ three {%- strip -%} {{- x -}}",
    "Ünïcödé ✓ 🙂 — “quotes”.",
]
HOSTILE_ASPECTS = ["a\nb", 'q"""', "{{ x }}", "<b>x</b>", "\u202eevil", "- | #"]


def _rubrics(texts=HOSTILE_TEXTS, aspects=HOSTILE_ASPECTS, scale=None) -> list[Rubric]:
    out = []
    for i, text in enumerate(texts):
        kwargs = {"scale": scale} if scale is not None else {}
        aspect = aspects[i % len(aspects)] if i % 2 else None
        out.append(Rubric.create(text, ("SAT", "DSAT", None)[i % 3], aspect=aspect, **kwargs))
    return out


def _run_folder(parent: Path, name: str, rubrics, *, fields=("text",), backend=None, extra=None) -> Path:
    """A run folder as `rubric-induce run` leaves it for export: selected.jsonl and artifact.json."""
    from rubric_induce.scoring.artifact import write_artifact

    folder = parent / name
    folder.mkdir(parents=True)
    RubricSet(rubrics, {"name": name}, threshold=0.5).save(folder / "selected.jsonl")
    write_artifact(folder, rubrics="selected.jsonl", threshold=0.5, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only"}, fields=list(fields), backend=backend,
                   calibration=None, question=None, judges=["j1"], extra=extra)
    return folder


def _same(a, b) -> None:
    assert [(r.id, r.text, r.polarity, r.aspect) for r in a] == [(r.id, r.text, r.polarity, r.aspect) for r in b]


def _invoke(args):
    res = CliRunner().invoke(cli, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res


# ----------------------------------------------------------------------------- item 3: the inspect module
def test_inspect_module_from_hostile_folders_runs_no_code_and_points_at_the_folder(tmp_path):
    """One subprocess imports a module exported from each hostile folder name; the payload would
    write PWNED beside the module. Today the first name ends the docstring and runs the payload."""
    rubrics = _rubrics()[:2]
    modules, folders = [], []
    for i, name in enumerate(HOSTILE_NAMES):
        folder = _run_folder(tmp_path / f"r{i}", name, rubrics)
        out = tmp_path / f"m{i}" / ('odd"""\nname.py' if i % 2 else "scorer.py")
        out.parent.mkdir()
        res = _invoke(["export", str(folder), "--format", "inspect", "--out", str(out)])
        assert res.exit_code == 0, res.output
        modules.append(str(out))
        folders.append(str(folder.resolve()))
    code = ("import importlib.util, json, sys\n"
            "got = []\n"
            "for i, p in enumerate(json.loads(sys.argv[1])):\n"
            "    spec = importlib.util.spec_from_file_location(f'm{i}', p)\n"
            "    m = importlib.util.module_from_spec(spec)\n"
            "    try:\n"
            "        spec.loader.exec_module(m)\n"
            "        got.append([m.SOURCE, m.THRESHOLD, callable(m.rubric_scorer)])\n"
            "    except Exception as exc:\n"
            "        got.append(repr(exc))\n"
            "print(json.dumps(got))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(modules)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.rglob("PWNED")), "the exported module ran injected code"
    assert json.loads(proc.stdout) == [[f, 0.5, True] for f in folders]


def test_inspect_module_refuses_a_damaged_threshold(tmp_path):
    """A string threshold in a received artifact.json was formatted with :.3f (a traceback)."""
    folder = _run_folder(tmp_path, "run", _rubrics()[:1])
    doc = json.loads((folder / "artifact.json").read_text(encoding="utf-8"))
    doc["threshold"] = "0.5); import os #"
    (folder / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    res = _invoke(["export", str(folder), "--format", "inspect", "--out", str(tmp_path / "m.py")])
    assert res.exit_code == 2 and "artifact.json" in res.output and "'threshold'" in res.output, res.output
    assert not (tmp_path / "m.py").exists()


# ----------------------------------------------------------------------------- every format round-trips
_FORMATS = [("json", ".json"), ("llm-rubric", ".json"), ("deepeval", ".json"), ("promptfoo", ".yaml"),
            ("openai-graders", ".json"), ("prometheus", ".json")]


@pytest.mark.parametrize("fmt,suffix", _FORMATS)
def test_hostile_rubrics_and_run_names_round_trip_through_every_format(fmt, suffix, tmp_path):
    """Texts with newlines, quotes, template syntax, HTML and control characters, and hostile
    aspect names, come back exactly (id, text, polarity, aspect) through export then import, from a
    run folder with a hostile name; JSON and YAML outputs parse and carry the name verbatim."""
    rubrics = _rubrics(scale=AnswerScale.likert(1, 5))
    name = HOSTILE_NAMES[0]
    folder = _run_folder(tmp_path, name, rubrics)
    out = tmp_path / f"out{suffix}"
    args = ["export", str(folder), "--format", fmt, "--out", str(out)]
    res = _invoke(args)
    assert res.exit_code == 0, res.output
    back = import_rubrics(out)
    _same(back, rubrics)
    for r in back:  # the id is the content id of what came back: nothing changed in transit
        assert r.id == Rubric.make_id(r.text, r.polarity, r.aspect, r.scale)
    if fmt == "promptfoo":
        import yaml

        assert yaml.safe_load(out.read_text(encoding="utf-8"))["description"].startswith(name + ":")
    elif fmt == "deepeval":
        assert json.loads(out.read_text(encoding="utf-8"))["name"] == name
    if fmt == "llm-rubric":
        md = out.with_suffix(".md").read_text(encoding="utf-8")
        assert "<img" not in md and "</script>" not in md and "\u202e" not in md
    res = _invoke(["import", str(out), "--out", str(tmp_path / "pool.jsonl")])
    assert res.exit_code == 0, res.output
    _same(RubricSet.load(tmp_path / "pool.jsonl"), rubrics)


def test_label_model_graders_round_trip_hostile_texts_and_level_descriptors(tmp_path):
    rubrics = [Rubric.create(t, "SAT", aspect="a\nb", scale=AnswerScale(("No", "Yes"), (0.0, 1.0)),
                             levels=["not {{ x }}\nat all", '"yes"  indeed'])
               for t in HOSTILE_TEXTS[:4]]
    from rubric_induce.handoff import export_openai_graders

    back = import_rubrics(export_openai_graders(rubrics, tmp_path / "g.json", kind="label_model"))
    assert [(r.id, r.text, r.aspect, r.levels) for r in back] == [(r.id, r.text, r.aspect, r.levels) for r in rubrics]


# ----------------------------------------------------------------------------- item 7: newlines, templates
def test_newlines_and_spacing_survive_the_tool_formats(tmp_path):
    """The tool formats collapsed a text's whitespace on the rubric line but kept its id."""
    rubric = Rubric.create("First line.\n\n  - second  item\n  - third", "SAT")
    for fmt, suffix in (("deepeval", ".json"), ("promptfoo", ".yaml"), ("openai-graders", ".json")):
        export_json([rubric], tmp_path / "set.json")
        out = tmp_path / f"o{suffix}"
        res = _invoke(["export", "--rubrics", str(tmp_path / "set.json"), "--format", fmt, "--out", str(out)])
        assert res.exit_code == 0, res.output
        (back,) = import_rubrics(out)
        assert (back.id, back.text) == (rubric.id, rubric.text), fmt


def _jinja(text: str, **variables) -> str:
    jinja2 = pytest.importorskip("jinja2")
    return jinja2.Environment(keep_trailing_newline=True).from_string(text).render(**variables)


def test_promptfoo_values_render_to_the_rubric_text_not_a_template():
    """promptfoo renders each assertion value with Nunjucks and the test's vars: a rubric text
    holding {{ secret }} was filled in (or a {% %} tag broke the render)."""
    rubrics = _rubrics(texts=HOSTILE_TEXTS[2:3] + HOSTILE_TEXTS[8:9], aspects=[None])
    config = promptfoo_config(rubrics)
    from rubric_induce.handoff.common import graded_prompt

    for a, r in zip(config["defaultTest"]["assert"], rubrics):
        rendered = _jinja(a["value"], secret="LEAKED", x="LEAKED")
        assert rendered == graded_prompt(r, "promptfoo")
        assert "LEAKED" not in rendered and r.text.splitlines()[0][:20] in rendered


def test_promptfoo_python_assertion_keeps_a_run_path_with_template_syntax(tmp_path):
    folder = _run_folder(tmp_path, "run {{ x }} {%", _rubrics()[:1])
    config = promptfoo_config(folder)
    (python,) = [a for a in config["defaultTest"]["assert"] if a["type"] == "python"]
    rendered = _jinja(python["value"], x="LEAKED")
    assert repr(str(folder.resolve())) in rendered and "LEAKED" not in rendered
    compile(rendered.replace("return ", "x = "), "<assert>", "exec")  # still Python


def test_openai_graders_carry_no_template_openers_from_rubric_texts():
    """OpenAI graders substitute every {{ namespace.variable }} in their input: a rubric text with
    {{ item.secret }} pulled data into the grader prompt."""
    rubric = Rubric.create("Shows {{ item.secret }} and {{sample.output_text}} and {% if x %}.", "SAT")
    for kind in ("score_model", "label_model"):
        (grader,) = openai_graders([rubric], kind=kind)
        system, user = (m["content"] for m in grader["input"])
        assert not re.search(r"\{\{|\{%|\{#", system)
        assert user == "{{sample.output_text}}"  # our own template stays a template


def test_openai_graders_refuse_field_names_that_are_not_names(tmp_path):
    folder = _run_folder(tmp_path, "run", _rubrics()[:1], fields=("src}} {{sample.output_json", "summary"))
    res = _invoke(["export", str(folder), "--format", "openai-graders", "--out", str(tmp_path / "g.json")])
    assert res.exit_code == 2 and "'fields'" in res.output, res.output


@given(st.text(alphabet=st.sampled_from(list("{}%#\u200b \"ab\\\n\x1c\x85\u2028\t")), max_size=30))
@FUZZ
def test_template_escapes_are_exact_inverses(text):
    from rubric_induce.handoff.common import (
        braces_escape,
        braces_unescape,
        from_one_line,
        nunjucks_escape,
        nunjucks_unescape,
        one_line,
    )

    assert nunjucks_unescape(nunjucks_escape(text)) == text
    assert not re.search(r"\{[{%#]", re.sub(r'\{\{ "\{[{%#]" \}\}', "", nunjucks_escape(text)))
    assert _jinja(nunjucks_escape(text)) == text
    assert braces_unescape(braces_escape(text)) == text
    assert not re.search(r"\{[{%#]", braces_escape(text))
    assert from_one_line(one_line(text)) == text or not text.strip()
    assert len(one_line(text).splitlines()) <= 1


# ----------------------------------------------------------------------------- item 7: extra_body
def test_an_artifacts_extra_body_is_not_sent_with_the_users_key(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from rubric_induce.scoring.scorer import RubricScorer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET")
    body = {"store": True, "metadata": {"from": "artifact"}}
    url = "openai-compatible/m@http://127.0.0.1:9/v1"
    folder = _run_folder(tmp_path, "shared", _rubrics()[:1], backend=url,
                         extra={"backend_options": {"extra_body": body}})

    own = RubricScorer.load(folder, cache=False)  # the artifact's endpoint: no key, its fields kept
    assert own.backend.key_source == "none" and own.backend.extra_body == body
    named = RubricScorer.load(folder, cache=False, backend=url)  # the user's key: none of the artifact's fields
    assert named.backend.key_source == "environment" and not named.backend.extra_body
    given = RubricScorer.load(folder, cache=False, backend=url, backend_options={"extra_body": {"a": 1}})
    assert given.backend.extra_body == {"a": 1}  # the user's own fields are sent

    openai_folder = _run_folder(tmp_path / "o", "shared", _rubrics()[:1], backend="openai/gpt-4o-mini",
                                extra={"backend_options": {"extra_body": body}})
    api = RubricScorer.load(openai_folder, cache=False)  # api.openai.com gets the key whoever named it
    assert api.backend.key_source == "environment" and not api.backend.extra_body
    for s in (own, named, given, api):
        s.close()


# ----------------------------------------------------------------------------- fuzz: export / import
_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
texts = st.text(_chars, min_size=1, max_size=40).filter(lambda t: t.strip())
aspects = st.none() | st.text(_chars, max_size=12)


@given(st.lists(st.tuples(texts, st.sampled_from(["SAT", "DSAT", None]), aspects), min_size=1, max_size=4,
                unique_by=lambda t: (" ".join(t[0].split()), t[1], t[2])),
       st.sampled_from([f for f, _ in _FORMATS]))
@FUZZ
def test_fuzz_round_trip_of_random_rubrics(tmp_path_factory, items, fmt):
    """Random texts and aspects (any character but NUL and lone surrogates) come back exactly."""
    tmp = tmp_path_factory.mktemp("rt")
    rubrics = [Rubric.create(t, p, aspect=a) for t, p, a in items]
    if fmt in ("json", "llm-rubric"):
        out = tmp / "o.json"
        (export_json if fmt == "json" else export_llm_rubric)(rubrics, out)
    else:
        out = tmp / ("o.yaml" if fmt == "promptfoo" else "o.json")
        export_json(rubrics, tmp / "set.json")
        res = _invoke(["export", "--rubrics", str(tmp / "set.json"), "--format", fmt, "--out", str(out)])
        assert res.exit_code == 0, res.output
    _same(import_rubrics(out, fmt), rubrics)


def _mutate(doc, draw):
    """``doc`` with one value somewhere replaced by a random JSON value."""
    junk = st.recursive(st.none() | st.booleans() | st.integers(-2, 10**30) | st.floats() | st.text(max_size=5),
                        lambda c: st.lists(c, max_size=2) | st.dictionaries(st.text(max_size=5), c, max_size=2),
                        max_leaves=4)
    paths = []

    def walk(obj, path):
        paths.append(path)
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, path + [k])
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, path + [i])

    walk(doc, [])
    path = draw(st.sampled_from(paths))
    value = draw(junk)
    if not path:
        return value
    target = doc
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return doc


_SOURCES = {
    "json": lambda rs: {"format": "rubric-induce.rubric-set", "version": 1,
                        "rubrics": [r.to_dict() for r in rs]},
    "deepeval": lambda rs: deepeval_spec(rs, dag=False),
    "openai-graders": lambda rs: openai_graders(rs),
    "promptfoo": lambda rs: promptfoo_config(rs),
    "prometheus": lambda rs: prometheus_rubrics(rs),
    "llm-rubric": lambda rs: llm_rubric_questions(rs),
}


@pytest.mark.slow
@given(st.data(), st.sampled_from(sorted(_SOURCES)), st.integers(1, 3))
@FUZZ
def test_fuzz_damaged_hand_off_files_exit_2_without_traceback(tmp_path_factory, data, fmt, n_edits):
    """A hand-off file with random values anywhere: import gives rubrics or exit 2 with one line
    naming the file; never a traceback."""
    tmp = tmp_path_factory.mktemp("bad")
    doc = _SOURCES[fmt](_rubrics(texts=HOSTILE_TEXTS[:3], scale=AnswerScale.likert(1, 5)))
    doc = json.loads(json.dumps(doc))
    for _ in range(n_edits):
        doc = _mutate(doc, data.draw)
    path = tmp / ("in.yaml" if fmt == "promptfoo" else "in.json")
    path.write_text(json.dumps(doc), encoding="utf-8")
    res = CliRunner().invoke(cli, ["import", str(path), "--out", str(tmp / "pool.jsonl")])
    if res.exit_code != 0:
        assert res.exit_code == 2, (res.output, res.exception)
        assert isinstance(res.exception, SystemExit), repr(res.exception)
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and str(path) in lines[0], res.output
        assert not (tmp / "pool.jsonl").exists()
    try:
        import_rubrics(path)
    except RubricInduceError:
        pass


@given(st.data(), st.sampled_from(sorted(_SOURCES)))
@FUZZ
def test_fuzz_garbled_hand_off_bytes_exit_2_without_traceback(tmp_path_factory, data, fmt):
    """Truncated files, stray bytes, invalid UTF-8 and YAML / JSON syntax errors: one error line."""
    from rubric_induce.handoff.promptfoo import promptfoo_yaml

    tmp = tmp_path_factory.mktemp("garbled")
    doc = _SOURCES[fmt](_rubrics(texts=HOSTILE_TEXTS[:2], scale=AnswerScale.likert(1, 5)))
    raw = (promptfoo_yaml(doc) if fmt == "promptfoo" else json.dumps(doc, ensure_ascii=False)).encode("utf-8")
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw)))
        how = data.draw(st.sampled_from(["cut", "insert", "delete"]))
        junk = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"{", b"]", b":", b"\n- ", b"\t", b"'", b'"',
                                          b"&a", b"*a", b"!!python/object:os.system", b"\xef\xbb\xbf"]))
        raw = raw[:at] if how == "cut" else raw[:at] + junk + raw[at:] if how == "insert" else raw[:at] + raw[at + 1:]
    path = tmp / ("in.yaml" if fmt == "promptfoo" else "in.json")
    path.write_bytes(raw)
    res = CliRunner().invoke(cli, ["import", str(path), "--out", str(tmp / "pool.jsonl")])
    assert res.exit_code in (0, 2), (res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    if res.exit_code == 2:
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and str(path) in lines[0], res.output
        assert not (tmp / "pool.jsonl").exists()


_BAD_FILES = [
    ("not-utf8.yaml", b"defaultTest:\n  assert:\n  - type: llm-rubric\n    value: caf\xe9\n", "line 4"),
    ("syntax.yaml", b"defaultTest:\n  assert: [\n", "invalid YAML"),
    ("surrogate.json", b'{"rubrics": [{"text": "a \\ud800 b"}]}', "rubrics[0].text"),
    ("surrogate.yaml", b'defaultTest:\n  assert:\n  - type: llm-rubric\n    value: "a \\ud800"\n', "value"),
    ("deepeval.json", b'{"format": "rubric-induce.deepeval", "geval": [{"criteria": "Rubric r (SAT): x", '
                      b'"rubric": true}]}', "geval[0].rubric"),
    ("deepeval-empty.json", b'{"format": "rubric-induce.deepeval", "geval": [{"criteria": ""}]}', "criteria"),
    ("graders.json", b'[{"type": "score_model", "input": 7}]', "[0].input"),
]


@pytest.mark.parametrize("name,raw,where", _BAD_FILES, ids=[b[0] for b in _BAD_FILES])
def test_bad_hand_off_files_found_by_the_fuzz_exit_2_with_one_line(tmp_path, name, raw, where):
    """Each was a traceback (UnicodeDecodeError, UnicodeEncodeError, TypeError, IndexError) or a
    two-line YAML message."""
    path = tmp_path / name
    path.write_bytes(raw)
    res = CliRunner().invoke(cli, ["import", str(path), "--out", str(tmp_path / "pool.jsonl")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (res.output, res.exception)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and where in lines[0], res.output
    assert not (tmp_path / "pool.jsonl").exists()


def test_a_punctuation_only_rubric_exports(tmp_path):
    """A rubric text ':' crashed the question template (IndexError) in every format."""
    rubric = Rubric.create(":", "SAT")
    export_llm_rubric([rubric], tmp_path / "q.json")
    _same(import_rubrics(tmp_path / "q.json"), [rubric])


@given(st.data(), st.sampled_from([f for f, _ in _FORMATS] + ["inspect"]), st.integers(1, 2))
@FUZZ
def test_fuzz_damaged_artifact_export_exits_2_without_traceback(tmp_path_factory, data, fmt, n_edits):
    """A received run folder whose artifact.json holds random values anywhere: export writes its
    file or exits 2 with one line naming the file; never a traceback, never a partial output."""
    tmp = tmp_path_factory.mktemp("art")
    folder = _run_folder(tmp, "run", _rubrics(texts=HOSTILE_TEXTS[:2], scale=AnswerScale.likert(1, 5)),
                         fields=("source", "summary"))
    doc = json.loads((folder / "artifact.json").read_text(encoding="utf-8"))
    for _ in range(n_edits):
        doc = _mutate(doc, data.draw)
    (folder / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    out = tmp / ("out.py" if fmt == "inspect" else "out.yaml" if fmt == "promptfoo" else "out.json")
    res = CliRunner().invoke(cli, ["export", str(folder), "--format", fmt, "--out", str(out)])
    assert res.exit_code in (0, 2), (res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    if res.exit_code == 2:
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1, res.output
        assert not out.exists()


@pytest.mark.parametrize("key,value,where", [("task", True, "'task'"), ("fields", 7, "'fields'"),
                                             ("probe", [1], "'probe'"), ("rubrics", "sel\nected\x1e.jsonl", "\\n")])
def test_damaged_artifacts_found_by_the_fuzz_exit_2_with_one_line(tmp_path, key, value, where):
    """task: true was a TypeError traceback; a rubric file name with a newline printed a two-line error."""
    folder = _run_folder(tmp_path, "run", _rubrics()[:1])
    doc = json.loads((folder / "artifact.json").read_text(encoding="utf-8"))
    doc[key] = value
    (folder / "artifact.json").write_text(json.dumps(doc), encoding="utf-8")
    res = CliRunner().invoke(cli, ["export", str(folder), "--format", "deepeval", "--out", str(tmp_path / "o.json")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (res.output, res.exception)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and where in lines[0], res.output
