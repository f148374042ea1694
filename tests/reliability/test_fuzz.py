"""Issue 17, item 3: property-based fuzzing of the loaders and the config reader.

Every input gives either a result or one clean error: through the library, a result or a
:class:`~rubric_induce.core.errors.RubricInduceError` subclass (never another exception); through the
command line (``run CONFIG --check``), exit code 0 or 2 with one ``error:`` line and no traceback.
Inputs: example files in the project's JSONL (valid rows, rows with random values in every key,
garbled lines), flat JSONL / JSON / CSV, configs built from the real section and key names with
random values and typos, and raw bytes with byte-order marks and invalid UTF-8 mixed in.
"""
from __future__ import annotations

import atexit
import itertools
import json
import math
import os
import random
import shutil
import tempfile
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rubric_induce
from rubric_induce.cli import cli
from rubric_induce.core.errors import RubricInduceError
from rubric_induce.pipeline.config import SECTIONS

# 100 fixed examples per property in the test suite (a few seconds); RUBRIC_INDUCE_FUZZ_EXAMPLES=5000 hunts
# longer, with fresh random examples each time.
_N = int(os.environ.get("RUBRIC_INDUCE_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize=_N <= 100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DEMO = Path(rubric_induce.__file__).resolve().parent / "resources" / "demo_uss_dialogues.jsonl"
DEMO_ROWS = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()[:24]]

# --------------------------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------------------------
names = st.sampled_from(["text", "sat", "satisfaction", "id", "judge", "fields", "labels", "x", "", "tëxt"])
scalars = (st.none() | st.booleans() | st.integers(-3, 10) | st.sampled_from([0.5, 1e308, -0.0])
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6) | names)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(names | st.text(max_size=4), c,
                                                                                   max_size=3), max_leaves=8)
label_values = st.integers(0, 5) | st.floats(0, 5) | st.booleans() | values


@st.composite
def example_rows(draw) -> dict:
    """A rubric-induce example row, valid or with random values in any of its keys."""
    row = json.loads(json.dumps(draw(st.sampled_from(DEMO_ROWS))))
    for key in draw(st.lists(st.sampled_from(["id", "fields", "labels", "judgments", "group", "meta",
                                               "labels.sat", "labels.satisfaction", "fields.text",
                                               "judgments.0", "judgments.0.judge",
                                               "judgments.0.labels.satisfaction", "drop"]),
                             max_size=draw(st.sampled_from([0, 0, 0, 1, 2, 3])))):
        if key == "drop":
            row.pop(draw(st.sampled_from(sorted(row))), None)
            continue
        target, parts = row, key.split(".")
        try:
            for p in parts[:-1]:
                target = target[int(p)] if isinstance(target, list) else target[p]
            last = int(parts[-1]) if isinstance(target, list) else parts[-1]
            target[last] = draw(label_values if "labels." in key else values)
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    return row


def _garble(draw, line: bytes, rate: int = 1) -> bytes:
    """``line``, or (about one time in ``rate`` + 1) a damaged version of it."""
    if draw(st.integers(0, rate)) != 0:
        return line
    how = draw(st.sampled_from(["truncate", "bytes", "utf8-bad", "text", "empty"]))
    if how == "truncate" and line:
        return line[: draw(st.integers(0, len(line) - 1))]
    if how == "bytes":
        return draw(st.binary(max_size=20)).replace(b"\n", b"")
    if how == "utf8-bad" and line:
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xe9", b"\xed\xa0\x80"])) + line[at:]
    if how == "text":
        return draw(st.text(max_size=20)).replace("\n", " ").encode("utf-8", "surrogatepass")
    if how == "empty":
        return b""
    return line


@st.composite
def jsonl_files(draw, rows=example_rows()) -> bytes:  # noqa: B008 (a hypothesis strategy)
    lines = []
    for i in range(draw(st.integers(0, 8))):
        row = draw(rows)
        if isinstance(row.get("id"), str) and row["id"].startswith("uss-"):
            row["id"] = f"{row['id']}-{i}"  # sampled demo rows repeat; keep ids unique unless fuzzed
        lines.append(_garble(draw, json.dumps(row, allow_nan=True).encode(), rate=12))
    data = b"\n".join(lines) + draw(st.sampled_from([b"\n", b"", b"\r\n"]))
    return draw(st.sampled_from([b"", b"\xef\xbb\xbf"])) + data


flat_rows = st.fixed_dictionaries({"text": st.text(max_size=10) | values},
                                  optional={"id": values, "sat": label_values, "judge": values})


@st.composite
def csv_files(draw) -> bytes:
    header = draw(st.lists(st.sampled_from(["id", "text", "sat", "judge", "", "text "]), min_size=0, max_size=4))
    cell = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8) | st.sampled_from(
        ['"a,b"', '"x""y"', '"open', "1", "0", "yes", "nan", "inf", " "])
    rows = [",".join(draw(st.lists(cell, max_size=5))) for _ in range(draw(st.integers(0, 6)))]
    data = "\n".join([",".join(header), *rows]).encode("utf-8", "surrogatepass")
    data = _garble(draw, data, rate=3)
    return draw(st.sampled_from([b"", b"\xef\xbb\xbf"])) + data


def _load_or_clean_error(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except RubricInduceError as exc:
        assert str(exc)
        return exc


_ROOT = Path(tempfile.mkdtemp(prefix="rubric-induce-fuzz-"))
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)
_COUNT = itertools.count()


def _write(data: bytes, suffix: str) -> Path:
    """``data`` in a fresh folder of its own (a config and its examples file sit side by side)."""
    folder = _ROOT / str(next(_COUNT))
    folder.mkdir()
    path = folder / f"input{suffix}"
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------------------------
# library loaders
# --------------------------------------------------------------------------------------------
@pytest.mark.slow
@FUZZ
@given(jsonl_files())
def test_example_jsonl_gives_examples_or_one_clean_error(data):
    from rubric_induce.data import read_examples
    from rubric_induce.data.mapping import InputMapping

    path = _write(data, ".jsonl")
    out = _load_or_clean_error(read_examples, path)
    if isinstance(out, list):  # loaded examples are well-formed: text ids, numeric or null labels
        for ex in out:
            assert isinstance(ex.id, str) and ex.id
            for v in ex.labels.values():
                assert v is None or (isinstance(v, (int, float)) and math.isfinite(v))
    _load_or_clean_error(InputMapping().load, path, default_labels=("sat",))


@pytest.mark.slow
@FUZZ
@given(jsonl_files(flat_rows))
def test_flat_jsonl_gives_examples_or_one_clean_error(data):
    from rubric_induce.data.mapping import InputMapping

    path = _write(data, ".jsonl")
    _load_or_clean_error(InputMapping().load, path, default_labels=("sat",))
    _load_or_clean_error(InputMapping(labels=("sat",), judge="judge").load, path)


@pytest.mark.slow
@FUZZ
@given(st.lists(flat_rows | example_rows() | values, max_size=5), st.sampled_from([b"", b"\xef\xbb\xbf"]))
def test_json_arrays_give_examples_or_one_clean_error(rows, bom):
    from rubric_induce.data.mapping import InputMapping

    path = _write(bom + json.dumps(rows).encode(), ".json")
    _load_or_clean_error(InputMapping().load, path, default_labels=("sat",))


@FUZZ
@given(csv_files())
def test_csv_gives_examples_or_one_clean_error(data):
    from rubric_induce.data.mapping import InputMapping

    path = _write(data, ".csv")
    _load_or_clean_error(InputMapping().load, path, default_labels=("sat",))
    _load_or_clean_error(InputMapping(labels={"sat": "sat"}, judge="judge").load, path)


@pytest.mark.slow
@FUZZ
@given(jsonl_files(st.fixed_dictionaries({"text": values}, optional={"id": values, "polarity": values,
                                                                      "scale": values, "levels": values})))
def test_rubric_and_probe_files_give_a_result_or_one_clean_error(data):
    from rubric_induce.data import RubricPool
    from rubric_induce.data.probes import ProbeTable

    path = _write(data, ".jsonl")
    _load_or_clean_error(RubricPool.load, path)
    _load_or_clean_error(ProbeTable.load, path)


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------
def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


KEYS = {name: [f.name for f in fields(cls)] for name, cls in SECTIONS.items()}
SPECIAL = st.sampled_from(["fake", "local", "opneai/gpt-4o", "openai/", "openai-compatible/m@http://x", "sat",
                           "satisfaction", "text", "@missing.txt", "rubicon", "autocalibrate", "none", "topk",
                           "spur", "logprobs", "sampling", "analyze-rate", "uss", "drop", "neutral"])
toml_values = st.recursive(st.booleans() | st.integers(-5, 2000) | st.floats(allow_nan=True) | st.text(max_size=6)
                           | SPECIAL,
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(SPECIAL | st.text(max_size=4), c,
                                                                               max_size=2), max_leaves=5)


def _typo(draw, name: str) -> str:
    if not name or not draw(st.integers(0, 7)) == 0:
        return name
    i = draw(st.integers(0, len(name) - 1))
    return name[:i] + draw(st.sampled_from(["", "x", name[i] * 2])) + name[i + 1:]


@st.composite
def configs(draw) -> tuple[bytes, bytes]:
    """A config (bytes) over the demo examples with random keys/values/typos, and the examples' bytes."""
    sections: dict[str, dict] = {"data": {"examples": "ex.jsonl", "label": "sat"}, "backend": {"spec": "fake"},
                                 "run": {"limit": 24}, "calibrate": {"question": "satisfaction"},
                                 "task": {"description": "Was the user satisfied?"}}
    for _ in range(draw(st.integers(0, 3))):
        section = draw(st.sampled_from(sorted(KEYS)))
        key = draw(st.sampled_from(KEYS[section]))
        value = draw(st.sampled_from([None, 0, 1, -1, 0.0, 0.5, 2, 1000, "nan", True])) if draw(st.booleans()) \
            else draw(toml_values)  # plain numbers reach the range checks; any value reaches the type checks
        key = _typo(draw, key)
        if value is None:  # leave the key out (its default)
            sections.get(section, {}).pop(key, None)
        else:
            sections.setdefault(section, {})[key] = float(value) if value == "nan" else value
    if draw(st.integers(0, 9)) == 0:
        sections[_typo(draw, draw(st.sampled_from(sorted(KEYS))))] = {}
    lines = []
    for section, body in sections.items():
        lines.append(f"[{json.dumps(section) if not section.isidentifier() else section}]")
        lines += [f"{_toml(k)} = {_toml(v)}" for k, v in body.items()]
    text = "\n".join(lines) + "\n"
    data = text.encode("utf-8", "surrogatepass")
    data = _garble(draw, data, rate=8)
    data = draw(st.sampled_from([b"", b"", b"\xef\xbb\xbf"])) + data
    return data, draw(demo_files())


@st.composite
def demo_files(draw) -> bytes:
    """The 24 demo rows with a few of them changed in one place (a label, an id, a judgment, ...),
    or now and then a fully fuzzed file."""
    if draw(st.integers(0, 5)) == 0:
        return draw(jsonl_files())
    rows = json.loads(json.dumps(DEMO_ROWS))
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(rows) - 1))
        key = draw(st.sampled_from(["id", "labels.sat", "labels.satisfaction", "judgments.0.labels.satisfaction",
                                    "judgments.1.judge", "fields.text", "group", "labels", "judgments"]))
        target, parts = rows[i], key.split(".")
        try:
            for p in parts[:-1]:
                target = target[int(p)] if isinstance(target, list) else target[p]
            target[int(parts[-1]) if isinstance(target, list) else parts[-1]] = draw(
                label_values if "labels." in key else values)
        except (KeyError, IndexError, TypeError, ValueError):  # an earlier change removed the path
            continue
    lines = [json.dumps(r, allow_nan=True).encode() for r in rows]
    return draw(st.sampled_from([b"", b"\xef\xbb\xbf"])) + b"\n".join(_garble(draw, ln, rate=40) for ln in lines)


@pytest.mark.slow
@FUZZ
@given(configs())
def test_a_fuzzed_config_loads_or_gives_one_clean_error(case):
    from rubric_induce.pipeline.config import load_config

    data, examples = case
    cfg = _write(data, ".toml")
    (cfg.parent / "ex.jsonl").write_bytes(examples)
    _load_or_clean_error(load_config, cfg)


@pytest.mark.slow
@FUZZ
@given(configs())
def test_run_check_exits_0_or_2_without_a_traceback(case):
    data, examples = case
    cfg = _write(data, ".toml")
    (cfg.parent / "ex.jsonl").write_bytes(examples)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--check", "--out", str(cfg.parent / "run")])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        pytest.fail("".join(traceback.format_exception(res.exception)))
    assert res.exit_code in (0, 2), res.output
    assert "Traceback" not in res.output
    if res.exit_code == 2:
        assert res.output.count("error:") == 1 and res.output.startswith("error: "), res.output
    else:
        assert "config OK" in res.output
    assert not (cfg.parent / "run").exists()  # --check writes nothing


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([".toml", ".yaml", ".jsonl", ".csv", ".json"]))
def test_random_bytes_give_one_clean_error(data, suffix):
    from rubric_induce.data.mapping import InputMapping
    from rubric_induce.pipeline.config import load_config

    path = _write(random.Random(len(data)).choice([b"", b"\xef\xbb\xbf"]) + data, suffix)
    if suffix in (".toml", ".yaml"):
        _load_or_clean_error(load_config, path)
    else:
        _load_or_clean_error(InputMapping().load, path, default_labels=("sat",))
