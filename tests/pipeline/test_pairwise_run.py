"""Pairwise runs end to end on the fake backend (issue 33, round two; `slow`: about 4 s per run): the shipped
llmbar_pairwise.toml with `[backend] spec = "fake"` and `examples` pointed at a file of the LLMBar
layout, every stage through `rubric-induce run`, resume, the artifact's `compare`, and the
pairwise evaluation with its baselines."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import rubric_induce
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError
from rubric_induce.pipeline.config import load_config

RES = Path(rubric_induce.__file__).resolve().parent / "resources"
RESOURCE = RES / "llmbar_pairwise.toml"


def llmbar_rows(n: int = 16) -> list[dict]:
    """n pairs in LLMBar's layout: the preferred output answers the instruction, the other does not."""
    rows = []
    for i in range(n):
        good = f"Here are {i + 3} short tips on topic {i}: plan ahead, rest well, drink water."
        bad = f"I like turtles. Topic {i} is not something I will discuss today."
        first = i % 2 == 0
        rows.append({"input": f"Give {i + 3} tips on topic {i}.", "output_1": good if first else bad,
                     "output_2": bad if first else good, "label": 1 if first else 2})
    return rows


def fake_config(tmp_path: Path, rows: list[dict] | None = None, *, data_name: str = "pairs.json",
                raw: str | None = None) -> Path:
    """The shipped resource with the fake backend, a small budget and `examples` at a local file."""
    data = tmp_path / data_name
    if raw is not None:
        data.write_text(raw, encoding="utf-8")
    else:
        data.write_text(json.dumps(rows if rows is not None else llmbar_rows()), encoding="utf-8")
    text = RESOURCE.read_text(encoding="utf-8")
    text = text.replace('spec = "local"', 'spec = "fake"')
    text = re.sub(r'^examples = .*$', f'examples = "{data.as_posix()}"', text, flags=re.M)
    text = re.sub(r'^out = .*$', f'out = "{(tmp_path / "run").as_posix()}"', text, flags=re.M)
    text = text.replace("bootstrap = 1000", "bootstrap = 200")
    text = text.replace("[dedup]\nthreshold = 0.85", "[dedup]\nenabled = false")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(text, encoding="utf-8")
    return cfg


def test_resource_reads_the_shipped_llmbar_file():
    """The resource names LLMBar's Natural file under the shared data folder, read as shipped."""
    cfg = load_config(RESOURCE)
    assert cfg.data.kind == "pairwise"
    path = cfg.data.examples_path(cfg.resolve)
    assert path.parts[-3:] == ("llmbar", "Natural", "dataset.json")
    if path.exists():
        from rubric_induce.data.params import load_pairs

        pairs = load_pairs(cfg.data, cfg.resolve)
        assert len(pairs) == 100 and {p.preferred for p in pairs} == {"A", "B"}


@pytest.fixture(scope="module")
def pairwise_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pairwise")
    cfg = fake_config(tmp)
    t0 = time.perf_counter()
    res = CliRunner().invoke(cli, ["run", str(cfg)])
    seconds = time.perf_counter() - t0
    assert res.exit_code == 0, res.output
    return tmp, tmp / "run", res.output, seconds


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 4 s on 2 cores
def test_every_stage_runs_on_pairs(pairwise_run):
    tmp, run, output, seconds = pairwise_run
    assert seconds < 60
    for f in ("pool.jsonl", "probes.jsonl", "selected.jsonl", "calibration/bradley_terry.json", "artifact.json",
              "pairwise_evaluation.json", "pairwise_evaluation.md", "report.md", "view.html"):
        assert (run / f).is_file(), f
    ids = {json.loads(line)["example_id"] for line in (run / "probes.jsonl").read_text().splitlines() if line}
    assert ids == {f"{p}/{s}" for p in {i.rsplit("/", 1)[0] for i in ids} for s in "AB"}  # both sides probed
    art = json.loads((run / "artifact.json").read_text())
    assert art["kind"] == "pairwise" and art["pairwise_head"] == "calibration/bradley_terry.json"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["data"]["kind"] == "pairwise" and manifest["data"]["n_pairs"] == 16
    assert manifest["data"]["n_train_pairs"] + manifest["data"]["n_test_pairs"] == 16
    report = (run / "report.md").read_text()
    assert "## Pairwise evaluation (held-out pairs)" in report and "| longer wins |" in report


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 4 s on 2 cores
def test_viewer_shows_the_pairs_side_by_side(pairwise_run):
    from rubric_induce.pipeline.recorded import examples_from_recorded_config
    from rubric_induce.reporting.viewer.data import build_view_data

    _, run, _, _ = pairwise_run
    html = (run / "view.html").read_text(encoding="utf-8")
    assert '"pairs": [{' in html or '"pairs":[{' in html
    data = build_view_data(run, load_examples=examples_from_recorded_config, allow_outside=True)
    pairs = data["pairs"]
    assert len(pairs) == 16 and {p["split"] for p in pairs} == {"train", "test"}
    first = llmbar_rows()[0]
    assert (pairs[0]["prompt"], pairs[0]["a"], pairs[0]["b"]) == (first["input"], first["output_1"], first["output_2"])
    assert pairs[0]["preferred"] == "A" and 0.0 <= pairs[0]["p_a"] <= 1.0


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 4 s on 2 cores
def test_evaluation_has_baselines_and_intervals(pairwise_run):
    _, run, _, _ = pairwise_run
    ev = json.loads((run / "pairwise_evaluation.json").read_text())
    rows = ev["all"]["methods"]
    assert ev["reference"] == "selected rubrics (Bradley-Terry)"
    assert {"always first", "longer wins"} <= set(rows) and any(k.startswith("majority side") for k in rows)
    # the held-out half: 8 pairs alternating A/B preferred, so always-first is right on exactly its A pairs
    test_ids = json.loads((run / "manifest.json").read_text())["data"]["n_test_pairs"]
    assert ev["all"]["n"] == test_ids
    for r in rows.values():
        lo, hi = r["accuracy_ci"]
        assert 0 <= lo <= r["accuracy"] <= hi <= 1
    # the good responses are longer: longer-wins is right on every held-out pair
    assert rows["longer wins"]["accuracy"] == 1.0


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 4 s on 2 cores
def test_resume_skips_every_stage(pairwise_run):
    tmp, run, _, _ = pairwise_run
    res = CliRunner().invoke(cli, ["run", str(tmp / "cfg.toml")])
    assert res.exit_code == 0, res.output
    assert "ran 0 stage(s)" in res.output


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 4 s on 2 cores
def test_compare_is_a_probability_and_swaps(pairwise_run):
    """P(A > B) + P(B > A) = 1 (no ties learned, no position term), and equal texts give 1/2."""
    from rubric_induce.scoring.scorer import RubricScorer

    _, run, _, _ = pairwise_run
    scorer = RubricScorer.load(run)
    assert scorer.kind == "pairwise" and scorer.pairwise_head is not None
    a = "Here are 3 short tips: plan ahead, rest well, drink water."
    b = "I like turtles."
    p = scorer.compare(a, b, prompt="Give 3 tips.")
    q = scorer.compare(b, a, prompt="Give 3 tips.")
    assert 0.0 <= p <= 1.0 and p + q == pytest.approx(1.0, abs=1e-9)
    assert scorer.compare({"prompt": "x", "response": a}, {"prompt": "x", "response": a}) == pytest.approx(0.5)
    with pytest.raises(DataError):
        scorer.compare(3, b)  # type: ignore[arg-type]


@pytest.mark.tools  # imports TRL (slow), like tests/handoff/test_handoff_trl.py
def test_trl_judge_uses_compare(pairwise_run):
    pytest.importorskip("trl")
    from rubric_induce.handoff.trl import trl_pairwise_judge
    from rubric_induce.scoring.scorer import RubricScorer

    _, run, _, _ = pairwise_run
    scorer = RubricScorer.load(run)
    prompts = ["Give 3 tips.", "Give 4 tips."]
    pairs = [["Here are 3 short tips: plan, rest, water.", "No."], ["Nope.", "Here are 4 tips: a, b, c, d."]]
    judge = trl_pairwise_judge(scorer)
    got = judge.judge(prompts, pairs, shuffle_order=False)
    probs = scorer.compare_pairs(prompts, [p[0] for p in pairs], [p[1] for p in pairs])
    assert got == [0 if q >= 0.5 else 1 for q in probs]
    assert judge.judge(prompts, pairs, shuffle_order=True) == got  # the order shown does not change the pick


def test_pairwise_data_params_refuse_pointwise_keys(tmp_path):
    cfg = fake_config(tmp_path)
    text = cfg.read_text().replace('kind = "pairwise"', 'kind = "pairwise"\ntext_field = "input"')
    cfg.write_text(text)
    with pytest.raises(DataError, match="pointwise") as exc:
        load_config(cfg)
    assert exc.value.field == "data.text_field" and exc.value.line is not None


def test_inconsistency_rates_count_decided_non_tie_pairs():
    from rubric_induce.selection.pair_features import inconsistency_rates

    D = np.array([[0.5, -0.2, 0.0], [0.1, 0.3, 0.0], [-0.4, 0.0, 0.0], [0.9, 0.9, 0.9]])
    rates, decided = inconsistency_rates(D, [1, -1, 1, 0])  # the last pair is a tie: left out
    assert rates.tolist() == pytest.approx([2 / 3, 1.0, 0.0]) and decided.tolist() == [3, 2, 0]


def _select_with(tmp_path, limit: str, max_pairs: int = 8):
    cfg = fake_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("pair_consistency = 0.5", f"pair_consistency = {limit}")
                   .replace("max_pairs = 8", f"max_pairs = {max_pairs}"))
    return CliRunner().invoke(cli, ["run", str(cfg), "--stop-after", "select"])


def _rates_from_probes(run: Path, rubric_ids: list[str]) -> dict[str, float]:
    """Each rubric's against-the-preference rate on the training pairs, recomputed from probes.jsonl."""
    from rubric_induce.data import RubricPool
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.pipeline.context import RunContext
    from rubric_induce.selection.pair_features import inconsistency_rates, pair_differences

    ctx = RunContext(load_config(run.parent / "cfg.toml"), run)
    pool = {r.id: r for r in RubricPool.load(run / "pool.dedup.jsonl")}
    train = ctx.train_pairs
    D = pair_differences(ProbeTable.load(run / "probes.jsonl"), [pool[i] for i in rubric_ids], [p.id for p in train])
    rates, _ = inconsistency_rates(D, [p.target for p in train])
    return dict(zip(rubric_ids, rates.tolist()))


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 4 s on 2 cores
def test_consistency_filter_drops_and_counts(tmp_path):
    """On the fake backend's hash-random contrastive rubrics (32 usable: 16 hard rules, 16 principles, each
    deciding all 8 training pairs), a 30 % limit drops those against the preference on more than 30 % of
    them, counted with their rates in the filtered pool's manifest (consistent_pool.manifest.json) and in
    selected.manifest.json; the rates agree with the probes."""
    res = _select_with(tmp_path, "0.3")
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    man = json.loads((run / "selected.manifest.json").read_text())
    pool = json.loads((run / "consistent_pool.manifest.json").read_text())
    kept = [json.loads(line)["id"] for line in (run / "consistent_pool.jsonl").read_text().splitlines() if line]
    n_after, n_dropped = pool["n_after"], pool["n_dropped"]
    assert (pool["filter"], pool["limit"], pool["n_before"], pool["n_pairs"]) == ("pair_consistency", 0.3, 32, 8)
    assert n_after == len(kept) == pool["n_rubrics"] >= 1 and n_dropped >= 1 and n_after + n_dropped == 32
    assert man["pair_consistency"] == 0.3 and man["n_usable"] == 32 and man["n_pool"] == n_after
    assert man["consistent_pool"] == "consistent_pool.jsonl"
    assert [d["id"] for d in pool["dropped"]] == [d["id"] for d in man["dropped_inconsistent"]]
    assert pool["n_by_kind_before"] == {"hard_rule": 16, "principle": 16}
    assert sum(pool["n_by_kind_after"].values()) == n_after
    assert all(d["against"] > 0.3 and d["decided"] == 8 and d["kind"] in ("hard_rule", "principle") and d["text"]
               for d in pool["dropped"])
    assert kept == [k["id"] for k in pool["kept"]] and all(k["against"] <= 0.3 for k in pool["kept"])
    recorded = {d["id"]: d["against"] for d in pool["dropped"] + pool["kept"]}
    assert _rates_from_probes(run, list(recorded)) == pytest.approx(recorded)
    selected = [json.loads(line)["id"] for line in (run / "selected.jsonl").read_text().splitlines() if line]
    assert set(selected) <= set(kept)
    assert f"consistency filter: dropped {n_dropped} rubric(s)" in res.output and f"(32 -> {n_after} rubrics" in res.output


@pytest.mark.slow  # two pairwise runs on the fake backend: about 6 s on 2 cores
def test_consistent_pool_follows_the_setting_on_resume(tmp_path):
    """Unsetting select.pair_consistency reruns select only (the probes stay), and the filtered pool goes
    with the filter; the report names the filter's count while it is set."""
    res = _select_with(tmp_path, "0.3")
    assert res.exit_code == 0, res.output
    run, cfg = tmp_path / "run", tmp_path / "cfg.toml"
    res = CliRunner().invoke(cli, ["run", str(cfg)])
    assert res.exit_code == 0, res.output
    pool = json.loads((run / "consistent_pool.manifest.json").read_text())
    report = (run / "report.md").read_text()
    assert "## Rubric pool (pairwise run)" in report
    assert f"kept {pool['n_after']} of 32 usable rubrics, dropped {pool['n_dropped']}" in report
    assert "16 hard rule(s), 16 principle(s)" in report
    cfg.write_text(cfg.read_text().replace("pair_consistency = 0.3", "# pair_consistency unset"))
    res = CliRunner().invoke(cli, ["run", str(cfg)])
    assert res.exit_code == 0, res.output
    assert "[probe] done" not in res.output and "[select] done" in res.output
    assert not (run / "consistent_pool.jsonl").exists() and not (run / "consistent_pool.manifest.json").exists()
    man = json.loads((run / "selected.manifest.json").read_text())
    assert man["pair_consistency"] is None and man["n_pool"] == 32 and man["consistent_pool"] is None
    assert "Consistency filter" not in (run / "report.md").read_text()


@pytest.mark.slow  # generation alone on the fake backend
def test_rubicon_still_runs_on_pairs(tmp_path):
    """The shipped config now generates contrastively; RUBICON on the pairs' sides (preferred 1, other 0)
    still works."""
    cfg = fake_config(tmp_path)
    text = cfg.read_text()
    text = re.sub(r'^method = "contrastive".*$', 'method = "rubicon"\nper_class = 4', text, flags=re.M)
    text = re.sub(r"^options = \{ max_pairs.*$", "options = { top_k = 1, batch_size = 4, max_new = 2 }", text,
                  flags=re.M)
    cfg.write_text(text)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--stop-after", "generate"])
    assert res.exit_code == 0, res.output
    man = json.loads((tmp_path / "run" / "pool.manifest.json").read_text())
    assert man["method"] == "rubicon" and man["n_examples"] == {"positive": 4, "negative": 4}


def test_contrastive_on_pointwise_data_is_refused_naming_the_field(tmp_path):
    """generate.method = 'contrastive' with pointwise data stops at config load: exit 2, file, line, field."""
    data = tmp_path / "texts.jsonl"
    data.write_text(json.dumps({"text": "a text", "sat": 1}) + "\n" + json.dumps({"text": "b", "sat": 0}) + "\n")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[data]\nexamples = "{data.as_posix()}"\n\n[backend]\nspec = "fake"\n\n'
                   '[generate]\nmethod = "contrastive"\n')
    with pytest.raises(DataError, match="pairwise") as exc:
        load_config(cfg)
    assert exc.value.field == "generate.method"
    res = CliRunner().invoke(cli, ["run", str(cfg), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2
    last = res.output.strip().splitlines()[-1]
    assert "cfg.toml" in last and "line 8" in last and "generate.method" in last


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 5 s on 2 cores
def test_consistency_filter_dropping_every_rubric_warns_and_falls_back(tmp_path):
    """A filter that would drop every rubric is an outcome of the data found after all the LLM work (issue 40,
    item 2): the run goes on with the whole pool, says so in a warning, and records it in the filtered pool's
    manifest, the selected set's manifest, the run manifest and the report."""
    cfg = fake_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("pair_consistency = 0.5", "pair_consistency = 0.0")
                   .replace("max_pairs = 8", "max_pairs = 1"))  # 4 rubrics, each against the preference somewhere
    res = CliRunner().invoke(cli, ["run", str(cfg)])
    assert res.exit_code == 0, res.output
    assert "warning: consistency filter: every one of the 4 rubric(s) points against the preference" in res.output
    assert "the filter is not applied and selection uses the whole pool" in res.output
    run = tmp_path / "run"
    pool = json.loads((run / "consistent_pool.manifest.json").read_text())
    assert pool["fallback"] == "unfiltered" and pool["n_after"] == 0 and pool["n_used"] == pool["n_rubrics"] == 4
    man = json.loads((run / "selected.manifest.json").read_text())
    assert man["consistency_fallback"] == "unfiltered" and man["n_pool"] == 4 and man["dropped_inconsistent"] == []
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "finished"
    assert any("the filter is not applied" in w for w in manifest["stages"]["select"]["warnings"])
    report = (run / "report.md").read_text()
    assert "**Consistency filter not applied** (`select.pair_consistency = 0.0`): every one of the 4 usable" in report
    assert "| over the limit | kind | against | pairs decided |" in report


def test_check_of_a_pairwise_config_counts_pairs_and_speaks_of_the_preference(tmp_path):
    """`run --check` on pairs (issue 40, item 3): pairs, their responses, the split in pairs and the preference,
    not "examples" and "label 'sat'"."""
    rows = llmbar_rows(10)
    rows[0]["label"] = 0  # LLMBar's layout: 0 is a tie
    cfg = fake_config(tmp_path, rows)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--check"])
    assert res.exit_code == 0, res.output
    line = res.output.strip().splitlines()[-1]
    n_train = re.search(r"(\d+) train / (\d+) held-out pairs", line)
    assert line.startswith("config OK: 10 pairs (20 responses; ") and n_train, line
    assert int(n_train.group(1)) + int(n_train.group(2)) == 10
    assert "preference A 4, B 5, tie 1" in line and "label" not in line and "examples" not in line


@pytest.mark.slow  # a whole pairwise run on the fake backend: about 4 s on 2 cores
def test_judges_preferences_get_per_judge_weights(tmp_path):
    """Pairs with two judges' votes (ab layout, [data.mapping] judges): the head is fitted on the gold rows
    plus one row per judge vote, with a weight vector per judge."""
    rows = llmbar_rows()
    for _i, r in enumerate(rows):
        r["vote_x"] = r["label"]                        # agrees with gold
        r["vote_y"] = 2 if r["label"] == 1 else 1       # always the other side
    cfg = fake_config(tmp_path, rows)
    text = cfg.read_text().replace('layout = "ab"', 'layout = "ab"\njudges = { x = "vote_x", y = "vote_y" }')
    cfg.write_text(text)
    res = CliRunner().invoke(cli, ["run", str(cfg), "--stop-after", "calibrate"])
    assert res.exit_code == 0, res.output
    marker = json.loads((tmp_path / "run" / "stages" / "calibrate.json").read_text())["summary"]
    assert marker["judges"] == ["x", "y"] and marker["n_rows"] == 3 * marker["n_pairs"]
    head = json.loads((tmp_path / "run" / "calibration" / "bradley_terry.json").read_text())
    assert len(head["judges"]) == 2


@pytest.mark.slow  # a pairwise run on the fake backend: about 4 s on 2 cores
def test_rubrics_that_decide_no_training_pair_give_a_null_sharpness(tmp_path):
    """Every response gets the same answer on every rubric, so no score difference decides a pair: select
    still writes its set (sharpness null, not NaN, which JSON cannot hold) and says why, where it crashed."""
    from rubric_induce.backends.fake import FakeBackend
    from rubric_induce.pipeline import run_pipeline

    cfg = fake_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("pair_consistency = 0.5", "# no filter"), encoding="utf-8")
    said: list[str] = []
    backend = FakeBackend(answers=lambda messages, answers, prefix: {answers[0]: 1.0})
    run_pipeline(cfg, backend=backend, stop_after="select", echo=said.append)
    doc = json.loads((tmp_path / "run" / "selected.manifest.json").read_text(encoding="utf-8"))
    assert doc["train_metrics"]["sharpness"] is None and doc["train_metrics"]["coverage"] == 0.0
    assert any("decide none" in line for line in said)
