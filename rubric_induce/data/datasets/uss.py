"""User Satisfaction Simulation (Sun et al., SIGIR 2021): task-oriented dialogues with
dialogue-level satisfaction from 3-7 annotators.

Reads ``uss_user_satisfaction/<corpus>.txt`` (SGD 1000, MWOZ 1000, ReDial 1000, CCPE 500
dialogues). Each line is ``ROLE \\t text \\t action \\t scores`` with ``ROLE`` USER or SYSTEM and
``scores`` the comma-separated per-annotator turn satisfaction (USER turns only; empty for
SYSTEM); dialogues are separated by blank lines and end with ``USER \\t OVERALL \\t \\t r1,r2,...``,
the dialogue-level satisfaction (1-5) of each annotator. (Checked on all four files: every line
has 4 cells, every dialogue ends with exactly one OVERALL line, and each USER turn has as many
turn scores as the OVERALL line.)

Labels: ``satisfaction`` = mean of the annotators' OVERALL scores (continuous 1-5) and ``sat`` =
1 if that mean >= ``binary_threshold`` (default 3.0) else 0, i.e. a mean below 3 counts as
dissatisfied, as SPUR-style work does. Annotators carry no ids and differ between dialogues;
judges are named ``annotator1..k`` by position. Seven ReDial turns have empty text; they are left
out of the rendered dialogue and counted in ``meta["empty_turns"]``.
"""
from __future__ import annotations

import os
from pathlib import Path

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets._common import check_scale, dataset_file
from rubric_induce.data.model import Example, Judgment, LabelScale

__all__ = ["load_uss", "parse_uss", "USS_CORPORA", "USS_SCALES", "USS_RATER_SCALES"]

USS_CORPORA = ("SGD", "MWOZ", "ReDial", "CCPE")
USS_SCALES = {"satisfaction": LabelScale("continuous", 1, 5), "sat": LabelScale("binary", 0, 1)}
USS_RATER_SCALES = {"satisfaction": LabelScale("ordinal", 1, 5)}
ROLES = ("USER", "SYSTEM")


def load_uss(
    root: str | os.PathLike[str] | None = None,
    corpus: str = "SGD",
    binary_threshold: float = 3.0,
) -> list[Example]:
    """Load one USS corpus (``"SGD"``, ``"MWOZ"``, ``"ReDial"`` or ``"CCPE"``, any case).

    ``fields["text"]`` is the dialogue as ``USER: ...`` / ``SYSTEM: ...`` lines. Ids are
    ``uss-<corpus>/<i>`` (``i`` = 0-based dialogue index in the file); each dialogue is its own
    group. ``meta``: ``line`` (first line of the dialogue), ``n_turns``, ``actions`` and
    ``turn_satisfaction`` (mean turn score per USER turn).
    """
    names = {c.lower(): c for c in USS_CORPORA}
    if corpus.lower() not in names:
        raise DataError(f"unknown USS corpus {corpus!r}; choose from {USS_CORPORA}", field="corpus")
    corpus = names[corpus.lower()]
    path = dataset_file(root, "uss_user_satisfaction", f"{corpus}.txt")
    return parse_uss(path, corpus=corpus, binary_threshold=binary_threshold)


def parse_uss(path: str | os.PathLike[str], *, corpus: str | None = None,
              binary_threshold: float = 3.0) -> list[Example]:
    """Parse a USS-format file at ``path`` (see the module docstring)."""
    path = Path(path)
    name = corpus or path.stem
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError("file not found", path=path) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"file is not UTF-8 text ({exc.reason})", path=path) from None
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror}", path=path) from None

    dialogues: list[list[tuple[int, list[str]]]] = []
    current: list[tuple[int, list[str]]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            if current:
                dialogues.append(current)
                current = []
            continue
        current.append((line_no, line.split("\t")))
    if current:
        dialogues.append(current)
    if not dialogues:
        raise DataError("no dialogues in file", path=path)

    out = []
    for index, dialogue in enumerate(dialogues):
        out.append(_dialogue(path, name, index, dialogue, binary_threshold))
    return out


def _scores(cell: str, path, line_no: int, field: str) -> list[float]:
    parts = [p.strip() for p in cell.split(",")]
    if not parts or any(not p for p in parts):
        raise DataError(f"expected comma-separated scores, got {cell!r}", path=path, line=line_no,
                        field=field)
    values = []
    for k, p in enumerate(parts):
        try:
            v = float(p)
        except ValueError:
            raise DataError(f"score {p!r} is not a number", path=path, line=line_no,
                            field=f"{field}[{k}]") from None
        problem = USS_RATER_SCALES["satisfaction"].check(v)
        if problem:
            raise DataError(problem, path=path, line=line_no, field=f"{field}[{k}]")
        values.append(v)
    return values


def _dialogue(path, corpus: str, index: int, lines, threshold: float) -> Example:
    start = lines[0][0]
    last_no, last = lines[-1]
    if len(last) < 4 or last[1].strip() != "OVERALL":
        raise DataError(f"dialogue starting at line {start} does not end with an "
                        "'USER<TAB>OVERALL<TAB><TAB>scores' line", path=path, line=last_no,
                        field="OVERALL")
    rendered: list[str] = []
    actions: list[str] = []
    turn_sat: list[float] = []
    empty = 0
    for line_no, cells in lines[:-1]:
        if len(cells) not in (4, 5):
            raise DataError(f"expected 4 tab-separated cells (role, text, action, scores), "
                            f"found {len(cells)}", path=path, line=line_no)
        role, utt, action, scores = (c.strip() for c in cells[:4])
        if role not in ROLES:
            raise DataError(f"unknown speaker role {role!r}; expected USER or SYSTEM", path=path,
                            line=line_no, field="role")
        if utt == "OVERALL":
            raise DataError(f"OVERALL line in the middle of the dialogue starting at line {start} "
                            "(missing blank line?)", path=path, line=line_no, field="OVERALL")
        if role == "USER" and scores:
            vals = _scores(scores, path, line_no, "turn_satisfaction")
            turn_sat.append(sum(vals) / len(vals))
        if not utt:
            empty += 1
            continue
        rendered.append(f"{role}: {utt}")
        actions.append(action)
    if not rendered:
        raise DataError(f"dialogue starting at line {start} has no turns with text", path=path,
                        line=start, field="text")
    overall = _scores(last[3], path, last_no, "OVERALL")
    mean = sum(overall) / len(overall)
    labels = {"satisfaction": mean, "sat": 1.0 if mean >= threshold else 0.0}
    check_scale(labels, USS_SCALES, path=path, line=last_no)
    ex_id = f"uss-{corpus.lower()}/{index}"
    return Example.create(
        {"text": "\n".join(rendered)}, labels, id=ex_id,
        judgments=[Judgment(judge=f"annotator{k + 1}", labels={"satisfaction": v})
                   for k, v in enumerate(overall)],
        group=ex_id,
        meta={"dataset": f"uss-{corpus.lower()}", "line": start, "n_turns": len(rendered),
              "actions": actions, "turn_satisfaction": turn_sat, "empty_turns": empty,
              "binary_threshold": threshold},
    )
