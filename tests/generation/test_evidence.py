"""One rule for which labelled examples generation learns from (generation.evidence), pinned for
both generators, and each generator's settings declared once (the Params object, recorded whole)."""
from __future__ import annotations

import pytest

from rubric_induce.data.model import Example
from rubric_induce.generation.autocalibrate import AutoCalibrateParams, labelled_examples
from rubric_induce.generation.evidence import blank_example
from rubric_induce.generation.rubicon import RubiconParams, split_binary


@pytest.mark.parametrize("fields,shown,expected", [
    ({"source": "", "text": ""}, None, True),
    ({"source": "  \n", "text": "\t"}, None, True),
    ({"source": "", "text": "a reply"}, None, False),
    ({"source": "an article", "text": ""}, None, False),
    ({"source": "an article", "text": ""}, ["text"], True),   # only the shown field counts
    ({"source": "", "text": "a reply"}, ["text"], False),
])
def test_blank_example_looks_at_the_shown_fields_only(fields, shown, expected):
    assert blank_example(Example.create(fields, {"y": 1}, id="e"), shown) is expected


def _pair():
    return [Example.create({"source": "", "text": "ok"}, {"sat": 1, "q": 4.0}, id="half"),
            Example.create({"source": " ", "text": " "}, {"sat": 0, "q": 2.0}, id="blank"),
            Example.create({"source": "s", "text": "t"}, {"sat": 0, "q": 3.0}, id="full"),
            Example.create({"source": "s2", "text": "t2"}, {"sat": 1, "q": 5.0}, id="full2")]


def test_rubicon_and_autocalibrate_skip_the_same_examples():
    from rubric_induce.backends.structured import GenerationStats

    a, b = GenerationStats(), GenerationStats()
    pos, neg = split_binary(_pair(), "sat", stats=a)
    kept = labelled_examples(_pair(), "q", low=1, high=5, stats=b)
    assert sorted(e.id for e in pos + neg) == sorted(e.id for e in kept) == ["full", "full2", "half"]
    assert a.skipped == b.skipped == [{"reason": "empty text", "example_id": "blank"}]


def test_rubicon_switches_follow_the_mode():
    p = RubiconParams()
    assert (p.switched("rubicon", True).use_ds, p.switched("rubicon", True).use_cdp) == (True, True)
    assert p.switched("rubicon", False).use_cdp is False
    assert (p.switched("spur", True).use_ds, p.switched("spur", True).use_cdp) == (False, False)
    assert RubiconParams(use_ds=False).switched("rubicon", True).use_ds is False


def test_generators_record_every_setting_from_their_params(likert_examples_for_settings):
    from rubric_induce.backends.fake import FakeBackend
    from rubric_induce.generation.autocalibrate import generate_autocalibrate

    params = AutoCalibrateParams(aspect="coherence", sample_sizes=(2,), trials=1, samples=1, top_k=1, rounds=0)
    res = generate_autocalibrate(likert_examples_for_settings, FakeBackend(), params, metric="kendall")
    settings = res.pool.manifest["settings"]
    assert {k: v for k, v in settings.items() if k != "probe_options"} == \
        params.with_overrides(metric="kendall").to_dict()
    with pytest.raises(TypeError, match="no field 'top_kk'"):
        generate_autocalibrate(likert_examples_for_settings, FakeBackend(), params, top_kk=2)


@pytest.fixture
def likert_examples_for_settings():
    return [Example.create({"text": f"text number {i} with words"}, {"coherence": float(1 + i % 5)}, id=f"e{i}")
            for i in range(6)]
