"""Packed probing (issue 35): the answer-position parser on tricky replies, the probe stage end to end on
the fake backend, resume, the call cache, plans and batch files."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from rubric_induce.backends.base import TokenLogprob
from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import DataError
from rubric_induce.probing.api import ProbeParams, probe
from rubric_induce.probing.calls import probe_calls
from rubric_induce.probing.packed import pack_groups, pack_order, parse_packed_text, parse_packed_tokens
from rubric_induce.probing.plan import plan_probes

LIK = [str(i) for i in range(1, 6)]


def _toks(*pieces, top=None):
    """Tokens of a reply; ``top`` maps a token's index to its top alternatives {text: prob}."""
    top = top or {}
    return [TokenLogprob(p, math.log(0.9), {t: math.log(v) for t, v in top[i].items()} if i in top else {})
            for i, p in enumerate(pieces)]


def _argmax(ans, labels=LIK):
    return labels[max(range(len(labels)), key=lambda i: ans.raw[i])]


def test_answers_out_of_order_are_matched_by_label():
    toks = _toks("R2", ":", " 4", "\n", "R1", ":", " 2", top={2: {" 4": 0.7, " 5": 0.2}, 6: {" 2": 0.6, " 1": 0.3}})
    a1, a2 = parse_packed_tokens(toks, [LIK, LIK])
    assert a1.raw == pytest.approx([0.3, 0.6, 0, 0, 0]) and a2.raw == pytest.approx([0, 0, 0, 0.7, 0.2])


def test_a_missing_line_is_a_failed_probe_of_that_rubric_only():
    toks = _toks("R1", ":", " 3", "\n", "R3", ":", " 5")
    a1, a2, a3 = parse_packed_tokens(toks, [LIK, LIK, LIK])
    assert _argmax(a1) == "3" and _argmax(a3) == "5"
    assert a2.raw is None and "R2:" in a2.error


def test_extra_text_and_digits_before_the_answer_never_count():
    # a preamble with digits, a digit in the echoed question, markdown: only the labelled lines count
    text = "Here are my 2 answers for question 1:\nR1 (rated 1 to 5): see below\n**R1:** 4\nR2: Yes, 3 times\n"
    # "R2: Yes, 3 times": the answer position holds "Yes"; the text parser reads it as the token parser does
    assert parse_packed_text(text, [LIK, ["Yes", "No"]]) == ["4", "Yes"]
    toks = _toks("Sure", " 1", ".", "\n", "R", "1", ":", " ", "4", "\n", "R2", ":", " Yes", ",", " 3",
                 top={8: {"4": 0.5, "2": 0.25}, 12: {" Yes": 0.8, " No": 0.1}})
    a1, a2 = parse_packed_tokens(toks, [LIK, ["Yes", "No"]])
    assert a1.raw == pytest.approx([0, 0.25, 0, 0.5, 0]) and a2.raw == pytest.approx([0.8, 0.1])


def test_a_label_split_over_tokens_and_fused_with_the_answer():
    toks = _toks("R", "1", ": 4", "\n", "R", "2", ":", "3", top={2: {": 4": 0.5, ":4": 0.2, ": 5": 0.1},
                                                               7: {"3": 0.9}})
    a1, a2 = parse_packed_tokens(toks, [LIK, LIK])
    assert a1.raw == pytest.approx([0, 0, 0, 0.7, 0.1]) and a2.raw == pytest.approx([0, 0, 0.9, 0, 0])
    assert a1.bound == pytest.approx(0.1)


def test_r1_is_not_r10_and_an_empty_line_is_no_answer():
    toks = _toks(*"R10: 2\nR1:\nR2: 5".replace("\n", " \n ").split(" "))
    text = "R10: 2\nR1:\nR2: 5"
    got = parse_packed_text(text, [LIK] * 10)
    assert got[0] is None and got[1] == "5" and got[9] == "2"
    a = parse_packed_tokens(_toks("R1", ":", "\n", "R2", ":", " 5"), [LIK, LIK])
    assert a[0].raw is None and "no answer" in a[0].error
    assert toks  # the split above is only for the eye


def test_order_is_seeded_per_text_and_groups_cover_every_rubric():
    assert pack_order("ex1", 10, 0) == pack_order("ex1", 10, 0)
    assert pack_order("ex1", 10, 0) != pack_order("ex2", 10, 0) or pack_order("ex1", 10, 1) != pack_order("ex1", 10, 0)
    groups = pack_groups("ex1", 10, 3, 4)
    assert [len(g) for g in groups] == [4, 3, 3] and sorted(sum(groups, [])) == list(range(10))
    assert pack_groups("ex1", 5, 3, None) == [pack_order("ex1", 5, 3)]


def test_params_refuse_packing_with_sampling_or_another_style():
    with pytest.raises(DataError, match="probe.packing"):
        ProbeParams(packing="packed", estimator="sampling")
    with pytest.raises(DataError, match="probe.packing"):
        ProbeParams(packing="packed", style="analyze-rate")
    assert ProbeParams().packing == "independent"


def test_packed_run_on_the_fake_backend(examples, rubrics):
    be = FakeBackend()
    table = probe(examples, rubrics, be, ProbeParams(packing="packed"), seed=7)
    assert len(be.calls) == len(examples)  # one call per text
    assert [(r.example_id, r.rubric_id) for r in table.records] == [(e.id, r.id) for e in examples for r in rubrics]
    assert all(r.ok for r in table.records) and table.meta["packing"]["mode"] == "packed"
    for ex in examples:
        recs = [r for r in table.records if r.example_id == ex.id]
        order = pack_order(ex.id, len(rubrics), 7)
        assert [recs[i].pack_position for i in order] == list(range(len(rubrics)))
        assert {r.pack_size for r in recs} == {len(rubrics)} and {r.pack_seed for r in recs} == {7}
    # the record round-trips through JSON with its pack fields
    rec = table.records[0]
    again = type(rec).from_dict(json.loads(json.dumps(rec.to_dict())))
    assert (again.pack_position, again.pack_size, again.pack_seed) == (rec.pack_position, rec.pack_size, 7)
    # pack_size splits each text's rubrics over several calls
    be2 = FakeBackend()
    probe(examples, rubrics, be2, ProbeParams(packing="packed", pack_size=2))
    assert len(be2.calls) == 2 * len(examples)


def test_a_reply_missing_a_line_fails_that_rubric_and_is_recorded(examples, rubrics):
    be = FakeBackend(replies=lambda messages, **kw: "R1: 4\nR3: 2")
    table = probe(examples[:1], rubrics, be, ProbeParams(packing="packed"))
    by_pos = {r.pack_position: r for r in table.records}
    assert by_pos[0].ok and by_pos[2].ok and not by_pos[1].ok and "R2:" in by_pos[1].error
    assert not by_pos[1].call_failed and by_pos[0].probs[3] == pytest.approx(1.0)


def test_resume_and_the_call_cache(tmp_path, examples, rubrics):
    params = ProbeParams(packing="packed")
    first = probe(examples, rubrics, CachedBackend(FakeBackend(), CallCache(tmp_path / "c.sqlite")), params)
    cached = CachedBackend(FakeBackend(), CallCache(tmp_path / "c.sqlite"))
    again = probe(examples, rubrics, cached, params)
    assert cached.tally.calls == 0 and [r.to_dict() for r in again.records] == [r.to_dict() for r in first.records]
    # records already done are kept; only the texts with a missing record are asked again
    be = FakeBackend()
    keep = [r for r in first.records if r.example_id != examples[0].id]
    resumed = probe(examples, rubrics, be, params, done=keep)
    assert len(be.calls) == 1 and resumed.meta["reused"] == len(keep)
    assert [r.to_dict() for r in resumed.records] == [r.to_dict() for r in first.records]


def test_calls_and_plan_price_packed_calls(examples, rubrics):
    be = FakeBackend()
    params = ProbeParams(packing="packed")
    calls = probe_calls(examples, rubrics, be, params)
    assert len(calls) == len(examples) and all(c.method == "chat" and c.options.top_logprobs == 20 for c in calls)
    assert calls[0].extra["rubric_ids"] and calls[0].rubric_id == "+".join(calls[0].extra["rubric_ids"])
    # the keys are those of the live calls: a cached run answers from them
    probe(examples, rubrics, be, params)
    assert [c[1]["messages"] for c in be.calls] == [c.messages for c in calls]
    plan = plan_probes(examples, rubrics, be, params)
    assert plan.calls == len(examples)
    assert plan.alternative["packing"] == "independent" and plan.alternative["calls"] == len(examples) * len(rubrics)
    assert plan.alternative["prompt_tokens"] > plan.prompt_tokens
    assert "independent" in plan.format()


def test_batch_round_trip_with_packed_calls(tmp_path, examples, rubrics):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "batch"))
    from _engine import Engine, backend  # noqa: E402

    from rubric_induce.batch.export import export_batch, ingest_results

    def packed_completion(body):
        """A packed reply to ``body``: every question answered '3' (top: 3, 4), as one token per piece."""
        from rubric_induce.backends.fake import _packed_questions

        qs = _packed_questions(body["messages"][-1]["content"])
        content, toks = "", []
        for j, (n, _labels) in enumerate(qs):
            for piece in (f"R{n}", ":", " 3") + (("\n",) if j < len(qs) - 1 else ()):
                top = [{"token": " 3", "logprob": math.log(0.6), "bytes": None},
                       {"token": " 4", "logprob": math.log(0.3), "bytes": None}] if piece == " 3" else \
                    [{"token": piece, "logprob": -0.01, "bytes": None}]
                toks.append({"token": piece, "logprob": top[0]["logprob"], "bytes": None, "top_logprobs": top})
                content += piece
        return {"id": "chatcmpl-p", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content},
                             "logprobs": {"content": toks}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": len(toks), "total_tokens": 100 + len(toks)}}

    params = ProbeParams(packing="packed")
    cache = CallCache(tmp_path / "c.sqlite")
    be = CachedBackend(backend(Engine(), base_url=None), cache)
    export = export_batch(probe_calls(examples, rubrics, be, params), be, tmp_path / "b")
    assert export.exported == len(examples)  # one request line per text
    out = tmp_path / "out.jsonl"
    with open(out, "w") as fh:
        for line in export.files[0].read_text().splitlines():
            req = json.loads(line)
            assert req["body"]["top_logprobs"] == 20 and req["body"]["logprobs"] is True
            fh.write(json.dumps({"custom_id": req["custom_id"], "error": None,
                                 "response": {"status_code": 200, "body": packed_completion(req["body"])}}) + "\n")
    assert ingest_results([out], tmp_path / "b", cache).ingested == len(examples)
    refusing = CachedBackend(backend(Engine(refuse=True), base_url=None), cache)
    table = probe(examples, rubrics, refusing, params)  # every record comes from the ingested replies
    assert refusing.tally.calls == 0 and len(table.records) == len(examples) * len(rubrics)
    assert all(r.ok and r.probs[2] == pytest.approx(2 / 3) and r.is_bounded for r in table.records)


@pytest.mark.slow  # a whole run, then score and probe through the CLI: about 5 s
def test_run_score_and_probe_cli_with_packed_probing(tmp_path, fake_run_config, examples, rubrics):
    """``run`` with probe.packing = "packed" on the fake backend, then ``score`` of new texts through the
    artifact (which carries the packing), then the ``probe`` command's --packing option."""
    from click.testing import CliRunner

    from rubric_induce.cli import cli
    from rubric_induce.data.model import RubricPool
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.pipeline import run_pipeline
    from rubric_induce.scoring.scorer import RubricScorer

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fake_run_config + '\n[probe]\npacking = "packed"\npack_size = 4\n\n[evaluate]\nbootstrap = 10\n',
                   encoding="utf-8")
    run_pipeline(cfg, out=tmp_path / "run", echo=lambda m: None, stop_after="artifact")
    table = ProbeTable.load(tmp_path / "run" / "probes.jsonl")
    assert table.meta["packing"] == {"mode": "packed", "pack_size": 4, "seed": 0}
    assert all(r.pack_size is not None and r.pack_size <= 4 for r in table.records)
    assert sum(r.ok for r in table.records) == len(table.records)
    doc = json.loads((tmp_path / "run" / "artifact.json").read_text())
    assert doc["probe"]["packing"] == "packed" and doc["probe"]["pack_size"] == 4
    fake = FakeBackend()
    scorer = RubricScorer.load(tmp_path / "run", backend=fake)
    results = scorer.score(["USER: a table for two\nSYSTEM: booked.", "USER: hi\nSYSTEM: what?"])
    assert len(results) == 2 and all(len(r.distributions) == len(scorer.rubrics) for r in results)
    assert all(c[0] == "chat" and c[1]["top_logprobs"] == 20 for c in fake.calls)  # packed calls
    assert len(fake.calls) == 2 * math.ceil(len(scorer.rubrics) / 4)
    # the probe command
    ex_file = tmp_path / "ex.jsonl"
    ex_file.write_text("".join(json.dumps({"id": e.id, "text": e.fields["text"]}) + "\n" for e in examples))
    RubricPool(rubrics).save(tmp_path / "pool.jsonl")
    res = CliRunner().invoke(cli, ["probe", "--examples", str(ex_file), "--rubrics", str(tmp_path / "pool.jsonl"),
                                   "--backend", "fake", "--packing", "packed", "--no-cache",
                                   "--out", str(tmp_path / "p.jsonl")])
    assert res.exit_code == 0, res.output
    out = ProbeTable.load(tmp_path / "p.jsonl")
    assert len(out.records) == len(examples) * len(rubrics) and all(r.pack_size == 3 for r in out.records)


def test_a_line_starting_with_a_word_is_bounded_not_read_further(examples, rubrics):
    # "R1: The answer is 4": the answer position holds "The"; the 4 later on the line never counts
    be = FakeBackend(replies=lambda messages, **kw: "R1: The answer is 4\nR2: 3\nR3: 5")
    by_pos = {r.pack_position: r for r in probe(examples[:1], rubrics, be, ProbeParams(packing="packed")).records}
    assert by_pos[0].is_bounded and by_pos[0].probs == pytest.approx([0.2] * 5)
    assert by_pos[1].probs[2] == pytest.approx(1.0) and by_pos[1].bounded == ["1", "2", "4", "5"]


def test_a_reply_out_of_order_with_a_missing_line_and_extra_text_all_at_once(examples, rubrics):
    """One reply with every trick: a preamble holding digits, lines out of order, commentary after an
    answer, a repeated label (the last line counts), a label beyond the list, a missing line, and a
    closing remark naming the missing label mid-sentence (not a line of its own)."""
    reply = ("Sure! Here are my ratings on the 1-5 scale:\n"
             "R3: 2 - the system repeated itself 3 times\n"
             "R1: 5\n\n"
             "R1: 1\n"
             "R9: 4\n"
             "Thanks. R2: hard to say, so 3 is my guess\n")
    be = FakeBackend(replies=lambda messages, **kw: reply)
    table = probe(examples[:1], rubrics, be, ProbeParams(packing="packed"))
    by_pos = {r.pack_position: r for r in table.records}
    assert by_pos[2].ok and by_pos[2].probs == pytest.approx([0, 1, 0, 0, 0])  # R3: 2, not the 3 after it
    assert by_pos[0].ok and by_pos[0].probs == pytest.approx([1, 0, 0, 0, 0])  # the last R1 line wins
    assert not by_pos[1].ok and "'R2:'" in by_pos[1].error  # "R2:" mid-line is no answer line
    assert table.n_errors == 1 and len(be.calls) == 1
    # the text parser reads the same lines
    assert parse_packed_text(reply, [LIK] * 3) == ["1", None, "2"]


def test_answers_read_with_trailing_punctuation_and_a_final_line_without_newline():
    toks = _toks("R2", ":", " 5", ".", " Because", "\n", "R1", ":", " **", "3", "**",
                 top={2: {" 5": 0.5, " 4": 0.4}, 9: {"3": 0.6, "2": 0.3}})
    a1, a2 = parse_packed_tokens(toks, [LIK, LIK])
    assert a1.raw == pytest.approx([0, 0.3, 0.6, 0, 0]) and a2.raw == pytest.approx([0, 0, 0, 0.4, 0.5])
    assert parse_packed_text("R2: 5. Because\nR1: **3**", [LIK, LIK]) == ["3", "5"]


def test_the_reply_shape_shown_suggests_no_answer_by_default_and_can_be_replaced(examples, rubrics):
    """The default shape names two labels with an ``<answer>`` placeholder and ``...`` (no answer value
    that a model could copy); ``format_example`` replaces it in the prompt, and only there."""
    from rubric_induce.probing.packed import build_packed_messages, default_format_example

    assert default_format_example(1) == "R1: <answer>"
    assert default_format_example(5) == "R1: <answer>\nR2: <answer>\n..."
    phrases = ["a number"] * len(rubrics)
    default, _ = build_packed_messages(examples[0], rubrics, phrases)
    assert "R1: <answer>\nR2: <answer>\n...\nWrite nothing else." in default[-1]["content"]
    shape = "\n".join(f"R{i + 1}: 3" for i in range(len(rubrics)))
    custom, _ = build_packed_messages(examples[0], rubrics, phrases, format_example=shape)
    assert shape + "\nWrite nothing else." in custom[-1]["content"] and "<answer>" not in custom[-1]["content"]
    assert custom[-1]["content"].replace(shape, "") == default[-1]["content"].replace(default_format_example(
        len(rubrics)), "")


# ----------------------------------------------------------------------------- issue 40, A2 and A8
def test_a_reply_without_alternatives_is_bounded_by_the_chosen_token_not_certain(examples, rubrics):
    """A reply whose tokens list no ``top_logprobs`` (``R1: 4`` and nothing else known) is read as the
    independent probe reads one: the chosen token's probability is listed, every other answer is
    bounded by it; it is never a certain [0, 0, 0, 1, 0] with no bound."""
    a1, = parse_packed_tokens(_toks("R1", ":", " 4"), [LIK])
    assert a1.raw == pytest.approx([0, 0, 0, 0.9, 0]) and a1.bound == pytest.approx(0.9)

    class NoAlternatives(FakeBackend):
        def chat(self, messages, options=None):
            reply = super().chat(messages, options)
            reply.tokens = [TokenLogprob(t.token, t.logprob, {}) for t in reply.tokens]
            return reply

    table = probe(examples[:1], rubrics, NoAlternatives(replies=lambda m, **kw: "R1: 4\nR2: 2\nR3: 5"),
                  ProbeParams(packing="packed"))
    by_pos = {r.pack_position: r for r in table.records}
    assert by_pos[0].is_bounded and by_pos[0].bound == pytest.approx(0.9)
    assert by_pos[0].bounded == ["1", "2", "3", "5"] and by_pos[0].raw[3] == pytest.approx(0.9)
    # the analyze-rate reader (answers read from generated tokens) bounds them the same way
    from rubric_induce.backends.base import listed_alternatives

    assert listed_alternatives(" 4", math.log(0.9), {}) == ({" 4": math.log(0.9)}, math.log(0.9))


def test_an_echo_before_the_answers_never_wins():
    """The last line of each label counts: an echo of the reply shape, or of example answers, before the
    real answers is read past; the token and the text reader agree."""
    text = "R1: 5\nR2: 5\n\nMy answers:\nR1: 2\nR2: 4"
    assert parse_packed_text(text, [LIK, LIK]) == ["2", "4"]
    pieces = "R1|:| 5|\n|R2|:| 5|\n|\n|My| answers|:|\n|R1|:| 2|\n|R2|:| 4".split("|")
    toks = _toks(*pieces, top={2: {" 5": 0.9}, 6: {" 5": 0.9}, 15: {" 2": 0.7, " 3": 0.2}, 19: {" 4": 0.8}})
    a1, a2 = parse_packed_tokens(toks, [LIK, LIK])
    assert a1.raw == pytest.approx([0, 0.7, 0.2, 0, 0]) and a2.raw == pytest.approx([0, 0, 0, 0.8, 0])
    # the placeholder shape echoed first: no answer there, the answers after it are read
    assert parse_packed_text("R1: <answer>\nR2: <answer>\n...\nR1: 3\nR2: 1", [LIK, LIK]) == ["3", "1"]


def test_45_is_no_answer_on_a_1_to_5_scale_for_either_reader():
    """``R1: 45`` (the digits as two tokens) is not a confident 4: the chosen token is the start of an
    answer the scale does not have, as the text reader says; other listed alternatives still count."""
    assert parse_packed_text("R1: 45\nR2: 4.", [LIK, LIK]) == [None, "4"]
    toks = _toks("R1", ":", " 4", "5", "\n", "R2", ":", " 4", ".", top={2: {" 4": 0.6, " 3": 0.3}, 7: {" 4": 0.8}})
    a1, a2 = parse_packed_tokens(toks, [LIK, LIK])
    assert a1.raw == pytest.approx([0, 0, 0.3, 0, 0]) and a1.bound == pytest.approx(0.3)
    assert a2.raw == pytest.approx([0, 0, 0, 0.8, 0])
    # with nothing else listed no answer is read: uniform below the bound, as for a line starting with a word
    lone = parse_packed_tokens(_toks("R1", ":", " 4", "5", top={2: {" 4": 0.9}}), [LIK])[0]
    assert lone.raw == [0, 0, 0, 0, 0] and lone.bound == pytest.approx(0.9)
    # a ten-point scale still reads "10" written as "1" + "0" as 10
    ten = [str(i) for i in range(1, 11)]
    a, = parse_packed_tokens(_toks("R1", ":", " 1", "0", top={2: {" 1": 0.5, " 2": 0.4}}), [ten])
    assert a.raw[9] == pytest.approx(0.5) and a.raw[0] == 0 and a.raw[1] == pytest.approx(0.4)


def test_export_inspect_refuses_a_packed_run_up_front(tmp_path, rubrics):
    """An inspect scorer asks one rubric a call: ``export --format inspect`` of a packed run is exit 2 with
    one line saying why and what to use, and writes nothing (it used to exit 0 and fail in the eval)."""
    from click.testing import CliRunner

    from rubric_induce.cli import cli
    from rubric_induce.data.model import RubricPool
    from rubric_induce.scoring.artifact import write_artifact

    RubricPool(rubrics).save(tmp_path / "selected.jsonl")
    write_artifact(tmp_path, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only", "packing": "packed"}, fields=["text"],
                   backend="fake", calibration=None, question=None)
    out = tmp_path / "scorer.py"
    res = CliRunner().invoke(cli, ["export", str(tmp_path), "--format", "inspect", "--out", str(out)])
    assert res.exit_code == 2, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "packed" in errors[0] and "rubric-induce score" in errors[0], res.output
    assert not out.exists()
    # an independent run exports as before
    write_artifact(tmp_path, rubrics="selected.jsonl", threshold=0.0, label="sat", label_threshold=None,
                   score_mode="expected", probe={"style": "score-only"}, fields=["text"], backend="fake",
                   calibration=None, question=None)
    res = CliRunner().invoke(cli, ["export", str(tmp_path), "--format", "inspect", "--out", str(out)])
    assert res.exit_code == 0, res.output


def test_damaged_tokens_and_a_5000_digit_label_are_read_without_a_crash():
    """The readers themselves never raise on what a damaged reply holds (issue 40, A1): a token that is
    not text fails every question of the reply; ``R<5000 digits>:`` is no label (Python refuses to read
    an integer of over 4,300 digits), so the lines after it are read."""
    bad = [TokenLogprob("R1", -0.1, {}), TokenLogprob(None, -0.1, {}), TokenLogprob(" 4", -0.1, {None: -0.1})]
    answers = parse_packed_tokens(bad, [LIK, LIK])  # type: ignore[arg-type]
    assert all(a.raw is None and "damaged packed reply" in a.error for a in answers)
    huge = "R" + "7" * 5000
    assert parse_packed_text(f"{huge}: 5\nR1: 2", [LIK]) == ["2"]
    a, = parse_packed_tokens(_toks(huge, ":", " 5", "\n", "R1", ":", " 2"), [LIK])
    assert a.raw == pytest.approx([0, 0.9, 0, 0, 0])
