"""Training one member of an :class:`~rubric_induce.calibration.adaptive.AdaptiveModel`: the target and
answer networks on randomly masked question blocks, each kept at its own best validation epoch (the
target and the answer losses bottom out at different epochs)."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubric_induce.calibration._torch import require_torch
from rubric_induce.calibration.adaptive_numpy import excess_surprise, random_masks
from rubric_induce.calibration.calibrator import validation_split

__all__ = ["MASK_POOL", "MemberData", "losses", "train_member"]

#: Training mask patterns per member when the rubrics have more subsets than this (see :func:`train_member`).
MASK_POOL = 512


@dataclass(frozen=True)
class MemberData:
    """The rows a member trains on: LLM blocks ``X`` [rows, blocks, k], their soft answer classes ``S``,
    judge indices ``J``, answer codes ``Y``, groups ``G`` (texts) and the main question's index."""

    X: np.ndarray
    S: np.ndarray
    J: np.ndarray
    Y: np.ndarray
    G: np.ndarray
    main: int


def losses(nets: tuple[Any, Any], Xin, S, J, Y, M, main: int) -> tuple[Any, Any]:
    """Target NLL (every output question, plus the main one again) and the soft cross-entropy of
    the unasked blocks' LLM answers, on network inputs ``Xin`` of rows with observed-block masks ``M``."""
    torch = require_torch()
    from rubric_induce.calibration.network import masked_nll  # network.py imports torch

    tnet, anet = nets
    logp = tnet(Xin, J)
    lt = masked_nll(logp, Y)
    if Y.shape[1] > 1:
        lt = lt + masked_nll(logp, Y, [main])
    alogp = anet(Xin, torch.full_like(J, -1))[..., : S.shape[2]]
    unasked = (~M).to(Xin.dtype)
    per_block = -(S * alogp.clamp_min(-1e4)).sum(dim=-1)  # [rows, blocks]
    la = (per_block * unasked).sum() / unasked.sum().clamp_min(1.0)
    return lt, la


def _split(model: Any, G: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation rows, split as the calibrator splits them."""
    return validation_split(G, model.early_stopping, model.validation_fraction, rng)


def _optimizer(model: Any, tnet: Any, anet: Any) -> Any:
    """AdamW over both networks; the judge-specific weights get their own decay."""
    torch = require_torch()
    jwd = model.weight_decay if model.judge_weight_decay is None else model.judge_weight_decay
    groups = [{"params": tnet.shared_parameters(), "weight_decay": float(model.weight_decay)},
              {"params": anet.shared_parameters(), "weight_decay": float(model.weight_decay)}]
    if model.personalized:
        groups.append({"params": tnet.judge_parameters(), "weight_decay": float(jwd)})
    return torch.optim.AdamW(groups, lr=float(model.learning_rate))


@dataclass
class _Best:
    """Each network's best validation loss, epoch and weights so far, and epochs since."""

    loss: list[float]
    epoch: list[int]
    since: list[int]
    state: list[Any]

    def update(self, vals: tuple[float, float], nets: tuple[Any, Any], epoch: int) -> None:
        for i, (v, net) in enumerate(zip(vals, nets)):
            if v < self.loss[i] - 1e-5:
                self.loss[i], self.epoch[i], self.since[i] = v, epoch, 0
                self.state[i] = copy.deepcopy(net.state_dict())
            else:
                self.since[i] += 1


def train_member(model: Any, nets: tuple[Any, Any], data: MemberData, seed: int) -> dict[str, Any]:
    """Train one member's ``(target, answer)`` networks with ``model``'s settings; early stopping keeps
    each at its own best validation loss. Returns the member's history."""
    torch = require_torch()
    tnet, anet = nets
    X, S, main = data.X, data.S, data.main
    rng = np.random.default_rng(seed)
    train_rows, val_rows = _split(model, data.G, rng)
    St, Jt, Yt = (torch.from_numpy(a) for a in (S, data.J, data.Y))
    opt = _optimizer(model, tnet, anet)
    gen = torch.Generator().manual_seed(seed)
    aw = float(model.answer_weight)
    if len(val_rows):
        vmask = random_masks(len(val_rows), X.shape[1], np.random.default_rng(seed + 1))
        vin, vm = torch.from_numpy(model._inputs(X[val_rows], vmask)), torch.from_numpy(vmask)
    best = _Best([math.inf, math.inf], [0, 0], [0, 0], [None, None])  # target, answer
    curve: list[float] = []
    bs = max(1, min(int(model.batch_size), len(train_rows)))
    # With many rubrics nearly every random mask is a new pattern, and each new pattern costs the
    # Gaussian fill a linear solve: draw the masks from a fixed pool of patterns (cached) instead.
    pool = None
    if getattr(model, "completion_", None) is not None and 2 ** X.shape[1] > MASK_POOL:
        pool = random_masks(MASK_POOL, X.shape[1], rng)
    for epoch in range(1, int(model.epochs) + 1):
        tnet.train()
        anet.train()
        masks = (random_masks(len(train_rows), X.shape[1], rng) if pool is None
                 else pool[rng.integers(len(pool), size=len(train_rows))])
        xin = torch.from_numpy(model._inputs(X[train_rows], masks))
        mt = torch.from_numpy(masks)
        perm = torch.randperm(len(train_rows), generator=gen)
        for start in range(0, len(perm), bs):
            b = perm[start:start + bs]
            r = torch.from_numpy(train_rows)[b]
            lt, la = losses(nets, xin[b], St[r], Jt[r], Yt[r], mt[b], main)
            loss = lt + aw * la
            opt.zero_grad()
            loss.backward()
            opt.step()
        if len(val_rows):
            tnet.eval()
            anet.eval()
            with torch.no_grad():
                vb = torch.from_numpy(val_rows)
                lt, la = losses(nets, vin, St[vb], Jt[vb], Yt[vb], vm, main)
            curve.append(float(lt + aw * la))
            best.update((float(lt), float(la)), nets, epoch)
            if min(best.since) >= int(model.patience):
                break
    for state, net in zip(best.state, nets):
        if state is not None:
            net.load_state_dict(state)
    excess = _val_excess(anet, vin, S[val_rows], vmask) if len(val_rows) else None
    return {"n_train_rows": int(len(train_rows)), "n_val_rows": int(len(val_rows)),
            "val_answer_excess": excess,
            "epochs_run": len(curve) if curve else int(model.epochs),
            "best_epoch": best.epoch[0] or int(model.epochs), "best_epoch_answers": best.epoch[1] or int(model.epochs),
            "val_loss": curve}


def _val_excess(anet: Any, vin: Any, S_val: np.ndarray, vmask: np.ndarray) -> float | None:
    """The answer network's excess surprise on texts it did not train on (its unasked blocks)."""
    torch = require_torch()
    anet.eval()
    with torch.no_grad():
        alogp = anet(vin, torch.full((len(S_val),), -1, dtype=torch.long))[..., : S_val.shape[2]]
    d = excess_surprise(np.exp(alogp.numpy().astype(np.float64)), S_val.astype(np.float64))
    return float(d[~vmask].mean()) if (~vmask).any() else None
