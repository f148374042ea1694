"""CallOptions: validation, exact cache keys, and the backends honouring one options value."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rubric_induce.backends import CallOptions
from rubric_induce.backends.cache import CachedBackend, CallCache, cache_key, canonical_json, canonical_value
from rubric_induce.backends.fake import FakeBackend

MSGS = [{"role": "user", "content": "Rate this."}]
IDENT = {"kind": "fake", "model": "m"}
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("changes, error, match", [
    ({"temperature": -0.1}, ValueError, "temperature"),
    ({"temperature": math.inf}, ValueError, "finite"),
    ({"temperature": math.nan}, ValueError, "finite"),
    ({"temperature": "0.5"}, TypeError, "temperature must be a number"),
    ({"temperature": True}, TypeError, "temperature"),
    ({"max_tokens": 0}, ValueError, "max_tokens must be >= 1"),
    ({"max_tokens": 2.0}, TypeError, "max_tokens must be an integer"),
    ({"seed": "3"}, TypeError, "seed must be an integer"),
    ({"seed": False}, TypeError, "bool"),
    ({"top_logprobs": -1}, ValueError, "top_logprobs must be >= 0"),
    ({"stop": "\n"}, TypeError, "not a bare string"),
    ({"stop": ["a", 1]}, TypeError, "strings only"),
    ({"stop": 5}, TypeError, "sequence of strings"),
    ({"json_schema": ["type", "object"]}, TypeError, "mapping"),
    ({"json_schema": {"enum": [np.arange(3)]}}, TypeError, "plain JSON"),
    ({"json_schema": {"maximum": math.nan}}, TypeError, "plain JSON"),
])
def test_validation_errors_name_the_field(changes, error, match):
    with pytest.raises(error, match=match):
        CallOptions(**changes)


def test_values_are_normalised():
    opts = CallOptions(temperature=1, max_tokens=np.int64(7), seed=np.int32(-3), stop=["\n", "END"],
                       top_logprobs=np.uint8(2))
    assert type(opts.temperature) is float and opts.temperature == 1.0
    assert (type(opts.max_tokens), type(opts.seed), type(opts.top_logprobs)) == (int, int, int)
    assert opts.stop == ("\n", "END")
    assert CallOptions(stop=[]).stop is None  # same as no stop, as every backend treats it
    assert CallOptions(temperature=-0.0).to_key() == CallOptions().to_key()


def test_frozen_merged_and_equality():
    base = CallOptions(temperature=0.2, seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.seed = 2  # type: ignore[misc]
    more = base.merged(seed=2, stop=("\n",))
    assert (more.temperature, more.seed, more.stop) == (0.2, 2, ("\n",)) and base.seed == 1
    assert base.replace(seed=1) == base and hash(base.replace(seed=1)) == hash(base)
    with pytest.raises(ValueError):
        base.merged(max_tokens=0)  # merged values are validated too
    with pytest.raises(TypeError):
        base.merged(nucleus=0.9)
    assert CallOptions(json_schema=SCHEMA) == CallOptions(json_schema=dict(SCHEMA))
    same = {CallOptions(json_schema=SCHEMA), CallOptions(json_schema=dict(SCHEMA))}
    assert same == {CallOptions(json_schema=SCHEMA)}


def test_schema_is_copied_and_its_key_order_counts():
    schema = json.loads(json.dumps(SCHEMA))
    opts = CallOptions(json_schema=schema)
    schema["properties"]["c"] = {"type": "string"}
    assert "c" not in opts.json_schema["properties"]  # later edits by the caller do not leak in
    swapped = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}
    # a constrained decoder writes the fields in schema order: different requests, different keys
    assert CallOptions(json_schema=SCHEMA).to_key() != CallOptions(json_schema=swapped).to_key()
    assert json.loads(CallOptions(json_schema=SCHEMA).to_key()["json_schema"]) == SCHEMA


def test_resolve_refuses_anything_but_options():
    assert CallOptions.resolve(None) == CallOptions()
    with pytest.raises(TypeError, match="CallOptions"):
        CallOptions.resolve({"temperature": 0.5})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FakeBackend().chat(MSGS, temperature=0.5)  # type: ignore[call-arg]  # the old keyword form is gone


# ---------------------------------------------------------------- exact keys


def test_arrays_that_differ_only_in_the_tail_get_different_keys():
    a = np.arange(5000, dtype=np.float64)
    b = a.copy()
    b[-1] += 1e-9
    # The old key used json.dumps(..., default=str): numpy elides the middle of a long array, so
    # both printed the same text and two different requests shared one cache entry.
    old = [json.dumps({"x": v}, sort_keys=True, default=str) for v in (a, b)]
    assert old[0] == old[1]
    assert cache_key(IDENT, "chat", {"x": a}) != cache_key(IDENT, "chat", {"x": b})
    # dtype and shape are part of the value too
    assert canonical_json(a.astype(np.float32)) != canonical_json(a)
    assert canonical_json(a.reshape(50, 100)) != canonical_json(a)
    assert canonical_json(np.asfortranarray(a.reshape(50, 100))) == canonical_json(a.reshape(50, 100))


def test_canonical_value_is_exact_or_refuses():
    assert canonical_value(np.int64(3)) == 3 and type(canonical_value(np.int64(3))) is int
    assert canonical_value(np.float32(0.5)) == 0.5 and canonical_value(np.bool_(True)) is True
    assert canonical_value((1, (2, 3))) == [1, [2, 3]]
    assert canonical_value({"b", "a", "c"}) == ["a", "b", "c"]
    assert canonical_value(Path("/x/y")) == "/x/y"
    assert canonical_value(float("-inf")) != canonical_value(float("inf"))
    assert canonical_json(0.1) == "0.1" and canonical_json(1) != canonical_json(True)

    @dataclasses.dataclass
    class P:
        a: int
        b: np.ndarray

    assert canonical_value(P(1, np.zeros(2)))["a"] == 1
    for bad in (object(), {1: "int key"}, np.array([object()]), 1 + 2j, b"bytes", np.longdouble(1) if
                np.dtype(np.longdouble).itemsize > 8 else object()):
        with pytest.raises(TypeError):
            canonical_json(bad)


def test_same_options_same_key_across_processes():
    opts = CallOptions(temperature=0.7, max_tokens=33, seed=5, json_schema=SCHEMA, stop=("\n",),
                       top_logprobs=3)
    payload = {"messages": MSGS, "options": opts.to_key(), "arr": np.linspace(0, 1, 2000)}
    here = cache_key(IDENT, "chat", payload)
    code = ("import json, numpy as np\n"
            "from rubric_induce.backends import CallOptions\n"
            "from rubric_induce.backends.cache import cache_key\n"
            f"opts = CallOptions(temperature=0.7, max_tokens=33, seed=5, json_schema={SCHEMA!r}, "
            "stop=('\\n',), top_logprobs=3)\n"
            f"payload = {{'arr': np.linspace(0, 1, 2000), 'options': opts.to_key(), 'messages': {MSGS!r}}}\n"
            f"print(cache_key({{'model': 'm', 'kind': 'fake'}}, 'chat', payload))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == here


def test_keys_refuse_secrets():
    with pytest.raises(ValueError, match="secret"):
        cache_key({"kind": "openai", "api_key": "sk-1"}, "chat", {})
    with pytest.raises(ValueError, match="secret"):
        cache_key(IDENT, "chat", {"headers": [{"Authorization": "Bearer x"}]})

    @dataclasses.dataclass
    class Conn:
        password: str

    with pytest.raises(ValueError, match="secret"):  # found inside dataclasses too
        cache_key(IDENT, "chat", {"conn": Conn("hunter2")})


# ---------------------------------------------------------------- backends


def test_cached_backend_hits_with_equal_options_and_misses_with_different(tmp_path):
    inner = FakeBackend()
    cached = CachedBackend(inner, CallCache(tmp_path / "c.sqlite"))
    opts = CallOptions(temperature=0.5, seed=4, max_tokens=20)
    first = cached.chat(MSGS, opts)
    again = cached.chat(MSGS, CallOptions(temperature=0.5, seed=np.int64(4), max_tokens=20))
    assert again.text == first.text and again.usage.cached and len(inner.calls) == 1
    for other in (opts.merged(seed=5), opts.merged(temperature=0.6), opts.merged(max_tokens=21),
                  opts.merged(stop=("x",)), opts.merged(top_logprobs=1), opts.merged(json_schema=SCHEMA)):
        assert not cached.chat(MSGS, other).usage.cached
    assert len(inner.calls) == 7
    assert cached.chat(MSGS).usage.cached is False and cached.chat(MSGS, CallOptions()).usage.cached
    # answer_logprobs: the options and the prefix are both part of the key
    cached.answer_logprobs(MSGS, ["1", "2"])
    assert cached.answer_logprobs(MSGS, ["1", "2"], CallOptions()).usage.cached
    assert not cached.answer_logprobs(MSGS, ["1", "2"], assistant_prefix="Rating:").usage.cached
    assert not cached.answer_logprobs(MSGS, ["1", "2"], CallOptions(top_logprobs=5)).usage.cached
    # what reached the wrapped backend is what the caller asked for
    assert inner.calls[0][1] | {"messages": None} == {
        "messages": None, "temperature": 0.5, "max_tokens": 20, "seed": 4, "json_schema": None,
        "stop": None, "top_logprobs": 0}


def test_fake_backend_honours_the_options():
    fake = FakeBackend()
    plain = fake.chat(MSGS).text
    assert "\n" in plain
    assert fake.chat(MSGS, CallOptions(stop=("\n",))).text == plain[: plain.index("\n")]
    assert fake.chat(MSGS, CallOptions(seed=1)).text != fake.chat(MSGS, CallOptions(seed=2)).text
    assert fake.chat(MSGS, CallOptions(seed=1)).text == fake.chat(MSGS, CallOptions(seed=1)).text
    reply = json.loads(fake.chat(MSGS, CallOptions(json_schema=SCHEMA)).text)
    assert isinstance(reply["a"], int) and isinstance(reply["b"], str)
    assert fake.chat(MSGS).tokens is None and fake.chat(MSGS, CallOptions(top_logprobs=2)).tokens
    seen = {}
    scripted = FakeBackend(replies=lambda m, **p: seen.update(p) or "ok")
    scripted.chat(MSGS, CallOptions(max_tokens=9, stop=["."]))
    assert (seen["max_tokens"], seen["stop"]) == (9, ["."])
