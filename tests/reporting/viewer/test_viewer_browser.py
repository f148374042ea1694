"""The viewer page in a real browser: headless Chromium from the Debian packages renders it from disk.

Marked ``browser`` (and ``slow``): plain ``pytest`` skips it; CI runs it, where ``scripts/setup.sh``
installs Chromium, and there a missing Chromium fails instead of skipping (tests/conftest.py).
"""
from __future__ import annotations

import html
import re
from collections import Counter
from urllib.parse import unquote

import pytest

from rubric_induce.pipeline.recorded import examples_from_recorded_config
from rubric_induce.reporting.viewer import VIEW_NAME, build_view_data, render_view
from rubric_induce.reporting.viewer.browser import dump_dom, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _attr(dom: str, name: str) -> str | None:
    m = re.search(rf'{name}="([^"]*)"', dom)
    return m.group(1) if m else None


def _js_errors(dom: str) -> str:
    m = re.search(r'<pre id="js-errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert m, "the page has no js-errors element"
    return html.unescape(m.group(1)).strip()


def _main(dom: str) -> str:
    """The rendered content only (the page's script source is in the DOM too)."""
    m = re.search(r'<main[^>]*>(.*)</main>', dom, re.S)
    assert m, "no <main> element"
    return m.group(1)


def _clean(res) -> str:
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert _attr(dom, "data-ready") == "1", "the page did not finish its first render"
    assert _js_errors(dom) == ""
    assert "Uncaught" not in res.stderr, res.stderr[-2000:]
    return dom


@pytest.fixture(scope="module")
def page(viewer_run):
    return viewer_run / VIEW_NAME


@pytest.fixture(scope="module")
def data(viewer_run):
    return build_view_data(viewer_run, allow_outside=True, load_examples=examples_from_recorded_config)


def test_rubric_texts_are_in_the_rendered_dom(chromium_path, page, data):
    dom = _main(_clean(dump_dom(chromium_path, page, "rubrics")))
    shown = [html.unescape(t) for t in re.findall(r'<p class="txt rubric-text">(.*?)</p>', dom, re.S)]
    assert shown == [r["text"] for r in data["rubrics"]] and shown
    for r in data["not_selected"]:
        assert html.escape(r["text"], quote=False) in dom
    assert dom.count("<svg") >= sum(1 for r in data["rubrics"] if r["curve"])  # precision curves drawn


def test_the_summary_shows_the_direct_judge_beside_the_rubrics(chromium_path, page, data):
    d = data["headline"]["direct"]
    dom = _main(_clean(dump_dom(chromium_path, page, "summary")))
    assert "Against asking the LLM directly" in dom and "direct judge" in dom
    assert "calibrated prediction minus direct judge" in dom
    assert f"{d['systems']['direct']['pearson']['value']:.3f}" in dom


def _filter_word(data) -> tuple[str, int]:
    """A word in some texts but not all, and how many texts the page's filter should keep."""
    hay = [(t["id"] + "\0" + t["split"] + "\0" + t["text"]).lower() for t in data["texts"]]
    words = Counter(w for t in data["texts"] for w in set(re.findall(r"[a-z]{5,}", t["text"].lower())))
    n = len(hay)
    word = min(words, key=lambda w: (abs(words[w] - n / 3), w))
    return word, sum(word in h for h in hay)


def test_filtering_the_table_changes_the_rows(chromium_path, page, data):
    everything = _clean(dump_dom(chromium_path, page, "texts"))
    n = len(data["texts"])
    assert _attr(everything, "data-rows") == str(n)
    assert everything.count('class="row"') == min(n, 100)
    word, expected = _filter_word(data)
    assert 0 < expected < n
    filtered = _clean(dump_dom(chromium_path, page, f"filter={word}"))
    assert _attr(filtered, "data-rows") == str(expected)
    assert filtered.count('class="row"') == min(expected, 100)
    held_out = _clean(dump_dom(chromium_path, page, "split=test"))
    assert _attr(held_out, "data-rows") == str(sum(t["split"] == "test" for t in data["texts"]))


def test_a_texts_page_shows_its_probes_judges_and_feedback(chromium_path, page, data):
    t = next(t for t in data["texts"] if t.get("feedback") and t.get("ratings"))
    dom = _main(_clean(dump_dom(chromium_path, page, f"text={t['id']}")))
    assert html.escape(t["text"][:60], quote=False) in dom
    assert dom.count('class="bars"') == sum(1 for p in t["probes"] if p and p.get("p"))
    for judge in t["ratings"]:
        assert f"<td>{judge}</td>" in dom
    assert "Feedback items that cite this text" in dom and "No feedback item cites" not in dom
    assert "held (0..1)" in dom
    assert 'id="next-text"' in dom or 'id="prev-text"' in dom  # j / k walk the table's order


def test_every_section_renders_without_a_javascript_error(chromium_path, page):
    for fragment in ("summary", "judges", "text=no-such-id", "filter=%3C%2Fscript%3E"):
        dom = _clean(dump_dom(chromium_path, page, fragment))
        assert float(_attr(dom, "data-first-render-ms")) > 0


def test_a_javascript_error_would_be_caught(chromium_path, viewer_run, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(render_view(build_view_data(viewer_run)).replace("route();\n", "route(); noSuchFunction();\n", 1),
                      encoding="utf-8")
    res = dump_dom(chromium_path, broken, "summary")
    assert "noSuchFunction" in _js_errors(res.stdout)
    assert "Uncaught" in res.stderr


@pytest.mark.parametrize("window", ["1280,800", "390,844"])
def test_screenshots_at_desktop_and_phone_width(chromium_path, page, tmp_path, window):
    png = tmp_path / "shot.png"
    res = screenshot(chromium_path, page, png, "texts", window=window)
    assert res.returncode == 0 and "Uncaught" not in res.stderr
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert (width, height) == tuple(int(v) for v in window.split(","))


def test_a_page_with_missing_pieces_renders_every_section(chromium_path, tmp_path, fake_run_config):
    from rubric_induce.pipeline import run_pipeline
    from rubric_induce.reporting.viewer import write_view

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(fake_run_config, encoding="utf-8")
    out = run_pipeline(cfg, out=tmp_path / "out", echo=lambda m: None, stop_after="select").out
    page = write_view(out, tmp_path / "partial.html")
    first = build_view_data(out)["texts"][0]["id"]
    for fragment in ("summary", "rubrics", "texts", "judges", f"text={first}"):
        dom = _main(_clean(dump_dom(chromium_path, page, fragment)))
        assert "Loading" not in dom
    assert "No held-out evaluation" in _main(_clean(dump_dom(chromium_path, page, "summary")))


@pytest.fixture(scope="module")
def hostile(viewer_run, tmp_path_factory):
    """A page of the run with a half-point label, bidi controls in a text and a rubric, and
    "from examples" ids as a list and (as a received page may hold) as one string."""
    data = build_view_data(viewer_run, allow_outside=True, load_examples=examples_from_recorded_config)
    first, second = data["texts"][0], data["texts"][1]
    first.update(y=4.5, labels={"sat": 4.5}, text="safe \u202etxt.exe\u2066 end")
    data["rubrics"][0]["text"] += " \u202e"
    data["rubrics"][0]["provenance"]["source_example_ids"] = [first["id"], second["id"]]
    data["rubrics"][1]["provenance"]["source_example_ids"] = second["id"]
    page = tmp_path_factory.mktemp("hostile") / "hostile.html"
    page.write_text(render_view(data), encoding="utf-8")
    return page, first, second


def test_from_examples_entries_are_links_not_file_url_text(chromium_path, hostile):
    page, first, second = hostile
    rub = _main(_clean(dump_dom(chromium_path, page, "rubrics")))
    links = re.findall(r'<span class="from-examples">(.*?)</span>', rub, re.S)
    assert len(links) >= 2 and "file:" not in rub

    def hrefs(span: str) -> list[str]:
        return [unquote(h) for h in re.findall(r'href="#text=([^"]*)"', span)]

    assert hrefs(links[0]) == [first["id"], second["id"]]
    assert hrefs(links[1]) == [second["id"]]  # a lone id string is one link


def test_half_point_labels_show_as_written(chromium_path, hostile):
    page, first, _ = hostile
    table = _main(_clean(dump_dom(chromium_path, page, "texts")))
    row = re.search(rf'<tr class="row"[^>]*data-id="{re.escape(first["id"])}".*?</tr>', table, re.S).group(0)
    assert re.search(r">4\.5<", row) and not re.search(r">5<", row)
    one = _main(_clean(dump_dom(chromium_path, page, f"text={first['id']}")))
    assert "sat = 4.5" in one


def test_bidi_controls_are_spelled_out_not_applied(chromium_path, hostile):
    page, first, _ = hostile
    one = _main(_clean(dump_dom(chromium_path, page, f"text={first['id']}")))
    assert "\u202e" not in one and "\u2066" not in one
    assert "\u27e8U+202E\u27e9txt.exe\u27e8U+2066\u27e9" in one


def test_a_fragment_with_bad_percent_encoding_does_not_break_the_page(chromium_path, hostile):
    page, _, _ = hostile
    for fragment in ("filter=%E0%A4%A", "text=%"):
        _clean(dump_dom(chromium_path, page, fragment))
    assert "No text with id %ZZ" in _main(_clean(dump_dom(chromium_path, page, "text=%ZZ")))


def test_pairs_and_their_verdicts_render_as_text(chromium_path, viewer_run, tmp_path):
    """A pairwise run's pairs side by side with the pairwise probe's verdicts in both orders: hostile
    prompt, response and rubric id texts show as text, never as markup."""
    data = build_view_data(viewer_run, allow_outside=True, load_examples=examples_from_recorded_config)
    evil = '<img src=x onerror="document.title=\'pwned\'">'
    data["pairs"] = [{"id": f"p{evil}", "split": "test", "prompt": f"prompt {evil}", "a": f"left {evil}",
                      "b": "right \u202eexe", "preferred": "A", "p_a": 0.7,
                      "verdicts": [{"rubric": f"r{evil}", "ab": 0.9, "ba": 0.8},
                                   {"rubric": "r2", "ab": 0.9, "ba": 0.2}]}]
    data["position_consistency"] = {"n": 2, "consistent": 0.5, "first_rate": 0.75, "mean_p_first": 0.7}
    page = tmp_path / "pairs.html"
    page.write_text(render_view(data), encoding="utf-8")
    main = _main(_clean(dump_dom(chromium_path, page, "summary")))
    assert "<img" not in main and html.escape(evil, quote=False) in main
    assert "\u202e" not in main and "\u27e8U+202E\u27e9exe" in main
    assert "A first → A (0.90) · B first → B (0.80) ✗" in main  # the first shown wins both times
    assert "r2: A first → A (0.90) · B first → A (0.20) ✓" in main
    assert "the two orders agree on 50.0%" in main and "75.0% of decided verdicts" in main


def test_inline_code_the_pager_smece_and_error_signs_as_rendered(chromium_path, viewer_run, tmp_path):
    """Issue 40, defect 7 in the browser: backticks in a warning become <code> (markup in them stays
    text), nothing ("null") is drawn under the texts pager, smECE lists its answers in numeric order,
    and a text's page calls every error prediction minus rating."""
    data = build_view_data(viewer_run, allow_outside=True, load_examples=examples_from_recorded_config)
    data["headline"]["warnings"] = ["set `calibrate.question = <b>q</b>` first"]
    data["calibration"]["smece"] = [["1", 0.1], ["1.5", 0.15], ["2", 0.2]]
    page = tmp_path / "page.html"
    page.write_text(render_view(data), encoding="utf-8")
    summary = _main(_clean(dump_dom(chromium_path, page, "summary")))
    assert "<code>calibrate.question = &lt;b&gt;q&lt;/b&gt;</code>" in summary and "`" not in summary
    assert "<b>q</b>" not in summary
    assert "1: 0.100, 1.5: 0.150, 2: 0.200" in summary
    texts = _main(_clean(dump_dom(chromium_path, page, "texts")))
    after_pager = texts.split('id="page-info"', 1)[1]
    assert "null" not in re.sub(r"<[^>]+>", "", after_pager)
    t = next(t for t in data["texts"] if t.get("jerr"))
    one = _main(_clean(dump_dom(chromium_path, page, f"text={t['id']}")))
    assert "error (prediction − rating)" in one and "rating − prediction" not in one
    judge, e = next(iter(t["jerr"].items()))
    assert re.search(rf"<td>{re.escape(judge)}</td>.*?<td class=\"num\">{e:.2f}</td>", one, re.S)
