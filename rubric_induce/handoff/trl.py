"""TRL hand-offs: an induced rubric set as a reward function and as a pairwise judge.

:func:`trl_reward` gives a callable with the signature TRL's trainers call reward functions with
(``GRPOTrainer(reward_funcs=[...])``, RLOO): ``reward(prompts=..., completions=...,
completion_ids=..., **columns) -> list[float]``, one reward per completion: the scorer's
calibrated prediction (or NetSAT, or the 0/1 label; for a pairwise run, the completion's
Bradley-Terry strength, the head's pointwise reward) of the rendered prompt + completion, mapped
onto [0, 1] unless ``normalise=False``. A completion that cannot be scored gets ``None``, which
GRPOTrainer turns into NaN and leaves out of the group's mean.

:func:`trl_pairwise_judge` gives a subclass of TRL's ``BasePairwiseJudge`` (online DPO, and any
code written against TRL's judge interface): ``judge(prompts, completions, shuffle_order=True)
-> list[int]``, the index (0 or 1) of the better completion of each pair, -1 where scoring
failed. With a pairwise run's scorer it picks by :meth:`RubricScorer.compare_pairs
<rubric_induce.scoring.scorer.RubricScorer.compare_pairs>` (the Bradley-Terry head over the rubrics'
probe differences); otherwise it compares the two completions' pointwise values from the same
scorer (calibrated prediction where the run has a calibrator, else NetSAT); an exact tie goes to
the first completion shown, so ``shuffle_order`` (a seeded
shuffle) keeps that from always being the same position. TRL kept ``BasePairwiseJudge`` at its
top level (older releases), then in ``trl.experimental.judges`` (up to 1.0); trl 1.1 removed it,
so the ``trl`` extra pins ``trl>=1.0,<1.1``.

TRL is imported only when the judge is built; without it a
:class:`~rubric_induce.core.errors.MissingDependencyError` names ``pip install 'rubric-induce[trl]'``.
The reward function itself does not need TRL.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import MissingDependencyError, RubricInduceError
from rubric_induce.handoff.dspy import RubricMetric
from rubric_induce.scoring.scorer import RubricScorer

__all__ = ["trl_reward", "trl_pairwise_judge", "TrlReward", "render_turn", "require_pairwise_judge_base"]

ScorerSource = RubricScorer | str | Path
Render = Callable[[Any, Any], str | Mapping[str, str]]


def _messages_text(value: Any) -> str:
    """A prompt or completion as text: strings as they are, chat messages as ``Role: content`` lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(m, Mapping) and "content" in m for m in value):
        return "\n".join(f"{str(m.get('role', '')).upper()}: {m['content']}" if m.get("role") else str(m["content"])
                         for m in value)
    raise RubricInduceError(f"expected text or a list of chat messages, got {type(value).__name__}")


def render_turn(prompt: Any, completion: Any, fields: Sequence[str] | None = None) -> str | dict[str, str]:
    """The text the rubrics judge: with two probed fields, ``{fields[0]: prompt, fields[1]: completion}``;
    otherwise the prompt and the completion as one dialogue (TRL's conversational format: messages
    rendered as ``ROLE: content`` lines; plain text: ``USER: prompt`` / ``SYSTEM: completion`` as the
    demo dialogues are written)."""
    p, c = _messages_text(prompt), _messages_text(completion)
    if fields and len(fields) == 2:
        return {fields[0]: p, fields[1]: c}
    if isinstance(prompt, str) and isinstance(completion, str):
        return f"USER: {p}\nSYSTEM: {c}"
    return f"{p}\n{c}"


def _target(scorer: RubricScorer, target: str) -> str:
    if target == "auto":
        if scorer.has_strength:
            return "strength"  # a pairwise run: its calibrated pointwise score is the Bradley-Terry strength
        return "prediction" if scorer.calibrator is not None else "score"
    return target


class TrlReward:
    """A reward function for TRL's trainers (build it with :func:`trl_reward`)."""

    def __init__(  # noqa: PLR0913 (the TRL reward's public keyword API, as documented in the hand-off guide)
            self, scorer: ScorerSource, render: Render | None = None, *, target: str = "auto",
            judge: str | Sequence[str] | None = None, normalise: bool = True, backend: Any = None,
            cache: str | Path | bool | None = None, name: str = "rubric_reward", aspect: str | None = None) -> None:
        if not isinstance(scorer, RubricScorer):
            scorer = RubricScorer.load(scorer, backend=backend, cache=cache)
        elif backend is not None:
            scorer.backend = backend
        fields = scorer.fields or ["text"]
        self.render = render or (lambda p, c: render_turn(p, c, fields))
        self.target = _target(scorer, target)
        self._metric = RubricMetric(scorer, self.render, target=self.target, judge=judge, normalise=normalise,
                                    aspect=aspect)
        self.__name__ = name  # GRPOTrainer names each reward function's logged column by __name__

    @property
    def scorer(self) -> RubricScorer:
        return self._metric.scorer

    def __repr__(self) -> str:
        return f"TrlReward({self.scorer!r}, target={self.target!r})"

    def values(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[float | None]:
        """One value per (prompt, completion); None where the scorer reported an error."""
        if len(prompts) != len(completions):
            raise RubricInduceError(f"{len(prompts)} prompts but {len(completions)} completions")
        out: list[float | None] = []
        for res in self._metric.results(list(prompts), list(completions)):
            try:
                out.append(self._metric.value(res))
            except RubricInduceError:
                out.append(None)
        return out

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return self.values(prompts, completions)


def trl_reward(  # noqa: PLR0913 (the TRL reward's public keyword API, as documented in the hand-off guide)
        scorer: ScorerSource, render: Render | None = None, *, target: str = "auto",
        judge: str | Sequence[str] | None = None, normalise: bool = True, backend: Any = None,
        cache: str | Path | bool | None = None, name: str = "rubric_reward",
        aspect: str | None = None) -> TrlReward:
    """A TRL reward function: ``reward(prompts, completions, **kwargs) -> list[float]``.

    ``target``: ``"prediction"`` (the calibrated expected judge answer), ``"score"`` (NetSAT),
    ``"label"`` (0/1), ``"strength"`` (a pairwise run's Bradley-Terry strength, logistic-mapped onto
    (0, 1) unless ``normalise=False``) or ``"auto"`` (strength for a pairwise run with a head, else
    prediction when the run has a calibrator, else NetSAT).
    ``render(prompt, completion)`` builds the judged text (default :func:`render_turn`).
    ``aspect`` (a run that calibrated several questions, with target ``"prediction"`` or ``"auto"``):
    the aspect whose prediction is the reward (default the main one); one reward function per
    aspect (each with its own ``name``) gives GRPO a reward per aspect.
    """
    return TrlReward(scorer, render, target=target, judge=judge, normalise=normalise, backend=backend,
                     cache=cache, name=name, aspect=aspect)


def require_pairwise_judge_base() -> type:
    """TRL's ``BasePairwiseJudge`` class, or a :class:`MissingDependencyError` naming the extra."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        from trl.experimental.judges import BasePairwiseJudge
        return BasePairwiseJudge
    except ImportError:
        pass
    try:
        from trl import BasePairwiseJudge  # releases before the judges moved to trl.experimental
        return BasePairwiseJudge
    except ImportError as exc:
        raise MissingDependencyError("trl", "the TRL pairwise judge (TRL's BasePairwiseJudge, which trl 1.1 "
                                     "removed)", extra="trl") from exc


def trl_pairwise_judge(scorer: ScorerSource | TrlReward, render: Render | None = None, *, target: str = "auto",
                       judge: str | Sequence[str] | None = None, seed: int = 0, backend: Any = None,
                       cache: str | Path | bool | None = None) -> Any:
    """A TRL ``BasePairwiseJudge``: with a pairwise run's scorer (a Bradley-Terry head), the completion
    that :meth:`RubricScorer.compare_pairs <rubric_induce.scoring.scorer.RubricScorer.compare_pairs>`
    prefers (P(first ≻ second) >= 0.5 picks the first); otherwise the one with the higher pointwise value."""
    base = require_pairwise_judge_base()
    reward = scorer if isinstance(scorer, TrlReward) else TrlReward(
        scorer, render, target=target, judge=judge, backend=backend, cache=cache)

    class RubricPairwiseJudge(base):  # type: ignore[misc, valid-type]
        """Pairwise judge from an induced rubric set (pointwise values compared)."""

        def __init__(self) -> None:
            self.reward = reward
            self._rng = np.random.default_rng(seed)

        def __repr__(self) -> str:
            return f"RubricPairwiseJudge({reward.scorer!r}, target={reward.target!r})"

        def judge(self, prompts: list[str], completions: list[list[str]], shuffle_order: bool = True) -> list[int]:
            if len(prompts) != len(completions):
                raise RubricInduceError(f"{len(prompts)} prompts but {len(completions)} completion pairs")
            for i, pair in enumerate(completions):
                if len(pair) != 2:
                    raise RubricInduceError(f"completion pair {i}: expected 2 completions, got {len(pair)}")
            flip = self._rng.random(len(prompts)) < 0.5 if shuffle_order else np.zeros(len(prompts), bool)
            shown = [(p[1], p[0]) if f else (p[0], p[1]) for p, f in zip(completions, flip)]
            sc = reward.scorer
            if getattr(sc, "pairwise_head", None) is not None:  # a pairwise run: P(first > second), Bradley-Terry
                texts = [(_messages_text(p), _messages_text(s[0]), _messages_text(s[1])) for p, s in zip(prompts, shown)]
                ok = [i for i, (_, a, b) in enumerate(texts) if a.strip() and b.strip()]  # an empty completion: -1
                probs = sc.compare_pairs(*(list(c) for c in zip(*(texts[i] for i in ok)))) if ok else []
                out = [-1] * len(prompts)
                for i, q in zip(ok, probs):
                    out[i] = (1 - int(q < 0.5)) if flip[i] else int(q < 0.5)
                return out
            firsts = reward.values(prompts, [s[0] for s in shown])
            seconds = reward.values(prompts, [s[1] for s in shown])
            out = []
            for a, b, f in zip(firsts, seconds, flip):
                if a is None or b is None:
                    out.append(-1)
                    continue
                best = 0 if a >= b else 1
                out.append(1 - best if f else best)
            return out

    return RubricPairwiseJudge()
