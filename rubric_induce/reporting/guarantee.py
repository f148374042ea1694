"""The guarantee of human agreement in the run report and the viewer: the fitted guarantees and
cascades of a run's ``artifact.json`` (``rubric-induce calibrate-guarantee``), and which texts the
viewer's scorer answers or abstains on under the strictest guarantee that answers any."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.mdtext import md_text
from rubric_induce.scoring.guarantee import Guarantee, ResampleCheck, read_resample
from rubric_induce.scoring.selective import (
    CASCADES_KEY,
    GUARANTEES_KEY,
    cascade_runs,
    check_cascade_record,
    load_guarantee_records,
    mark_results,
)

__all__ = ["guarantee_section", "viewer_guarantee", "pick_guarantee"]


def _records(run_dir: Path, key: str, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The artifact's guarantee (or cascade) records that read back whole; a damaged one is left out,
    with a note saying which and why (a report or a page never fails on a hand-edited artifact)."""
    if not (run_dir / "artifact.json").is_file():
        return []
    try:
        records = load_guarantee_records(run_dir, key)
    except DataError as exc:
        if notes is not None:
            notes.append(f"The run's {key} could not be read: {exc}")
        return []
    out = []
    for i, r in enumerate(records):
        try:
            if key == GUARANTEES_KEY:
                out.append(Guarantee.from_dict(r, where=f"{key}[{i}]").to_dict())
            else:
                out.append(check_cascade_record(r, where=f"{key}[{i}]"))
        except DataError as exc:
            if notes is not None:
                notes.append(f"A damaged entry of the run's {key} was left out: {exc}")
    return out


def pick_guarantee(records: Sequence[dict[str, Any]]):
    """The highest target whose threshold answers something (else the first record), as a Guarantee;
    records that do not read back as a guarantee are passed over (None when none does)."""
    good = []
    for r in records:
        try:
            good.append(Guarantee.from_dict(r))
        except DataError:
            continue
    if not good:
        return None
    usable = [g for g in good if g.threshold is not None]
    return max(usable, key=lambda g: (g.target, -g.delta)) if usable else good[0]


def guarantee_section(run_dir: str | Path) -> list[str]:
    """Markdown lines: the fitted guarantees and cascades (nothing when none was fitted)."""
    run_dir = Path(run_dir)
    notes: list[str] = []
    singles, cascades = _records(run_dir, GUARANTEES_KEY, notes), _records(run_dir, CASCADES_KEY, notes)
    if not singles and not cascades and not notes:
        return []

    lines = ["## Guaranteed agreement", "",
             "Texts are answered only when their confidence reaches the threshold (fixed-sequence test, exact "
             "binomial, on labelled texts the run did not probe). What is guaranteed: over draws of the "
             "calibration texts, with probability at least 1 − δ a draw either answers nothing or its error rate "
             "on the answered texts is at most 1 − target (the guaranteed error bound below). This is marginal "
             "over draws: among the draws that do answer, the error can exceed the bound more often than δ. "
             "The calibration agreement describes the calibration texts; it is not a bound.", ""]
    checks = [read_resample(r, source=None, where="record") for r in (*singles, *cascades)]
    if any(c is not None for c in checks):
        lines += [HALF_SPLIT_NOTE, ""]
    lines += [f"- {md_text(n)}" for n in notes] + ([""] if notes else [])
    if singles:
        lines += _single_table(singles)
    if cascades:
        lines += _cascade_table(cascades, run_dir)
    return lines


#: What the half-split columns say, and what they do not
HALF_SPLIT_NOTE = (
    "How often an issued guarantee holds, on these texts (the half-split columns): the same fit was repeated "
    "on S random halves of the calibration texts (whole groups where the texts have groups), and each refit "
    "was checked with all the calibration texts as the population. \"issued share\" is the share of refits "
    "that issued a guarantee; \"violation when issued\" the share of those whose agreement on the answered "
    "texts fell below the target. It estimates how often a guarantee you are shown holds, which the 1 − δ "
    "above does not bound; it is an estimate, not a bound: the refits use half the texts (they can issue more "
    "or less often than the fit on all of them), the population is only these calibration texts, and with few texts the figure "
    "is itself noisy. A violation rate when issued well above δ says to treat the guarantee with caution. "
    "– : no check (a record fitted before it, or with --check-draws 0).")


def _f(v: Any, p: int = 3) -> str:
    return "–" if v is None else f"{float(v):.{p}f}"


def _check_cells(check: ResampleCheck | None) -> str:
    """The half-split columns: issued share (with S and the half size), violation when issued (with
    how many refits issued one: a rate over a handful says little)."""
    if check is None:
        return "– | –"
    return (f"{check.issued_share:.3f} (S = {check.draws}, {check.half} of {check.n} texts) | "
            + ("–" if check.conditional_violation is None else
               f"{check.conditional_violation:.3f} ({round(check.conditional_violation * check.n_issued)} of "
               f"{check.n_issued})"))


_CHECK_HEAD = "issued share, half-splits | violation when issued |"


def _single_table(singles: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| target | δ | measure | tolerance | calibration texts | threshold | expected coverage | "
             f"agreement (calibration) | guaranteed error bound | {_CHECK_HEAD}", "|" + "---|" * 11]
    for r in singles:
        g = Guarantee.from_dict(r)
        lines.append(f"| {g.target:g} | {g.delta:g} | {g.measure} | {g.tolerance:g} | {g.n} | "
                     f"{'none: all abstained' if g.threshold is None else _f(g.threshold, 4)} | "
                     f"{g.coverage:.1%} | {_f(g.agreement)} | {_f(g.error_bound)} | {_check_cells(g.resample)} |")
    return lines + [""]


def _cascade_table(cascades: Sequence[dict[str, Any]], run_dir: Path) -> list[str]:
    lines = ["| cascade (cheapest first) | target | δ | method | tolerance | thresholds | coverage | per stage | "
             f"guaranteed error bound | {_CHECK_HEAD}", "|" + "---|" * 11]
    for r in cascades:
        names = [md_text(p.name) for p in cascade_runs(r, run_dir)]
        th = ", ".join("none" if t is None else _f(t, 3) for t in r["thresholds"])
        per = ", ".join(f"{n} {c:.1%}" for n, c in zip(names, r.get("stage_coverage") or []))
        tol = "–" if r.get("tolerance") is None else f"{float(r['tolerance']):g}"
        check = read_resample(r, source=None, where="cascade")
        lines.append(f"| {' → '.join(names)} | {r['target']:g} | {r['delta']:g} | {r.get('method', 'bonferroni')} | "
                     f"{tol} | {th} | {float(r.get('coverage') or 0):.1%} | {per} | "
                     f"{_f(None if all(t is None for t in r['thresholds']) else 1 - r['target'])} | "
                     f"{_check_cells(check)} |")
    return lines + [""]


def viewer_guarantee(scorer: Any, table: Any, examples: Sequence[Any], results: dict[str, Any],
                     notes: list[str]) -> dict[str, Any] | None:
    """Mark the viewer's scored texts under the run's strictest usable guarantee; its summary for the page."""
    if scorer is None or scorer.calibrator is None or not results or scorer.source is None:
        return None
    g = pick_guarantee(_records(Path(scorer.source).parent, GUARANTEES_KEY, notes))
    if g is None:
        return None
    scored = [e for e in examples if e.id in results]
    arr = table.arrays(example_ids=[e.id for e in scored], rubric_ids=[r.id for r in scorer.rubrics])
    try:
        mark_results(scorer, [results[e.id] for e in scored], arr, g)
    except Exception as exc:  # noqa: BLE001 - the page still shows everything else
        notes.append(f"The run's guarantee could not be applied: {exc}")
        return None
    answered = sum(bool(results[e.id].answered) for e in scored)
    return {"line": g.line(), "target": g.target, "delta": g.delta, "measure": g.measure, "threshold": g.threshold,
            "coverage": g.coverage, "answered": answered, "n": len(scored)}
