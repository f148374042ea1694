"""The pairwise probe (issue 33, item 3): each rubric asked which response meets it better, in both orders.

A fake backend scripted with a position bias (it favours whatever response is shown first) shows the
bias in the consistency figures and loses it in the averaged preference feature; the records carry
their order, and resume, the call cache, the plan and batch files handle them like any other probe.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.backends.fake import FakeBackend
from rubric_induce.core.errors import DataError
from rubric_induce.data.model import Rubric
from rubric_induce.data.pair_examples import order_examples, pair_examples
from rubric_induce.data.pairs import Pair
from rubric_induce.evaluation.pairwise import position_consistency
from rubric_induce.probing.api import ProbeParams, probe, probe_to_file
from rubric_induce.probing.calls import probe_calls
from rubric_induce.probing.pairwise import PAIRWISE_TEMPLATE, build_pairwise_messages
from rubric_induce.probing.plan import plan_probes
from rubric_induce.selection.pair_features import order_preferences, pair_features, pair_preferences

GOOD, BAD = "Here are three tips: rest, plan, hydrate.", "I like turtles."
BIAS, SKILL = 0.3, 0.15  # P(first shown wins) = 0.5 + BIAS +/- SKILL


def _pairs(n: int = 4) -> list[Pair]:
    """n pairs; the good response is A on even pairs, B on odd ones."""
    return [Pair(id=f"p{i}", prompt=f"Give tips {i}.", response_a=GOOD if i % 2 == 0 else BAD,
                 response_b=BAD if i % 2 == 0 else GOOD, preferred="A" if i % 2 == 0 else "B") for i in range(n)]


def _shown(messages) -> tuple[str, str]:
    user = messages[-1]["content"]
    first = user.split("Response A:\n", 1)[1].split("\n\nResponse B:\n", 1)[0]
    second = user.split("Response B:\n", 1)[1].split("\n\nCriterion:", 1)[0]
    return first, second


def biased(messages, answers, prefix=""):
    """Pairwise: prefers the first shown response (BIAS), and the good one a little (SKILL); pointwise: uniform."""
    if list(answers) == ["A", "B"]:
        first, _ = _shown(messages)
        p = 0.5 + BIAS + (SKILL if first == GOOD else -SKILL)
        return {"A": p, "B": 1 - p}
    return {a: 1 / len(answers) for a in answers}


RUBRICS = [Rubric(id="r-sat", text="The response gives the tips asked for.", polarity="SAT"),
           Rubric(id="r-dsat", text="The response ignores the request.", polarity="DSAT")]


def test_order_examples_show_both_orders_and_the_prompt_names_positions():
    pair = _pairs(1)[0]
    ab, ba = order_examples([pair])
    assert (ab.id, ba.id) == ("p0/AB", "p0/BA")
    assert (ab.fields["first"], ab.fields["second"]) == (GOOD, BAD)
    assert (ba.fields["first"], ba.fields["second"]) == (BAD, GOOD)
    messages, tmpl = build_pairwise_messages(ba, RUBRICS[0])
    assert tmpl.name == PAIRWISE_TEMPLATE and _shown(messages) == (BAD, GOOD)
    user = messages[-1]["content"]
    # the pair first, the rubric after it: every rubric of one order shares the prefix
    assert user.index("Give tips 0.") < user.index("Response A:") < user.index(RUBRICS[0].text)
    assert user.rstrip().endswith('Answer with only "A" or "B".')
    other, _ = build_pairwise_messages(ba, RUBRICS[1])
    assert other[-1]["content"].split("Criterion:")[0] == user.split("Criterion:")[0]


def test_both_orders_are_probed_and_recorded_with_their_order():
    pairs = _pairs(2)
    backend = FakeBackend(answers=biased)
    table = probe(order_examples(pairs), RUBRICS, backend)
    assert len(table.records) == 2 * 2 * len(RUBRICS)
    rec = table.get("p0/AB", "r-sat")
    assert rec.order == "AB" and rec.answers == ["A", "B"] and rec.values == [1.0, 0.0]
    assert rec.expected == pytest.approx(0.5 + BIAS + SKILL)          # A (good) shown first
    assert table.get("p0/BA", "r-sat").expected == pytest.approx(0.5 + BIAS - SKILL)  # bad shown first
    assert table.meta["pairwise"]["prompt"]["name"] == PAIRWISE_TEMPLATE
    assert table.meta["pairwise"]["n_order_examples"] == 4
    from rubric_induce.data.probes import ProbeRecord

    assert ProbeRecord.from_dict(json.loads(json.dumps(rec.to_dict()))).order == "AB"


def test_position_bias_shows_in_consistency_and_cancels_in_the_averaged_feature():
    pairs = _pairs(4)
    table = probe(order_examples(pairs), RUBRICS, FakeBackend(answers=biased))
    ids = [p.id for p in pairs]
    ab, ba = order_preferences(table, RUBRICS, ids, fill=None)
    # one order alone is dominated by the bias: the first shown wins on every cell
    assert (ab > 0.5).all() and (ba > 0.5).all()
    pc = position_consistency(ab, ba, [r.id for r in RUBRICS])
    assert pc["all"]["first_rate"] == 1.0 and pc["all"]["consistent"] == 0.0 and pc["all"]["n"] == 8
    assert pc["all"]["mean_p_first"] == pytest.approx(0.5 + BIAS)
    # averaged over the two orders the bias is gone: the margin is exactly 2 x SKILL toward the good side
    margin = pair_preferences(table, RUBRICS, ids)
    target = np.array([1.0 if p.preferred == "A" else -1.0 for p in pairs])
    assert margin[:, 0] == pytest.approx(2 * SKILL * target)
    assert margin[:, 1] == pytest.approx(-2 * SKILL * target)  # DSAT: the sign flips
    both = pair_features(table, RUBRICS, ids, "both")  # the differences (no pointwise probe here: 0), then the margins
    assert both.shape == (4, 4) and both[:, :2].tolist() == [[0.0, 0.0]] * 4 and both[:, 2:] == pytest.approx(margin)


def test_a_missing_pairwise_probe_is_neutral_or_named():
    pairs = _pairs(2)
    table = probe(order_examples(pairs[:1]), RUBRICS, FakeBackend(answers=biased))
    assert pair_preferences(table, RUBRICS, ["p0", "p1"])[1].tolist() == [0.0, 0.0]
    with pytest.raises(DataError, match="p1"):
        pair_preferences(table, RUBRICS, ["p0", "p1"], fill=None)


def test_ties_are_a_third_answer_counting_half():
    def tie_heavy(messages, answers, prefix=""):
        return {"A": 0.2, "B": 0.2, "tie": 0.6} if "tie" in answers else {a: 1 / len(answers) for a in answers}

    table = probe(order_examples(_pairs(1)), RUBRICS[:1], FakeBackend(answers=tie_heavy),
                  ProbeParams(pairwise=True, pairwise_ties=True))
    rec = table.get("p0/AB", "r-sat")
    assert rec.answers == ["A", "B", "tie"] and rec.expected == pytest.approx(0.5)
    assert pair_preferences(table, RUBRICS[:1], ["p0"]).tolist() == [[0.0]]


def test_params_refuse_packed_pairwise_and_ties_without_the_probe():
    with pytest.raises(DataError) as exc:
        ProbeParams(pairwise=True, packing="packed")
    assert exc.value.field == "probe.pairwise"
    with pytest.raises(DataError) as exc:
        ProbeParams(pairwise_ties=True)
    assert exc.value.field == "probe.pairwise_ties"


def test_resume_keeps_pairwise_records_and_the_cache_answers_them(tmp_path):
    pairs = _pairs(2)
    examples = [*pair_examples(pairs), *order_examples(pairs)]
    first = FakeBackend(answers=biased)
    path, marker = tmp_path / "probes.jsonl", tmp_path / "probe.partial.json"
    table = probe_to_file(path, examples, RUBRICS, first, marker=marker, fingerprint="fp")
    assert sum(r.order is not None for r in table.records) == 8 and len(first.calls) == 16
    # a killed run: the file holds the records, the marker names the job; nothing is asked again
    from rubric_induce.data.jsonl import write_json

    write_json(marker, {"fingerprint": "fp", "file": path.name})
    again = FakeBackend(answers=biased)
    table2 = probe_to_file(path, examples, RUBRICS, again, marker=marker, fingerprint="fp")
    assert again.calls == [] and table2.meta["reused"] == 16
    assert table2.get("p1/BA", "r-sat").order == "BA"
    # through the call cache: a second probe makes no backend call
    cache = CallCache(tmp_path / "c.sqlite")
    probe(examples, RUBRICS, CachedBackend(FakeBackend(answers=biased), cache))
    inner = FakeBackend(answers=biased)
    probe(examples, RUBRICS, CachedBackend(inner, cache))
    assert inner.calls == []


def test_calls_and_plan_list_the_pairwise_calls(tmp_path):
    pairs = _pairs(3)
    examples = [*pair_examples(pairs), *order_examples(pairs)]
    cache = CallCache(tmp_path / "c.sqlite")
    backend = CachedBackend(FakeBackend(answers=biased), cache)
    listed = probe_calls(examples, RUBRICS, backend)
    assert len(listed) == (6 + 6) * len(RUBRICS)
    assert sum(c.example_id.endswith(("/AB", "/BA")) for c in listed) == 6 * len(RUBRICS)
    assert all(c.answers == ["A", "B"] for c in listed if c.example_id.endswith(("/AB", "/BA")))
    plan = plan_probes(examples, RUBRICS, backend)
    assert plan.calls == len(listed) and plan.to_make == len(listed)
    assert plan.params["pairwise"] == {"order_texts": 6, "ties": False} and plan.alternative is None
    probe(examples, RUBRICS, backend)
    assert {c.key for c in listed} == {row[0] for row in cache.rows()}
    assert plan_probes(examples, RUBRICS, backend).to_make == 0


def test_batch_round_trip_with_pairwise_calls(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "batch"))
    from _engine import Engine, backend  # noqa: E402

    from rubric_induce.batch.export import export_batch, ingest_results

    def ab_completion(body):
        top = [{"token": "A", "logprob": math.log(0.7), "bytes": None},
               {"token": "B", "logprob": math.log(0.2), "bytes": None}]
        return {"id": "chatcmpl-ab", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "A"},
                             "logprobs": {"content": [{"token": "A", "logprob": top[0]["logprob"], "bytes": None,
                                                       "top_logprobs": top}]}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}}

    examples = order_examples(_pairs(2))
    cache = CallCache(tmp_path / "c.sqlite")
    be = CachedBackend(backend(Engine(), base_url=None), cache)
    export = export_batch(probe_calls(examples, RUBRICS, be), be, tmp_path / "b")
    assert export.exported == len(examples) * len(RUBRICS)
    out = tmp_path / "out.jsonl"
    with open(out, "w") as fh:
        for line in export.files[0].read_text().splitlines():
            req = json.loads(line)
            assert "Response A:" in req["body"]["messages"][-1]["content"]
            fh.write(json.dumps({"custom_id": req["custom_id"], "error": None,
                                 "response": {"status_code": 200, "body": ab_completion(req["body"])}}) + "\n")
    assert ingest_results([out], tmp_path / "b", cache).ingested == len(examples) * len(RUBRICS)
    refusing = CachedBackend(backend(Engine(refuse=True), base_url=None), cache)
    table = probe(examples, RUBRICS, refusing)
    assert refusing.tally.calls == 0 and all(r.order in ("AB", "BA") for r in table.records)
    assert all(r.probs == pytest.approx([0.7 / 0.9, 0.2 / 0.9]) for r in table.records)


def test_the_plan_text_names_the_order_texts():
    pairs = _pairs(2)
    plan = plan_probes([*pair_examples(pairs), *order_examples(pairs)], RUBRICS, FakeBackend())
    assert "pairwise probe:" in plan.format() and "4  order texts" in plan.format()
