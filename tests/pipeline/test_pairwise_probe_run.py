"""A pairwise run with the pairwise probe (`[probe] pairwise = true`) on a fake backend scripted with a
position bias (issue 33, items 3 and 5; `slow`: a whole run, about 5 s): the report shows the bias,
the averaged feature does not have it, and selection and the Bradley-Terry head on the preference
feature (`[select] pair_feature`) decide pairs the pointwise differences cannot."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_pairwise_run import fake_config, llmbar_rows

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.cli import cli
from rubric_induce.pipeline.runner import run_pipeline

BIAS, SKILL = 0.3, 0.15


def biased(messages, answers, prefix=""):
    """Pairwise: P(first shown wins) = 0.5 + BIAS +/- SKILL (the good response answers the instruction);
    pointwise: uniform, so every score difference is 0."""
    if list(answers) == ["A", "B"]:
        user = messages[-1]["content"]
        first = user.split("Response A:\n", 1)[1].split("\n\nResponse B:\n", 1)[0]
        p = 0.5 + BIAS + (SKILL if first.startswith("Here are") else -SKILL)
        return {"A": p, "B": 1 - p}
    return {a: 1 / len(answers) for a in answers}


def biased_noisy(messages, answers, prefix=""):
    """:func:`biased`, with seeded noise for the pointwise probes (so their differences decide pairs)."""
    if list(answers) == ["A", "B"]:
        return biased(messages, answers, prefix)
    import hashlib

    import numpy as np

    seed = int.from_bytes(hashlib.sha256(json.dumps(messages).encode()).digest()[:8], "little")
    return dict(zip(answers, np.random.default_rng(seed).dirichlet(np.ones(len(answers))).tolist()))


def _config(tmp_path, feature: str):
    cfg = fake_config(tmp_path)
    text = cfg.read_text().replace('style = "score-only"', 'style = "score-only"\npairwise = true')
    text = text.replace("pair_consistency = 0.5", f'pair_consistency = 0.5\npair_feature = "{feature}"')
    cfg.write_text(text)
    return cfg


@pytest.fixture(scope="module")
def biased_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pairprobe")
    res = run_pipeline(_config(tmp, "preference"), backend=FakeBackend(answers=biased), echo=lambda s: None)
    return tmp / "run", res


@pytest.mark.slow
def test_the_report_shows_the_position_bias(biased_run):
    run, _ = biased_run
    ev = json.loads((run / "pairwise_evaluation.json").read_text())
    pc = ev["position_consistency"]["all"]
    assert pc["n"] > 0 and pc["first_rate"] == 1.0 and pc["consistent"] == 0.0
    assert pc["mean_p_first"] == pytest.approx(0.5 + BIAS)
    report = (run / "report.md").read_text()
    assert "Position consistency (pairwise probe, held-out pairs)" in report
    assert f"| **all** | {pc['n']} | 0.0 | 100.0 | 0.800 |" in report
    assert "Held-out pairs side by side" in report


@pytest.mark.slow
def test_the_averaged_feature_cancels_it_and_the_head_uses_it(biased_run):
    run, _ = biased_run
    ev = json.loads((run / "pairwise_evaluation.json").read_text())
    rows = ev["all"]["methods"]
    assert ev["pair_feature"] == "preference" and ev["reference"] == "selected rubrics (Bradley-Terry)"
    # one order alone is the bias (the first shown always wins): always-first's accuracy, 50 %
    assert rows["pairwise probe, A shown first only"]["accuracy"] == rows["always first"]["accuracy"] == 0.5
    # both orders averaged, the head, and the selector's mean are right on every held-out pair
    for name in ("pairwise probe, both orders averaged", "selected rubrics (Bradley-Terry)",
                 "selected rubrics (mean pairwise preference)"):
        assert rows[name]["accuracy"] == 1.0, name
    man = json.loads((run / "selected.manifest.json").read_text())
    assert man["pair_feature"] == "preference" and man["train_metrics"]["accuracy"] == 1.0
    head = json.loads((run / "calibration" / "bradley_terry.json").read_text())
    assert head["n_features_in"] == len(man["history"][: sum(h["kept"] for h in man["history"])])
    # per pair: both orders' verdicts, and P(A > B) on the gold side
    for row in ev["pairs"]:
        assert (row["p_a"] > 0.5) == (row["preferred"] == "A")
        for v in row["verdicts"].values():
            assert v["AB"] > 0.5 and v["BA"] > 0.5


@pytest.mark.slow
def test_the_viewer_shows_verdicts_in_both_orders(biased_run):
    from rubric_induce.pipeline.recorded import examples_from_recorded_config
    from rubric_induce.reporting.viewer.data import build_view_data

    run, _ = biased_run
    data = build_view_data(run, load_examples=examples_from_recorded_config, allow_outside=True)
    assert data["position_consistency"]["first_rate"] == 1.0
    pairs = data["pairs"]
    assert len(pairs) == len(llmbar_rows()) and all(p["verdicts"] for p in pairs)
    v = pairs[0]["verdicts"][0]
    assert set(v) == {"rubric", "ab", "ba"} and v["ab"] == pytest.approx(0.5 + BIAS + SKILL)
    assert not any(t["id"].endswith(("/AB", "/BA")) for t in data["texts"])  # order texts are not texts


@pytest.mark.slow
def test_compare_asks_both_orders_with_the_preference_head(biased_run):
    from rubric_induce.scoring.scorer import RubricScorer

    run, _ = biased_run
    scorer = RubricScorer.load(run, backend=FakeBackend(answers=biased))
    good, bad = "Here are 3 tips: a, b, c.", "I like turtles."
    p = scorer.compare(good, bad, prompt="Give 3 tips.")
    assert p > 0.5 and scorer.compare(bad, good, prompt="Give 3 tips.") == pytest.approx(1 - p)


@pytest.mark.slow
def test_the_difference_feature_stays_the_default_and_ignores_the_probe(tmp_path):
    cfg = fake_config(tmp_path)
    cfg.write_text(cfg.read_text().replace('style = "score-only"', 'style = "score-only"\npairwise = true'))
    run_pipeline(cfg, backend=FakeBackend(answers=biased_noisy), echo=lambda s: None, stop_after="evaluate")
    ev = json.loads((tmp_path / "run" / "pairwise_evaluation.json").read_text())
    assert ev["pair_feature"] == "difference" and "selected rubrics (mean difference)" in ev["all"]["methods"]
    assert ev["position_consistency"]["all"]["first_rate"] == 1.0


def test_preference_feature_without_the_probe_exits_2(tmp_path):
    cfg = fake_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("pair_consistency = 0.5", 'pair_consistency = 0.5\npair_feature = "both"'))
    res = CliRunner().invoke(cli, ["run", str(cfg)])
    assert res.exit_code == 2 and "select.pair_feature" in res.output.splitlines()[-1]


def test_the_pairwise_probe_on_a_pointwise_run_exits_2(tmp_path, fake_run_config):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fake_run_config + "\n[probe]\npairwise = true\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2 and "probe.pairwise" in res.output.splitlines()[-1]
