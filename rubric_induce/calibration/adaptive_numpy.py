"""The adaptive model's networks in numpy: a :class:`~rubric_induce.calibration.network.CalibrationNetwork`'s
forward pass (the same function as its torch ``forward``, tested to agree), the random question masks
it trains on, and the excess surprise of read answers. The policy evaluates every (text, candidate
question, outcome) at each step, so prediction must not pay torch's per-call cost."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["random_masks", "np_state", "sigmoid", "affine", "np_forward", "excess_surprise"]


def random_masks(n: int, n_blocks: int, rng: np.random.Generator, available: np.ndarray | None = None) -> np.ndarray:
    """``[n, n_blocks]`` boolean masks: a uniform number of observed blocks (0..all), then a uniform
    subset of that size (among ``available`` blocks when given)."""
    keys = rng.random((n, n_blocks))
    if available is not None:
        keys = np.where(available, keys, 2.0)  # unavailable blocks sort last, never observed
        n_avail = available.sum(axis=1)
    else:
        n_avail = np.full(n, n_blocks)
    k = np.floor(rng.random(n) * (n_avail + 1)).astype(np.int64)
    ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
    return ranks < k[:, None]


def np_state(net) -> dict[str, Any]:
    """A network's weights as float64 numpy arrays, with what the numpy forward pass needs."""
    st = {k: v.detach().cpu().double().numpy() for k, v in net.state_dict().items()}
    return {"W1": st["W1"], "W2": st["W2"], "V": st["V"], "W1a": st["W1a"], "W2a": st["W2a"], "Va": st["Va"],
            "theta": st.get("theta"), "theta_a": st.get("theta_a"), "mask": st["answer_mask"].astype(bool),
            "personalized": net.personalized, "head": net.head, "sizes": list(net.scale_sizes)}


def sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function, overflow-free."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free


def affine(h: np.ndarray, w: np.ndarray, wa: np.ndarray | None, judges: np.ndarray | None) -> np.ndarray:
    """``(W + W^a_j)[1; h]`` per row, the judge-specific term added judge by judge (no gather)."""
    hb = np.concatenate([np.ones((h.shape[0], 1)), h], axis=1)
    out = hb @ w
    if wa is not None and judges is not None:
        for j in np.unique(judges[judges >= 0]):
            rows = judges == j
            out[rows] += hb[rows] @ wa[j]
    return out


def np_forward(state: dict[str, Any], x: np.ndarray, judges: np.ndarray,
               questions: np.ndarray | None = None) -> np.ndarray:
    """Probabilities ``[rows, questions, k_max]`` of a :class:`CalibrationNetwork` in numpy
    (padded answers 0); the same function as its torch ``forward`` (tested to agree).

    ``questions`` (one index per row): only that question's distribution, ``[rows, k_max]``; for a
    softmax head without judge-specific output weights it skips the other questions' outputs."""
    pers = state["personalized"]
    jh = judges if pers is True else None
    jo = judges if pers else None
    z1 = sigmoid(affine(x, state["W1"], state["W1a"], jh))
    z2 = sigmoid(affine(z1, state["W2"], state["W2a"], jh))
    V, Va = state["V"], state["Va"]
    if questions is not None:
        rows = np.arange(x.shape[0])
        if jo is not None or state["head"] != "softmax":
            return np_forward(state, x, judges)[rows, questions]
        hb = np.concatenate([np.ones((z2.shape[0], 1)), z2], axis=1)
        logits = np.einsum("rh,rho->ro", hb, V[questions])
        logits = np.where(state["mask"][questions], logits, -np.inf)
        logits = logits - logits.max(axis=-1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=-1, keepdims=True)
    q, hp1, o = V.shape
    v = V.transpose(1, 0, 2).reshape(hp1, q * o)
    va = Va.transpose(0, 2, 1, 3).reshape(Va.shape[0], hp1, q * o)
    out = affine(z2, v, va, jo).reshape(-1, q, o)
    mask = state["mask"]
    if state["head"] == "softmax":
        logits = np.where(mask, out, -np.inf)
        logits = logits - logits.max(axis=-1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=-1, keepdims=True)
    score = out[..., 0]
    raw = np.broadcast_to(state["theta"], (x.shape[0], *state["theta"].shape)).copy()
    if jo is not None:
        for j in np.unique(jo[jo >= 0]):
            raw[jo == j] += state["theta_a"][j]
    gaps = np.logaddexp(0.0, raw[..., 1:]) + 1e-4
    theta = np.concatenate([raw[..., :1], raw[..., :1] + np.cumsum(gaps, axis=-1)], axis=-1)
    cdf = sigmoid(theta - score[..., None])
    sizes = np.asarray(state["sizes"])
    pos = np.arange(theta.shape[-1])
    cdf = np.where(pos[None, None, :] >= (sizes - 1)[None, :, None], 1.0, cdf)
    full = np.concatenate([np.zeros((*score.shape, 1)), cdf, np.ones((*score.shape, 1))], axis=-1)
    probs = np.clip(full[..., 1:] - full[..., :-1], 1e-12, None)
    probs = np.where(mask, probs, 0.0)
    return probs / probs.sum(axis=-1, keepdims=True)


def excess_surprise(P: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``sum((P - S) * log P)`` over the last axis: cross-entropy of the read answers ``S`` under the
    prediction ``P`` minus ``P``'s entropy (zero in expectation when ``P`` is calibrated)."""
    logp = np.log(np.clip(P, 1e-12, None))
    return ((P - S) * logp).sum(axis=-1)
