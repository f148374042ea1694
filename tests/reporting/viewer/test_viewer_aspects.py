"""The viewer of a run that calibrated several aspects: one held-out table per aspect in the
summary's headline, rendered by headless Chromium (marked ``browser``, as the other page tests)."""
from __future__ import annotations

import html
import json
import random
import re

import pytest

from rubric_induce.reporting.viewer import VIEW_NAME, build_view_data
from rubric_induce.reporting.viewer.browser import dump_dom

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ASPECTS = ["overall", "clarity", "accuracy"]
CONFIG = """
[run]
seed = 0
test_size = 0.3

[data]
examples = "texts.jsonl"
label = "overall"
label_threshold = 3

[data.mapping]
id = "id"
text = { text = "text" }
labels = { overall = "overall", clarity = "clarity", accuracy = "accuracy" }

[backend]
spec = "fake"

[generate]
method = "none"
include = ["rubrics.json"]

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 1

[calibrate]
cv_folds = 0
adaptive = false
options = { hidden = [4, 4], pretrain_epochs = 3, finetune_epochs = 3 }

[evaluate]
bootstrap = 20

[report]
figures = false
"""


@pytest.fixture(scope="module")
def aspect_view(tmp_path_factory):
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("aspect-view")
    rng = random.Random(1)
    words = "the answer is right wrong clear vague short long helpful rambling".split()
    rows = [{"id": f"t{i}", "text": " ".join(rng.choice(words) for _ in range(8 + i % 5)),
             **{a: rng.choice([1, 2, 3, 4, 5]) for a in ASPECTS}} for i in range(30)]
    (tmp / "texts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp / "rubrics.json").write_text(json.dumps({"format": "rubric-induce.rubric-set", "version": 1, "rubrics": [
        {"text": "The answer is clear.", "polarity": "SAT"}, {"text": "The answer is correct.", "polarity": "SAT"},
        {"text": "The answer is short.", "polarity": "SAT"}, {"text": "The answer rambles.", "polarity": "DSAT"}]}),
        encoding="utf-8")
    (tmp / "cfg.toml").write_text(CONFIG, encoding="utf-8")
    run_pipeline(tmp / "cfg.toml", out=tmp / "run", echo=lambda m: None)
    return tmp / "run"


def test_the_summary_shows_a_table_per_aspect(chromium_path, aspect_view):
    data = build_view_data(aspect_view)
    assert [a["question"] for a in data["headline"]["aspects"]] == ASPECTS
    res = dump_dom(chromium_path, aspect_view / VIEW_NAME, "summary")
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    errors = re.search(r'<pre id="js-errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert errors and html.unescape(errors.group(1)).strip() == ""
    main = re.search(r"<main[^>]*>(.*)</main>", dom, re.S).group(1)
    for a in ASPECTS:
        assert f"Aspect {a}" in main
    assert "overall, clarity, accuracy" in main  # the calibrated questions, in the run's summary
