"""The LLM-RUBRIC calibration network (Hashemi et al., 2024, eqs. 3-5), in torch.

``x`` is the LLM's answer distributions for every rubric question, concatenated and *not*
renormalised (a not-applicable or missing question is an all-zero block). Two hidden layers
use shared + judge-specific weights ``(W + W^a)[1; x]``; each output question has a head over
its own answer scale, padded to the largest scale and masked, so 3- and 4-point scales coexist.

Two heads:

* ``softmax`` (the paper): ``softmax((V_i + V_i^a)[1; z2])``.
* ``ordinal`` (paper Appendix B, footnote 27): an ordered-logit model; a latent score
  ``r = (v_i + v_i^a)[1; z2]`` and ``K-1`` thresholds per question, shared + judge-specific,
  kept increasing by a cumulative softplus; ``P(y <= k) = sigmoid(theta_k - r)``.

Judge index ``-1`` means an unseen judge: only the shared weights are used.
This module imports torch; import it only through :mod:`rubric_induce.calibration`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["CalibrationNetwork", "HEADS", "INITS", "masked_nll"]

HEADS = ("softmax", "ordinal")
# "glorot": shared weights Glorot-uniform, judge-specific deviations zero (an unseen judge is the
# shared model). "normal": every weight, judge-specific ones included, drawn from N(0, init_scale^2),
# as the released LLM-RUBRIC code (microsoft/LLM-Rubric, ``torch.randn``) initialises them.
INITS = ("glorot", "normal")
_NEG = -1e9  # logit for padded answers (finite, so 0 * _NEG stays 0 in the loss)


class CalibrationNetwork(nn.Module):
    """Personalized multi-task calibration network.

    Parameters: ``n_inputs`` features, ``n_judges`` known judges, ``scale_sizes[i]`` answers of
    output question ``i``, ``hidden = (h1, h2)``, ``personalized`` (judge-specific weights in
    every layer: True; only in the output heads: ``"head"``; none: False), ``head``
    (``"softmax"`` or ``"ordinal"``).
    """

    def __init__(
        self,
        n_inputs: int,
        n_judges: int,
        scale_sizes: Sequence[int],
        hidden: tuple[int, int] = (25, 25),
        *,
        personalized: bool | str = True,
        head: str = "softmax",
        init_scale: float = 1.0,
        init: str = "glorot",
    ) -> None:
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"unknown head {head!r}; choose from {HEADS}")
        if init not in INITS:
            raise ValueError(f"unknown init {init!r}; choose from {INITS}")
        if any(k < 2 for k in scale_sizes):
            raise ValueError(f"every answer scale needs at least 2 answers, got {list(scale_sizes)}")
        h1, h2 = (int(h) for h in hidden)
        self.n_inputs, self.n_judges = int(n_inputs), int(n_judges)
        self.scale_sizes = [int(k) for k in scale_sizes]
        self.n_questions, self.k_max = len(self.scale_sizes), max(self.scale_sizes)
        if personalized not in (True, False, "head"):
            raise ValueError(f"personalized must be True, False or 'head', got {personalized!r}")
        self.hidden, self.personalized, self.head = (h1, h2), personalized, head
        j = max(self.n_judges, 1)
        q, k = self.n_questions, self.k_max
        out = k if head == "softmax" else 1

        def glorot(*shape: int) -> torch.Tensor:
            fan_in, fan_out = shape[-2], shape[-1]
            bound = init_scale * math.sqrt(6.0 / (fan_in + fan_out))
            return (torch.rand(*shape) * 2 - 1) * bound

        self.W1 = nn.Parameter(glorot(self.n_inputs + 1, h1))
        self.W2 = nn.Parameter(glorot(h1 + 1, h2))
        self.V = nn.Parameter(glorot(q, h2 + 1, out))
        # Judge-specific deviations start at zero: an untrained judge is the shared model.
        self.W1a = nn.Parameter(torch.zeros(j, self.n_inputs + 1, h1))
        self.W2a = nn.Parameter(torch.zeros(j, h1 + 1, h2))
        self.Va = nn.Parameter(torch.zeros(j, q, h2 + 1, out))
        self.init = init
        if init == "normal":
            with torch.no_grad():
                for p in (self.W1, self.W2, self.V, self.W1a, self.W2a, self.Va):
                    p.normal_(0.0, float(init_scale))
        if head == "ordinal":
            # Thresholds: first one free, the gaps through softplus (so they stay increasing).
            base = torch.zeros(q, k - 1)
            for i, ki in enumerate(self.scale_sizes):
                base[i, : ki - 1] = torch.linspace(-1.5, 1.5, ki - 1) if ki > 2 else 0.0
            raw = base.clone()
            raw[:, 1:] = torch.log(torch.expm1((base[:, 1:] - base[:, :-1]).clamp_min(1e-3)))
            self.theta = nn.Parameter(raw)
            self.theta_a = nn.Parameter(torch.zeros(j, q, k - 1))
        mask = torch.zeros(q, k, dtype=torch.bool)
        for i, ki in enumerate(self.scale_sizes):
            mask[i, :ki] = True
        self.register_buffer("answer_mask", mask)
        if not self.personalized:
            for p in self.judge_parameters():
                p.requires_grad_(False)
        elif self.personalized == "head":
            for p in (self.W1a, self.W2a):
                p.requires_grad_(False)

    def judge_parameters(self) -> list[nn.Parameter]:
        """The judge-specific parameters in use (``W^a``, ``V^a``, and ordinal ``theta^a``)."""
        ps = [self.W1a, self.W2a, self.Va] if self.personalized != "head" else [self.Va]
        if self.head == "ordinal":
            ps.append(self.theta_a)
        return ps

    def shared_parameters(self) -> list[nn.Parameter]:
        ps = [self.W1, self.W2, self.V]
        if self.head == "ordinal":
            ps.append(self.theta)
        return ps

    def _onehot(self, judges: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        """One-hot judge rows (all zero for unseen judges, index < 0); None when unpersonalized."""
        if not self.personalized:
            return None
        known = judges >= 0
        oh = torch.zeros(judges.shape[0], self.W1a.shape[0], dtype=dtype)
        oh[known, judges[known]] = 1.0
        return oh

    @staticmethod
    def _affine(h: torch.Tensor, w: torch.Tensor, wa: torch.Tensor, oh: torch.Tensor | None) -> torch.Tensor:
        """``(W + W^a)[1; h]`` for every row, as dense matmuls: the judge-specific term is
        ``(onehot(a) (x) [1; h]) @ W^a`` flattened, which is fast and exact."""
        hb = torch.cat([torch.ones(h.shape[0], 1, dtype=h.dtype), h], dim=1)
        out = hb @ w
        if oh is not None:
            kron = (oh.unsqueeze(2) * hb.unsqueeze(1)).reshape(h.shape[0], -1)
            out = out + kron @ wa.reshape(kron.shape[1], -1)
        return out

    def forward(self, x: torch.Tensor, judges: torch.Tensor) -> torch.Tensor:
        """Log-probabilities ``[batch, questions, k_max]``; padded answers get ~-1e9."""
        oh = self._onehot(judges, x.dtype)
        oh_hidden = oh if self.personalized is True else None
        z1 = torch.sigmoid(self._affine(x, self.W1, self.W1a, oh_hidden))
        z2 = torch.sigmoid(self._affine(z1, self.W2, self.W2a, oh_hidden))
        q, _, o = self.V.shape
        v = self.V.permute(1, 0, 2).reshape(self.V.shape[1], q * o)
        va = self.Va.permute(0, 2, 1, 3).reshape(self.Va.shape[0], self.V.shape[1], q * o)
        out = self._affine(z2, v, va, oh).reshape(-1, q, o)
        if self.head == "softmax":
            logits = out.masked_fill(~self.answer_mask, _NEG)
            return torch.log_softmax(logits, dim=-1)
        return self._ordinal_logprobs(out[..., 0], oh)

    def _ordinal_logprobs(self, score: torch.Tensor, oh: torch.Tensor | None) -> torch.Tensor:
        raw = self.theta.unsqueeze(0).expand(score.shape[0], -1, -1)  # [b, q, k-1]
        if oh is not None:
            raw = raw + (oh @ self.theta_a.reshape(self.theta_a.shape[0], -1)).reshape(raw.shape)
        gaps = nn.functional.softplus(raw[..., 1:]) + 1e-4
        theta = torch.cat([raw[..., :1], raw[..., :1] + torch.cumsum(gaps, dim=-1)], dim=-1)
        cdf = torch.sigmoid(theta - score.unsqueeze(-1))  # P(y <= k), k = 1..K-1
        b, q = score.shape
        ones = torch.ones(b, q, 1, dtype=score.dtype)
        zeros = torch.zeros(b, q, 1, dtype=score.dtype)
        # Each question's own top answer takes the rest of the mass: put cdf = 1 at its K-1.
        sizes = torch.tensor(self.scale_sizes)
        pos = torch.arange(self.k_max - 1)
        cdf = torch.where(pos.view(1, 1, -1) >= (sizes - 1).view(1, -1, 1), 1.0, cdf)
        full = torch.cat([zeros, cdf, ones], dim=-1)
        probs = (full[..., 1:] - full[..., :-1]).clamp_min(1e-12)
        logp = torch.log(probs)
        return logp.masked_fill(~self.answer_mask, _NEG)


def masked_nll(logp: torch.Tensor, targets: torch.Tensor, questions: Sequence[int] | None = None) -> torch.Tensor:
    """Mean negative log-likelihood over the observed (row, question) cells only.

    ``targets[b, q]`` is the answer index, or ``-1`` where the judge gave no applicable answer;
    those cells are left out of both the sum and the count (a masked mean, never diluted).
    ``questions`` restricts the loss to some output questions (fine-tuning on the main one).
    """
    if questions is not None:
        idx = torch.as_tensor(list(questions), dtype=torch.long)
        logp, targets = logp[:, idx], targets[:, idx]
    valid = targets >= 0
    picked = logp.gather(-1, targets.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    n = valid.sum()
    if int(n) == 0:
        return logp.sum() * 0.0
    return -(picked * valid).sum() / n
