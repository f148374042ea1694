"""A run's held-out judgements as a judgements file (``rubric-induce export RUN --format judgements``).

The run's ``scores.jsonl`` (written by its evaluate stage) holds, per held-out text, each system's
distribution over the label's scale (the calibrated prediction, per-judge heads, a direct judge)
and the human label. Those texts were never trained on, so a guarantee can be fitted on them:
``rubric-induce calibrate-guarantee --judgements OUT --stages ...``. One row per text: ``id``,
``label`` (the human score; a row without one is unlabelled), ``group``, ``scale`` and under
``judges`` every system with a distribution for the chosen aspect (systems that give only a score
are left out, and named in the message). The aspect: ``--label``, else the first with a distribution.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import judgement_row, read_judgements, write_judgements
from rubric_induce.evaluation.score_table import read_scores

__all__ = ["export_run_judgements", "SCORES_FILE"]

SCORES_FILE = "scores.jsonl"


def _scores_path(run: Path) -> Path:
    folder = run if run.is_dir() else run.parent
    path = folder / SCORES_FILE
    if not path.is_file():
        raise DataError(f"no {SCORES_FILE} in {folder}: the run's evaluate stage writes it (a run with held-out "
                        "texts, run.test_size > 0)", path=folder, field="scores")
    return path


def export_run_judgements(run: str | Path, out: str | Path, *, aspect: str | None = None) -> str:
    """Write the run's held-out distributions as a judgements file; returns a one-line message."""
    path = _scores_path(Path(run))
    rows = read_scores(path)
    aspects = list(OrderedDict.fromkeys(r.aspect for r in rows))
    if not aspects:
        raise DataError("the score table is empty", path=path)
    with_probs = [a for a in aspects if any(r.aspect == a and r.probs is not None for r in rows)]
    chosen = aspect or (with_probs or aspects)[0]
    if chosen not in aspects:
        raise DataError(f"no aspect {chosen!r} in the score table; it has {', '.join(aspects)}", path=path,
                        field="aspect")
    texts: OrderedDict[str, dict[str, Any]] = OrderedDict()
    skipped: set[str] = set()
    mine = [r for r in rows if r.aspect == chosen]
    # systems may give distributions over different values (a calibrator over the answers it
    # learned, a direct judge over the whole scale): the file's scale is their union
    scale = tuple(sorted({v for r in mine if r.scale is not None for v in r.scale}))
    if not scale:
        raise DataError(f"no system gives a distribution for aspect {chosen!r}", path=path, field="probs")
    where = {v: k for k, v in enumerate(scale)}
    for r in mine:
        t = texts.setdefault(r.example_id, {"group": r.group, "human": r.human, "judges": {}})
        if t["human"] is None:
            t["human"] = r.human
        if r.probs is None:
            skipped.add(r.system)
            continue
        total = sum(r.probs)
        full = [0.0] * len(scale)
        for v, p in zip(r.scale, r.probs):
            full[where[v]] = round(p / total, 6)
        t["judges"][r.system] = {"probs": full}
    values = [int(v) if float(v).is_integer() else v for v in scale]
    out_rows = [judgement_row(i, t["judges"], label=_on_scale(t["human"], scale), group=t["group"], scale=values,
                              human=t["human"])
                for i, t in texts.items() if t["judges"]]
    written = write_judgements(out, out_rows)
    jd = read_judgements(written)  # what was written reads back under the layout's checks
    note = f"; left out systems without a distribution: {', '.join(sorted(skipped - set(jd.judge_names)))}" \
        if skipped - set(jd.judge_names) else ""
    return (f"wrote {jd.n} held-out text(s) of aspect {chosen!r} ({int(jd.labelled.sum())} labelled), judges "
            f"{', '.join(jd.judge_names)}, to {written}{note}")


def _on_scale(human: float | None, scale: tuple[float, ...]) -> float | None:
    """The human label when it is a scale value; a mean of raters between values is no label (the
    layout would take per-rater labels, which the score table does not hold): it stays in the
    row's ``human`` field."""
    if human is None:
        return None
    for v in scale:
        if abs(v - human) < 1e-9:
            return int(v) if float(v).is_integer() else v
    return None
