"""Where the labelled examples come from and which label is learned: :class:`DataParams`, and the
one function that loads examples from them (:func:`load_examples`, used by ``run`` and every
command that reads examples)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import DataError
from ..params import Params, param
from .model import Example

__all__ = ["DataParams", "load_examples"]


@dataclass(frozen=True)
class DataParams(Params):
    """The examples (a file or a shared dataset), the label selection learns, the fields shown."""

    section = "data"
    examples: str | None = param(None, help="Examples file: rubric-induce JSONL, or CSV/JSONL with text_field.")
    dataset: str | None = param(None, help="Or a shared dataset name (see `rubric-induce datasets`).")
    data_root: str | None = param(None, help="Folder of the shared benchmark data.")
    text_field: str | None = param(None, help="Generic CSV/JSONL: the text column (enables the generic loader).")
    label_fields: tuple[str, ...] = param((), help="Generic CSV/JSONL: the label columns.")
    label: str = param("sat", help="The human label selection learns (0/1, or graded with label_threshold).")
    label_threshold: float | None = param(None, help="Call label >= T positive (a graded label made binary).")
    fields: tuple[str, ...] | None = param(None, help="Example fields shown to the LLM, in order (default: all).")

    def check(self) -> None:
        if self.examples and self.dataset:
            raise DataError("give exactly one of data.examples (a file) or data.dataset (a shared dataset)",
                            field="data")


def load_examples(params: DataParams, resolve: Callable[[str], Path] = Path, *, limit: int | None = None,
                  source: str | None = None) -> list[Example]:
    """The examples ``params`` describe (``resolve`` turns a relative path into a real one, e.g.
    against the config file's folder); errors name the file, line and field."""
    if bool(params.examples) == bool(params.dataset):
        raise DataError("give exactly one of data.examples (a file) or data.dataset (a shared dataset)",
                        path=source, field="data")
    if params.dataset:
        from .datasets import load_dataset

        root = resolve(params.data_root) if params.data_root else None
        examples = load_dataset(params.dataset, root=root)
    else:
        path = resolve(params.examples)
        if not path.exists():
            raise DataError(f"examples file not found: {path}", path=source, field="data.examples")
        if params.text_field:
            from .datasets.generic import load_generic

            examples = load_generic(path, text_fields={params.text_field: params.text_field},
                                    label_fields={k: k for k in params.label_fields} or None)
        else:
            from .examples_io import read_examples

            examples = read_examples(path)
    return examples[:limit] if limit else examples
