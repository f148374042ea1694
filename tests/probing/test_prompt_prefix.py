"""Nothing rubric-specific precedes the text in any probe template (issue 19, item 2).

Every probe of one text must share the prompt up to the end of the text, whatever the rubric and
its answer scale, so the embedded model's KV cache and a server's prompt cache compute that
prefix once. Checked twice: on the template files (a rubric-specific placeholder written before
``${example}``) and on rendered prompts (two rubrics with different scales and levels agree on
every character up to the end of the example), which also catches a placeholder added later.
"""
from __future__ import annotations

import string

import pytest

from rubric_induce.core.task import TaskParams
from rubric_induce.core.templates import load_prompt, prompts_dir
from rubric_induce.data import Example, Rubric
from rubric_induce.data.model import YES_NO, AnswerScale
from rubric_induce.data.render import render_example
from rubric_induce.probing.api import PROBE_STYLES, TEMPLATE_FOR_STYLE, build_messages

#: The placeholders build_messages fills from the rubric (its text, levels and answer scale).
RUBRIC_SPECIFIC = {"rubric", "levels", "scale"}
PROBE_TEMPLATES = sorted(p.stem for p in prompts_dir().glob("probe_*.txt"))


def _placeholder_order(template) -> list[str]:
    names = []
    for _, body in template.sections:
        for m in string.Template.pattern.finditer(body):
            name = m.group("named") or m.group("braced")
            if name:
                names.append(name)
    return names


def test_every_probe_style_has_a_template_file_checked_here():
    assert set(TEMPLATE_FOR_STYLE.values()) <= set(PROBE_TEMPLATES) and len(PROBE_TEMPLATES) >= 3


@pytest.mark.parametrize("name", PROBE_TEMPLATES)
def test_no_rubric_specific_placeholder_before_the_example(name):
    order = _placeholder_order(load_prompt(name))
    assert "example" in order, f"{name}: no ${{example}}"
    first = order.index("example")
    early = [p for p in order[:first] if p in RUBRIC_SPECIFIC]
    assert not early, f"prompts/{name}.txt puts {early} before ${{example}}: move the answer instruction after the text"


def test_the_check_catches_a_template_that_puts_the_scale_first(tmp_path):
    (tmp_path / "probe_bad.txt").write_text("[user]\nAnswer with only ${scale}.\n\n${example}\n\nQuestion: ${rubric}\n")
    order = _placeholder_order(load_prompt("probe_bad", tmp_path))
    assert "scale" in order[:order.index("example")]


@pytest.mark.parametrize("task", [None, TaskParams(preset="uss")], ids=["default", "uss"])
@pytest.mark.parametrize("style", PROBE_STYLES)
def test_rubrics_with_different_scales_share_the_prompt_up_to_the_end_of_the_text(style, task):
    ex = Example.create({"text": "The assistant booked the wrong flight and apologised twice."}, id="x")
    likert = Rubric.create("The assistant resolved the request.", "SAT")
    yes_no = Rubric.create("The user had to repeat themselves.", "DSAT", scale=YES_NO, levels=["it happened", "no"])
    seven = Rubric.create("Overall quality.", scale=AnswerScale.likert(1, 7))
    rendered = [build_messages(ex, r, style, task=task)[0] for r in (likert, yes_no, seven)]
    text = render_example(ex)
    for msgs in rendered[1:]:
        assert msgs[:-1] == rendered[0][:-1]  # the system message: identical
        a, b = rendered[0][-1]["content"], msgs[-1]["content"]
        shared = a[: a.index(text) + len(text)]
        assert b.startswith(shared), f"{style}: the prompts differ before the end of the text"
