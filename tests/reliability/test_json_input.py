"""Text that parses but cannot be used (issue 40, A6 and A7): a lone UTF-16 surrogate escape ("\\ud800",
which no UTF-8 file, hash or database can hold), an integer longer than Python converts (4,300 digits) and
a YAML alias bomb. Every reader of a file someone else wrote answers each with exit 2 and one `error:`
line naming the file, the line and the field: `run --check` and `run` alike (the check used to pass
surrogate examples that `run` then crashed on), `score --input`, `score --probes`, `compare`, `import`, a
mapping file and an artifact. A hypothesis pass puts either value anywhere in an examples file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runconfigs import RES, small_run_config

pytestmark = pytest.mark.slow  # over about 1 s per file on 2 cores: CI runs it, plain pytest does not

_N = int(os.environ.get("RUBRIC_INDUCE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=min(_N, 40), deadline=None, derandomize=_N <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SURROGATE = '"USER: hi \\ud800\\nSYSTEM: hello"'  # JSON text: a lone high half
LONG_INT = "1" + "0" * 4999                            # JSON text: a 5,000-digit integer
BAD = {"surrogate": (SURROGATE, "surrogate pair without its other half"),
       "long_int": (LONG_INT, "integer of 5000 digits is too long")}


def clean_error(rc: int, out: str, *phrases: str) -> None:
    assert rc == 2, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for phrase in phrases:
        assert phrase in out, f"{phrase!r} not in {out!r}"


def _demo_lines(n: int = 12) -> list[str]:
    return (RES / "demo_uss_dialogues.jsonl").read_text(encoding="utf-8").splitlines()[:n]


def _examples(tmp: Path, kind: str, line: int = 5) -> tuple[Path, str]:
    """The demo examples with line ``line`` damaged: a surrogate in its text, or a long integer as its label."""
    rows = _demo_lines()
    row = json.loads(rows[line - 1])
    value, _ = BAD[kind]
    field = "fields.text" if kind == "surrogate" else "labels.sat"
    part, key = field.split(".")
    row[part][key] = "@@BAD@@"
    rows[line - 1] = json.dumps(row).replace('"@@BAD@@"', value)
    path = tmp / "examples.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path, field


def _config(tmp: Path, examples: Path) -> Path:
    cfg = tmp / "cfg.toml"
    cfg.write_text(small_run_config().replace((RES / "demo_uss_dialogues.jsonl").as_posix(), examples.as_posix()),
                   encoding="utf-8")
    return cfg


@pytest.mark.parametrize("kind", list(BAD))
def test_run_check_and_run_refuse_the_same_example(tmp_path, kind):
    """`run --check` and `run` agree: the same one-line error naming the file, line 5 and the field,
    before any stage runs (no run folder is written)."""
    examples, field = _examples(tmp_path, kind)
    cfg = _config(tmp_path, examples)
    phrase = BAD[kind][1]
    rc, checked = invoke("run", cfg, "--check")
    clean_error(rc, checked, str(examples), "line 5", f"field '{field}'", phrase)
    rc, ran = invoke("run", cfg, "--out", tmp_path / "run")
    clean_error(rc, ran, str(examples), "line 5", f"field '{field}'", phrase)
    assert not (tmp_path / "run" / "probes.jsonl").exists()


@pytest.fixture
def small(tmp_path) -> Path:
    """A small uncalibrated scorer artifact on the fake backend (two demo rubrics)."""
    from rubric_induce.scoring.artifact import write_artifact

    folder = tmp_path / "run"
    folder.mkdir()
    rubrics = json.loads((RES / "demo_uss_rubrics.json").read_text(encoding="utf-8"))["rubrics"][:2]
    (folder / "selected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rubrics), encoding="utf-8")
    write_artifact(folder, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only", "estimator": "logprobs"},
                   fields=["text"], backend="fake", calibration=None, question=None,
                   extra={"input": {"text": {"text": "text"}, "id": "id"}})
    return folder


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("layout", ["jsonl", "json"])
def test_score_input_names_the_text(small, tmp_path, kind, layout):
    """`score --input`: JSONL names the line; a JSON array names the line and the record's field."""
    value, phrase = BAD[kind]
    texts = [json.dumps({"id": f"t{i}", "text": f"USER: hi {i}\nSYSTEM: hello"}) for i in range(3)]
    texts[1] = texts[1].replace('"t1"', value)  # the id: a string where one is expected, or a long number
    if layout == "jsonl":
        path = tmp_path / "texts.jsonl"
        path.write_text("\n".join(texts) + "\n", encoding="utf-8")
        where = ("line 2", "field 'id'")
    else:
        path = tmp_path / "texts.json"
        path.write_text("[\n" + ",\n".join(texts) + "\n]\n", encoding="utf-8")
        where = ("line 3", "field '[1].id'")
    rc, out = invoke("score", small, "--input", path, "--cache", tmp_path / "c.sqlite")
    clean_error(rc, out, str(path), *where, phrase)
    assert not (tmp_path / "c.sqlite").exists()


@pytest.mark.parametrize("kind", list(BAD))
def test_compare_names_the_pair(pairwise_artifact, tmp_path, kind):
    value, phrase = BAD[kind]
    rows = [json.dumps({"input": f"Say {i}.", "output_1": f"{i}", "output_2": f"not {i}", "label": 1})
            for i in range(4)]
    rows[2] = rows[2].replace('"not 2"', value)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(rows) + "\n", encoding="utf-8")
    clean_error(*invoke("compare", pairwise_artifact, "--pairs", pairs, "--cache", tmp_path / "c.sqlite"),
                str(pairs), "line 3", "field 'output_2'", phrase)


def test_score_probes_names_the_record(small, tmp_path):
    """A probe file from elsewhere: a surrogate in a record's rubric id names its line and the field."""
    from rubric_induce.scoring.scorer import RubricScorer

    texts = [{"id": f"p{i}", "text": f"USER: hi {i}\nSYSTEM: hello"} for i in range(3)]
    RubricScorer.load(small, cache=False).probe(texts).save(tmp_path / "good.jsonl")
    lines = (tmp_path / "good.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[3])
    rec["rubric_id"] = "@@BAD@@"
    lines[3] = json.dumps(rec).replace('"@@BAD@@"', '"r\\udc00"')
    probes = tmp_path / "probes.jsonl"
    probes.write_text("\n".join(lines) + "\n", encoding="utf-8")
    clean_error(*invoke("score", small, "--probes", probes), str(probes), "line 4", "field 'rubric_id'",
                "\\udc00")


def test_a_valid_surrogate_pair_is_one_character(tmp_path):
    """An escaped pair (an emoji written as \\ud83d\\ude00) is a character like any other: `run --check` passes."""
    rows = _demo_lines()
    row = json.loads(rows[4])
    row["fields"]["text"] += " @@E@@"
    rows[4] = json.dumps(row).replace("@@E@@", "\\ud83d\\ude00")
    examples = tmp_path / "examples.jsonl"
    examples.write_text("\n".join(rows) + "\n", encoding="utf-8")
    rc, out = invoke("run", _config(tmp_path, examples), "--check")
    assert rc == 0, out


@pytest.mark.parametrize("kind", list(BAD))
def test_import_and_a_mapping_file_name_the_field(tmp_path, kind):
    value, phrase = BAD[kind]
    src = tmp_path / "rubrics.json"
    src.write_text('{"rubrics": [{"text": "The reply is polite.", "polarity": "SAT", "aspect": ' + value + "}]}",
                   encoding="utf-8")
    clean_error(*invoke("import", src, "--out", tmp_path / "pool.jsonl"), str(src), "line 1",
                "field 'rubrics[0].aspect'", phrase)
    assert not (tmp_path / "pool.jsonl").exists()
    from rubric_induce.core.errors import DataError
    from rubric_induce.data.mapping import load_mapping_file

    mapping = tmp_path / "mapping.json"
    mapping.write_text('{\n  "text": ["text"],\n  "id": ' + value + "\n}\n", encoding="utf-8")
    with pytest.raises(DataError, match=phrase) as err:
        load_mapping_file(mapping)
    assert err.value.line == 3 and err.value.field == "id" and err.value.path == str(mapping)


def test_an_artifact_with_a_surrogate_names_it(small, tmp_path):
    """A received run folder whose artifact.json holds a lone surrogate: exit 2 naming artifact.json."""
    run = small
    doc = (run / "artifact.json").read_text(encoding="utf-8")
    (run / "artifact.json").write_text(doc.replace('"label": "sat"', '"label": "sat\\ud800"', 1), encoding="utf-8")
    texts = tmp_path / "t.jsonl"
    texts.write_text(json.dumps({"text": "USER: hi\nSYSTEM: hello"}) + "\n", encoding="utf-8")
    clean_error(*invoke("score", run, "--input", texts), "artifact.json", "field 'label'", "surrogate")


@FUZZ
@given(data=st.data())
def test_fuzz_a_bad_value_anywhere_in_an_examples_file(tmp_path_factory, data):
    """Either value at any key or list position of any line of an examples file: `run --check` exits 2
    naming that line (never a traceback, never a pass)."""
    tmp = tmp_path_factory.mktemp("fuzz-json")
    rows = [json.loads(r) for r in _demo_lines(8)]
    line = data.draw(st.integers(1, len(rows)), label="line")
    row = rows[line - 1]
    paths: list[list] = []

    def walk(node, parts):
        paths.append(parts)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, [*parts, k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, [*parts, i])

    walk(row, [])
    parts = data.draw(st.sampled_from([p for p in paths if p]), label="where")
    kind = data.draw(st.sampled_from(list(BAD)), label="kind")
    node = row
    for p in parts[:-1]:
        node = node[p]
    node[parts[-1]] = "@@BAD@@"
    text = [json.dumps(r) for r in rows]
    text[line - 1] = text[line - 1].replace('"@@BAD@@"', BAD[kind][0])
    examples = tmp / "examples.jsonl"
    examples.write_text("\n".join(text) + "\n", encoding="utf-8")
    rc, out = invoke("run", _config(tmp, examples), "--check")
    clean_error(rc, out, str(examples), f"line {line}", BAD[kind][1])


# -- YAML: aliases that expand without bound (A7) ----------------------------------------------------
def _bomb(levels: int = 9) -> str:
    """About 400 bytes that expand to 9**levels strings ("billion laughs")."""
    out = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels):
        out += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n"
    return out + f"description: *a{levels - 1}\n"


def _cli(*args, timeout: float = 60) -> tuple[int, str, float]:
    """The CLI in a child process (a hang is a failure at ``timeout``, not a stuck suite)."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "rubric_induce.cli", *map(str, args)], capture_output=True,
                         text=True, timeout=timeout)
    return res.returncode, res.stdout + res.stderr, time.perf_counter() - t0


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    """`import` of a 400-byte alias bomb used to walk 10**8 strings for minutes; now exit 2 naming the
    file, in the time the command takes to start."""
    src = tmp_path / "bomb.yaml"
    src.write_text(_bomb(), encoding="utf-8")
    assert len(src.read_bytes()) < 450
    rc, out, seconds = _cli("import", src, "--out", tmp_path / "pool.jsonl")
    clean_error(rc, out, str(src), "alias")
    assert seconds < 30
    assert not (tmp_path / "pool.jsonl").exists()


@pytest.mark.parametrize("text, phrase, line", [
    ("a: &a [*a]\n", "recursive alias", 1),
    ("defaultTest:\n  assert:\n  - type: llm-rubric\n    value: \"polite \\ud800\"\n", "surrogate", 4),
    ("defaultTest:\n  threshold: " + LONG_INT + "\n", "too long", 2),
])
def test_other_unusable_yaml_names_the_line(tmp_path, text, phrase, line):
    src = tmp_path / "config.yaml"
    src.write_text(text, encoding="utf-8")
    clean_error(*invoke("import", src, "--out", tmp_path / "pool.jsonl"), str(src), f"line {line}", phrase)


def test_yaml_aliases_of_ordinary_size_still_load(tmp_path):
    """A promptfoo config that shares one block through an alias reads as before."""
    from rubric_induce.core.textfiles import parse_yaml

    doc = parse_yaml("base: &b {type: llm-rubric, value: polite}\ntests:\n- assert: [*b]\n- assert: [*b, *b]\n")
    assert doc["tests"][1]["assert"] == [{"type": "llm-rubric", "value": "polite"}] * 2
    assert parse_yaml('k: "\\ud83d\\ude00"') == {"k": "\U0001F600"}  # an escaped pair: one character


def test_a_run_config_with_an_alias_bomb_or_a_long_integer(tmp_path):
    """A YAML run config whose bomb sits where any value is taken (`backend.extra_body`) used to hang
    `run --check` while the check walked it; a TOML integer of 5,000 digits was a traceback."""
    lines = ["backend:", "  spec: openai-compatible/m@http://127.0.0.1:9/v1", "  extra_body:",
             "    x: &a0 {k0: lol, k1: lol, k2: lol, k3: lol, k4: lol, k5: lol, k6: lol, k7: lol, k8: lol}"]
    lines += [f"    y{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc, out, seconds = _cli("run", cfg, "--check", timeout=60)
    clean_error(rc, out, str(cfg), "alias")
    assert seconds < 30
    toml = tmp_path / "cfg.toml"
    toml.write_text("[run]\nseed = " + LONG_INT + "\n", encoding="utf-8")
    clean_error(*invoke("run", toml, "--check"), str(toml), "line 2", "too long to read")


@pytest.mark.parametrize("kind", list(BAD))
def test_a_prices_file_names_the_model(tmp_path, kind):
    """`[prices]` / `--prices` read from JSON: the value under a model's price (a surrogate in the model name
    used to be kept, to fail where it was written)."""
    from rubric_induce.backends.pricing import parse_prices
    from rubric_induce.core.errors import DataError

    value, phrase = BAD[kind]
    prices = tmp_path / "prices.json"
    entry = '{"input": 0.1, "output": ' + value + "}" if kind == "long_int" else '{"input": 0.1, "output": 0.2}'
    model = '"gpt-4o-mini"' if kind == "long_int" else '"gpt\\ud800"'
    prices.write_text("{\n  " + model + ": " + entry + "\n}\n", encoding="utf-8")
    with pytest.raises(DataError, match=phrase) as err:
        parse_prices(prices)
    assert err.value.path == str(prices) and err.value.line == 2
    assert err.value.field == ("gpt-4o-mini.output" if kind == "long_int" else "gpt\\ud800")
