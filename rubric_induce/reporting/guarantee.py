"""The guarantee of human agreement in the run report and the viewer: the fitted guarantees and
cascades of a run's ``artifact.json`` (``rubric-induce calibrate-guarantee``), and which texts the
viewer's scorer answers or abstains on under the strictest guarantee that answers any."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["guarantee_section", "viewer_guarantee", "pick_guarantee"]


def _records(run_dir: Path, key: str) -> list[dict[str, Any]]:
    from rubric_induce.core.errors import DataError
    from rubric_induce.scoring.selective import load_guarantee_records

    if not (run_dir / "artifact.json").is_file():
        return []
    try:
        return [r for r in load_guarantee_records(run_dir, key) if isinstance(r, dict)]
    except DataError:
        return []


def pick_guarantee(records: Sequence[dict[str, Any]]):
    """The highest target whose threshold answers something (else the first record), as a Guarantee."""
    from rubric_induce.scoring.guarantee import Guarantee

    if not records:
        return None
    usable = [r for r in records if r.get("threshold") is not None]
    best = max(usable, key=lambda r: (float(r["target"]), -float(r["delta"]))) if usable else records[0]
    return Guarantee.from_dict(best)


def guarantee_section(run_dir: str | Path) -> list[str]:
    """Markdown lines: the fitted guarantees and cascades (nothing when none was fitted)."""
    from rubric_induce.scoring.guarantee import Guarantee
    from rubric_induce.scoring.selective import CASCADES_KEY, GUARANTEES_KEY

    run_dir = Path(run_dir)
    singles, cascades = _records(run_dir, GUARANTEES_KEY), _records(run_dir, CASCADES_KEY)
    if not singles and not cascades:
        return []

    def f(v: Any, p: int = 3) -> str:
        return "–" if v is None else f"{float(v):.{p}f}"

    lines = ["## Guaranteed agreement", "",
             "Texts are answered only when their confidence reaches the threshold; with probability at least "
             "1 − δ, agreement with humans on the answered texts is at least the target (fixed-sequence test, "
             "exact binomial bound, on labelled texts the run did not probe).", ""]
    if singles:
        lines += ["| target | δ | measure | tolerance | calibration texts | threshold | expected coverage | "
                  "agreement (calibration) | error bound |", "|---|---|---|---|---|---|---|---|---|"]
        for r in singles:
            g = Guarantee.from_dict(r)
            lines.append(f"| {g.target:g} | {g.delta:g} | {g.measure} | {g.tolerance:g} | {g.n} | "
                         f"{'none: all abstained' if g.threshold is None else f(g.threshold, 4)} | "
                         f"{g.coverage:.1%} | {f(g.agreement)} | {f(g.upper_error)} |")
        lines.append("")
    if cascades:
        lines += ["| cascade (cheapest first) | target | δ | method | thresholds | coverage | per stage |",
                  "|---|---|---|---|---|---|---|"]
        for r in cascades:
            names = [Path(n).name for n in r.get("runs") or []]
            th = ", ".join("none" if t is None else f(t, 3) for t in r.get("thresholds") or [])
            per = ", ".join(f"{n} {c:.1%}" for n, c in zip(names, r.get("stage_coverage") or []))
            lines.append(f"| {' → '.join(names)} | {r.get('target')} | {r.get('delta')} | {r.get('method')} | {th} | "
                         f"{float(r.get('coverage') or 0):.1%} | {per} |")
        lines.append("")
    return lines


def viewer_guarantee(scorer: Any, table: Any, examples: Sequence[Any], results: dict[str, Any],
                     notes: list[str]) -> dict[str, Any] | None:
    """Mark the viewer's scored texts under the run's strictest usable guarantee; its summary for the page."""
    from rubric_induce.scoring.selective import GUARANTEES_KEY, mark_results

    if scorer is None or scorer.calibrator is None or not results or scorer.source is None:
        return None
    g = pick_guarantee(_records(Path(scorer.source).parent, GUARANTEES_KEY))
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
