"""Price table: built-in rates, snapshots, user tables, cached and batch pricing."""
from __future__ import annotations

import json

import pytest

from rubric_induce.backends import pricing
from rubric_induce.backends.base import PRICES_PER_MTOK, price_for
from rubric_induce.backends.pricing import ModelPrice, cost, load_prices, price_of, register_prices
from rubric_induce.core.errors import DataError


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch):
    monkeypatch.setattr(pricing, "_registered", {})
    monkeypatch.setattr(pricing, "_env_loaded", None)
    monkeypatch.delenv(pricing.PRICES_ENV, raising=False)


def test_builtin_rates_and_snapshots():
    assert price_of("gpt-4o-mini") == ModelPrice(0.15, 0.60, 0.075, 0.075, 0.30)
    assert price_of("gpt-4o-mini-2024-07-18") == price_of("gpt-4o-mini")
    assert price_of("openai/gpt-4o") == price_of("gpt-4o")
    assert price_of("gpt-4-0613") == price_of("gpt-4")
    assert price_of("gpt-4-turbo-2024-04-09") == price_of("gpt-4-turbo")
    # a different model that merely starts with a known name is not priced as it
    assert price_of("gpt-4o-mini-tts") is None
    assert price_of("my-local-llama") is None
    assert PRICES_PER_MTOK["gpt-4o"] == (2.50, 10.00)


def test_cost_plain_cached_batch():
    # 1M prompt tokens, 400k of them cached, 100k completion tokens on gpt-4o-mini
    assert cost("gpt-4o-mini", 1_000_000, 100_000) == pytest.approx(0.15 + 0.06)
    assert cost("gpt-4o-mini", 1_000_000, 100_000, cached_tokens=400_000) == pytest.approx(
        0.6 * 0.15 + 0.4 * 0.075 + 0.06)
    assert cost("gpt-4o-mini", 1_000_000, 100_000, batch=True) == pytest.approx(0.075 + 0.03)
    # no caching discount: cached tokens cost the input rate
    assert cost("gpt-4", 1000, 0, cached_tokens=1000) == cost("gpt-4", 1000, 0)
    # cached tokens cannot exceed the prompt
    assert cost("gpt-4o", 10, 0, cached_tokens=50) == pytest.approx(10 * 1.25 / 1e6)
    assert cost("unknown-model", 10, 10) is None


def test_price_for_wrapper_keeps_old_signature():
    assert price_for("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert price_for("gpt-4o-mini", 1_000_000, 0, cached_tokens=1_000_000) == pytest.approx(0.075)
    assert price_for("my-local-llama", 10, 10) is None


def test_user_table_mapping_file_and_registration(tmp_path, monkeypatch):
    table = load_prices({"my-llama": {"input": 0.1, "output": 0.2}})
    assert table["my-llama"] == ModelPrice(0.1, 0.2)  # no batch rates said: no batch API
    assert cost("my-llama", 10, 10, batch=True, table=table) is None
    assert cost("my-llama", 1_000_000, 1_000_000, table=table) == pytest.approx(0.3)

    toml = tmp_path / "run.toml"
    toml.write_text('[prices."gpt-4o"]\ninput = 1.0\noutput = 2.0\nbatch_input = 0.5\nbatch_output = 1.0\n')
    assert load_prices(toml)["gpt-4o"] == ModelPrice(1.0, 2.0, None, 0.5, 1.0)

    js = tmp_path / "p.json"
    js.write_text(json.dumps({"vendor/model-x": [1, 2, 0.5]}))
    assert load_prices(js)["vendor/model-x"] == ModelPrice(1.0, 2.0, 0.5)

    register_prices({"my-llama": {"input": 1, "output": 1}})
    assert price_for("my-llama", 1_000_000, 0) == pytest.approx(1.0)

    env = tmp_path / "env.toml"
    env.write_text('[env-model]\ninput = 3\noutput = 4\n')
    monkeypatch.setenv(pricing.PRICES_ENV, str(env))
    assert price_for("env-model", 1_000_000, 0) == pytest.approx(3.0)


@pytest.mark.parametrize("raw, field", [
    ({"m": {"input": -1, "output": 1}}, "prices.m.input"),
    ({"m": {"input": 1}}, "prices.m.output"),
    ({"m": {"input": 1, "output": 1, "speed": 2}}, "prices.m"),
    ({"m": "cheap"}, "prices.m"),
    ({"m": {"input": "1", "output": 1}}, "prices.m.input"),
])
def test_bad_user_entries_name_the_field(raw, field):
    with pytest.raises(DataError) as err:
        load_prices(raw)
    assert err.value.field == field


def test_bad_price_file_names_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[m\ninput=1")
    with pytest.raises(DataError) as err:
        load_prices(bad)
    assert err.value.path == str(bad)
    with pytest.raises(DataError):
        load_prices(tmp_path / "missing.toml")
