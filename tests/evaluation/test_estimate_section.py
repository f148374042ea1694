"""The report's estimate section (rubric_induce.evaluation.estimate_section): held-out labels give
the mean human rating with its interval, the judge's own mean and its bias; texts without a human
score add the PPI++ column; fewer than 5 labelled texts give no interval."""
from __future__ import annotations

import numpy as np
import pytest

from rubric_induce.evaluation.estimate_section import estimate_section
from rubric_induce.evaluation.score_table import ScoreRow

pytestmark = pytest.mark.slow  # imports ppi-python (about 3 s)


def _rows(n_lab: int, n_unl: int, seed: int = 0) -> list[ScoreRow]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_lab + n_unl):
        y = int(rng.integers(1, 6))
        p = np.full(5, 0.05)
        p[min(y, 4)] += 0.75  # the judge leans one point high: a bias of about +0.7
        out.append(ScoreRow(f"t{i}", "overall", "calibrated", float(p @ np.arange(1, 6)),
                            human=float(y) if i < n_lab else None, probs=tuple(p), scale=(1, 2, 3, 4, 5)))
        out.append(ScoreRow(f"t{i}", "overall", "netsat", float(y), human=float(y) if i < n_lab else None))
    return out


def test_held_out_labels_only() -> None:
    lines = estimate_section(_rows(40, 0))
    table = [line for line in lines if line.startswith("| overall")]
    assert len(table) == 1  # netsat gives no distribution: no row
    cells = [c.strip() for c in table[0].strip("|").split("|")]
    assert cells[:4] == ["overall", "calibrated", "40", "0"] and cells[7] == ""
    bias = [float(x) for x in cells[6].replace("[", "").replace("]", "").replace(",", "").split()]
    assert 0.4 < bias[0] and bias[1] > 0  # the judge's bias is found, with an interval above 0


def test_unlabelled_texts_add_ppi_and_few_labels_give_no_interval() -> None:
    row = next(line for line in estimate_section(_rows(30, 200)) if line.startswith("| overall"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "200" and "labels' worth" in cells[7]
    low, high = (float(x) for x in cells[7].split("[")[1].split("]")[0].split(","))
    assert 1 <= low < high <= 5
    few = estimate_section(_rows(4, 10))
    assert any("fewer than 5 labelled texts" in line for line in few)
    assert estimate_section([r for r in _rows(10, 0) if r.system == "netsat"]) == []
