"""``rubric-induce calibrate-guarantee --judgements FILE --stages a,b,c``: a guarantee on any judges'
outputs (a judgements file, :mod:`rubric_induce.data.judgements`), written as JSON records
(:class:`~rubric_induce.scoring.judgements_guarantee.JudgementsGuarantee`)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from rubric_induce.cli._shared import echo
from rubric_induce.core.errors import DataError
from rubric_induce.data.judgements import read_judgements
from rubric_induce.scoring.guarantee import largest_target
from rubric_induce.scoring.guarantee_draws import ResampleParams
from rubric_induce.scoring.judgements_guarantee import FitSpec, fit_judgements_guarantee, judgements_check

__all__ = ["fit_judgements_file", "parse_costs", "parse_stages"]


def parse_stages(text: str | None) -> list[str]:
    names = [s.strip() for s in (text or "").split(",") if s.strip()]
    if not names:
        raise DataError("--stages names the judges to use, comma-separated (e.g. --stages gpt-4o-mini,gpt-4o)",
                        field="stages")
    if len(set(names)) != len(names):
        raise DataError(f"--stages names a judge twice: {text}", field="stages")
    return names


def parse_costs(items: tuple[str, ...]) -> dict[str, float]:
    """``--cost NAME=VALUE`` (repeatable) as a mapping; a bad item is a DataError naming it."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            cost = float(value)
        except ValueError:
            cost = float("nan")
        if not sep or not name.strip() or not cost >= 0 or cost == float("inf"):
            raise DataError(f"--cost takes NAME=VALUE with a finite cost >= 0, got {item!r}", field="cost")
        out[name.strip()] = cost
    return out


def _scale(text: str | None) -> list[float] | None:
    if not text:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise DataError(f"--scale takes comma-separated numbers, got {text!r}", field="scale") from None


def fit_judgements_file(path: Path, opts: dict[str, Any]) -> Path:
    """Read the file, fit one record per target, print each and write them to ``opts['out']``
    (default: ``<file>.guarantees.json`` beside it), each with its half-split check (``opts['check']``,
    a :class:`~rubric_induce.scoring.guarantee_draws.ResampleParams`). ``opts``: the command's options by name."""
    stages = parse_stages(opts["stages"])
    jd = read_judgements(path, scale=_scale(opts.get("scale")))
    kind = "guarantee" if len(stages) == 1 else ("jury" if opts["method"] == "jury" else "cascade")
    spec = FitSpec(kind=kind, method=opts["method"] if kind == "cascade" else "bonferroni",
                   combiner=opts["combiner"], order=opts["order"], stage_confidence=opts["stage_confidence"],
                   grid=opts["grid"], tolerance=opts["tolerance"], costs=parse_costs(opts["costs"]),
                   seed=opts["seed"])
    labelled = int(jd.labelled.sum())
    echo(f"{jd.n} row(s) in {path}, {labelled} labelled (unlabelled rows are skipped); scale "
         f"{', '.join(f'{v:g}' for v in jd.scale)}; judges used: {', '.join(stages)}")
    echo(f"the largest target {labelled} text(s) could support at delta {opts['delta']:g} is "
         f"{largest_target(labelled, opts['delta']):.3f} (even if every one agreed)")
    records = []
    check = opts.get("check") or ResampleParams()
    for target in opts["targets"]:
        g = fit_judgements_guarantee(jd, stages, target=target, delta=opts["delta"], spec=spec)
        g = replace(g, resample=judgements_check(jd, stages, target=target, delta=opts["delta"], spec=spec,
                                                 params=check))
        records.append(g.to_dict())
        echo(g.line())
    out = Path(opts["out"]) if opts.get("out") else path.with_name(path.stem + ".guarantees.json")
    doc = {"judgements": str(path), "guarantees": records}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    echo(f"wrote {len(records)} guarantee(s) to {out}")
    return out
