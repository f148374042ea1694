"""Issue 31, item 7 (Markdown): report, evaluation and feedback Markdown show data as text.

Rubric texts, judge, aspect, system and group names and LLM replies come from files someone else
may have written. Written raw into ``report.md`` / ``evaluation.md`` / ``feedback.md`` /
the llm-rubric questionnaire, ``<img src=x onerror=...>`` became an element when the Markdown
was rendered, ``|`` or a newline in a name broke its table row, and ``[x](javascript:...)``
became a link. Each writer now escapes them (:mod:`rubric_induce.core.mdtext`).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from rubric_induce.data import Example, Rubric, RubricSet
from rubric_induce.data.model import Judgment

EVIL = '<img src=x onerror=alert(1)> a|b\nnew line [click](javascript:alert(1)) `tick` \u202eevil'


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` is not a separator)."""
    return re.split(r"(?<!\\)\|", row.strip())[1:-1]


def _assert_inert(md: str) -> None:
    """No HTML element, link or bidi control from the data survives in ``md`` (outside code spans,
    whose text is literal)."""
    md = re.sub(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", "CODE", md)
    assert "<img" not in md and "<script" not in md and not re.search(r"(?<!\\)\]\(javascript:", md)
    assert "\u202e" not in md
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert "<img" not in html and 'href="javascript' not in html


def _table_rows(md: str, header_start: str) -> list[list[str]]:
    lines = md.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(header_start))
    width = len(_cells(lines[i]))
    rows = []
    for ln in lines[i + 2:]:
        if not ln.startswith("|"):
            break
        rows.append(_cells(ln))
        assert len(rows[-1]) == width, ln
    return rows


def test_md_text_and_md_code():
    from rubric_induce.core.mdtext import md_code, md_text

    out = md_text(EVIL)
    _assert_inert(out)
    assert "\n" not in out and len(_cells(f"| {out} |")) == 1
    assert "&lt;img src=x onerror=alert(1)&gt;" in out and "&lt;U+202E&gt;" in out
    code = md_code("a ``b`` | c")
    assert code.startswith("```") and code.endswith("```") and "a ``b`` | c" in code
    block = md_text("# head\n- item\n1. x\n<b>y</b>", keep_lines=True)
    assert block.split("\n\n") == ["\\# head", "\\- item", "1\\. x", "&lt;b&gt;y&lt;/b&gt;"]


def test_feedback_markdown_escapes_names_rubric_texts_and_replies():
    from rubric_induce.backends.structured import GenerationStats
    from rubric_induce.feedback.api import Feedback, FeedbackSummary, GroupFeedback

    fb = Feedback(strengths=(EVIL,), weaknesses=("<script>x</script>",), summary=EVIL + "\n# Not a heading")
    group = GroupFeedback(name=EVIL, feedback=fb, n_items=2, n_examples=1, n_rubrics=2, mean_score=0.5,
                          rubric_stats=[{"id": "rb-1|x", "text": EVIL, "polarity": "SAT", "n": 2, "mean": 0.5}])
    summary = FeedbackSummary(groups={EVIL: group, "other": group}, overall=fb, depth=1, n_items=2,
                              context_budget=100, calls_by_level={1: 1}, stats=GenerationStats(), model=EVIL)
    md = summary.to_markdown()
    _assert_inert(md)
    assert "\n# Not a heading" not in md
    rows = _table_rows(md, "| rubric |")
    assert len(rows) == 1 and rows[0][2].strip() == "2"


def test_judges_table_escapes_judge_names():
    from rubric_induce.evaluation.judges import judge_rows, judges_markdown

    names = [EVIL, "plain", "p|pe"]
    rng = np.random.default_rng(0)
    test = [Example.create({"text": f"t{i}"}, {"q": 1.0}, id=f"e{i}",
                           judgments=[Judgment(n, {"q": float(rng.integers(1, 6))}) for n in names])
            for i in range(8)]
    info = judge_rows(test, EVIL, min_n=1) or judge_rows(test, "q", min_n=1)
    md = judges_markdown(info)
    _assert_inert(md)
    rows = _table_rows(md, "| judge |")
    assert len(rows) == len(names) + 1  # one per judge and the pooled row


def _run_dir(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    (out / "stages").mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps({
        "format": "rubric-induce-run", "config_file": "cfg` <b>x</b>", "seed": 0,
        "data": {"label": EVIL, "n_examples": 4, "n_train": 2, "n_test": 2},
        "backend": {"spec": "fake"}, "stages": {EVIL: {"status": "done"}}}), encoding="utf-8")
    (out / "evaluation.json").write_text(json.dumps({
        "warnings": [f"rubric {EVIL!r} is near-constant"], "question": EVIL,
        "calibrated": {"calibrated": {"pearson": 0.5, "spearman": 0.5, "kendall": 0.4, "rmse": 1.0, "n": 3}}}),
        encoding="utf-8")
    rubrics = [Rubric.create(EVIL, "SAT", aspect="<b>asp</b>"), Rubric.create("Plain | text.", "DSAT")]
    RubricSet(rubrics, {}, threshold=0.0).save(out / "selected.jsonl")
    from rubric_induce.evaluation.score_table import ScoreRow, write_scores

    write_scores(out / "scores.jsonl", [ScoreRow(example_id=f"e{i}", aspect=EVIL, system="sys|<i>x</i>",
                                                 score=float(i), human=float(i % 3)) for i in range(6)])
    return out


def test_run_report_escapes_rubric_texts_and_names(tmp_path):
    from rubric_induce.reporting.report import ReportParams, report

    out = _run_dir(tmp_path)
    md = report(out, ReportParams(bootstrap=5, figures=False)).read_text(encoding="utf-8")
    _assert_inert(md)
    assert "&lt;img src=x onerror=alert(1)&gt;" in md  # shown, as text
    for header in ("| stage |", "| aspect | system | n |", "| key | value |"):
        _table_rows(md, header)  # every row keeps its column count


def test_heldout_evaluation_markdown_escapes_labels_and_warnings():
    from rubric_induce.data.results import ScoreResult
    from rubric_induce.evaluation.heldout import evaluate

    examples = [Example.create({"text": f"t{i}"}, {EVIL: float(i % 2)}, id=f"e{i}",
                               judgments=[Judgment(EVIL, {EVIL: float(i % 2)})]) for i in range(6)]
    # netsat separates the labels but for one text: accuracy 5/6 against a majority baseline, so a
    # warning naming the label is written too
    results = [ScoreResult(id=ex.id, distributions={}, expected={}, netsat=float(i % 2) + 0.1 * i, threshold=0.5,
                           label=int(i % 2)) for i, ex in enumerate(examples)]
    res = evaluate(results, examples, np.array([i % 2 for i in range(6)], dtype=float), label=EVIL, threshold=0.5,
                   binary=True)
    _assert_inert(res.markdown)


def test_llm_rubric_markdown_escapes_titles_and_questions(tmp_path):
    from rubric_induce.handoff import export_llm_rubric

    rubrics = RubricSet([Rubric.create(EVIL, "SAT", aspect="<b>a</b>")], {"name": EVIL})
    _, md_path = export_llm_rubric(rubrics, tmp_path / "q.json")
    _assert_inert(md_path.read_text(encoding="utf-8"))


class _SameVector:
    """An embedder that sees every text as the same: everything merges into one group."""

    model = "same-vector"

    def encode(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)


def test_dedup_report_escapes_rubric_texts():
    from rubric_induce.dedup import dedup

    rubrics = [Rubric.create(EVIL, "SAT"), Rubric.create(EVIL + " again", "SAT"), Rubric.create("x | y", "SAT")]
    md = dedup(rubrics, threshold=0.9, embedder=_SameVector()).report_markdown
    _assert_inert(md)
    assert "&lt;img" in md
    for ln in md.splitlines():
        if ln.startswith("| ") and "`rb-" in ln:
            assert len(_cells(ln)) == 4, ln


def test_probe_report_escapes_rubric_texts():
    from rubric_induce.backends.fake import FakeBackend
    from rubric_induce.probing.api import probe
    from rubric_induce.probing.report import probe_report

    examples = [Example.create({"text": f"text {i}"}, {"sat": float(i % 2)}, id=f"e{i}") for i in range(4)]
    rubrics = [Rubric.create(EVIL, "SAT")]
    md = probe_report(probe(examples, rubrics, FakeBackend()), examples, rubrics, label="sat")
    _assert_inert(md)
    assert "&lt;img" in md
