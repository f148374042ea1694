"""Structured replies: JSON under a schema, retries with new seeds, failures counted."""
from __future__ import annotations

import json

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.backends.structured import (
    RETRY_TEMPERATURE,
    GenerationStats,
    ask_json,
    clean_item,
    derive_seed,
    parse_json_reply,
    string_list,
    string_list_schema,
)
from rubric_induce.core.errors import ReplyParseError

MSG = [{"role": "user", "content": "give me patterns"}]


def test_parse_json_reply_accepts_fences_and_surrounding_text():
    assert parse_json_reply('{"a": 1}') == {"a": 1}
    assert parse_json_reply('Sure!\n```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert parse_json_reply('Here: {"a": 2} hope it helps') == {"a": 2}
    with pytest.raises(ReplyParseError):
        parse_json_reply("no json here")


def test_string_list_cleans_and_requires_sentences():
    parse = string_list("rubrics")
    assert parse({"rubrics": ["1. The user waits long.", "- \"The bot helps them.\""]}) == [
        "The user waits long.", "The bot helps them."]
    assert parse(["bare list works fine"]) == ["bare list works fine"]
    with pytest.raises(ReplyParseError):
        parse({"rubrics": ["...", "N/A"]})
    with pytest.raises(ReplyParseError):
        parse({"other": ["x y z"]})
    assert clean_item("  (a) Two   spaces ") == "Two spaces"


def test_ask_json_passes_schema_and_returns_parsed_value():
    schema = string_list_schema("patterns", max_items=2)
    backend = FakeBackend(replies=['{"patterns": ["The user says thanks."]}'])
    stats = GenerationStats()
    out = ask_json(backend, MSG, schema, string_list("patterns"), step="t", stats=stats, seed=7)
    assert out == ["The user says thanks."]
    call = backend.calls[0][1]
    assert call["json_schema"] == schema and call["seed"] == 7 and call["temperature"] == 0.0
    assert stats.requests == 1 and stats.retries == 0 and stats.n_failures == 0


def test_ask_json_retries_with_new_seed_and_temperature_then_succeeds():
    backend = FakeBackend(replies=["garbage", '{"patterns": ["The user is happy."]}'])
    stats = GenerationStats()
    out = ask_json(backend, MSG, string_list_schema("patterns"), string_list("patterns"), step="t",
                   stats=stats, seed=3)
    assert out == ["The user is happy."]
    seeds = [c[1]["seed"] for c in backend.calls]
    temps = [c[1]["temperature"] for c in backend.calls]
    assert seeds[0] == 3 and seeds[1] != 3
    assert temps == [0.0, RETRY_TEMPERATURE]
    assert stats.retries == 1 and stats.n_failures == 0


def test_ask_json_counts_failure_after_all_retries():
    backend = FakeBackend(replies=["nope"] * 3)
    stats = GenerationStats()
    out = ask_json(backend, MSG, string_list_schema("patterns"), string_list("patterns"), step="extract",
                   stats=stats, seed=0, retries=2, context={"example_id": "x"})
    assert out is None
    assert len(backend.calls) == 3
    assert stats.n_failures == 1
    f = stats.failures[0]
    assert f.step == "extract" and f.attempts == 3 and f.context == {"example_id": "x"} and f.reply == "nope"
    d = stats.to_dict()
    assert d["n_failures"] == 1 and json.dumps(d)  # JSON-serialisable for the manifest


def test_derive_seed_is_stable_and_distinct():
    assert derive_seed(0, "a", 1) == derive_seed(0, "a", 1)
    assert derive_seed(0, "a", 1) != derive_seed(0, "a", 2) != derive_seed(1, "a", 2)
    assert 0 <= derive_seed(5, "x") < 2**31


def test_subject_constrained_schema_compiles_to_a_llama_grammar(require_module):
    llama_cpp = require_module("llama_cpp")
    schema = string_list_schema("rubrics", max_items=3, subjects=("The assistant", "The user"))
    pattern = schema["properties"]["rubrics"]["items"]["pattern"]
    assert pattern.startswith("^(The assistant|The user) ") and "\n" not in pattern
    llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
