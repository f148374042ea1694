"""What is judged: the task description that every prompt takes (:class:`TaskParams`, ``[task]``).

A labelled data set means something: "the user was satisfied", "the summary is consistent with
its article", "the response is safe". :class:`TaskParams` says so once, and generation (RUBICON,
SPUR, AutoCalibrate), probing and feedback render their prompts from it:

- ``description``: what is judged and what the human label means (text, or ``@file`` resolved
  against the config's folder);
- ``kind``: the kind of text (``conversation``, ``summary``, ``response``, ``text``);
- ``fields``: the role of each example field shown to the LLM (:data:`ROLES`);
- ``positive`` / ``negative``: names of the two classes; ``scale``: meaning of a graded scale;
- ``preset``: named wordings (:data:`PRESETS`). ``uss`` is the user-satisfaction wording (with
  its booking few-shot examples) that RUBICON's prompts used before tasks existed.

Without a ``[task]`` section the task is generic: no satisfaction wording, no booking examples,
and the probe and feedback prompts read exactly as they did before tasks existed. The module is
shared (not a stage), so every stage may import it.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param, read_at_file, suggest
from rubric_induce.core.textfiles import read_table_file

__all__ = ["TaskParams", "TaskWording", "ROLES", "PRESETS", "JUDGED_ROLES", "load_task_file", "plural"]

#: Field roles and what each tells the LLM (``{kind}`` is the task's kind of text).
ROLES: dict[str, str] = {
    "text": "the {kind} being judged",
    "conversation": "the conversation being judged",
    "source": "the source the {kind} was written from (context, not judged itself)",
    "context": "the context the {kind} responds to (not judged itself)",
    "reference": "a reference {kind} for comparison (not judged itself)",
    "question": "the question or instruction the {kind} answers (not judged itself)",
    "knowledge": "background knowledge the {kind} may use (not judged itself)",
}
#: Roles that hold the judged text itself.
JUDGED_ROLES = ("text", "conversation")

#: Named presets: the field values they default to, and the wording they use in prompts.
#: ``uss`` reproduces the user-satisfaction prompts byte for byte (so cached replies stay valid).
PRESETS: dict[str, dict[str, Any]] = {
    "generic": {"values": {}, "wording": {}},
    "uss": {
        "values": {"kind": "conversation", "positive": "satisfied", "negative": "dissatisfied"},
        "wording": {
            "expert": "conversation analysis",
            "subjects": "conversations between a user and an AI assistant",
            "why": "the user was satisfied or dissatisfied",
            "label_sentence": {"SAT": "This conversation was labelled positive: the user was satisfied with it.",
                               "DSAT": "This conversation was labelled negative: the user was dissatisfied with it."},
            "pattern_kind": {"SAT": "satisfaction", "DSAT": "dissatisfaction"},
            "pattern_focus": "the assistant or the user did",
            "polarity_name": {"SAT": "SAT (satisfaction)", "DSAT": "DSAT (dissatisfaction)"},
            "polarity_instruction": {
                "SAT": "Each rubric states something that, when it holds, makes users satisfied with the "
                       "conversation.",
                "DSAT": "Each rubric states something that, when it holds, makes users dissatisfied with the "
                        "conversation."},
            "rubric_advice": {"SAT": ', for example: "The assistant confirms the details before booking."',
                              "DSAT": ', for example: "The user repeats a request the assistant ignored."'},
            "estimating": "whether users are satisfied with an AI assistant",
            "ds_heading": "Domain and task (what the assistant is for and what is expected of it):",
            "ds_guidance": "Judge a conversation by whether it makes progress towards this goal and meets these "
                           "expectations; a pleasant conversation that does not move the task forward is not a "
                           "good one. Look for task-specific signals (progress towards the goal, information "
                           "provided or requested, the user's requests answered) as well as conversational ones.",
            "subjects_start": ("The assistant", "The user", "The system", "The conversation"),
            # the probe prompts of USS runs have always said "text": kept, so cached probes stay valid
            "probe_kind": "text",
        },
    },
}


def plural(noun: str) -> str:
    """English plural of a (last) noun: summary -> summaries, text -> texts, news -> news."""
    if not noun:
        return noun
    low = noun.lower()
    if low.endswith(("news", "data")):
        return noun
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def _q(name: str) -> str:
    return f'"{name}"'


@dataclass(frozen=True)
class TaskParams(Params):
    """What is judged and what the human label means; every prompt is rendered from it."""

    section = "task"
    preset: str | None = param(None, choices=tuple(PRESETS), cli="--task-preset",
                               help="Named wording: generic (default) or uss (user satisfaction with an "
                                    "AI assistant, RUBICON's original prompts and booking examples).")
    description: str | None = param(None, cli="--task-description",
                                    help="What is judged and what the human label means (text, or @file).")
    kind: str | None = param(None, cli="--task-kind",
                             help="The kind of text judged, e.g. conversation, summary, response (default: text).")
    fields: dict[str, str] = param(factory=dict,
                                   help="Role of each example field shown to the LLM: field = role, roles "
                                        + ", ".join(ROLES) + ".")
    positive: str | None = param(None, cli="--task-positive",
                                 help="Name of the positive class (label 1, or >= label_threshold).")
    negative: str | None = param(None, cli="--task-negative", help="Name of the negative class.")
    scale: str | None = param(None, cli="--task-scale",
                              help="Meaning of a graded label's scale, e.g. '1 = unreadable ... 5 = fluent'.")

    def check(self) -> None:
        for name, role in self.fields.items():
            if not isinstance(role, str) or role not in ROLES:
                raise DataError(f"unknown field role {role!r}{suggest(str(role), ROLES)}; roles: "
                                f"{', '.join(ROLES)}", field=f"task.fields.{name}")
        for name in ("description", "kind", "positive", "negative", "scale"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise DataError("must not be empty (leave it out instead)", field=self.where(name))
        if self.description == "@":
            raise DataError("'@' needs a file name after it", field="task.description")

    # -- resolution ----------------------------------------------------------------------------
    @property
    def is_default(self) -> bool:
        return self == TaskParams()

    def resolved(self, resolve: Callable[[str], Path] = Path, *, source: str | None = None) -> TaskParams:
        """A copy whose ``@file`` description is read (``resolve`` turns the name into a path,
        e.g. against the config's folder); a missing or unreadable file is a :class:`DataError`
        naming it and ``task.description``."""
        d = self.description
        if not (d and d.startswith("@")):
            return self
        path = resolve(d[1:])
        text = read_at_file(d, resolve, field="task.description", what="task description", source=source).strip()
        if not text:
            raise DataError(f"task description file is empty: {path}", path=source, field="task.description")
        return self.replace(description=text)

    def check_files(self, resolve: Callable[[str], Path] = Path, *, source: str | None = None) -> None:
        """Raise :class:`DataError` now when the ``@file`` description does not exist."""
        d = self.description
        if d and d.startswith("@") and not Path(resolve(d[1:])).exists():
            raise DataError(f"task description file not found: {resolve(d[1:])}", path=source,
                            field="task.description")

    def wording(self) -> TaskWording:
        """The phrases prompts are rendered from (preset values, then this task's own)."""
        return TaskWording(self.resolved())

    def to_record(self) -> dict[str, Any]:
        """Plain values with the description read: what artifacts and manifests store."""
        return self.resolved().to_dict()


def load_task_file(path: str | Path) -> TaskParams:
    """A :class:`TaskParams` from a TOML or JSON file: a ``[task]`` table (e.g. a run config) or
    the task's keys at top level. ``@file`` descriptions resolve against the file's folder."""
    path = Path(path)
    raw = read_table_file(path, "task file")
    table = raw.get("task", raw) if isinstance(raw.get("task"), Mapping) or "task" not in raw else None
    if table is None:
        raise DataError("[task] must be a table", path=path, field="task")
    task = TaskParams.from_mapping(table, source=str(path))
    base = path.resolve().parent
    task.check_files(lambda p: base / p, source=str(path))
    return task.resolved(lambda p: base / p, source=str(path))


class TaskWording:
    """The task's phrases for prompt templates: the preset's wording, else generic wording built
    from the description, kind and class names."""

    def __init__(self, task: TaskParams) -> None:
        preset = PRESETS[task.preset or "generic"]
        values = {**preset["values"], **{k: v for k, v in task.to_dict().items()
                                          if k in ("kind", "positive", "negative") and v is not None}}
        self.task = task
        # a preset's fixed sentences fit only its own kind and class names
        self._preset = {} if _overrides_wording(task) else preset["wording"]
        self.kind: str = values.get("kind", "text")
        self.kinds: str = plural(self.kind)
        self.a_kind: str = ("an " if self.kind[:1].lower() in "aeiou" else "a ") + self.kind
        self.positive: str = values.get("positive", "positive")
        self.negative: str = values.get("negative", "negative")
        self.description: str | None = task.description
        self.scale: str | None = task.scale
        self.fields: dict[str, str] = dict(task.fields)

    def _w(self, key: str, default: Any, polarity: str | None = None) -> Any:
        value = self._preset.get(key)
        if value is None:
            return default
        return value[polarity] if polarity is not None and isinstance(value, Mapping) else value

    # -- blocks shared by every stage -----------------------------------------------------------
    def fields_note(self, names: Sequence[str] | None = None) -> str:
        """One sentence on the shown fields' roles (empty when no roles are given)."""
        roles = self.fields
        if not roles:
            return ""
        shown = [n for n in (names if names is not None else roles) if n in roles]
        if not shown:
            return ""
        parts = [f"{n.replace('_', ' ').capitalize()} is {ROLES[roles[n]].format(kind=self.kind)}"
                 for n in shown]
        return "\nThe example has titled parts: " + "; ".join(parts) + "."

    def task_block(self, *, include_description: bool = True, classes: bool = True,
                   names: Sequence[str] | None = None) -> str:
        """The task as a system-prompt block (with its leading blank line), or '' when the task
        has no description (the generic default and the bare uss preset add nothing)."""
        if not self.description:
            return ""
        lines = []
        if include_description:
            lines.append(f"Task: {self.description}")
        if classes:
            lines.append(f"The human label calls each {self.kind} {_q(self.positive)} (the positive class) or "
                         f"{_q(self.negative)} (the negative class).")
        if self.scale:
            lines.append(f"Scale of the human scores: {self.scale}")
        note = self.fields_note(names).strip()
        if note:
            lines.append(note)
        return "\n\n" + "\n".join(lines) if lines else ""

    def context_block(self) -> str:
        """The task for evaluators (probes, feedback): description only, no class names."""
        if not self.description:
            return ""
        return f"\n\nThe {self.kinds} come from this evaluation task: {self.description}"

    # -- RUBICON / SPUR ------------------------------------------------------------------------
    def rubicon(self, polarity: str) -> dict[str, str]:
        """Values of the RUBICON/SPUR templates' task placeholders for one polarity (SAT / DSAT)."""
        pos = polarity == "SAT"
        cls = self.positive if pos else self.negative
        kind, kinds = self.kind, self.kinds
        return {
            "kind": kind, "kinds": kinds, "kind_title": kind[:1].upper() + kind[1:],
            "expert": self._w("expert", f"evaluating {kinds}"),
            "subjects": self._w("subjects", kinds),
            "why": self._w("why", f"human annotators labelled them {_q(self.positive)} or {_q(self.negative)}"),
            "label_sentence": self._w("label_sentence",
                                      f"This {kind} was labelled {_q(cls)} (the {'positive' if pos else 'negative'} "
                                      "class).", polarity),
            "pattern_kind": self._w("pattern_kind", _q(cls), polarity),
            "pattern_focus": self._w("pattern_focus", f"that the {kind} does or fails to do"),
            "polarity_name": self._w("polarity_name", f"{polarity} ({cls})", polarity),
            "polarity_instruction": self._w(
                "polarity_instruction", f"Each rubric states something that, when it holds, makes {self.a_kind} more "
                                        f"likely to be labelled {_q(cls)}.", polarity),
            "rubric_advice": self._w("rubric_advice",
                                     f" that says what the {kind} does or contains; never mention the label, the "
                                     "class names or the annotators.", polarity),
            "estimating": self._w("estimating", f"whether {self.a_kind} is labelled {_q(self.positive)} or "
                                                f"{_q(self.negative)}"),
        }

    def ds(self) -> dict[str, str]:
        """The domain sensitization block's heading and guidance."""
        return {"ds_heading": self._w("ds_heading", f"Domain and task (what the {self.kinds} are for and what "
                                                    "is expected of them):"),
                "ds_guidance": self._w("ds_guidance",
                                       f"Judge {self.a_kind} by whether it meets these expectations; {self.a_kind} "
                                       "that reads well but misses them is not a good one. Look for task-specific "
                                       "signals as well as general qualities of the text.")}

    def subjects(self) -> tuple[str, ...]:
        """Sentence starts for constrained decoding of patterns and rubrics."""
        start = self._w("subjects_start", None)
        if start:
            return tuple(start)
        if self.kind == "conversation":
            return ("The assistant", "The user", "The system", "The conversation")
        return (f"The {self.kind}",)

    @property
    def is_conversation(self) -> bool:
        return self.kind == "conversation"

    # -- probes, feedback, AutoCalibrate -----------------------------------------------------------
    @property
    def probe_kind(self) -> str:
        return self._w("probe_kind", self.kind)

    def autocal_task(self, aspect: str, low: int, high: int) -> str:
        """AutoCalibrate's task statement (the description when given)."""
        base = f"Score the {aspect} of {self.a_kind} on a scale of {low} to {high}, with {low} being the lowest."
        if not self.description:
            return base
        text = f"{self.description}\n{base}"
        return text + (f"\nScale: {self.scale}" if self.scale else "")

    def class_words(self) -> set[str]:
        """Words that name the label's classes (for the rubric filter)."""
        words = {"positive", "negative"}
        for name in (self.positive, self.negative):
            words.update(w for w in _words(name))
        if self.task.preset == "uss":
            words.update({"satisfied", "dissatisfied", "satisfaction", "dissatisfaction", "happy", "unhappy"})
        return words

    def prompt_texts(self) -> list[str]:
        """Texts of this task that prompts show (the filter rejects rubrics copied from them)."""
        out = [t for t in (self.description, self.scale) if t]
        for pol in ("SAT", "DSAT"):
            advice = self._w("rubric_advice", None, pol)
            if advice and '"' in advice:
                out.append(advice.split('"')[1])
        return out


def _overrides_wording(task: TaskParams) -> bool:
    """Whether a preset's fixed wording still fits: it does unless kind or class names change."""
    values = PRESETS[task.preset or "generic"]["values"]
    for key in ("kind", "positive", "negative"):
        v = getattr(task, key)
        if v is not None and v != values.get(key):
            return True
    return False


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())
