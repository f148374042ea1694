"""The select stage's one entry point: :func:`select` with :class:`SelectParams`.

Used by the ``run`` pipeline (training split of the run), the ``select`` command (its own split,
plus a metrics report) and the experiments, so missing probes, label checks and the saved set
behave the same everywhere.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends.redact import redact_text
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param, resolve_params, suggest
from rubric_induce.core.stats import pearson, spearman
from rubric_induce.data import Example, Rubric, RubricSet
from rubric_induce.data.jsonl import atomic_write_text, jsonable, write_json
from rubric_induce.data.labels import check_binary, is_binary
from rubric_induce.data.probes import ProbeTable, probe_health_markdown  # the latter re-exported
from rubric_induce.selection.baselines import SELECTORS
from rubric_induce.selection.metrics import evaluate_selection, metrics_markdown
from rubric_induce.selection.plots import plot_precision_curves
from rubric_induce.selection.polarity import check_polarity
from rubric_induce.selection.scores import SCORE_MODES, signs_from_polarity, unit_scores
from rubric_induce.selection.selector import CV_SCORINGS

__all__ = ["SelectParams", "SelectContext", "SelectResult", "select", "write_selection_report", "check_selection_labels",
           "SELECTED_FILE", "selector_class", "usable_rubrics", "NEUTRAL_FILL", "probe_health_markdown"]

SELECTED_FILE = "selected.jsonl"
_RESERVED = ("n_sat", "n_dsat")


def selector_class(method: str):
    return SELECTORS[method]


def _selector_names() -> tuple[str, ...]:
    return tuple(SELECTORS)


def _option_rules() -> dict[str, tuple[Any, str]]:
    return {
        "alpha": (lambda v: v is None or v >= 0, "a number >= 0"),
        "alphas": (lambda v: len(v) > 0 and all(a >= 0 for a in v), "a non-empty list of numbers >= 0"),
        "cv": (lambda v: v >= 2, "a whole number >= 2"),
        "precision": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
        "n_bins": (lambda v: v >= 2, "a whole number >= 2"),
        "tanh_width": (lambda v: v > 0, "a number > 0"),
        "k": (lambda v: v is None or v >= 1, "a whole number >= 1"),
        "budgets": (lambda v: v is None or (len(v) > 0 and all(
            len(b) == 2 and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in b)
            and sum(b) >= 1 for b in v)), "a list of [n_sat, n_dsat] pairs of whole numbers >= 0"),
        "cv_scoring": (lambda v: v in CV_SCORINGS, f"one of {', '.join(CV_SCORINGS)}"),
        "score": (lambda v: v in SCORE_MODES, f"one of {', '.join(SCORE_MODES)}"),
    }


def _check_option(key: str, value: Any, default: Any) -> None:
    """A selector option of the type of its default (numbers finite), within its known range."""
    where = f"select.options.{key}"
    numbers = (value,) if not isinstance(value, (list, tuple)) else tuple(value)
    for v in numbers:
        if isinstance(v, float) and not math.isfinite(v):
            raise DataError(f"must be finite, got {value!r}", field=where)
    if default is not None and default is not inspect.Parameter.empty and value is not None:
        want = type(default)
        ok = (isinstance(value, bool) if want is bool else
              isinstance(value, (int, float)) and not isinstance(value, bool) if want is float else
              isinstance(value, int) and not isinstance(value, bool) if want is int else
              isinstance(value, (list, tuple)) if want in (list, tuple) else isinstance(value, want))
        if not ok:
            raise DataError(f"expected {want.__name__}, got {value!r}", field=where)
    rule = _option_rules().get(key)
    if rule is not None:
        try:
            good = rule[0](value)
        except TypeError:
            good = False
        if not good:
            raise DataError(f"must be {rule[1]}, got {value!r}", field=where)


@dataclass(frozen=True)
class SelectParams(Params):
    """Which selector, its SAT/DSAT budgets and options, and what to do with missing probes."""

    section = "select"
    method: str = param("rubicon", choices=_selector_names(),
                        help="Selection policy: RUBICON, its correctness-only ablation, or a baseline.")
    n_sat: int = param(10, ge=0, help="SAT budget.")
    n_dsat: int = param(10, ge=0, help="DSAT budget.")
    missing: str = param("error", choices=("error", "drop"),
                         help="A rubric whose share of failed or absent probes exceeds max_failure_rate: "
                              "stop with an error, or drop that rubric (reported).")
    max_failure_rate: float = param(0.1, ge=0.0, le=1.0,
                                    help="Share of a rubric's probes that may fail (or be absent) before "
                                         "select.missing applies; failed probes below it score neutral "
                                         "(the middle of the scale, 5 of 10). 0: every probe must succeed.")
    polarity_check: str = param("flip", choices=("flip", "drop", "off"),
                                help="A SAT rubric whose training probes go with bad labels (or a DSAT one going "
                                     "with good labels) by a one-sided test: flip its polarity, drop it, or "
                                     "leave it (training split only).")
    polarity_alpha: float = param(0.01, gt=0.0, lt=1.0,
                                  help="Level of that one-sided test (Mann-Whitney U; Spearman for graded labels).")
    pair_consistency: float | None = param(None, ge=0.0, le=1.0,
                                           help="Pairwise runs: drop a rubric whose score difference points "
                                                "against the preference on more than this share of the training "
                                                "pairs it decides (the consistency filter; e.g. 0.5: worse than "
                                                "chance). Unset: no filter.")
    pair_feature: str = param("difference", choices=("difference", "preference", "both"),
                              help="Pairwise runs: what a rubric says about a pair, for selection, the "
                                   "Bradley-Terry head and compare. difference: its pointwise score on A minus "
                                   "that on B; preference: the pairwise probe's P(A > B) - P(B > A), averaged over "
                                   "both orders (needs probe.pairwise = true); both: the head weighs the two, "
                                   "the selector reads their mean.")
    options: dict[str, Any] = param(factory=dict, help="The selector's own parameters (e.g. alpha, cv, score).")

    def check(self) -> None:
        if self.n_sat + self.n_dsat == 0:
            raise DataError("n_sat + n_dsat must be at least 1", field="select")
        cls = selector_class(self.method)
        allowed = [n for n in inspect.signature(cls.__init__).parameters if n != "self" and n not in _RESERVED]
        for key in self.options:
            if key in _RESERVED:
                raise DataError(f"{key!r} is set elsewhere in the config, not in options",
                                field=f"select.options.{key}")
            if key not in allowed:
                raise DataError(f"unknown option{suggest(key, allowed)}; allowed: {', '.join(sorted(allowed))}",
                                field=f"select.options.{key}")
            _check_option(key, self.options[key], inspect.signature(cls.__init__).parameters[key].default)

    def make_selector(self, seed: int = 0):
        opts = {"random_state": seed, **self.options}
        return selector_class(self.method)(n_sat=self.n_sat, n_dsat=self.n_dsat, **opts)


#: Unit score (on [0, 10]) given to a failed or absent probe of a rubric kept under max_failure_rate.
NEUTRAL_FILL = 5.0


def _retry_hint(table, rubric_ids: Sequence[str]) -> str:
    """A note on the failed probes that are failed calls (a rerun of the probe stage retries them),
    quoting the first one's error: what the server said (e.g. an HTTP 400 about the request)."""
    ids = set(rubric_ids)
    failed = [r for r in table.records if r.rubric_id in ids and getattr(r, "call_failed", False)]
    if not failed:
        return ""
    first = next((str(r.error) for r in failed if r.error), "")
    said = f" (the first: {redact_text(first[:400])})" if first else ""
    return (f"; {len(failed)} of them are calls that failed after the backend's retries{said}: rerun the same "
            "command to retry just those")


def usable_rubrics(table, examples: Sequence[Example], rubrics: Sequence[Rubric], missing: str,
                   source: str | None, max_failure_rate: float = 0.0) -> tuple[list[Rubric], list[str]]:
    """``(kept rubrics, dropped rubric ids)``: a rubric whose failed + absent probes exceed
    ``max_failure_rate`` of ``examples`` stops the run (``missing="error"``) or is dropped
    (``"drop"``); the rest are kept, their failed probes to be read as :data:`NEUTRAL_FILL`."""
    health = table.health([r.id for r in rubrics], [e.id for e in examples])
    n = max(1, len(examples))
    over = [r.id for r in rubrics if (health[r.id]["failed"] + health[r.id]["absent"]) / n > max_failure_rate]
    if not over:
        return list(rubrics), []
    if missing == "error":
        n_failed = sum(health[rid]["failed"] for rid in over)
        n_absent = sum(health[rid]["absent"] for rid in over)
        worst = max(over, key=lambda rid: health[rid]["failed"] + health[rid]["absent"])
        w = health[worst]
        raise DataError(
            f"{len(over)} of {len(rubrics)} rubric(s) have more than {max_failure_rate:.0%} of their probes "
            f"unusable ({n_failed} failed, {n_absent} absent over {len(examples)} examples; worst "
            f"{worst!r}: {w['failed'] + w['absent']} of {w['n']}){_retry_hint(table, over)}; see each "
            "record's 'error' in the probes file, probe the same examples and rubrics, raise "
            "select.max_failure_rate, or drop those "
            "rubrics with select.missing = 'drop' (--missing drop)", path=source, field="select.missing")
    kept = [r for r in rubrics if r.id not in set(over)]
    if not kept:
        raise DataError(f"every rubric has more than {max_failure_rate:.0%} of its probes unusable; see the "
                        "'error' of the records in the probes file", path=source, field="select.missing")
    return kept, sorted(over)


def check_selection_labels(y: np.ndarray, method: str, label: str) -> bool:
    """Selection needs 0/1 labels (except top-K by correlation) with both classes; returns binary."""
    binary = is_binary(y)
    if not binary and method != "topk":
        check_binary(y, label=label, both_classes=False)
    if np.ptp(y) == 0:
        raise DataError(f"every training example has the same {label!r} label ({y[0]:g}); selection needs "
                        "two classes: use more examples or a smaller test share", field=f"labels.{label}")
    return binary


@dataclass
class SelectResult:
    """A fitted selector, the pool it chose from, and the rubrics dropped for missing probes."""

    selector: Any
    pool: list[Rubric]
    params: SelectParams
    n_train: int
    dropped: list[str] = field(default_factory=list)
    label: str | None = None
    label_threshold: float | None = None
    seed: int = 0
    #: Per pool rubric (and dropped ones): probes ``n``, ``bounded``, ``failed``, ``absent`` on the training examples.
    health: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The polarity pre-filter's outcome (:meth:`PolarityCheck.to_dict`): rubrics flipped or dropped, by reason.
    polarity: dict[str, Any] = field(default_factory=dict)

    @property
    def chosen(self) -> list[Rubric]:
        return list(self.selector.selected_rubrics_ or [])

    @property
    def threshold(self) -> float | None:
        return self.selector.threshold_

    @property
    def alpha(self) -> float | None:
        return getattr(self.selector, "alpha_", None)

    def manifest(self, **extra: Any) -> dict[str, Any]:
        sel = self.selector
        return jsonable({
            "method": self.params.method, "params": sel.get_params(), "label": self.label,
            "label_threshold": self.label_threshold, "seed": self.seed, "alpha": self.alpha,
            "n_train": self.n_train, "n_pool": len(self.pool), "score_mode": sel.score,
            "dropped_missing_probes": self.dropped, "max_failure_rate": self.params.max_failure_rate,
            "probe_health": self.health, "polarity_check": self.polarity, "history": getattr(sel, "history_", []),
            "cv_results": getattr(sel, "cv_results_", None), **extra})

    def decision_function(self, table, examples: Sequence[Example]) -> np.ndarray:
        """NetSAT of ``examples`` under the selected set, failed probes read as :data:`NEUTRAL_FILL`."""
        chosen = self.chosen
        x = unit_scores(table, chosen, example_ids=[e.id for e in examples], score=self.selector.score,
                        fill=NEUTRAL_FILL)
        return (x * signs_from_polarity(chosen, len(chosen))[None, :]).sum(axis=1)

    def probe_counts(self) -> dict[str, int]:
        """Totals over the pool's training probes: bounded, failed (neutral-filled), absent."""
        kept = {r.id for r in self.pool}
        return {k: sum(h[k] for rid, h in self.health.items() if rid in kept) for k in ("bounded", "failed", "absent")}

    def summary(self) -> dict[str, Any]:
        counts = self.probe_counts()
        per_rubric = {rid: {k: h[k] for k in ("bounded", "failed", "absent") if h[k]}
                      for rid, h in self.health.items() if h["bounded"] or h["failed"] or h["absent"]}
        return jsonable({"selected": len(self.chosen), "pool": len(self.pool), "dropped": len(self.dropped),
                         "dropped_ids": list(self.dropped),
                         "polarity_flipped": len(self.polarity.get("flipped") or []),
                         "polarity_dropped": len(self.polarity.get("dropped") or []),
                         "polarity_reasons": dict(self.polarity.get("counts") or {}),
                         "probes_bounded": counts["bounded"],
                         "probes_filled": counts["failed"] + counts["absent"], "probe_health": per_rubric,
                         "threshold": self.threshold, "score_mode": self.selector.score,
                         "train_delta_netsat": getattr(self.selector, "train_delta_netsat_", None)})

    def save(self, out: str | Path, **manifest_extra: Any) -> Path:
        """Write the selected set (``selected.jsonl`` in a directory) with its threshold and manifest."""
        out = Path(out)
        path = out if out.suffix == ".jsonl" else out / SELECTED_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        RubricSet(self.chosen, self.manifest(**manifest_extra), threshold=self.threshold).save(path)
        return path

    def evaluate(self, table, splits: Mapping[str, tuple[Sequence[Example], np.ndarray]], *,
                 precision: float = 0.9, n_boot: int = 1000) -> dict[str, Any]:
        """NetSAT metrics of the selected set on named splits (binary: A/P/R/F1, YieldRate@P,
        ΔNetSAT with bootstrap intervals; graded: Pearson and Spearman)."""
        binary = self.threshold is not None
        out: dict[str, Any] = {}
        for name, (exs, ys) in splits.items():
            s = self.decision_function(table, list(exs))
            if binary:
                out[name] = evaluate_selection(s, ys, self.threshold, p=precision, n_boot=n_boot,
                                               random_state=self.seed)
            else:
                out[name] = {"pearson": pearson(s, ys), "spearman": spearman(s, ys)}
        return out


@dataclass(frozen=True)
class SelectContext:
    """What the select stage is told about the run besides its settings.

    Attributes:
        label: The name of the label ``y`` holds (for messages and the manifest).
        label_threshold: The threshold that made a graded label binary (recorded).
        seed: The selector's random state.
        source: The probes file, named in errors.
    """

    label: str = "sat"
    label_threshold: float | None = None
    seed: int = 0
    source: str | None = None


def select(
    table: ProbeTable,
    rubrics: Sequence[Rubric],
    examples: Sequence[Example],
    y: np.ndarray,
    params: SelectParams | None = None,
    *,
    context: SelectContext | None = None,
    **overrides: Any,
) -> SelectResult:
    """The select stage: fit the selector of ``params`` on the training examples' probes.

    Rubrics without usable probes stop the run or are dropped (``params.missing``); SAT/DSAT
    rubrics whose probes on these (training) examples go against their polarity are then flipped
    or dropped (``params.polarity_check``, see :mod:`.polarity`).

    Args:
        table: The probe results (a :class:`~rubric_induce.data.probes.ProbeTable`).
        rubrics: The pool to choose from.
        examples: The training examples.
        y: Their labels, already thresholded (0/1; graded only for ``method = "topk"``).
        params: The stage's settings (default: :class:`SelectParams` defaults).
        context: The run (:class:`SelectContext`): label name, threshold, seed, source file.
        **overrides: Fields of ``params`` (``n_sat``, ``n_dsat``, ``method``, ``options`` ...),
            checked like a config; an unknown name is a :class:`TypeError`.

    Returns:
        The fitted selector with the pool it chose from, the rubrics dropped and the probe health.

    Raises:
        DataError: Labels of one class, too many failed probes (``missing = "error"``), or every
            rubric against its polarity.
    """
    params = resolve_params(SelectParams, params, overrides)
    context = context or SelectContext()
    label, seed, source = context.label, context.seed, context.source
    y = np.asarray(y, dtype=float)
    check_selection_labels(y, params.method, label)
    pool, dropped = usable_rubrics(table, examples, rubrics, params.missing, source, params.max_failure_rate)
    selector = params.make_selector(seed)
    x = unit_scores(table, pool, example_ids=[e.id for e in examples], score=selector.score, fill=NEUTRAL_FILL)
    checked = check_polarity(x, y, pool, action=params.polarity_check, alpha=params.polarity_alpha)
    if not checked.rubrics:
        raise DataError(f"every one of the {len(pool)} rubric(s) goes against its polarity on the training "
                        "examples; set select.polarity_check = 'flip' to keep them flipped", path=source,
                        field="select.polarity_check")
    pool, x = checked.rubrics, x[:, checked.keep]
    selector.fit(x, y, rubrics=pool)
    health = table.health([r.id for r in rubrics], [e.id for e in examples])
    return SelectResult(selector, pool, params, len(examples), dropped, label, context.label_threshold, seed, health,
                        checked.to_dict())


def write_selection_report(result: SelectResult, table, splits: Mapping[str, tuple[Sequence[Example], np.ndarray]],
                           out_dir: str | Path, *, precision: float = 0.9, n_boot: int = 1000, plot: bool = True,
                           **manifest_extra: Any) -> dict[str, Any]:
    """Save the selected set and its metrics on ``splits`` into ``out_dir``: ``selected.jsonl``,
    ``metrics.json``, ``metrics.md`` and (binary labels, matplotlib) ``precision_curves.png``.
    Returns the metrics payload (with its markdown table under ``"markdown"``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = result.evaluate(table, splits, precision=precision, n_boot=n_boot)
    result.save(out_dir, **manifest_extra)
    chosen, method = result.chosen, result.params.method
    payload = {"method": method, "threshold": result.threshold, "alpha": result.alpha,
               "selected": [r.id for r in chosen], "dropped": result.dropped, "precision_level": precision,
               "n_boot": n_boot, "metrics": metrics}
    write_json(out_dir / "metrics.json", jsonable(payload))
    binary = result.threshold is not None
    if binary:
        table_md = metrics_markdown(metrics, p=precision)
    else:
        table_md = ("| metric | " + " | ".join(metrics) + " |\n|---|" + "---|" * len(metrics) + "\n"
                    + "\n".join(f"| {m} | " + " | ".join(f"{metrics[s][m]:.3f}" for s in metrics) + " |"
                                for m in ("pearson", "spearman")) + "\n")
    n_sat = sum(r.polarity != "DSAT" for r in chosen)
    thr_text = "n/a" if result.threshold is None else f"{result.threshold:.3f}"
    alpha_text = "" if result.alpha is None else f", alpha {result.alpha:g}"
    n_test = len(splits["test"][0]) if "test" in splits else 0
    header = (f"# Rubric selection: {method}\n\n{len(chosen)} rubrics selected from {len(result.pool)} "
              f"({n_sat} SAT, {len(chosen) - n_sat} DSAT); threshold {thr_text}{alpha_text}; "
              f"{result.n_train} train / {n_test} test examples (label {result.label!r}).\n\n")
    dropped = (f"\n{len(result.dropped)} rubric(s) dropped: more than "
               f"{result.params.max_failure_rate:.0%} of their probes failed or absent: "
               + ", ".join(f"`{d}`" for d in result.dropped) + "\n") if result.dropped else ""
    dropped += probe_health_markdown(result.health, result.n_train)
    rubric_list = "\n## Selected rubrics\n\n" + "\n".join(
        f"{i + 1}. [{r.polarity or 'aspect'}] {r.text} (`{r.id}`)" for i, r in enumerate(chosen)) + "\n"
    atomic_write_text(out_dir / "metrics.md", header + table_md + dropped + rubric_list)
    if plot and binary:
        scores = {n: (result.decision_function(table, list(exs)), ys) for n, (exs, ys) in splits.items()}
        plot_precision_curves(scores, result.threshold, len(chosen), out_dir / "precision_curves.png", p=precision,
                              title=f"{method}: {len(chosen)} rubrics")
    payload["markdown"] = table_md
    return payload
