"""Train/test splits that keep every group on one side and both classes on both sides."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rubric_induce.data.labels import is_binary
from rubric_induce.data.model import Example

__all__ = ["group_split"]


def group_split(
    examples: Sequence[Example],
    y: np.ndarray | None = None,
    *,
    test_size: float = 0.5,
    random_state: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test): whole ``group``s (an example without one is its own) go to one side.

    With 0/1 labels ``y`` the groups are split per majority class, so each class is represented
    in both halves as far as the counts allow (RUBICON's "homogeneously represented" 50:50 split).
    Seeded: the same inputs give the same split.
    """
    if not 0.0 <= test_size < 1.0:
        raise ValueError(f"test_size must be in [0, 1), got {test_size}")
    keys = [ex.group if ex.group is not None else f"\0{ex.id}" for ex in examples]
    groups = list(dict.fromkeys(keys))
    gindex = {g: i for i, g in enumerate(groups)}
    member = np.array([gindex[k] for k in keys], dtype=int)
    if y is not None and is_binary(y):
        share = np.bincount(member, weights=np.asarray(y, dtype=float), minlength=len(groups))
        share /= np.bincount(member, minlength=len(groups))
        strata = (share >= 0.5).astype(int)
    else:
        strata = np.zeros(len(groups), dtype=int)
    rng = np.random.default_rng(random_state)
    test_groups = np.zeros(len(groups), dtype=bool)
    for s in np.unique(strata):
        idx = rng.permutation(np.flatnonzero(strata == s))
        test_groups[idx[: int(round(test_size * len(idx)))]] = True
    is_test = test_groups[member]
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)
