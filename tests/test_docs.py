"""The README and the docs site: a short README that starts with the two set-up commands, and no
relative link in README.md or docs/ that points at a missing file (mkdocs checks docs/ links when
it builds; this catches README's, and docs' links, without mkdocs installed)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200
SETUP_COMMANDS = ("bash scripts/demo.sh", "bash scripts/test.sh")

# [text](target) and ![alt](target); the target ends at whitespace or ')'
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def _links(path: Path) -> list[tuple[int, str]]:
    """``(line, target)`` of every Markdown link outside fenced code blocks and inline code."""
    out, in_fence = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line.strip()):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            out.append((number, match.group(1)))
    return out


def _is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith(("#", "/"))


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


def test_readme_starts_with_the_two_setup_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[0].strip() == "```bash", "README.md must open with a bash code block"
    assert lines[1].startswith(SETUP_COMMANDS[0] + " "), lines[1]
    assert lines[2].startswith(SETUP_COMMANDS[1] + " "), lines[2]
    assert lines[3].strip() == "```"
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert (ROOT / script).is_file()


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(page: Path) -> None:
    missing = []
    for line, target in _links(page):
        if not _is_relative(target):
            continue
        file_part = target.split("#", 1)[0]
        if file_part and not (page.parent / file_part).exists():
            missing.append(f"{page.relative_to(ROOT)}:{line}: {target}")
    assert not missing, "links to missing files:\n" + "\n".join(missing)


def test_link_checker_sees_links() -> None:
    """The checker is not vacuous: it finds README's links to the docs pages."""
    assert any(t.startswith("docs/") for _, t in _links(README))


def test_link_checker_flags_a_missing_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("See [a page](nope.md#x), [web](https://example.org) and `[code](skip.md)`.\n"
                    "```\n[fenced](skip2.md)\n```\n", encoding="utf-8")
    targets = [t for _, t in _links(page) if _is_relative(t)]
    assert targets == ["nope.md#x"]


def test_every_docs_page_is_in_the_nav() -> None:
    """A page left out of mkdocs.yml's nav is built but unreachable; mkdocs only warns about it."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")]
    assert pages
    absent = [p for p in pages if f": {p}" not in nav]
    assert not absent, f"docs pages missing from mkdocs.yml nav: {absent}"
