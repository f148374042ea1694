"""Score table I/O and the run report (library and `rubric-induce report`)."""
from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from rubric_induce.calibration.metrics import smooth_ece
from rubric_induce.cli import cli
from rubric_induce.core.errors import DataError, MissingDependencyError
from rubric_induce.core.stats import quadratic_weighted_kappa, summary_level, williams_test_scores
from rubric_induce.data.jsonl import atomic_write_text, write_json
from rubric_induce.evaluation.score_table import ScoreRow, read_scores, write_scores
from rubric_induce.reporting.report import render_run_report

N_BOOT = 100


# --------------------------------------------------------------------------- score table

def test_score_rows_round_trip(tmp_path):
    rows = [
        ScoreRow("e1", "coh", "sys", 3.5, 4.0, group="d1", probs=(0.2, 0.8), scale=(1, 2), threshold=None),
        {"example_id": "e2", "aspect": "coh", "system": "sys", "score": None, "human": None, "group": None},
        {"example_id": 7, "aspect": "sat", "system": "sys", "score": 1, "human": 1, "threshold": 0.5,
         "extra": "ignored"},
    ]
    path = write_scores(tmp_path / "scores.jsonl", rows)
    back = read_scores(path)
    assert back[0] == rows[0]
    assert back[1].example_id == "e2" and not back[1].has_score and back[1].human is None
    assert back[2].example_id == "7" and back[2].score == 1.0 and back[2].threshold == 0.5
    # numpy scalars and arrays, as probing code produces them, are accepted and stored as plain JSON
    np_row = ScoreRow(np.str_("e3"), "coh", "sys", np.float32(2.5), np.int64(3), group=np.int64(4),
                      probs=np.array([0.25, 0.75], dtype=np.float32), scale=np.array([1, 2]))
    assert read_scores(write_scores(tmp_path / "np.jsonl", [np_row]))[0] == np_row
    assert np_row.group == "4" and np_row.probs == (0.25, 0.75) and np_row.scale == (1.0, 2.0)
    first = json.loads(path.read_text().splitlines()[1])
    assert list(first) == ["example_id", "group", "aspect", "system", "score", "human", "probs", "scale",
                           "threshold"]
    assert first["score"] is None  # NaN is written as null, never as invalid JSON


@pytest.mark.parametrize("line, field, message", [
    ({"example_id": "a", "aspect": "x", "system": "s"}, "score", "missing"),
    ({"example_id": "a", "aspect": "x", "system": "s", "score": "high"}, "score", "number"),
    ({"example_id": "a", "aspect": "", "system": "s", "score": 1}, "aspect", "empty"),
    ({"example_id": "a", "aspect": "x", "system": "s", "score": 1, "human": True}, "human", "number"),
    ({"example_id": "a", "aspect": "x", "system": "s", "score": 1, "probs": [0.5, 0.5]}, "scale", "together"),
    ({"example_id": "a", "aspect": "x", "system": "s", "score": 1, "probs": [1.0], "scale": [1, 2]},
     "probs", "1 probabilities for 2"),
    ({"example_id": "a", "aspect": "x", "system": "s", "score": 1, "probs": [-1, 2], "scale": [1, 2]},
     "probs", "non-negative"),
])
def test_read_scores_names_file_line_and_field(tmp_path, line, field, message):
    path = tmp_path / "scores.jsonl"
    good = {"example_id": "ok", "aspect": "x", "system": "s", "score": 1.0}
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(line) + "\n")
    with pytest.raises(DataError, match=message) as info:
        read_scores(path)
    assert info.value.path == str(path) and info.value.line == 3 and info.value.field == field


def test_read_scores_rejects_duplicates_and_bad_json(tmp_path):
    path = tmp_path / "scores.jsonl"
    row = {"example_id": "a", "aspect": "x", "system": "s", "score": 1.0}
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"duplicate .*\(first on line 1\)") as info:
        read_scores(path)
    assert info.value.line == 2
    path.write_text("{not json\n")
    with pytest.raises(DataError, match="malformed JSON"):
        read_scores(path)
    with pytest.raises(DataError, match="row 1") as info:
        write_scores(tmp_path / "out.jsonl", [row, {**row, "score": float("inf")}])
    assert info.value.field == "score" and not (tmp_path / "out.jsonl").exists()


# --------------------------------------------------------------------------- synthetic run

def _synthetic_rows(seed: int = 0) -> list[ScoreRow]:
    """20 documents x 5 outputs; a Likert aspect (groups, 1-5 distributions) and a binary aspect
    (threshold, two-point distributions), each scored by a sharp and a noisy system."""
    rng = np.random.default_rng(seed)
    rows = []
    for doc in range(20):
        for k in range(5):
            eid = f"d{doc}-{k}"
            human = float(rng.integers(1, 6))
            for system, noise in (("sharp", 0.7), ("noisy", 2.0)):
                guess = human + rng.normal(0, noise)
                probs = np.exp(-0.5 * (np.arange(1, 6) - guess) ** 2)
                rows.append(ScoreRow(eid, "coherence", system, float(np.clip(np.round(guess), 1, 5)),
                                     None if (doc, k) == (0, 0) else human, group=f"doc{doc}",
                                     probs=tuple(probs / probs.sum()), scale=(1, 2, 3, 4, 5)))
                y = float(human >= 3)
                netsat = 2 * y - 1 + rng.normal(0, noise)
                q = 1 / (1 + np.exp(-2 * netsat))
                rows.append(ScoreRow(eid, "sat", system, float(netsat), y, probs=(1 - q, q), scale=(0, 1),
                                     threshold=0.0))
    return rows


def _make_run(d: Path) -> Path:
    write_scores(d / "scores.jsonl", _synthetic_rows())
    write_json(d / "manifest.json", {"config": {"seed": 0, "backend": "fake/echo"},
                                     "versions": {"rubric_induce": "0.1.0"},
                                     "usage": {"prompt_tokens": 1234, "cost_usd": None},
                                     "timings": {"probe_s": 12.5}})
    atomic_write_text(d / "select" / "metrics.md", "# Rubric selection: rubicon\n\nbody\n")
    nested = [replace(r, probs=None, scale=None) for r in _synthetic_rows(seed=1) if r.aspect == "sat"]
    write_scores(d / "ablation" / "scores.jsonl", nested)
    return d


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return _make_run(tmp_path / "run")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, str]:
    """The synthetic run rendered once with figures (drawing is the slow part)."""
    d = _make_run(tmp_path_factory.mktemp("rendered") / "run")
    path = render_run_report(d, n_boot=N_BOOT)
    assert path == d / "report.md"
    return d, path.read_text()


@pytest.fixture
def small_run(tmp_path) -> Path:
    """One binary aspect, one system, no distributions: three figures."""
    d = tmp_path / "small"
    write_scores(d / "scores.jsonl", [replace(r, probs=None, scale=None) for r in _synthetic_rows()
                                      if r.aspect == "sat" and r.system == "sharp"][:40])
    return d


def _line(md: str, *cells: str) -> str:
    prefix = "| " + " | ".join(cells) + " |"
    hits = [ln for ln in md.splitlines() if ln.startswith(prefix)]
    assert hits, f"no table row starting with {prefix!r}"
    return hits[0]


def _section(md: str, heading: str) -> str:
    start = md.index(heading)
    nxt = md.find("\n## ", start + len(heading))
    return md[start: nxt if nxt >= 0 else len(md)]


@pytest.mark.slow
def test_report_sections_numbers_and_figures(rendered):
    run_dir, md = rendered
    for heading in ("# Run report: run", "## Run", "## Scores: `scores.jsonl`", "## Scores: `ablation/scores.jsonl`",
                    "### Correlation with human scores", "Summary level", "### Significance: Williams' test",
                    "### Agreement on the shared integer scale", "### Binary aspects",
                    "### Score distributions by human label", "### Calibration of the answer distributions",
                    "## Other reports in this run"):
        assert heading in md, heading
    # manifest rendered generically
    assert "| config.backend | `fake/echo` |" in md and "| usage.prompt_tokens | `1234` |" in md
    assert "| timings.probe_s | `12.5` |" in md
    assert "[select/metrics.md](select/metrics.md): Rubric selection: rubicon" in md
    assert "report.md" not in _section(md, "## Other reports")

    top = _section(md, "## Scores: `scores.jsonl`")
    rows = _synthetic_rows()
    cell = {(a, s): [r for r in rows if r.aspect == a and r.system == s and r.human is not None]
            for a in ("coherence", "sat") for s in ("sharp", "noisy")}
    for (aspect, system), cr in cell.items():
        s = np.array([r.score for r in cr])
        h = np.array([r.human for r in cr])
        line = _line(top, aspect, system, str(len(cr)))
        r_p, r_s, r_k = stats.pearsonr(s, h)[0], stats.spearmanr(s, h)[0], stats.kendalltau(s, h)[0]
        assert f"| {r_p:.3f} [" in line and f"| {r_s:.3f} [" in line and f"| {r_k:.3f} [" in line
    # summary level, coherence only (the binary aspect has no groups)
    cr = cell[("coherence", "sharp")]
    summ = summary_level([r.score for r in cr], [r.human for r in cr], [r.group for r in cr])
    assert f"| coherence | sharp | {summ.n_groups} | {summ.value:.3f} [" in top
    assert "| sat | sharp | 0 |" not in top
    # Williams: the sharp system against the noisy one
    sharp = {r.example_id: r for r in cell[("coherence", "sharp")]}
    noisy = {r.example_id: r for r in cell[("coherence", "noisy")]}
    w = williams_test_scores([sharp[i].human for i in sharp], [sharp[i].score for i in sharp],
                             [noisy[i].score for i in sharp])
    assert w["t"] > 2
    assert _line(top, "coherence", "sharp", "noisy", str(w["n"])).endswith(f"| {w['t']:.3f} | {w['p']:.3g} |")
    # QWK on the shared 1-5 scale, for the Likert aspect only
    qwk = quadratic_weighted_kappa([r.score for r in cr], [r.human for r in cr], labels=[1, 2, 3, 4, 5])
    agreement = _section(top, "### Agreement")
    assert f"| 1-5 | {qwk:.3f} |" in _line(agreement, "coherence", "sharp")
    assert "| sat |" not in agreement.split("### Binary")[0]
    # binary metrics at the stored threshold
    bs = cell[("sat", "sharp")]
    s = np.array([r.score for r in bs])
    y = np.array([r.human for r in bs])
    acc = np.mean((s > 0) == (y == 1))
    auc = stats.mannwhitneyu(s[y == 1], s[y == 0]).statistic / ((y == 1).sum() * (y == 0).sum())
    assert f"| {auc:.3f} | 0 | {acc:.3f} |" in _line(_section(top, "### Binary aspects"), "sat", "sharp")
    # calibration: P(positive) for the binary aspect
    q = np.array([r.probs[1] for r in bs])
    assert _line(top, "sat", "sharp", "P(positive)").endswith(f"| {smooth_ece(q, y):.3f} |")
    assert "| coherence | sharp | top-label | 99 |" in top

    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) == 9  # top: 6 figures, ablation: 3
    for link in links:
        png = run_dir / link
        assert png.parent == run_dir / "figures"
        assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    names = {Path(x).name for x in links}
    assert {"scores_correlations.png", "scores_precision_sat.png", "scores_distribution_coherence.png",
            "scores_reliability_coherence.png", "ablation_correlations.png"} <= names
    assert len(names) == len(links)  # one file per figure, nothing overwritten


@pytest.mark.slow
def test_report_is_deterministic_and_rerunnable(rendered, tmp_path):
    run_dir, md = rendered
    out = tmp_path / "again.md"

    def text(md: str) -> list[str]:
        """All but links (relative to the report), blank lines and the figures-only section."""
        return [ln for ln in md.splitlines() if ln and "](" not in ln and "Score distributions" not in ln]

    # the same run rendered again (tables only, to another file) gives the same numbers
    again = text(render_run_report(run_dir, out, n_boot=N_BOOT, figures=False).read_text())
    assert again == text(md) and len(again) > 50
    assert text(render_run_report(run_dir, out, n_boot=N_BOOT, seed=1, figures=False).read_text()) != again


def test_report_out_elsewhere_links_resolve(small_run, tmp_path):
    out = tmp_path / "elsewhere" / "r.md"
    render_run_report(small_run, out, n_boot=20)
    md = out.read_text()
    links = re.findall(r"\]\(([^)]+)\)", md)
    assert len(links) == 4  # the table file and three figures
    assert all((out.parent / link).exists() for link in links)
    assert all((small_run / "figures") in (out.parent / link).resolve().parents
               for link in links if link.endswith(".png"))
    assert not (small_run / "report.md").exists()


def test_report_without_figures_and_without_matplotlib(run_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    with pytest.raises(MissingDependencyError, match=r"rubric-induce\[plots\]"):
        render_run_report(run_dir, n_boot=20)
    md = render_run_report(run_dir, n_boot=20, figures=False).read_text()
    assert "### Correlation with human scores" in md and "![" not in md
    assert not (run_dir / "figures").exists()


def test_report_manifest_only_and_empty_dir(tmp_path):
    d = tmp_path / "m"
    write_json(d / "manifest.json", {"stages": {"probe": {"seconds": 3}}, "seeds": [0, 1]})
    md = render_run_report(d).read_text()
    assert "| stages.probe.seconds | `3` |" in md and "| seeds | `[0, 1]` |" in md
    assert "## Scores" not in md
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="nothing to report"):
        render_run_report(empty)
    (empty / "report.md").write_text("# an old report\n")  # the report itself is not an input
    with pytest.raises(DataError, match="nothing to report"):
        render_run_report(empty)
    with pytest.raises(DataError, match="not a directory"):
        render_run_report(tmp_path / "missing")


def test_cli_report(small_run, run_dir, tmp_path):
    result = CliRunner().invoke(cli, ["report", str(small_run)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(small_run / "report.md")
    md = (small_run / "report.md").read_text()
    assert "### Correlation with human scores" in md and "1000 resamples" in md
    assert len(list((small_run / "figures").glob("*.png"))) == 3
    out = tmp_path / "cli.md"
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--out", str(out), "--no-figures",
                                      "--bootstrap", "30"])
    assert result.exit_code == 0, result.output
    assert "![" not in out.read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["report", str(empty)])
    assert result.exit_code == 2 and "nothing to report" in result.output
    result = CliRunner().invoke(cli, ["report", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output
