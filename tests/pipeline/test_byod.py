"""Bring-your-own-data shapes end to end on the fake backend: a long-format CSV (several judges per
text, some texts with one) graded 0-10, where no training text happens to get some grades."""
from __future__ import annotations

import csv
import json
import random

import pytest
from click.testing import CliRunner

from rubric_induce.cli import cli
from rubric_induce.pipeline import run_pipeline

CONFIG = """
[run]
seed = 0
test_size = 0.4

[data]
examples = "grades.csv"
label = "grade"
label_threshold = 6
scales = { grade = [0, 10] }

[data.mapping]
id = "essay"
judge = "grader"
text = { prompt = "prompt", essay = "body" }
labels = { grade = "grade" }

[task]
description = "Short essays about a service; graders give 0 (unusable) to 10 (excellent)."
fields = { prompt = "question", essay = "text" }

[backend]
spec = "fake"

[generate]
per_class = 3
options = { top_k = 2, batch_size = 3, max_new = 2 }

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 2

[calibrate]
options = { hidden = [4, 4], finetune_epochs = 5, pretrain = false }
adaptive_options = { epochs = 5 }
"""


@pytest.fixture(scope="module")
def graded_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("byod")
    rng = random.Random(0)
    words = "the service was quick helpful slow rude clear confusing polite late accurate wrong".split()
    with (tmp / "grades.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["essay", "prompt", "body", "grader", "grade"])
        for i in range(30):
            body = " ".join(rng.choice(words) for _ in range(12 + i % 7))
            for g in (["g1", "g2"] if i % 3 else ["g3"]):  # every third text has one grader
                w.writerow([f"e{i}", "Describe a service you used.", body, g, rng.choice([0, 1, 2, 5, 6, 8, 9])])
    (tmp / "cfg.toml").write_text(CONFIG, encoding="utf-8")
    run_pipeline(tmp / "cfg.toml", out=tmp / "run", echo=lambda m: None, stop_after="artifact")
    return tmp, tmp / "run"


@pytest.mark.slow
def test_declared_scale_gives_the_calibrator_every_grade(graded_run):
    """The grades 3, 4, 7 and 10 occur in no row, yet `[data] scales = { grade = [0, 10] }` says
    they exist: the calibrator (and the adaptive model) predict over all eleven (they used only
    the grades seen, so could never predict a 10)."""
    _, run = graded_run
    cal = json.loads((run / "calibration" / "calibrator.json").read_text(encoding="utf-8"))
    assert cal["scales"] == [[float(v) for v in range(11)]]
    assert sorted(cal["judges"]) == ["g1", "g2", "g3"]
    adaptive = json.loads((run / "calibration" / "adaptive" / "adaptive.json").read_text(encoding="utf-8"))
    assert adaptive["scales"] == cal["scales"]


@pytest.mark.slow
def test_score_and_adaptive_score_on_the_wide_scale(graded_run, tmp_path):
    tmp, run = graded_run
    new = tmp_path / "new.csv"
    new.write_text("essay,prompt,body\nx1,Describe a service you used.,quick polite accurate\n", encoding="utf-8")
    for extra in ([], ["--adaptive", "--budget", "2"]):
        out = tmp_path / "s.jsonl"
        res = CliRunner().invoke(cli, ["score", str(run), "--input", str(new), "--out", str(out), "--judge", "g1",
                                       *extra])
        assert res.exit_code == 0, res.output
        row = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
        assert row["id"] == "x1" and 0.0 <= row["prediction"] <= 10.0
        if extra:
            assert row["scale"] == [float(v) for v in range(11)] and len(row["asked"]) <= 2


@pytest.mark.slow
def test_selection_warnings_are_stage_lines_not_python_warnings(graded_run, tmp_path, monkeypatch):
    """`run` printed selection's warnings as Python warnings (`/.../selection/api.py:288:
    SelectionWarning: ...` plus a source line); they are now the stage's own `warning:` lines and
    are kept in its summary."""
    import shutil
    import warnings

    import rubric_induce.pipeline.stages as stages
    from rubric_induce.selection.selector import SelectionWarning

    original = stages.run_select  # the select stage's library entry point, as the stage imports it

    def noisy(*args, **kwargs):
        warnings.warn("the selected set does not separate the classes", SelectionWarning, stacklevel=2)
        return original(*args, **kwargs)

    monkeypatch.setattr(stages, "run_select", noisy)
    tmp, _ = graded_run
    shutil.copy(tmp / "grades.csv", tmp_path / "grades.csv")
    (tmp_path / "cfg.toml").write_text(CONFIG, encoding="utf-8")
    said: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_pipeline(tmp_path / "cfg.toml", out=tmp_path / "run", echo=said.append, stop_after="select")
    assert "  warning: the selected set does not separate the classes" in said
    assert not [w for w in caught if issubclass(w.category, SelectionWarning)]
    assert result.summaries["select"]["warnings"] == ["the selected set does not separate the classes"]


@pytest.mark.slow
@pytest.mark.parametrize("threshold,cls", [("11", "negative"), ("0", "positive")])
def test_a_threshold_outside_the_labels_names_the_threshold(graded_run, tmp_path, threshold, cls):
    """label_threshold = 11 on a 0-10 scale said "the training split holds one class only; use more
    examples or a smaller run.test_size": the split was not the problem."""
    import shutil

    tmp, _ = graded_run
    shutil.copy(tmp / "grades.csv", tmp_path / "grades.csv")
    (tmp_path / "cfg.toml").write_text(CONFIG.replace("label_threshold = 6", f"label_threshold = {threshold}"),
                                       encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(tmp_path / "cfg.toml"), "--check"])
    assert res.exit_code == 2
    assert f"with label_threshold {threshold} every one of the 30 examples is {cls}" in res.output
    assert "field 'data.label_threshold'" in res.output and "runs from 0 to 9" in res.output


@pytest.mark.slow
def test_stage_commands_read_a_csv_through_the_run_configs_mapping(graded_run, tmp_path):
    """`probe`, `select`, `calibrate` ... took --examples CSV only with a `text` column (and calibrate
    took rubric-induce JSONL only, with an error saying to give a .csv file a .csv name);
    --mapping-file reads the columns (and [data] scales) as `run` does."""
    tmp, run = graded_run
    runner = CliRunner()
    common = ["--examples", str(tmp / "grades.csv"), "--mapping-file", str(tmp / "cfg.toml")]
    res = runner.invoke(cli, ["probe", *common, "--rubrics", str(run / "selected.jsonl"), "--backend", "fake",
                              "--no-cache", "--out", str(tmp_path / "p.jsonl"), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "probing 30 examples x" in res.output
    res = runner.invoke(cli, ["calibrate", "--probes", str(tmp_path / "p.jsonl"), *common, "--question", "grade",
                              "--cv-folds", "0", "--no-adaptive",
                              "--out", str(tmp_path / "cal")])
    assert res.exit_code == 0, res.output
    cal = json.loads((tmp_path / "cal" / "calibrator.json").read_text(encoding="utf-8"))
    assert cal["scales"] == [[float(v) for v in range(11)]] and sorted(cal["judges"]) == ["g1", "g2", "g3"]
    # without the mapping: the missing column, and where to name it
    res = runner.invoke(cli, ["calibrate", "--probes", str(tmp_path / "p.jsonl"), "--examples",
                              str(tmp / "grades.csv"), "--question", "grade", "--out", str(tmp_path / "c2")])
    assert res.exit_code == 2 and "missing column 'text'" in res.output and "--mapping-file" in res.output
    bad = tmp_path / "bad.toml"
    bad.write_text('[data.mapping]\ntext = { essay = "body" }\nlabls = { grade = "grade" }\n', encoding="utf-8")
    res = runner.invoke(cli, ["select", "--probes", str(tmp_path / "p.jsonl"), "--rubrics", str(run / "selected.jsonl"),
                              "--examples", str(tmp / "grades.csv"), "--mapping-file", str(bad), "--label", "grade",
                              "--out", str(tmp_path / "sel")])
    assert res.exit_code == 2 and "bad.toml" in res.output and "did you mean 'labels'" in res.output


def test_a_continuous_label_is_warned_about_before_calibration(tmp_path):
    """A 0-1 float score (every text its own value) became one calibration class per value, silently."""
    rng = random.Random(9)
    with (tmp_path / "cont.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text", "score"])
        for i in range(30):
            w.writerow([i, f"text number {i} " + " ".join(rng.choice("ab cd ef gh".split()) for _ in range(6)),
                        round(rng.random(), 3)])
    cfg = ('[data]\nexamples = "cont.csv"\nlabel = "score"\nlabel_threshold = 0.5\n[task]\ndescription = "Texts."\n'
           '[backend]\nspec = "fake"\n')
    (tmp_path / "cfg.toml").write_text(cfg, encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(tmp_path / "cfg.toml"), "--check"])
    assert res.exit_code == 0, res.output
    assert "'score' has 15 distinct answers in 15 training ratings" in res.output
    rounded = tmp_path / "cfg2.toml"  # a 1-5 rating: no warning
    (tmp_path / "r.csv").write_text("id,text,score\n" + "".join(f"{i},text {i},{1 + i % 5}\n" for i in range(30)),
                                    encoding="utf-8")
    rounded.write_text(cfg.replace("cont.csv", "r.csv").replace("0.5", "3"), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(rounded), "--check"])
    assert res.exit_code == 0 and "distinct answers" not in res.output, res.output


def test_too_few_training_texts_for_calibration_mention_the_held_out_share(tmp_path):
    (tmp_path / "t.csv").write_text("id,text,v\n" + "".join(f"{i},text {i},{i % 2}\n" for i in range(5)),
                                    encoding="utf-8")
    (tmp_path / "cfg.toml").write_text('[data]\nexamples = "t.csv"\nlabel = "v"\n[task]\ndescription = "T."\n'
                                       '[backend]\nspec = "fake"\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(tmp_path / "cfg.toml"), "--check"])
    assert res.exit_code == 2 and "only 2 training examples" in res.output
    assert "3 of 5 are held out: a smaller run.test_size keeps more" in res.output
