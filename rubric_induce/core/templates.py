"""Load prompt templates from ``prompts/`` and render them into chat messages.

Templates are files, not strings in code, so they can be read, diffed and versioned on their own;
each carries the hash of its content, which goes into provenance and (through the rendered
messages) into every cache key.
"""
from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from rubric_induce.core.errors import RubricInduceError

__all__ = ["PromptTemplate", "load_prompt", "prompts_dir"]

_SECTION = re.compile(r"^\[(system|user|assistant)\]\s*$")


def prompts_dir() -> Path:
    """Where the templates live: ``prompts/`` of the checkout this module was imported from, else
    the installed package data. (The checkout comes first: an editable install maps the package
    data to the checkout it was installed from, which need not be this one, e.g. a git worktree.)"""
    checkout = Path(__file__).resolve().parents[2] / "prompts"
    if (checkout / "probe_score_only.txt").exists():
        return checkout
    try:
        path = Path(str(resources.files("rubric_induce.prompts")))
        if (path / "probe_score_only.txt").exists():
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "prompts"


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    sections: tuple[tuple[str, str], ...]
    hash: str

    @property
    def placeholders(self) -> set[str]:
        names: set[str] = set()
        for _, body in self.sections:
            for m in string.Template.pattern.finditer(body):
                name = m.group("named") or m.group("braced")
                if name:
                    names.add(name)
        return names

    def render(self, **values: str) -> list[dict[str, str]]:
        """Fill every placeholder (missing ones are an error, not a silent blank)."""
        missing = self.placeholders - values.keys()
        if missing:
            raise RubricInduceError(f"prompt {self.name!r} needs values for {sorted(missing)}")
        return [{"role": role, "content": string.Template(body).substitute(values)}
                for role, body in self.sections]


@cache
def _load(path: Path) -> PromptTemplate:
    raw = path.read_text(encoding="utf-8")
    sections: list[tuple[str, list[str]]] = []
    for line in raw.splitlines():
        m = _SECTION.match(line)
        if m:
            sections.append((m.group(1), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip() and not line.startswith("#"):
            raise RubricInduceError(f"{path}: text before the first [system]/[user] section")
    if not sections:
        raise RubricInduceError(f"{path}: no [system]/[user]/[assistant] section")
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]
    return PromptTemplate(path.stem, tuple((r, "\n".join(b).strip("\n")) for r, b in sections), digest)


def load_prompt(name: str, directory: str | Path | None = None) -> PromptTemplate:
    """Load ``<name>.txt`` from ``directory`` (default: the packaged prompts)."""
    base = Path(directory) if directory is not None else prompts_dir()
    path = base / f"{name}.txt"
    if not path.exists():
        known = sorted(p.stem for p in base.glob("*.txt"))
        raise RubricInduceError(f"no prompt template {name!r} in {base}; known: {', '.join(known)}")
    return _load(path.resolve())
