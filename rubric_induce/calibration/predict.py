"""The one way calibrated predictions are read off probes: the calibrator's input features from a probe
table (:func:`calibrator_features`), the answer width it was trained on (:func:`fit_width`), which judge's
weights a name asks for (:func:`resolve_judge`) and each text's calibrated numbers (:func:`calibrated_rows`).

The scorer, the ``score`` command, the viewer and held-out evaluation all read predictions through here.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import suggest

__all__ = ["calibrator_features", "calibrated_rows", "fit_width", "resolve_judge", "SHARED_JUDGE", "UNSEEN_JUDGE"]


# --------------------------------------------------------------------------------------------
def calibrator_features(cal, table, example_ids: Sequence[str] | None = None, *, source: str | None = None):
    """``(arrays, X)``: the probe arrays of the calibrator's input rubrics and its input tensor.

    Checks that the probes cover every input rubric and fit the trained answer width (shorter
    scales are zero-padded: a missing answer carries no mass).
    """
    if not cal.input_names_:
        raise DataError("the calibrator does not record its input rubric ids", path=source)
    present = {r.rubric_id for r in table.records}
    missing = [r for r in cal.input_names_ if r not in present]
    if missing:
        raise DataError(f"the probes lack {len(missing)} rubric(s) the calibrator was trained on, e.g. "
                        f"{missing[:3]}", path=source)
    arr = table.arrays(example_ids=example_ids, rubric_ids=cal.input_names_)
    return arr, fit_width(cal, np.where(arr.ok[..., None], arr.raw, 0.0), source=source)


def fit_width(cal, X: np.ndarray, *, source: str | None = None) -> np.ndarray:
    """``X`` (``[texts, rubrics, answers]``) at the answer width the calibrator was trained on.

    The width is the longest scale among the probes it was trained on (e.g. an 11-point rubric of
    the pool that selection left out), so the selected rubrics' probes are often narrower: zero
    answers are padded on (a missing answer carries no mass). Wider probes with mass beyond the
    width are an error."""
    k = cal.n_features_in_shape_[-1]
    if X.shape[2] < k:
        X = np.concatenate([X, np.zeros((*X.shape[:2], k - X.shape[2]))], axis=2)
    if X.shape[2] > k and (X[:, :, k:] > 0).any():
        raise DataError(f"the probes have answer scales longer than the {k} answers the calibrator "
                        "was trained on", path=source)
    return X[:, :, :k]


#: The judge name that asks for the shared weights only (a judge the calibrator has not seen).
SHARED_JUDGE = "shared"
#: What an unseen judge name means: an error (default) or the shared weights.
UNSEEN_JUDGE = ("error", "shared")


def resolve_judge(cal, judge: Any, unseen_judge: str = "error") -> Any:
    """``judge`` as the calibrator takes it, refusing names it was not trained on.

    None: every judge's mean is the caller's business (passed through). A known name or a list of
    known names: as given. ``"shared"`` (:data:`SHARED_JUDGE`, unless a training judge has that
    name): None, the shared weights only. Any other unseen name is a :class:`DataError` listing
    the known judges with the closest one, unless ``unseen_judge="shared"`` says that unseen
    judges get the shared weights (then they are passed on, and the calibrator uses the shared
    weights for them).
    """
    if unseen_judge not in UNSEEN_JUDGE:
        raise DataError(f"unseen_judge must be one of {UNSEEN_JUDGE}, got {unseen_judge!r}", field="unseen_judge")
    if judge is None:
        return None
    known = [str(j) for j in cal.judges_]
    single = isinstance(judge, (str, int, np.integer))
    names = [str(judge)] if single else [str(j) for j in judge]
    if not names:
        raise DataError("the list of trusted judges is empty", field="judge")
    unknown = [n for n in names if n not in known and n != SHARED_JUDGE]
    if unknown and unseen_judge == "error":
        shown = ", ".join(known[:12]) + (f", ... ({len(known)} in all)" if len(known) > 12 else "")
        raise DataError(f"unknown judge {unknown[0]!r}{suggest(unknown[0], known)}; the calibrator was trained on "
                        f"{shown}. For a judge it has not seen, ask for the shared weights: judge {SHARED_JUDGE!r} "
                        f"(CLI --judge {SHARED_JUDGE}; API unseen_judge='shared')", field="judge")
    if single:
        return None if names[0] == SHARED_JUDGE and SHARED_JUDGE not in known else str(judge)
    return names


def calibrated_rows(cal, X: np.ndarray, judge: Any = None, *, question: str | int | None = None,
                    aggregate: str = "mean", unseen_judge: str = "error") -> dict[str, np.ndarray]:
    """Per row: the calibrated distribution, prediction, variance, sd and entropy (one definition
    of each, from the calibrator's own methods). ``judge``: see :func:`resolve_judge`."""
    judge = resolve_judge(cal, judge, unseen_judge)
    q = cal.question_index(question)
    proba = cal.predict_proba(X, judge, question=q)
    var = cal.predictive_variance(X, judge, question=q)
    return {"proba": proba, "prediction": cal.predict(X, judge, question=q, aggregate=aggregate),
            "variance": var, "sd": np.sqrt(var), "entropy": cal.entropy(X, judge, question=q),
            "scale": np.asarray(cal.scales_[q], dtype=float), "question": cal.question_names_[q]}
