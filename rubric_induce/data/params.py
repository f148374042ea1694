"""Where the labelled examples come from and which label is learned: :class:`DataParams`, and the
one function that loads examples from them (:func:`load_examples`, used by ``run`` and every
command that reads examples)."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param, suggest
from rubric_induce.data.datasets import load_dataset
from rubric_induce.data.datasets.paths import data_root
from rubric_induce.data.examples_io import check_labels
from rubric_induce.data.mapping import InputMapping
from rubric_induce.data.model import Example, LabelScale
from rubric_induce.data.pair_examples import pair_examples
from rubric_induce.data.pairs import Pair, PairMapping, read_pairs

__all__ = ["DataParams", "load_examples", "load_pairs", "DATA_KINDS", "SHARED_PREFIX"]

DATA_KINDS = ("pointwise", "pairwise")
#: ``examples = "shared:llmbar/Natural/dataset.json"``: a file under the shared data folder (see
#: :func:`~rubric_induce.data.datasets.paths.data_root`; ``data.data_root`` names it explicitly).
SHARED_PREFIX = "shared:"


@dataclass(frozen=True)
class DataParams(Params):
    """The examples (a file or a shared dataset), the label selection learns, the fields shown."""

    section = "data"
    kind: str = param("pointwise", choices=DATA_KINDS,
                      help="pointwise (a label per text) or pairwise (two responses to one prompt and which is "
                           "preferred; [data.mapping] is then a pair mapping, see PairMapping).")
    examples: str | None = param(None, help="Examples file: JSONL (flat or rubric-induce), JSON, CSV or TSV, "
                                            "read through data.mapping.")
    dataset: str | None = param(None, help="Or a shared dataset name (see `rubric-induce datasets`).")
    data_root: str | None = param(None, help="Folder of the shared benchmark data.")
    mapping: InputMapping | PairMapping | None = param(
                                         None, help="[data.mapping]: which columns of data.examples hold the id, "
                                                    "group, text fields, labels and judges (see InputMapping); "
                                                    "with kind = 'pairwise' the prompt, the two responses and the "
                                                    "preference (see PairMapping).",
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
        if self.kind not in DATA_KINDS:  # before the mapping, whose reading depends on it
            case = " (in lower case)" if str(self.kind).lower() in DATA_KINDS else ""
            raise DataError(f"unknown value {self.kind!r}{suggest(str(self.kind), DATA_KINDS)}; choose from "
                            f"{', '.join(DATA_KINDS)}{case}", field="data.kind")
        if isinstance(self.mapping, Mapping):  # a [data.mapping] table
            cls = PairMapping if self.kind == "pairwise" else InputMapping
            object.__setattr__(self, "mapping", cls.from_mapping(self.mapping))
        super().__post_init__()

    def check(self) -> None:
        if self.kind == "pairwise":
            self._check_pairwise()
            return
        if isinstance(self.mapping, PairMapping):
            raise DataError("a pair mapping needs data.kind = 'pairwise'", field="data.kind")
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

    def _check_pairwise(self) -> None:
        if self.dataset:
            raise DataError("pairwise data is read from a file (data.examples); a shared dataset is pointwise",
                            field="data.dataset")
        for name in ("text_field", "label_fields", "fields", "label_threshold"):
            if getattr(self, name):
                raise DataError(f"data.{name} applies to pointwise data; a pairwise run reads the prompt and "
                                "the two responses through [data.mapping] (a pair mapping)", field=f"data.{name}")
        if self.scales:
            raise DataError("data.scales applies to pointwise labels", field="data.scales")
        if self.mapping is not None and not isinstance(self.mapping, PairMapping):
            raise DataError("data.kind = 'pairwise' reads a pair mapping", field="data.mapping")

    def pair_mapping(self) -> PairMapping:
        """The pair mapping of a pairwise run (defaults: the layout detected from the file)."""
        return self.mapping if isinstance(self.mapping, PairMapping) else PairMapping()

    def examples_path(self, resolve: Callable[[str], Path] = Path) -> Path | None:
        """``examples`` as a path: ``shared:REL`` is REL under the shared data folder, anything else
        goes through ``resolve`` (relative to the config file's folder)."""
        if self.examples is None:
            return None
        if self.examples.startswith(SHARED_PREFIX):
            root = data_root(resolve(self.data_root) if self.data_root else None)
            return root / self.examples[len(SHARED_PREFIX):].lstrip("/")
        return resolve(self.examples)

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
        """:attr:`mapping` with the ``text_field`` / ``label_fields`` shortcuts folded in (None for pairwise data)."""
        if self.kind == "pairwise":
            return None
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
    if params.kind == "pairwise":
        return pair_examples(load_pairs(params, resolve, limit=limit, source=source), params.label)
    if params.dataset:
        root = resolve(params.data_root) if params.data_root else None
        examples = load_dataset(params.dataset, root=root)
    else:
        path = params.examples_path(resolve)
        if not path.exists():
            raise DataError(f"examples file not found: {path}", path=source, field="data.examples")
        mapping = params.input_mapping() or InputMapping()
        examples = mapping.load(path, default_labels=(params.label,), label_scales=params.label_scales() or None)
    _check_scale_names(params, examples, source)
    if params.dataset and params.scales:  # a shared dataset's loader checks its own scales; check the declared ones
        scales = params.label_scales()
        for ex in examples:
            check_labels(ex.labels, scales, path=params.dataset, field_prefix=f"{ex.id}: labels.")
            for j, jd in enumerate(ex.judgments):
                check_labels(jd.labels, scales, path=params.dataset, field_prefix=f"{ex.id}: judgments[{j}].labels.")
    return examples[:limit] if limit else examples


def load_pairs(params: DataParams, resolve: Callable[[str], Path] = Path, *, limit: int | None = None,
               source: str | None = None) -> list[Pair]:
    """The pairs of a pairwise run's examples file (``limit``: the first N pairs); a bad row is a
    DataError naming the file, line (or record) and field."""
    path = params.examples_path(resolve)
    if path is None:
        raise DataError("a pairwise run reads data.examples (a file of pairs)", path=source, field="data.examples")
    if not path.exists():
        raise DataError(f"examples file not found: {path}", path=source, field="data.examples")
    pairs = read_pairs(path, params.pair_mapping())  # a repeated pair id is an error naming its line
    if limit:
        pairs = pairs[:limit]
    if len(pairs) < 2:
        raise DataError(f"a pairwise run needs at least 2 pairs, found {len(pairs)}", path=path)
    return pairs


def _check_scale_names(params: DataParams, examples: list[Example], source: str | None) -> None:
    """A declared scale must name a label the examples have (a typo would check nothing)."""
    known = {q for ex in examples for q in (*ex.labels, *(k for j in ex.judgments for k in j.labels))}
    for name in params.scales:
        if name not in known:
            raise DataError(f"no example has a label {name!r}{suggest(name, sorted(known))}; labels: "
                            f"{', '.join(sorted(known)) or 'none'}", path=source, field=f"data.scales.{name}")
