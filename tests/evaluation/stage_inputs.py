"""What the evaluate stage is handed for a fake run's held-out texts, beside the probes: the label, the
run's threshold, question and judges, the first six texts as training texts, the selected rubrics.
Imported as ``from stage_inputs import stage_kwargs`` (pytest puts this folder on ``sys.path``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.data import RubricPool


def stage_kwargs(scorer: Any, fake_run: Path, examples: list, y: np.ndarray) -> dict[str, Any]:
    """The keyword arguments of ``evaluate`` / ``evaluate_probes`` as the pipeline's stage builds them."""
    return dict(label="sat", threshold=scorer.threshold, binary=True, question=scorer.question, seed=3,
                train=examples[:6], train_y=y[:6], trained_judges=scorer.judges,
                rubrics=list(RubricPool.load(fake_run / "selected.jsonl")), selected=[r.id for r in scorer.rubrics],
                answer_reference=getattr(scorer.adaptive, "answer_surprise_reference_", None))
