"""Data model, JSONL I/O and dataset loaders."""
from rubric_induce.data.examples_io import write_examples
from rubric_induce.data.labels import check_binary, check_labels, is_binary, labels_from_examples, require_two_classes
from rubric_induce.data.mapping import read_examples
from rubric_induce.data.model import (
    LIKERT_5,
    YES_NO,
    AnswerScale,
    Example,
    Judgment,
    LabelScale,
    Rubric,
    RubricPool,
    RubricSet,
    content_id,
)
from rubric_induce.data.render import excerpt, render_example, truncate

__all__ = [
    "AnswerScale", "LIKERT_5", "YES_NO", "LabelScale", "Judgment", "Example", "Rubric",
    "RubricPool", "RubricSet", "content_id", "read_examples", "write_examples", "check_labels",
    "require_two_classes", "render_example", "truncate", "excerpt", "labels_from_examples", "is_binary", "check_binary",
]
