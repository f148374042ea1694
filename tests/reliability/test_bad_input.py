"""Issue 17, item 3: bad input is refused before the first LLM call, with one clean error.

Each case of the audit is reproduced here through the command line (``run CONFIG --check``, which
runs exactly the checks a run does before its first LLM call) or the library loader it goes
through: exit code 2, no traceback, and a message that names the file, the line (where there is
one) and the field, with a "did you mean" where a close name exists.
"""
from __future__ import annotations

import json
import re
import sqlite3
import warnings
from pathlib import Path

import pytest
from cli_runner import invoke

import rubric_induce
from rubric_induce.core.errors import DataError, RubricInduceError

RES = Path(rubric_induce.__file__).resolve().parent / "resources"
DEMO = RES / "demo_uss_dialogues.jsonl"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def demo_rows() -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]


def set_keys(text: str, **keys: str) -> str:
    """The config ``text`` with ``section__key = value`` set (replaced, or added to the section)."""
    for dotted, value in keys.items():
        section, key = dotted.split("__")
        header = f"[{section}]\n"
        if header not in text:
            text += f"\n{header}"
        start = text.index(header) + len(header)
        nxt = re.search(r"^\[", text[start:], flags=re.M)
        end = start + nxt.start() if nxt else len(text)
        body = text[start:end]
        line = re.compile(rf"^{re.escape(key)}\s*=.*$", flags=re.M)
        body = line.sub(f"{key} = {value}", body) if line.search(body) else f"{key} = {value}\n{body}"
        text = text[:start] + body + text[end:]
    return text


@pytest.fixture
def make_run(tmp_path, fake_run_config):
    """Write examples (rows, or raw bytes) and the fake-run config pointing at them; returns the config."""

    def make(rows: list[dict] | None = None, *, raw: bytes | None = None, data_name: str = "ex.jsonl",
             config_bytes: bytes | None = None, **keys: str) -> Path:
        data = tmp_path / data_name
        if raw is not None:
            data.write_bytes(raw)
        else:
            rows = demo_rows()[:24] if rows is None else rows
            data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        text = set_keys(fake_run_config.replace(f'"{DEMO}"', f'"{data}"'), **keys)
        cfg = tmp_path / "cfg.toml"
        cfg.write_bytes(config_bytes if config_bytes is not None else text.encode("utf-8"))
        return cfg

    return make



def check_fails(cfg: Path, *phrases: str, code: int = 2) -> str:
    rc, out = invoke("run", cfg, "--check")
    assert rc == code, out
    assert out.count("error:") == 1, out
    for phrase in phrases:
        assert phrase in out, f"{phrase!r} not in {out!r}"
    return out


def check_ok(cfg: Path) -> str:
    rc, out = invoke("run", cfg, "--check")
    assert rc == 0, out
    assert "config OK" in out
    return out


# --------------------------------------------------------------------------------------------
# labels
# --------------------------------------------------------------------------------------------
def _with(rows: list[dict], i: int, path: str, value) -> list[dict]:
    """``rows`` with ``rows[i][a][b]... = value`` (dotted path; ``judgments.0.labels.x``)."""
    row = rows[i]
    parts = path.split(".")
    for p in parts[:-1]:
        row = row[int(p)] if isinstance(row, list) else row[p]
    row[parts[-1]] = value
    return rows


@pytest.mark.parametrize("value, phrase", [
    ("yes", "must be a number, got 'yes'"),
    ("1", "must be a number, got '1'"),
    ([1], "must be a number"),
    ({"a": 1}, "must be a number"),
])
def test_a_label_that_is_not_a_number_names_file_line_and_field(make_run, value, phrase):
    cfg = make_run(_with(demo_rows()[:24], 4, "labels.sat", value))
    out = check_fails(cfg, "ex.jsonl", "line 5", "labels.sat", phrase, "[data.mapping]")
    assert "Traceback" not in out


def test_a_string_label_in_a_csv_names_line_and_column(make_run):
    rows = [f'e{i},"USER: hi {i}",{i % 2}' for i in range(12)]
    rows[6] = 'e6,"USER: hi 6",yes'
    data = "id,text,sat\n" + "\n".join(rows) + "\n"
    cfg = make_run(raw=data.encode(), data_name="ex.csv", run__limit="12", generate__method='"none"',
                   calibrate__enabled="false")
    check_fails(cfg, "ex.csv", "line 8", "'sat'", "must be a number, got 'yes'")


@pytest.mark.parametrize("where", ["labels.sat", "judgments.0.labels.satisfaction"])
def test_nan_label_names_file_line_and_field(make_run, tmp_path, where):
    rows = demo_rows()[:24]
    data = tmp_path / "ex.jsonl"
    lines = [json.dumps(r) for r in rows]
    row = json.loads(lines[6])
    _with([row], 0, where, "__NAN__")
    lines[6] = json.dumps(row).replace('"__NAN__"', "NaN")
    cfg = make_run(raw=("\n".join(lines) + "\n").encode())
    field = "labels.sat" if where == "labels.sat" else "judgments[0].labels.satisfaction"
    check_fails(cfg, str(data), "line 7", field, "finite number")


def test_null_in_the_learned_label_names_line_and_field(make_run):
    cfg = make_run(_with(demo_rows()[:24], 2, "labels.sat", None))
    check_fails(cfg, "ex.jsonl", "line 3", "labels.sat", "null", "data.label")


def test_null_in_a_judgment_means_not_answered_and_passes(make_run):
    check_ok(make_run(_with(demo_rows()[:24], 2, "judgments.0.labels.satisfaction", None)))


def test_true_false_labels_read_as_1_0(make_run):
    rows = demo_rows()[:24]
    for r in rows:
        r["labels"]["sat"] = bool(r["labels"]["sat"])
    check_ok(make_run(rows))


def test_a_rating_outside_the_declared_scale_names_line_and_allowed_values(make_run):
    rows = _with(demo_rows()[:24], 9, "judgments.1.labels.satisfaction", 99)
    cfg = make_run(rows, data__scales="{ satisfaction = [1, 5] }")
    check_fails(cfg, "ex.jsonl", "line 10", "judgments[1].labels.satisfaction", "99", "[1, 5]")
    check_ok(make_run(_with(demo_rows()[:24], 9, "judgments.1.labels.satisfaction", 4),
                      data__scales="{ satisfaction = [1, 5] }"))


def test_a_lone_far_out_rating_without_a_declared_scale_is_warned_about(make_run):
    """Without a scale a 99 is an answer like any other (it would become a calibration class of its
    own); --check says so and how to declare the range."""
    from rubric_induce.pipeline import load_config
    from rubric_induce.pipeline.context import RunContext

    rows = demo_rows()[:24]
    cfg = make_run(rows)
    out = check_ok(cfg)
    assert "warning" not in out
    first_train = RunContext(load_config(cfg), cfg.parent / "run").train[0].id
    i = next(k for k, r in enumerate(rows) if r["id"] == first_train)
    out = check_ok(make_run(_with(rows, i, "judgments.1.labels.satisfaction", 99)))
    assert "warning: answer 99 to 'satisfaction' appears once" in out and "[data] scales" in out


def test_a_declared_scale_for_an_unknown_label_suggests_the_closest(make_run):
    cfg = make_run(data__scales="{ satisfction = [1, 5] }")
    check_fails(cfg, "data.scales.satisfction", "did you mean 'satisfaction'")


@pytest.mark.parametrize("scale", ["[5, 1]", "[1]", "['a', 'b']", "3"])
def test_a_malformed_scale_is_a_config_error(make_run, scale):
    check_fails(make_run(data__scales=f"{{ satisfaction = {scale} }}"), "cfg.toml", "data.scales")


# --------------------------------------------------------------------------------------------
# ids
# --------------------------------------------------------------------------------------------
def test_integer_ids_are_text_everywhere(make_run):
    rows = demo_rows()[:24]
    for i, r in enumerate(rows):
        r["id"] = 100 + i
    from rubric_induce.data import read_examples

    path = make_run(rows).parent / "ex.jsonl"
    assert [e.id for e in read_examples(path)][:2] == ["100", "101"]
    check_ok(path.parent / "cfg.toml")


@pytest.mark.slow
def test_a_run_with_integer_ids_completes_on_the_fake_backend(make_run, tmp_path):
    """Every stage, the 2-fold cross-validation by text and the adaptive model included, each trained
    as little as that takes (one adaptive member of 20 epochs; the default is 5 of 200)."""
    rows = demo_rows()[:24]
    for i, r in enumerate(rows):
        r["id"] = i
    cfg = make_run(rows, calibrate__cv_folds="2", calibrate__adaptive_options="{ epochs = 20, n_members = 1 }")
    rc, out = invoke("run", cfg, "--out", tmp_path / "run")
    assert rc == 0, out
    assert (tmp_path / "run" / "report.md").exists()


@pytest.mark.parametrize("value", [1.5, True, [1], {"a": 1}, ""])
def test_an_id_that_is_not_text_or_an_integer_names_line_and_field(make_run, value):
    check_fails(make_run(_with(demo_rows()[:24], 3, "id", value)), "line 4", "field 'id'")


def test_duplicate_ids_name_both_lines(make_run):
    rows = demo_rows()[:24]
    rows[7]["id"] = rows[2]["id"]
    check_fails(make_run(rows), "ex.jsonl", "line 8", "duplicate example id", "first on line 3")


def test_duplicate_ids_as_integer_and_string_are_the_same_id(make_run):
    rows = demo_rows()[:24]
    rows[2]["id"], rows[5]["id"] = 7, "7"
    check_fails(make_run(rows), "line 6", "duplicate example id '7'", "first on line 3")


# --------------------------------------------------------------------------------------------
# encodings
# --------------------------------------------------------------------------------------------
def test_a_utf8_bom_is_accepted_in_jsonl_csv_and_toml(make_run, tmp_path, fake_run_config):
    body = "".join(json.dumps(r) + "\n" for r in demo_rows()[:24]).encode("utf-8")
    cfg = make_run(raw=b"\xef\xbb\xbf" + body)
    check_ok(cfg)
    cfg.write_bytes(b"\xef\xbb\xbf" + cfg.read_bytes())
    check_ok(cfg)
    csv_text = "id,text,sat\n" + "".join(f'c{i},"USER: hi {i}",{i % 2}\n' for i in range(12))
    cfg = make_run(raw=b"\xef\xbb\xbf" + csv_text.encode(), data_name="ex.csv", run__limit="12",
                   generate__method='"none"', calibrate__enabled="false")
    check_ok(cfg)


def test_bytes_that_are_not_utf8_name_the_line(make_run):
    lines = ["".join(json.dumps(r)) for r in demo_rows()[:24]]
    raw = ("\n".join(lines[:5]) + "\n").encode() + lines[5].encode().replace(b"USER", b"US\xffER", 1) + b"\n"
    check_fails(make_run(raw=raw), "ex.jsonl", "line 6", "not UTF-8", "0xff")


def test_a_config_that_is_not_utf8_names_the_line(make_run):
    cfg = make_run()
    text = cfg.read_bytes().replace(b"seed = 0", b"seed = 0 # caf\xe9", 1)
    cfg.write_bytes(text)
    check_fails(cfg, "cfg.toml", "line 3", "not UTF-8")


@pytest.mark.parametrize("what", ["domain", "include"])
def test_a_domain_or_rubric_file_that_is_not_utf8_fails_the_check(make_run, tmp_path, what):
    bad = tmp_path / ("domain.txt" if what == "domain" else "rubrics.jsonl")
    bad.write_bytes(b"caf\xe9\n" if what == "domain" else b'{"text": "caf\xe9"}\n')
    key = {"generate__domain": f'"@{bad}"'} if what == "domain" else {"generate__include": f'["{bad}"]'}
    check_fails(make_run(**key), "not UTF-8", "line 1")


def test_a_csv_that_is_not_utf8_names_the_line(make_run):
    raw = b"id,text,sat\n" + b"".join(f'c{i},"hi {i}",{i % 2}\n'.encode() for i in range(6)) + b'c9,"caf\xe9",1\n'
    cfg = make_run(raw=raw, data_name="ex.csv", run__limit="6", generate__method='"none"',
                   calibrate__enabled="false")
    check_fails(cfg, "ex.csv", "line 8", "not UTF-8")


# --------------------------------------------------------------------------------------------
# numeric parameters
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key, value, field", [
    ("evaluate__bootstrap", "-1", "evaluate.bootstrap"),
    ("probe__samples", "0", "probe.samples"),
    ("probe__temperature", "-0.5", "probe.temperature"),
    ("probe__temperature", "nan", "probe.temperature"),
    ("calibrate__options", "{ finetune_epochs = -20 }", "calibrate.options"),
    ("calibrate__options", "{ pretrain_epochs = -1 }", "calibrate.options"),
    ("calibrate__options", "{ patience = 0 }", "calibrate.options"),
    ("calibrate__options", "{ weight_decay = -1.0 }", "calibrate.options"),
    ("calibrate__options", "{ learning_rate = 0 }", "calibrate.options"),
    ("calibrate__options", "{ hidden = 'x' }", "calibrate.options"),
    ("run__test_size", "1.5", "run.test_size"),
    ("run__limit", "-3", "run.limit"),
    ("select__n_sat", "-1", "select.n_sat"),
    ("backend__spec", "'fake'\ntimeout = -1", "backend.timeout"),
    ("run__seed", "-1", "run.seed"),
    ("data__label_threshold", "inf", "data.label_threshold"),
    ("select__options", "{ alpha = -1.0 }", "select.options.alpha"),
    ("select__options", "{ cv = 1 }", "select.options.cv"),
    ("select__options", "{ cv_scoring = 'acuracy' }", "select.options.cv_scoring"),
    ("select__options", "{ alphas = [] }", "select.options.alphas"),
    ("select__options", "{ budgets = [[1]] }", "select.options.budgets"),
    ("select__options", "{ two_sided = 'yes' }", "select.options.two_sided"),
    ("dedup__borderline", "0.95", "dedup.borderline"),
    ("dedup__judge", "'opneai/x'", "dedup.judge"),
])
def test_a_bad_number_fails_the_check_naming_the_field(make_run, key, value, field):
    out = check_fails(make_run(**{key: value}), "cfg.toml", field)
    assert re.search(r"cfg\.toml, line \d+, field", out), out  # the line that sets it


@pytest.mark.slow
def test_bootstrap_0_means_no_intervals_and_the_run_finishes(make_run, tmp_path):
    cfg = make_run(evaluate__bootstrap="0")
    check_ok(cfg)
    rc, out = invoke("run", cfg, "--out", tmp_path / "run")
    assert rc == 0, out
    assert (tmp_path / "run" / "evaluation.json").exists()


# --------------------------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, hint", [
    ("'opneai/gpt-4o'", "did you mean 'openai'"),
    ("'lokal'", "did you mean 'local'"),
    ("'openai-compatable/m@http://x'", "did you mean 'openai-compatible'"),
    ("'openai/'", "backend.spec"),
    ("''", "backend.spec"),
])
def test_a_bad_backend_spec_fails_the_check_with_a_suggestion(make_run, spec, hint):
    check_fails(make_run(backend__spec=spec), "cfg.toml", "line ", "backend.spec", hint)


def test_a_bad_backend_on_the_command_line_fails_the_check(make_run):
    rc, out = invoke("run", make_run(), "--check", "--backend", "opneai/gpt-4o")
    assert rc == 2 and "did you mean 'openai'" in out


def test_a_mistyped_calibrate_question_fails_the_check_with_a_suggestion(make_run):
    check_fails(make_run(calibrate__question='"satisfction"'), "cfg.toml", "line ", "calibrate.question",
                "did you mean 'satisfaction'")


def test_a_mistyped_label_fails_the_check_with_a_suggestion(make_run):
    check_fails(make_run(data__label='"sta"'), "labels.sta", "did you mean 'sat'")


@pytest.mark.parametrize("key, value, field, hint", [
    ("data__fields", '["txt"]', "data.fields", "did you mean 'text'"),
    ("task__fields", '{ txt = "text" }', "task.fields", "did you mean 'text'"),
])
def test_a_field_the_examples_lack_fails_the_check_with_a_suggestion(make_run, key, value, field, hint):
    check_fails(make_run(**{key: value}), "cfg.toml", "line ", field, hint)


# --------------------------------------------------------------------------------------------
# --check runs exactly the pre-LLM checks of a run
# --------------------------------------------------------------------------------------------
def test_check_and_run_refuse_the_same_input_before_any_llm_call(make_run, tmp_path, monkeypatch):
    from rubric_induce.backends.fake import FakeBackend

    calls = []
    for name in ("chat", "answer_logprobs"):
        orig = getattr(FakeBackend, name)
        monkeypatch.setattr(FakeBackend, name, lambda self, *a, _o=orig, **k: calls.append(1) or _o(self, *a, **k))
    cfg = make_run(calibrate__question='"satisfction"')
    check_fails(cfg, "calibrate.question")
    rc, out = invoke("run", cfg, "--out", tmp_path / "run")
    assert rc == 2 and "calibrate.question" in out and not calls


# --------------------------------------------------------------------------------------------
# judges
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, fake_run_config):
    tmp = tmp_path_factory.mktemp("judges")
    rows = demo_rows()[:24]
    for i in range(6):  # one judge seen once per text: some of these texts land in the training split
        rows[i]["judgments"].append({"judge": f"once-{i}", "labels": {"satisfaction": 4.0}})
    data = tmp / "ex.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = tmp / "cfg.toml"
    cfg.write_text(fake_run_config.replace(f'"{DEMO}"', f'"{data}"'), encoding="utf-8")
    rc, out = invoke("run", cfg, "--out", tmp / "run", "--stop-after", "artifact")
    assert rc == 0, out
    return tmp / "run", out


@pytest.mark.slow
def test_a_judge_seen_once_is_warned_about_at_calibrate_time(finished_run):
    out_dir, out = finished_run
    marker = json.loads((out_dir / "stages" / "calibrate.json").read_text())
    few = marker["summary"]["few_ratings"]
    once = {j: n for j, n in few.items() if j.startswith("once-")}
    assert once and set(once.values()) == {1} and all(n < 3 for n in few.values())
    assert "warning:" in out and f"{next(iter(once))} (1 rating)" in out and "judge 'shared'" in out


@pytest.mark.slow
def test_score_refuses_an_unknown_judge_unless_shared_weights_are_asked_for(finished_run):
    out_dir, _ = finished_run
    probes = out_dir / "probes.jsonl"
    rc, out = invoke("score", out_dir, "--probes", probes, "--judge", "anotator1")
    assert rc == 2 and "anotator1" in out and "did you mean 'annotator1'" in out and "--judge shared" in out
    rc, out = invoke("score", out_dir, "--probes", probes, "--judge", "shared")
    assert rc == 0, out
    first = json.loads(out.splitlines()[0])
    assert first["prediction"] is not None
    rc, out = invoke("score", out_dir, "--probes", probes, "--judge", "annotator1")
    assert rc == 0, out


@pytest.mark.slow
def test_the_scorer_api_has_the_same_rule(finished_run):
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.scoring.scorer import RubricScorer

    out_dir, _ = finished_run
    scorer = RubricScorer.load(out_dir, backend=None)
    table = ProbeTable.load(out_dir / "probes.jsonl")
    ids = sorted({r.example_id for r in table.records})[:3]
    with pytest.raises(DataError, match="did you mean 'annotator1'"):
        scorer.score_probes(table, ids, judge="anotator1")
    with pytest.raises(DataError, match="annotator9"):
        scorer.score_probes(table, ids, judge=["annotator1", "annotator9"])
    shared = scorer.score_probes(table, ids, judge="shared")
    allowed = scorer.score_probes(table, ids, judge="annotator9", unseen_judge="shared")
    assert [r.prediction for r in shared] == [r.prediction for r in allowed]


# --------------------------------------------------------------------------------------------
# damaged files: cache, calibrator weights
# --------------------------------------------------------------------------------------------
def test_a_damaged_cache_file_is_a_clean_error_naming_it_and_the_fix(tmp_path):
    from rubric_induce.backends.cache import CallCache

    bad = tmp_path / "llm_calls.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RubricInduceError) as info:
        CallCache(bad)
    msg = str(info.value)
    assert str(bad) in msg and "damaged" in msg and "delete it" in msg and "[backend] cache" in msg


def test_a_truncated_cache_file_is_a_clean_error(tmp_path):
    from rubric_induce.backends.cache import CachedBackend, CallCache
    from rubric_induce.backends.fake import FakeBackend

    path = tmp_path / "c.sqlite"
    cache = CallCache(path)
    backend = CachedBackend(FakeBackend(), cache)
    for i in range(50):
        backend.chat([{"role": "user", "content": f"hello {i} " * 50}])
    cache.close()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\x00" * 50 + data[150:len(data) // 2])
    with pytest.raises(RubricInduceError, match="damaged"):
        c = CallCache(path)
        try:
            for i in range(50):
                CachedBackend(FakeBackend(), c).chat([{"role": "user", "content": f"hello {i} " * 50}])
        finally:
            c.close()


def test_a_cache_row_of_bad_json_is_a_miss_with_one_warning(tmp_path):
    from rubric_induce.backends.cache import CachedBackend, CallCache
    from rubric_induce.backends.fake import FakeBackend

    path = tmp_path / "c.sqlite"
    backend = CachedBackend(FakeBackend(), CallCache(path))
    msgs = [{"role": "user", "content": "hello"}]
    first = backend.chat(msgs)
    backend.cache.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE calls SET response = '{not json'")
    again = CachedBackend(FakeBackend(), CallCache(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = again.chat(msgs)
        third = again.chat(msgs)  # the re-call replaced the damaged row
    assert second.text == first.text == third.text
    assert again.tally.calls == 1 and again.tally.cache_hits == 1
    damaged = [w for w in caught if "damaged" in str(w.message)]
    assert len(damaged) == 1 and str(path) in str(damaged[0].message)
    again.cache.close()


def test_run_with_a_damaged_cache_exits_2_without_traceback(make_run, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "llm_calls.sqlite").write_bytes(b"garbage" * 1000)
    rc, text = invoke("run", make_run(), "--out", out)
    assert rc == 2 and "damaged" in text and "llm_calls.sqlite" in text


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_weights_file_is_a_clean_error_naming_it(finished_run, tmp_path, damage):
    import shutil

    from rubric_induce.calibration.artifacts import load_calibrator

    src, _ = finished_run
    folder = tmp_path / "cal"
    shutil.copytree(src / "calibration", folder)
    weights = next(folder.glob("weights.*"))
    data = weights.read_bytes()
    weights.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x07" * 64, "empty": b""}[damage])
    with pytest.raises(DataError) as info:
        load_calibrator(folder)
    assert str(weights) in str(info.value) and "damaged" in str(info.value)
    rc, out = invoke("score", folder, "--probes", src / "probes.jsonl")
    assert rc == 2 and weights.name in out


@pytest.mark.slow
def test_score_input_with_a_bom_is_read_and_bad_bytes_name_the_line(finished_run, tmp_path):
    out_dir, _ = finished_run
    good = tmp_path / "new.jsonl"
    good.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": 7, "text": "USER: hi\nSYSTEM: hello"}).encode() + b"\n")
    rc, out = invoke("score", out_dir, "--input", good, "--judge", "shared")
    assert rc == 0, out
    assert json.loads(out.splitlines()[-1])["id"] == "7"
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(good.read_bytes() + b'{"id": "x", "text": "caf\xe9"}\n')
    rc, out = invoke("score", out_dir, "--input", bad)
    assert rc == 2 and "bad.jsonl, line 2" in out and "not UTF-8" in out
    rc, out = invoke("score", out_dir, "--input", good, "--judge", "anotator1")
    assert rc == 2 and "did you mean 'annotator1'" in out


# --------------------------------------------------------------------------------------------
# issue 40: the field the user got wrong, and the closest full dotted path
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, hint", [("Pairwise", "did you mean 'pairwise'?"), ("PAIRWISE", "in lower case"),
                                        ("pairwse", "did you mean 'pairwise'?")])
def test_a_misspelt_data_kind_next_to_a_pair_mapping_names_data_kind(make_run, kind, hint):
    """`kind = "Pairwise"` beside a `[data.mapping]` pair table reported `data.mapping.layout` (the mapping was
    read as a pointwise one first); the error is the kind's, with the spelling that works."""
    cfg = make_run(data__kind=f'"{kind}"')
    cfg.write_text(cfg.read_text(encoding="utf-8") + '\n[data.mapping]\nlayout = "ab"\n', encoding="utf-8")
    out = check_fails(cfg, "field 'data.kind'", f"unknown value '{kind}'", hint)
    assert "data.mapping" not in out


def test_a_misspelt_dotted_label_path_suggests_the_full_path(tmp_path):
    """`scores.overal` in a JSON array with nested scores suggested `scores`; now `scores.overall`."""
    rows = [{"mr": f"name[Hotel {i}]", "scores": {"overall": 1 + i % 5, "naturalness": 3, "informativeness": 4}}
            for i in range(8)]
    data = tmp_path / "hotels.json"
    data.write_text(json.dumps(rows), encoding="utf-8")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[task]\ndescription = "hotel descriptions"\n[data]\nexamples = "{data.as_posix()}"\n'
                   'label = "quality"\n[data.mapping]\ntext = ["mr"]\nlabels = {quality = "scores.overal"}\n',
                   encoding="utf-8")
    check_fails(cfg, str(data), "field 'scores.overal'", "did you mean 'scores.overall'?")
