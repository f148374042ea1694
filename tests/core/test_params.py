"""The parameter classes: checked on construction, the same from a config, the CLI or the API."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_induce.calibration.api import CalibrateParams
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import params_class
from rubric_induce.generation.api import AutoCalibrateParams, GenerateParams, RubiconParams
from rubric_induce.pipeline.config import SECTIONS, config_from_dict
from rubric_induce.probing.api import ProbeParams
from rubric_induce.selection.api import SelectParams


def test_values_are_checked_and_the_field_is_named():
    with pytest.raises(DataError) as err:
        ProbeParams(style="vibes")
    assert err.value.field == "probe.style" and "choose from score-only" in str(err.value)
    with pytest.raises(DataError, match="at least 1") as err:
        ProbeParams(samples=0)
    assert err.value.field == "probe.samples"
    with pytest.raises(DataError, match="expected true or false"):
        CalibrateParams(search="yes")
    with pytest.raises(DataError, match="LOW < HIGH"):
        AutoCalibrateParams(scale=(5, 1))


def test_lists_become_tuples_and_ints_floats():
    p = AutoCalibrateParams(sample_sizes=[2, 3], draft_temperature=1)
    assert p.sample_sizes == (2, 3) and isinstance(p.draft_temperature, float)
    assert AutoCalibrateParams(sample_sizes="2, 3").sample_sizes == (2, 3)  # as a command line gives it
    assert p.to_dict()["sample_sizes"] == [2, 3]


def test_frozen_and_replace_revalidates():
    p = SelectParams()
    with pytest.raises(AttributeError):
        p.n_sat = 3  # type: ignore[misc]
    assert p.replace(n_sat=3).n_sat == 3
    with pytest.raises(DataError):
        p.replace(n_sat=-1)


def test_options_tables_are_checked_against_the_method():
    with pytest.raises(DataError, match="did you mean 'top_k'") as err:
        GenerateParams(options={"topk": 2})
    assert err.value.field == "generate.options.topk"
    assert GenerateParams(method="autocalibrate", options={"metric": "kendall"}).method_options().metric == "kendall"
    with pytest.raises(DataError) as err:
        GenerateParams(method="autocalibrate", options={"metric": "cosine"})
    assert err.value.field == "generate.options.metric"
    with pytest.raises(DataError, match="unknown option"):
        SelectParams(options={"alhpa": 1.0})
    assert SelectParams(method="rubicon", options={"alpha": 0.5}).make_selector(3).alpha == 0.5
    with pytest.raises(DataError, match="set elsewhere"):
        CalibrateParams(options={"main_question": "x"})


def test_config_sections_report_file_and_field(tmp_path):
    with pytest.raises(DataError) as err:
        config_from_dict({"data": {"dataset": "uss-sgd"}, "select": {"n_sat": "ten"}}, source="my.toml")
    assert err.value.path == "my.toml" and err.value.field == "select.n_sat"


def test_experiment_configs_are_typed_by_their_defaults():
    cls = params_class("demo", {"n_boot": 100, "aspects": ["a"], "alpha": 0.5, "name": "x", "limit": None})
    ok = cls.from_mapping({"n_boot": 5, "alpha": 1, "limit": 7})
    assert ok.n_boot == 5 and ok.alpha == 1.0 and ok.limit == 7
    with pytest.raises(DataError, match="expected an integer"):
        cls.from_mapping({"n_boot": "lots"})
    with pytest.raises(DataError, match="did you mean 'n_boot'"):
        cls.from_mapping({"n_bot": 5})


@settings(max_examples=60, deadline=None)
@given(style=st.sampled_from(["score-only", "rate-explain", "analyze-rate"]),
       samples=st.integers(1, 50), temperature=st.floats(0, 2, allow_nan=False),
       n_sat=st.integers(0, 20), n_dsat=st.integers(1, 20), missing=st.sampled_from(["error", "drop"]),
       top_k=st.integers(1, 9), use_ds=st.sampled_from([None, True, False]))
def test_every_section_round_trips_through_its_config_table(style, samples, temperature, n_sat, n_dsat, missing,
                                                            top_k, use_ds):
    values = {"probe": ProbeParams(style=style, samples=samples, temperature=temperature),
              "select": SelectParams(n_sat=n_sat, n_dsat=n_dsat, missing=missing),
              "generate": GenerateParams(options=RubiconParams(top_k=top_k, use_ds=use_ds).to_dict())}
    for name, params in values.items():
        again = SECTIONS[name].from_mapping(params.to_dict())
        assert again == params
