"""``AdaptiveModel``: a model of the unasked rubric answers, for adaptive scoring (issue 22).

LLM-RUBRIC (§8, Appendix B) proposes an *adaptive rubric*: ask a text only the questions whose
answers are expected to move the prediction, and stop when the rest would not. That needs, for
any set of questions already asked of a text,

(a) the target distribution given only the answers observed so far, and
(b) the LLM's answer distribution for every question not asked yet (what asking would return).

Both are LLM-RUBRIC calibration networks (:class:`~.network.CalibrationNetwork`) fed the
completed features ``[fill(x, observed); observed]``, trained with random masking of question
blocks: every row of every epoch sees a fresh mask with a uniformly drawn number of observed
blocks, so every subset size is trained for. ``completion="gaussian"`` (default) fills each
unasked block with its conditional mean given the asked ones under a shrunk multivariate normal
of the training texts' answers (:mod:`.completion`); ``"zeros"`` leaves it an all-zero block, the
first version's input. The indicator keeps "asked, not applicable" and "not asked" apart either
way. The rubrics' answers are often strongly correlated (on the LLM-RUBRIC release several pairs
above 0.95), so one asked answer says much about the unasked ones; zero-filled networks must
learn that for every subset from a few hundred rows (the ablation is in BENCHMARKS.md).

``n_members`` pairs of networks (different seeds and validation texts) are averaged: a small
deep ensemble, which on a few hundred rows is what keeps the predicted distributions (and so
the expected gains the policy ranks) from being overconfident. Early stopping keeps each network
at its own best validation loss.

* ``target_nets_`` (one per member): shared + judge-specific weights, as the calibrator, on the judges' answers
  (every output question, the main one counted twice, so a multi-question table trains like the
  calibrator's pre-training while the main question keeps the weight).
* ``answer_nets_``: shared weights only (the LLM's answer does not depend on who reads the score),
  one head per input block over its answers plus one "no mass" class (``1 - sum``: the all-zero
  not-applicable block, or the probability mass outside the scale), trained by soft cross-entropy
  on the masked blocks only. Its prediction is the chance that an answer *sampled* from the LLM's
  distribution is each class.
* ``prototypes_[q, c]``: the expected input block of question ``q`` given that the sampled answer
  is class ``c`` (the probability-weighted mean of the training blocks). The policy inserts it as
  the hypothetical observation for outcome ``c``.

Prediction runs in numpy (weights copied once after fitting or loading): the policy evaluates
every (text, candidate question, outcome) at each step, so it must not pay torch's per-call cost.
Saved as JSON + safetensors (npz without safetensors), never pickle.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.calibration._torch import require_torch
from rubric_induce.calibration.adaptive_numpy import excess_surprise, np_forward, np_state
from rubric_induce.calibration.adaptive_training import MemberData, train_member
from rubric_induce.calibration.artifacts import (
    REBUILD_ERRORS,
    check_network_config,
    damaged,
    load_network_state,
    non_finite_tensors,
    package_versions,
    read_config,
    read_weights,
    weights_path,
    write_weights,
)
from rubric_induce.calibration.calibrator import check_features, encode_targets
from rubric_induce.calibration.completion import COMPLETIONS, GaussianCompletion, complete_zeros
from rubric_induce.calibration.judges import judge_index, judge_names, judge_rows, judge_vocabulary
from rubric_induce.core.errors import DataError, NotFittedError, RubricInduceError
from rubric_induce.core.estimator import Estimator, param_names
from rubric_induce.data.jsonl import jsonable

__all__ = ["AdaptiveModel", "save_adaptive", "load_adaptive", "ADAPTIVE_DIR", "ADAPTIVE_CONFIG", "ADAPTIVE_PARAMS"]

ADAPTIVE_DIR = "adaptive"
ADAPTIVE_CONFIG = "adaptive.json"
FORMAT_VERSION = 2


def check_fitted(model: AdaptiveModel) -> None:
    if not hasattr(model, "target_nets_"):
        raise NotFittedError("this AdaptiveModel is not fitted yet; call fit(X, judge_ids, targets) first (or "
                             "load one with rubric_induce.calibration.adaptive.load_adaptive)")


class AdaptiveModel(Estimator):
    """Target and unasked-answer predictions from a partly observed set of rubric answers.

    Fitted on the same rows as :class:`~.calibrator.Calibrator` (``X[row]`` the text's LLM answer
    distributions ``[questions, answers]``, ``targets[row, question]`` the judge's answers).
    ``epochs`` passes with a fresh random mask of question blocks per row and pass;
    ``answer_weight`` weighs the unasked-answer loss against the target loss.
    """

    def __init__(  # noqa: PLR0913 (a scikit-learn estimator: each setting is a constructor parameter)
            self, hidden: tuple[int, int] = (25, 25), answer_hidden: tuple[int, int] = (25, 25),
            learning_rate: float = 5e-3, batch_size: int = 64, epochs: int = 200, weight_decay: float = 0.0,
            judge_weight_decay: float | None = 1e-2, main_question: int | str = 0,
            personalized: bool | str = True, head: str = "softmax", answer_weight: float = 1.0,
            early_stopping: bool = False, validation_fraction: float = 0.15, patience: int = 20,
            not_applicable: Sequence[float] = (0,), random_state: int = 0, n_threads: int | None = None,
            completion: str = "gaussian", n_members: int = 5) -> None:
        self.hidden = hidden
        self.answer_hidden = answer_hidden
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.epochs = epochs
        self.weight_decay = weight_decay
        self.judge_weight_decay = judge_weight_decay
        self.main_question = main_question
        self.personalized = personalized
        self.head = head
        self.answer_weight = answer_weight
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.not_applicable = not_applicable
        self.random_state = random_state
        self.n_threads = n_threads
        self.completion = completion
        self.n_members = n_members

    def _check_params(self) -> None:
        for name in ("hidden", "answer_hidden"):
            h = tuple(getattr(self, name))
            if len(h) != 2 or any(int(v) < 1 for v in h):
                raise ValueError(f"{name} must be two positive sizes, got {getattr(self, name)!r}")
        if not (isinstance(self.learning_rate, (int, float)) and 0 < float(self.learning_rate) < math.inf):
            raise ValueError(f"learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        if self.completion not in COMPLETIONS:
            raise ValueError(f"completion must be one of {COMPLETIONS}, got {self.completion!r}")
        for name in ("batch_size", "epochs", "patience", "n_members"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
        if self.personalized not in (True, False, "head"):
            raise ValueError(f"personalized must be True, False or 'head', got {self.personalized!r}")
        if self.head not in ("softmax", "ordinal"):
            raise ValueError(f"head must be 'softmax' or 'ordinal', got {self.head!r}")
        if not 0 < float(self.validation_fraction) < 1:
            raise ValueError("validation_fraction must be in (0, 1)")
        if not float(self.answer_weight) >= 0:
            raise ValueError(f"answer_weight must be >= 0, got {self.answer_weight!r}")
        for name in ("weight_decay", "judge_weight_decay"):
            v = getattr(self, name)
            if v is None and name == "judge_weight_decay":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")

    # -- fitting -------------------------------------------------------------------------------
    def fit(self, X: Any, judge_ids: Sequence[Any], targets: Any, *, scales: Sequence[Sequence[float]] | None = None,
            groups: Sequence[Any] | None = None, question_names: Sequence[str] | None = None,
            input_names: Sequence[str] | None = None) -> AdaptiveModel:
        """Fit on rows ``(X[r], judge_ids[r], targets[r, :])`` (the calibrator's layout; ``X`` must be
        ``[rows, questions, answers]``: the model masks whole question blocks). Returns ``self``."""
        require_torch()
        self._check_params()
        Xa = check_features(X)
        if Xa.ndim != 3:
            raise DataError(f"X must be [rows, questions, answers] (question blocks to mask), got shape {Xa.shape}",
                            field="X")
        n, n_in, k = Xa.shape
        judges = judge_names(judge_ids)
        if len(judges) != n:
            raise DataError(f"judge_ids has {len(judges)} entries for {n} rows of X", field="judge_ids")
        names, scales, codes = self._targets(targets, n, scales, question_names)
        main = self._main_index(names)
        if not (codes[:, main] >= 0).any():
            raise DataError(f"the main question {names[main]!r} has no applicable answer in the training data",
                            field="targets")
        rows = np.flatnonzero((codes >= 0).any(axis=1))
        vocab = judge_vocabulary(judges[r] for r in rows)
        groups_arr = np.asarray([str(g) for g in groups]) if groups is not None else np.arange(n).astype(str)
        if len(groups_arr) != n:
            raise DataError(f"groups has {len(groups_arr)} entries for {n} rows", field="groups")
        in_names = list(input_names) if input_names is not None else [f"input{i}" for i in range(n_in)]
        if len(in_names) != n_in:
            raise DataError(f"{len(in_names)} input names for {n_in} question blocks", field="input_names")
        soft = self._fit_answer_classes(Xa)
        self.n_features_in_shape_ = (n_in, k)
        self.question_names_ = names
        self.input_names_ = in_names
        self.scales_ = scales
        self.main_question_index_ = main
        self.judges_ = vocab
        kept = Counter(judges[r] for r in rows)
        self.judge_counts_ = {j: int(kept[j]) for j in vocab}
        data = MemberData(Xa[rows].astype(np.float32), soft[rows].astype(np.float32),
                          judge_index(vocab, [judges[r] for r in rows]), codes[rows], groups_arr[rows], main)
        if self.completion == "gaussian":  # one answer vector per text, however many judges read it
            _, first = np.unique(data.G, return_index=True)
            self.completion_ = GaussianCompletion().fit(data.X[np.sort(first)])
        else:
            self.completion_ = None
        self._fit_members(data)
        return self

    def _targets(self, targets: Any, n: int, scales: Sequence[Sequence[float]] | None,
                 question_names: Sequence[str] | None) -> tuple[list[str], list[tuple[float, ...]], np.ndarray]:
        """Question names, answer scales (default: the answers seen) and answer codes of ``targets``, checked."""
        y = np.asarray(targets, dtype=np.float64)
        y = y[:, None] if y.ndim == 1 else y
        if y.shape[0] != n:
            raise DataError(f"targets has {y.shape[0]} rows for {n} rows of X", field="targets")
        n_q = y.shape[1]
        names = list(question_names) if question_names is not None else [f"Q{i}" for i in range(n_q)]
        if len(names) != n_q:
            raise DataError(f"{len(names)} question names for {n_q} target columns", field="question_names")
        na = set(float(v) for v in self.not_applicable)
        if scales is None:
            scales = []
            for q in range(n_q):
                seen = sorted({float(v) for v in y[:, q] if np.isfinite(v) and float(v) not in na})
                if len(seen) < 2:
                    raise DataError(f"question {names[q]!r} has {len(seen)} distinct answer(s); pass scales=[...]",
                                    field="scales")
                scales.append(seen)
        scales = [tuple(float(v) for v in s) for s in scales]
        if len(scales) != n_q:
            raise DataError(f"{len(scales)} scales for {n_q} target columns", field="scales")
        return names, scales, encode_targets(y, scales, self.not_applicable)

    def _fit_answer_classes(self, Xa: np.ndarray) -> np.ndarray:
        """Each input block's answer width, class prototypes and frequencies (fitted attributes); returns
        the soft answer classes ``[rows, blocks, 1 + max width]`` the answer networks learn."""
        n_in = Xa.shape[1]
        # Each input block's answer width: its last column that ever carries mass (at least 1).
        used = (Xa > 0).any(axis=0)  # [blocks, answers]
        widths = np.array([max(1, int(np.flatnonzero(u).max()) + 1) if u.any() else 1 for u in used])
        soft = self._soft_targets(Xa, widths)  # [rows, blocks, 1 + max width]
        w = soft.sum(axis=0)  # [blocks, classes]
        protos = np.einsum("rqc,rqk->qck", soft, Xa)
        protos = np.divide(protos, w[..., None], out=np.zeros_like(protos), where=w[..., None] > 0)
        for q in range(n_in):  # a class never seen: its own one-hot answer (the no-mass class: zeros)
            for c in range(int(widths[q])):
                if w[q, c] <= 0:
                    protos[q, c] = 0.0
                    protos[q, c, c] = 1.0
        self.input_widths_ = [int(v) for v in widths]
        self.prototypes_ = protos
        self.class_freq_ = np.divide(w, w.sum(axis=1, keepdims=True), out=np.zeros_like(w),
                                     where=w.sum(axis=1, keepdims=True) > 0)
        return soft

    def _fit_members(self, data: MemberData) -> None:
        """Train ``n_members`` (target, answer) network pairs from different seeds; their histories."""
        torch = require_torch()
        from rubric_induce.calibration.network import CalibrationNetwork  # network.py imports torch

        n_in, k = self.n_features_in_shape_
        prev = torch.get_num_threads()
        if self.n_threads:
            torch.set_num_threads(int(self.n_threads))
        tnets, anets, histories = [], [], []
        try:
            for member in range(int(self.n_members)):
                seed = int(self.random_state) + 1009 * member
                torch.manual_seed(seed)
                tnet = CalibrationNetwork(n_in * k + n_in, len(self.judges_), [len(s) for s in self.scales_],
                                          tuple(self.hidden), personalized=self.personalized, head=self.head)
                anet = CalibrationNetwork(n_in * k + n_in, 0, [int(v) + 1 for v in self.input_widths_],
                                          tuple(self.answer_hidden), personalized=False, head="softmax")
                histories.append(train_member(self, (tnet, anet), data, seed))
                tnet.eval()
                anet.eval()
                tnets.append(tnet)
                anets.append(anet)
        finally:
            torch.set_num_threads(prev)
        self.target_nets_, self.answer_nets_ = tnets, anets
        self.history_ = {"members": [{k: v for k, v in h.items() if k != "val_loss"} for h in histories],
                         "val_loss": [h["val_loss"] for h in histories]}
        self.answer_surprise_reference_ = _reference_excess(self.history_)
        self._cache_numpy()

    @staticmethod
    def _soft_targets(X: np.ndarray, widths: np.ndarray) -> np.ndarray:
        """``[rows, blocks, 1 + max width]``: each block's answers, then its missing mass (``1 - sum``)."""
        n, q, _ = X.shape
        c = int(widths.max()) + 1
        out = np.zeros((n, q, c))
        for b in range(q):
            wb = int(widths[b])
            out[:, b, :wb] = X[:, b, :wb]
            out[:, b, wb] = np.clip(1.0 - X[:, b, :wb].sum(axis=1), 0.0, 1.0)
        return out

    def _main_index(self, names: Sequence[str]) -> int:
        mq = self.main_question
        if isinstance(mq, str):
            if mq not in names:
                raise DataError(f"main question {mq!r} is not among the questions {list(names)}",
                                field="main_question")
            return list(names).index(mq)
        if not 0 <= int(mq) < len(names):
            raise DataError(f"main question index {mq} is out of range for {len(names)} questions",
                            field="main_question")
        return int(mq)

    def complete(self, X: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """``X`` with the unasked blocks filled in (``completion``: conditional means, or zeros)."""
        comp = getattr(self, "completion_", None)
        return comp.complete(X, observed) if comp is not None else complete_zeros(X, observed)

    def _inputs(self, X: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """The networks' input ``[completed x; observed]`` (numpy, ``X`` ``[rows, blocks, k]``): the
        indicator keeps "asked, not applicable" (an all-zero block) apart from "not asked"."""
        obs = np.asarray(observed)
        return np.concatenate([self.complete(X, obs).reshape(X.shape[0], -1), obs.astype(X.dtype)], axis=1)

    def _cache_numpy(self) -> None:
        self._np_targets = [np_state(net) for net in self.target_nets_]
        self._np_answers = [np_state(net) for net in self.answer_nets_]

    # -- prediction ----------------------------------------------------------------------------
    def judge_rows(self, judge: Any, n: int, judge_ids: Sequence[Any] | None = None) -> list[np.ndarray]:
        """One judge-index array per judge to average over (``-1``: the shared weights only):
        ``judge`` None / unseen name (shared), a name, or a list of names; or ``judge_ids`` per row."""
        check_fitted(self)
        return judge_rows(self.judges_, judge, n, judge_ids)

    def check_inputs(self, X: Any, observed: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """``(X, observed)`` checked against the fitted shape; ``observed`` default: every block
        with probability mass."""
        check_fitted(self)
        Xa = check_features(X)
        if Xa.ndim != 3 or tuple(Xa.shape[1:]) != tuple(self.n_features_in_shape_):
            raise DataError(f"X has shape {Xa.shape}, the adaptive model was fitted on [rows, "
                            f"{self.n_features_in_shape_[0]}, {self.n_features_in_shape_[1]}]", field="X")
        if observed is None:
            obs = Xa.sum(axis=2) > 0
        else:
            obs = np.asarray(observed, dtype=bool)
            if obs.shape != Xa.shape[:2]:
                raise DataError(f"observed has shape {obs.shape}, expected {Xa.shape[:2]}", field="observed")
        return Xa, obs

    def target_proba_rows(self, X: np.ndarray, observed: np.ndarray, judges: Sequence[np.ndarray],
                          question: int) -> np.ndarray:
        """Target distribution ``[rows, answers]`` (mean over ``judges`` index arrays), unchecked inputs."""
        xin = self._inputs(X, observed)
        kq = len(self.scales_[question])
        p = np.mean([np_forward(st, xin, j)[:, question, :kq] for st in self._np_targets for j in judges], axis=0)
        return p / p.sum(axis=1, keepdims=True)

    def predict_proba(self, X: Any, observed: Any = None, judge: Any = None, *,
                      judge_ids: Sequence[Any] | None = None, question: int | str | None = None) -> np.ndarray:
        """Target answer distribution ``[rows, answers]`` given the observed blocks only
        (``observed[r, q]`` False: question ``q`` not asked of row ``r``, its block ignored)."""
        Xa, obs = self.check_inputs(X, observed)
        q = self.question_index(question)
        return self.target_proba_rows(Xa, obs, self.judge_rows(judge, len(Xa), judge_ids), q)

    def predict(self, X: Any, observed: Any = None, judge: Any = None, *, judge_ids: Sequence[Any] | None = None,
                question: int | str | None = None) -> np.ndarray:
        """Expected target answer given the observed blocks."""
        q = self.question_index(question)
        return self.predict_proba(X, observed, judge, judge_ids=judge_ids, question=q) @ np.asarray(self.scales_[q])

    def answer_proba_rows(self, X: np.ndarray, observed: np.ndarray, blocks: np.ndarray | None = None) -> np.ndarray:
        """``[rows, blocks, classes]`` predicted LLM answer-class distribution, unchecked inputs;
        with ``blocks`` (one per row) only that block's, ``[rows, classes]``."""
        xin = self._inputs(X, observed)
        shared = np.full(len(X), -1, dtype=np.int64)
        return np.mean([np_forward(st, xin, shared, blocks) for st in self._np_answers], axis=0)

    def predict_answers(self, X: Any, observed: Any = None) -> np.ndarray:
        """For every block, the predicted distribution of an answer sampled from the LLM's
        distribution, ``[rows, blocks, classes]``: classes ``0..width-1`` are the answers, class
        ``width`` is "no mass" (not applicable). Meaningful for the blocks not observed."""
        Xa, obs = self.check_inputs(X, observed)
        return self.answer_proba_rows(Xa, obs)

    def answer_surprise(self, X: Any, order: Sequence[Sequence[int]], observed: Any = None) -> np.ndarray:
        """Per row, how much more surprising the LLM's answers were than this model expected (nats).

        For each block in ``order[row]`` (the blocks in the order they were asked; those not in
        ``observed``, e.g. failed probes, are skipped), the answer network's prediction given the
        blocks read before it, ``P``, is compared with the answer read, ``S``:
        ``sum((P - S) * log P)``, the cross-entropy of ``S`` under ``P`` minus ``P``'s own entropy.
        Its expectation is zero when the model's predictions are calibrated, whichever blocks a
        policy chooses (the choice depends only on answers already read). A mean well above
        :attr:`answer_surprise_reference_` (the same on the held-out training texts) says the texts
        are unlike the training texts (:func:`~rubric_induce.core.stats.check_answer_shift`). NaN for a row
        that read nothing.
        """
        Xa, obs = self.check_inputs(X, observed)
        n, nb = obs.shape
        if len(order) != n:
            raise DataError(f"order has {len(order)} entries for {n} rows", field="order")
        lengths = np.array([len(o) for o in order], dtype=np.int64)
        steps = np.full((n, int(lengths.max(initial=0))), -1, dtype=np.int64)
        for i, o in enumerate(order):
            steps[i, : len(o)] = [int(b) for b in o]
        inside = np.arange(steps.shape[1]) < lengths[:, None]
        if (inside & ((steps < 0) | (steps >= nb))).any():
            raise DataError(f"order holds a block outside 0..{nb - 1}", field="order")
        if any(len(set(o)) < len(o) for o in order):
            raise DataError("order repeats a block within a row: each rubric is read once", field="order")
        S = self._soft_targets(Xa, np.asarray(self.input_widths_))
        total, count = np.zeros(n), np.zeros(n)
        before = np.zeros((n, nb), dtype=bool)
        for k in range(steps.shape[1]):
            rows = np.flatnonzero(lengths > k)
            blocks = steps[rows, k]
            use = obs[rows, blocks]
            rows, blocks = rows[use], blocks[use]
            if not len(rows):
                continue
            P = self.answer_proba_rows(Xa[rows], before[rows], blocks)
            total[rows] += excess_surprise(P, S[rows, blocks])
            count[rows] += 1
            before[rows, blocks] = True
        return np.divide(total, count, out=np.full(n, np.nan), where=count > 0)

    def question_index(self, question: int | str | None = None) -> int:
        check_fitted(self)
        if question is None:
            return self.main_question_index_
        if isinstance(question, str):
            if question not in self.question_names_:
                raise DataError(f"unknown question {question!r}; the adaptive model knows {self.question_names_}",
                                field="question")
            return self.question_names_.index(question)
        if not 0 <= int(question) < len(self.question_names_):
            raise DataError(f"question index {question} out of range", field="question")
        return int(question)


#: The AdaptiveModel's parameters (its constructor's arguments): the keys of ``[calibrate] adaptive_options``.
ADAPTIVE_PARAMS = param_names(AdaptiveModel)


def _reference_excess(history: Mapping[str, Any]) -> float | None:
    """The members' mean excess surprise on their own validation texts (None without early stopping)."""
    vals = [m.get("val_answer_excess") for m in history.get("members", []) if isinstance(m, Mapping)]
    vals = [float(v) for v in vals if v is not None and np.isfinite(v)]
    return float(np.mean(vals)) if vals else None


# --------------------------------------------------------------------------------------------
# saving and loading (JSON + safetensors / npz; never pickle)
# --------------------------------------------------------------------------------------------
def save_adaptive(model: AdaptiveModel, directory: str | Path, *, fmt: str = "auto") -> Path:
    """Write ``model`` to ``directory`` (``adaptive.json`` + ``adaptive.safetensors`` or ``.npz``)."""
    check_fitted(model)
    directory = Path(directory)
    tensors = {f"{tag}.{i}.{name}": t.detach().cpu().contiguous().numpy()
               for tag, nets in (("target", model.target_nets_), ("answer", model.answer_nets_))
               for i, net in enumerate(nets)
               for name, t in net.state_dict().items() if name != "answer_mask"}
    tensors["prototypes"] = np.ascontiguousarray(model.prototypes_, dtype=np.float64)
    if model.completion_ is not None:
        for name, arr in model.completion_.arrays().items():
            tensors[f"completion.{name}"] = np.ascontiguousarray(arr, dtype=np.float64)
    bad = non_finite_tensors(tensors)
    if bad:
        raise RubricInduceError(f"the adaptive model's weights are not finite ({', '.join(bad[:5])}): the fit "
                                "diverged; lower its learning_rate")
    weights = write_weights(tensors, directory, "adaptive", fmt)
    params = model.get_params()
    config = {
        "format": "rubric-induce-adaptive", "format_version": FORMAT_VERSION,
        "params": jsonable({**params, "hidden": list(params["hidden"]), "answer_hidden": list(params["answer_hidden"]),
                            "not_applicable": list(params["not_applicable"])}),
        "question_names": list(model.question_names_), "scales": [list(s) for s in model.scales_],
        "main_question_index": int(model.main_question_index_), "judges": list(model.judges_),
        "judge_counts": dict(model.judge_counts_), "input_names": list(model.input_names_),
        "input_shape": list(model.n_features_in_shape_), "input_widths": list(model.input_widths_),
        "class_freq": model.class_freq_.tolist(), "weights": weights, "versions": package_versions(),
        "history": jsonable({k: v for k, v in model.history_.items() if k != "val_loss"}),
    }
    (directory / ADAPTIVE_CONFIG).write_text(json.dumps(config, indent=2), encoding="utf-8")
    return directory


def load_adaptive(directory: str | Path) -> AdaptiveModel:
    """Rebuild an :class:`AdaptiveModel` saved by :func:`save_adaptive` (shapes checked)."""
    require_torch()  # a clear MissingDependencyError before the network import
    directory = Path(directory)
    path = directory / ADAPTIVE_CONFIG
    config = read_config(path, "rubric-induce-adaptive", "adaptive-model", version=FORMAT_VERSION,
                         absent=f"no {ADAPTIVE_CONFIG} here: no adaptive model was saved")
    wpath = weights_path(directory, config, path)
    if not wpath.exists():
        raise DataError("weights file is missing", path=wpath)
    tensors = read_weights(wpath)
    bad = non_finite_tensors(tensors)
    if bad:
        raise DataError(f"tensor {bad[0]!r} holds NaN or infinite values: the weights are damaged; rerun the "
                        "calibrate stage", path=wpath)
    check_network_config(config, path, tensors, n_inputs=None, hidden_keys=("hidden", "answer_hidden"))
    try:
        model = _model_from_config(config, tensors)
    except REBUILD_ERRORS as exc:
        raise damaged(path, "adaptive-model", exc) from None
    model.target_nets_, model.answer_nets_ = _load_networks(model, config, tensors, (path, wpath))
    _load_arrays(model, tensors, wpath)
    model._cache_numpy()
    return model


def _model_from_config(config: Mapping[str, Any], tensors: Mapping[str, Any]) -> AdaptiveModel:
    """The model's parameters and data-derived attributes as saved (a bad value raises for the caller to
    report as a damaged file)."""
    params = dict(config["params"])
    for key in ("hidden", "answer_hidden", "not_applicable"):
        params[key] = tuple(params[key])
    if int(config.get("format_version", 1)) < 2:  # one network pair, unasked blocks zeroed
        params.update(completion="zeros", n_members=1)
    model = AdaptiveModel(**params)
    model._check_params()
    model.question_names_ = [str(q) for q in config["question_names"]]
    model.scales_ = [tuple(float(v) for v in s) for s in config["scales"]]
    model.main_question_index_ = int(config["main_question_index"])
    model.judges_ = [str(j) for j in config["judges"]]
    model.judge_counts_ = {str(k): int(v) for k, v in config.get("judge_counts", {}).items()}
    model.input_names_ = [str(n) for n in config["input_names"]]
    model.n_features_in_shape_ = tuple(int(v) for v in config["input_shape"])
    model.input_widths_ = [int(v) for v in config["input_widths"]]
    model.class_freq_ = np.asarray(config["class_freq"], dtype=np.float64)
    model.history_ = dict(config.get("history") or {})
    model.answer_surprise_reference_ = _reference_excess(model.history_)
    n_in, k = model.n_features_in_shape_
    if len(model.input_widths_) != n_in or min(model.input_widths_, default=1) < 1 \
            or max(model.input_widths_, default=1) * n_in * k > sum(t.size for t in tensors.values()):
        raise ValueError(f"input_widths must be {n_in} positive widths that fit the weights")
    return model


def _load_networks(model: AdaptiveModel, config: Mapping[str, Any], tensors: Mapping[str, Any],
                   paths: tuple[Path, Path]) -> tuple[list[Any], list[Any]]:
    """Each member's (target, answer) networks rebuilt and filled from ``tensors`` (``paths``: the config
    and weights files, for errors)."""
    from rubric_induce.calibration.network import CalibrationNetwork  # network.py imports torch

    path, wpath = paths
    n_in, k = model.n_features_in_shape_
    version = int(config.get("format_version", 1))
    nets: dict[str, list[Any]] = {"target": [], "answer": []}
    for member in range(int(model.n_members)):
        try:
            pair = {"target": CalibrationNetwork(n_in * k + n_in, len(model.judges_), [len(s) for s in model.scales_],
                                                 model.hidden, personalized=model.personalized, head=model.head),
                    "answer": CalibrationNetwork(n_in * k + n_in, 0, [w + 1 for w in model.input_widths_],
                                                 model.answer_hidden, personalized=False, head="softmax")}
        except REBUILD_ERRORS as exc:
            raise damaged(path, "adaptive-model", exc) from None
        for tag, net in pair.items():
            prefix = f"{tag}." if version < 2 else f"{tag}.{member}."
            nets[tag].append(load_network_state(net, tensors, prefix, wpath))
    return nets["target"], nets["answer"]


def _load_arrays(model: AdaptiveModel, tensors: Mapping[str, Any], wpath: Path) -> None:
    """The class prototypes and the Gaussian completion's mean and covariance, shapes checked."""
    n_in, k = model.n_features_in_shape_
    protos = tensors.get("prototypes")
    c = max(model.input_widths_) + 1
    if protos is None or tuple(protos.shape) != (n_in, c, k):
        raise DataError(f"the weights file's prototypes are missing or not [{n_in}, {c}, {k}]", path=wpath)
    model.prototypes_ = np.array(protos, dtype=np.float64)
    model.completion_ = None
    if model.completion == "gaussian":
        d = n_in * k
        mean, cov = tensors.get("completion.mean"), tensors.get("completion.covariance")
        if mean is None or cov is None or tuple(mean.shape) != (d,) or tuple(cov.shape) != (d, d):
            raise DataError(f"the weights file's completion mean / covariance are missing or not [{d}] / "
                            f"[{d}, {d}]", path=wpath)
        model.completion_ = GaussianCompletion.from_arrays(mean, cov, (n_in, k))
