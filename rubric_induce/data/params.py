"""Where the labelled examples come from and which label is learned: :class:`DataParams`, and the
one function that loads examples from them (:func:`load_examples`, used by ``run`` and every
command that reads examples)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param
from rubric_induce.data.mapping import InputMapping
from rubric_induce.data.model import Example, LabelScale

__all__ = ["DataParams", "load_examples"]


@dataclass(frozen=True)
class DataParams(Params):
    """The examples (a file or a shared dataset), the label selection learns, the fields shown."""

    section = "data"
    examples: str | None = param(None, help="Examples file: JSONL (flat or rubric-induce), JSON, CSV or TSV, "
                                            "read through data.mapping.")
    dataset: str | None = param(None, help="Or a shared dataset name (see `rubric-induce datasets`).")
    data_root: str | None = param(None, help="Folder of the shared benchmark data.")
    mapping: InputMapping | None = param(None, help="[data.mapping]: which columns of data.examples hold the id, "
                                                    "group, text fields, labels and judges (see InputMapping).",
                                         hidden=True)
    text_field: str | None = param(None, help="Shortcut for data.mapping.text = [COLUMN] (one text column).")
    label_fields: tuple[str, ...] = param((), help="Shortcut for data.mapping.labels = [COLUMNS].")
    label: str = param("sat", help="The human label selection learns (0/1, or graded with label_threshold).")
    label_threshold: float | None = param(None, help="Call label >= T positive (a graded label made binary).")
    fields: tuple[str, ...] | None = param(None, help="Example fields shown to the LLM, in order (default: all).")
    scales: dict[str, Any] = param(factory=dict, help="Declared range of labels, {label = [low, high]}: a label or "
                                   "a judge's answer outside it is an error naming its line (0, not applicable in "
                                   "calibration, is always allowed, and left out of the judges' mean, unless the "
                                   "scale holds 0, e.g. [0, 10]). Without one, any number is taken.")

    def __post_init__(self) -> None:
        if isinstance(self.mapping, Mapping):  # a [data.mapping] table
            object.__setattr__(self, "mapping", InputMapping.from_mapping(self.mapping))
        super().__post_init__()

    def check(self) -> None:
        if self.examples and self.dataset:
            raise DataError("give exactly one of data.examples (a file) or data.dataset (a shared dataset)",
                            field="data")
        if self.dataset and self.input_mapping() is not None:
            raise DataError("a mapping reads data.examples files; a shared dataset has its own loader",
                            field="data.mapping")
        m = self.mapping
        if self.text_field and m is not None and m.text is not None:
            raise DataError("give data.text_field or data.mapping.text, not both", field="data.text_field")
        if self.label_fields and m is not None and m.labels is not None:
            raise DataError("give data.label_fields or data.mapping.labels, not both", field="data.label_fields")
        self.label_scales()

    def label_scales(self) -> dict[str, LabelScale]:
        """:attr:`scales` as :class:`LabelScale` objects (checked: two finite numbers, low < high)."""
        out = {}
        for name, value in self.scales.items():
            where = f"data.scales.{name}"
            if (not isinstance(value, (list, tuple)) or len(value) != 2
                    or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                           for v in value)):
                raise DataError(f"expected [low, high] (two numbers), got {value!r}", field=where)
            low, high = float(value[0]), float(value[1])
            if not low < high:
                raise DataError(f"expected low < high, got {list(value)!r}", field=where)
            # 0 = "not applicable" (LLM-RUBRIC) only where it is no answer of the scale: on 0-10 it is a grade
            out[str(name)] = LabelScale("continuous", low, high, not_applicable=() if low <= 0.0 <= high else (0.0,))
        return out

    def input_mapping(self) -> InputMapping | None:
        """:attr:`mapping` with the ``text_field`` / ``label_fields`` shortcuts folded in."""
        changes = {}
        if self.text_field:
            changes["text"] = (self.text_field,)
        if self.label_fields:
            changes["labels"] = self.label_fields
        if not changes:
            return self.mapping
        return (self.mapping or InputMapping()).replace(**changes)


def load_examples(params: DataParams, resolve: Callable[[str], Path] = Path, *, limit: int | None = None,
                  source: str | None = None) -> list[Example]:
    """The examples ``params`` describe (``resolve`` turns a relative path into a real one, e.g.
    against the config file's folder); errors name the file, line and field."""
    if bool(params.examples) == bool(params.dataset):
        raise DataError("give exactly one of data.examples (a file) or data.dataset (a shared dataset)",
                        path=source, field="data")
    if params.dataset:
        from rubric_induce.data.datasets import load_dataset

        root = resolve(params.data_root) if params.data_root else None
        examples = load_dataset(params.dataset, root=root)
    else:
        path = resolve(params.examples)
        if not path.exists():
            raise DataError(f"examples file not found: {path}", path=source, field="data.examples")
        mapping = params.input_mapping() or InputMapping()
        examples = mapping.load(path, default_labels=(params.label,), label_scales=params.label_scales() or None)
    _check_scale_names(params, examples, source)
    if params.dataset and params.scales:  # a shared dataset's loader checks its own scales; check the declared ones
        from rubric_induce.data.examples_io import check_labels

        scales = params.label_scales()
        for ex in examples:
            check_labels(ex.labels, scales, path=params.dataset, field_prefix=f"{ex.id}: labels.")
            for j, jd in enumerate(ex.judgments):
                check_labels(jd.labels, scales, path=params.dataset, field_prefix=f"{ex.id}: judgments[{j}].labels.")
    return examples[:limit] if limit else examples


def _check_scale_names(params: DataParams, examples: list[Example], source: str | None) -> None:
    """A declared scale must name a label the examples have (a typo would check nothing)."""
    from rubric_induce.core.params import suggest

    known = {q for ex in examples for q in (*ex.labels, *(k for j in ex.judgments for k in j.labels))}
    for name in params.scales:
        if name not in known:
            raise DataError(f"no example has a label {name!r}{suggest(name, sorted(known))}; labels: "
                            f"{', '.join(sorted(known)) or 'none'}", path=source, field=f"data.scales.{name}")
