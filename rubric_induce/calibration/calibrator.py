"""``Calibrator``: the LLM-RUBRIC calibration network as a scikit-learn-shaped estimator.

Training data are rows ``(text, judge)`` with the LLM features ``X[row]`` of the text and the
judge's answers ``targets[row, question]``; every observed cell is one (text, question, judge,
answer) tuple of the paper's objective (1). Not-applicable (``0`` by default) and unanswered
(NaN) cells are left out of the loss exactly.

Training: multi-task pre-training on every output question, then fine-tuning on the main
question (each phase can be switched off for ablations); Adam with weight decay (judge-specific
weights get their own, usually stronger, decay so that they stay deviations from the shared
model); early stopping on held-out *texts* of the training data when ``early_stopping`` is on.
``n_ensemble > 1`` averages the predicted distributions of networks trained from different seeds.

Prediction: for a named judge, for an unseen judge or ``judge=None`` (shared weights only), or
for a list of trusted judges (the mean of their distributions; :meth:`Calibrator.predict` can
also take the max of their expected values, paper Appendix A).
"""
from __future__ import annotations

import contextlib
import copy
import math
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rubric_induce.calibration._torch import require_torch
from rubric_induce.calibration.judges import judge_index, judge_names, judge_rows, judge_vocabulary
from rubric_induce.core.errors import DataError, NotFittedError
from rubric_induce.core.estimator import Estimator, param_names

__all__ = ["Calibrator", "NotFittedError", "check_features", "encode_targets", "validation_split", "PARAMS"]


def check_features(X: Any, *, what: str = "X") -> np.ndarray:
    """Validate LLM features: finite, in [0, 1], each question block summing to at most 1.

    ``X`` is ``[rows, questions, answers]`` (zero-padded distributions) or ``[rows, features]``.
    Blocks that sum to less than one are kept as they are (the raw probability mass Z is a
    feature, LLM-RUBRIC footnote 3); an all-zero block means "not applicable / not asked".
    """
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim not in (2, 3):
        raise DataError(f"{what} must be [rows, questions, answers] or [rows, features], got shape {arr.shape}",
                        field=what)
    if arr.shape[0] == 0:
        raise DataError(f"{what} has no rows", field=what)
    bad = ~np.isfinite(arr)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise DataError(f"{what} has {int(bad.sum())} NaN/inf value(s), first in row {row}; encode a missing "
                        "LLM answer as an all-zero block, not NaN", field=what)
    if (arr < 0).any():
        row = int(np.argwhere(arr < 0)[0][0])
        raise DataError(f"{what} has negative probabilities (first in row {row}); pass probabilities, "
                        "not log-probabilities", field=what)
    if (arr > 1 + 1e-6).any():
        row = int(np.argwhere(arr > 1 + 1e-6)[0][0])
        raise DataError(f"{what} has values above 1 (first in row {row}); pass probabilities", field=what)
    if arr.ndim == 3:
        sums = arr.sum(axis=2)
        if (sums > 1 + 1e-3).any():
            r, q = (int(v) for v in np.argwhere(sums > 1 + 1e-3)[0])
            raise DataError(f"{what}[{r}, {q}] sums to {sums[r, q]:.4f} > 1; each question's answer "
                            "probabilities must sum to at most 1", field=what)
    return arr


def encode_targets(
    targets: Any, scales: Sequence[Sequence[float]], not_applicable: Sequence[float] = (0,)
) -> np.ndarray:
    """Answer values -> answer indices (``-1`` for unanswered NaN and not-applicable cells)."""
    y = np.asarray(targets, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[1] != len(scales):
        raise DataError(f"targets must be [rows, {len(scales)} questions], got shape {y.shape}", field="targets")
    out = np.full(y.shape, -1, dtype=np.int64)
    na = set(float(v) for v in not_applicable)
    for q, scale in enumerate(scales):
        values = np.asarray(scale, dtype=np.float64)
        col = y[:, q]
        for r in np.flatnonzero(np.isfinite(col)):
            v = float(col[r])
            hit = np.flatnonzero(np.isclose(values, v))
            if len(hit):
                out[r, q] = int(hit[0])
            elif v not in na:
                raise DataError(f"answer {v:g} in row {r} is not on question {q}'s scale {list(values)} "
                                f"(not-applicable values: {sorted(na)})", field="targets")
        inf = np.isinf(col)
        if inf.any():
            raise DataError(f"targets column {q} has infinite values", field="targets")
    return out


def check_fitted(est: Calibrator) -> None:
    if not hasattr(est, "networks_"):
        raise NotFittedError("this Calibrator is not fitted yet; call fit(X, judge_ids, targets) first "
                             "(or load a saved one with rubric_induce.calibration.artifacts.load_calibrator)")

def validation_split(G: np.ndarray, early_stopping: bool, fraction: float,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation rows: with early stopping, ``fraction`` of the groups (texts) held out,
    drawn with ``rng``; without it (or with too few groups to split), every row trains."""
    train_rows, val_rows = np.arange(len(G)), np.array([], dtype=np.int64)
    if early_stopping:
        uniq = np.unique(G)
        n_val = int(round(len(uniq) * float(fraction)))
        if n_val >= 1 and len(uniq) - n_val >= 1:
            val_groups = set(rng.choice(uniq, size=n_val, replace=False).tolist())
            is_val = np.array([g in val_groups for g in G])
            train_rows, val_rows = np.flatnonzero(~is_val), np.flatnonzero(is_val)
    return train_rows, val_rows


class Calibrator(Estimator):
    """Personalized multi-task calibration of LLM answer distributions to human judges.

    Parameters
    ----------
    hidden: sizes ``(h1, h2)`` of the two hidden layers.
    learning_rate, batch_size: Adam settings.
    pretrain_epochs, finetune_epochs: epochs of multi-task pre-training and of main-question
        fine-tuning (upper bounds when ``early_stopping``).
    weight_decay: decoupled weight decay (AdamW) of the shared weights.
    judge_weight_decay: decay of the judge-specific weights (None: same as ``weight_decay``).
    main_question: index or name of the question fine-tuned on and predicted by default.
    personalized: judge-specific weights ``W^a``, ``V^a`` in every layer (True), only in the
        output heads (``"head"``: fewer judge parameters), or none (False).
    head: ``"softmax"`` (paper eq. 5) or ``"ordinal"`` (ordered logit with judge thresholds).
    pretrain, finetune: switch a phase off (ablations).
    early_stopping: hold out ``validation_fraction`` of the training *texts* and keep the
        parameters of the best held-out epoch (stopping after ``patience`` epochs without gain).
    n_ensemble: networks trained from different seeds whose distributions are averaged.
    not_applicable: answer values meaning "not applicable" (excluded from the loss).
    random_state: seed of initialisation, batching and the validation split.
    n_threads: torch intra-op threads while fitting/predicting (None leaves torch's setting).
    init: ``"glorot"`` (default: Glorot-uniform shared weights, judge-specific deviations start
        at zero) or ``"normal"`` (every weight, judge-specific ones included, from N(0, 1), as in
        the released LLM-RUBRIC code; with ``pretrain_epochs=6, finetune_epochs=8`` on the
        synthetic data this is about the released recipe's 150 optimiser steps). On synthetic
        5-fold CV the released recipe has a much lower held-out Q0 log-likelihood (about -1.41
        against -1.09), so it is not the default.
    """

    def __init__(  # noqa: PLR0913 (a scikit-learn estimator: each setting is a constructor parameter)
        self,
        hidden: tuple[int, int] = (25, 25),
        learning_rate: float = 1e-3,
        batch_size: int = 64,
        pretrain_epochs: int = 20,
        finetune_epochs: int = 30,
        weight_decay: float = 0.0,
        judge_weight_decay: float | None = None,
        main_question: int | str = 0,
        personalized: bool | str = True,
        head: str = "softmax",
        pretrain: bool = True,
        finetune: bool = True,
        early_stopping: bool = False,
        validation_fraction: float = 0.15,
        patience: int = 10,
        n_ensemble: int = 1,
        not_applicable: Sequence[float] = (0,),
        random_state: int = 0,
        n_threads: int | None = None,
        init: str = "glorot",
    ) -> None:
        self.hidden = hidden
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.pretrain_epochs = pretrain_epochs
        self.finetune_epochs = finetune_epochs
        self.weight_decay = weight_decay
        self.judge_weight_decay = judge_weight_decay
        self.main_question = main_question
        self.personalized = personalized
        self.head = head
        self.pretrain = pretrain
        self.finetune = finetune
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.n_ensemble = n_ensemble
        self.not_applicable = not_applicable
        self.random_state = random_state
        self.n_threads = n_threads
        self.init = init

    # -- fitting -------------------------------------------------------------------------------
    def _check_params(self) -> None:
        """Refuse a setting out of range (fit calls this: the constructor stores settings as given)."""
        if len(tuple(self.hidden)) != 2 or any(int(h) < 1 for h in self.hidden):
            raise ValueError(f"hidden must be two positive sizes, got {self.hidden!r}")
        if not self.learning_rate > 0:
            raise ValueError("learning_rate must be > 0")
        if int(self.batch_size) < 1:
            raise ValueError("batch_size must be >= 1")
        if self.personalized not in (True, False, "head"):
            raise ValueError(f"personalized must be True, False or 'head', got {self.personalized!r}")
        if self.head not in ("softmax", "ordinal"):
            raise ValueError(f"head must be 'softmax' or 'ordinal', got {self.head!r}")
        if not (self.pretrain or self.finetune):
            raise ValueError("at least one of pretrain and finetune must be on")
        if self.init not in ("glorot", "normal"):
            raise ValueError(f"init must be 'glorot' or 'normal', got {self.init!r}")
        if int(self.n_ensemble) < 1:
            raise ValueError("n_ensemble must be >= 1")
        if not 0 < float(self.validation_fraction) < 1:
            raise ValueError("validation_fraction must be in (0, 1)")
        self._check_counts()

    def _check_counts(self) -> None:
        """Epochs, patience, decays, threads and not-applicable values: whole numbers and finite numbers."""
        for name in ("pretrain_epochs", "finetune_epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        if isinstance(self.patience, bool) or not isinstance(self.patience, (int, np.integer)) or self.patience < 1:
            raise ValueError(f"patience must be a whole number >= 1, got {self.patience!r}")
        for name in ("weight_decay", "judge_weight_decay"):
            value = getattr(self, name)
            if value is None and name == "judge_weight_decay":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if not np.isfinite(float(self.learning_rate)):
            raise ValueError(f"learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        if self.n_threads is not None and (isinstance(self.n_threads, bool) or int(self.n_threads) < 1):
            raise ValueError(f"n_threads must be >= 1 (or None), got {self.n_threads!r}")
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in tuple(self.not_applicable)):
            raise ValueError(f"not_applicable must be a list of numbers, got {self.not_applicable!r}")

    def fit(
        self,
        X: Any,
        judge_ids: Sequence[Any],
        targets: Any,
        *,
        scales: Sequence[Sequence[float]] | None = None,
        groups: Sequence[Any] | None = None,
        question_names: Sequence[str] | None = None,
        input_names: Sequence[str] | None = None,
    ) -> Calibrator:
        """Fit on rows ``(X[r], judge_ids[r], targets[r, :])``.

        ``scales[q]`` are the answer values of output question ``q`` (default: the sorted
        answers seen in ``targets``; a question never answered then needs an explicit scale).
        ``groups`` (e.g. text ids) keeps every text's rows on one side of the early-stopping
        split. Returns ``self``.
        """
        require_torch()
        Xf, J, Y, G, main, scales = self._prepare(X, judge_ids, targets, scales, groups, question_names, input_names)
        nets, histories = [], []
        with _threads(self.n_threads):
            for m in range(int(self.n_ensemble)):
                seed = int(self.random_state) + 1000 * m
                net, trainer = self._pretrained(Xf, J, Y, G, seed, scales)
                if self.finetune:
                    self._phase(net, trainer, "finetune", [main], int(self.finetune_epochs))
                net.eval()
                nets.append(net)
                histories.append(trainer["history"])
        self.networks_ = nets
        self.history_ = histories
        return self

    def fit_heads(self, X: Any, judge_ids: Sequence[Any], targets: Any, *, questions: Sequence[str | int],
                  scales: Sequence[Sequence[float]] | None = None, groups: Sequence[Any] | None = None,
                  question_names: Sequence[str] | None = None, input_names: Sequence[str] | None = None
                  ) -> dict[str, Calibrator]:
        """``{question name: Calibrator}``, one per question of ``questions`` (names or indices, in
        that order) on one multi-task pre-training: pre-trained once on every question, a copy
        (weights, optimiser state, batch order) is fine-tuned on each (LLM-RUBRIC, a head per aspect).
        A head is :meth:`fit` with that ``main_question`` on the same data, number for number."""
        require_torch()
        if not questions:
            raise DataError("fit_heads needs at least one question", field="questions")
        first = self.clone(main_question=questions[0])
        Xf, J, Y, G, _, scales = first._prepare(X, judge_ids, targets, scales, groups, question_names, input_names,
                                                heads=questions)
        index = [first._main_index(first.question_names_, q) for q in questions]
        if len(set(index)) != len(index):
            raise DataError(f"a question is named twice in {list(questions)}", field="questions")
        fitted = {first.question_names_[q]: ([], []) for q in index}
        with _threads(self.n_threads):
            for m in range(int(self.n_ensemble)):
                seed = int(self.random_state) + 1000 * m
                net, trainer = first._pretrained(Xf, J, Y, G, seed, scales)
                for q in index:
                    head, opt = copy.deepcopy((net, trainer["opt"]))  # the optimiser follows the copy's weights
                    state = {**trainer, "opt": opt, "gen": torch_generator(trainer["gen"].get_state()),
                             "history": copy.deepcopy(trainer["history"])}
                    if self.finetune:
                        first._phase(head, state, "finetune", [q], int(self.finetune_epochs))
                    head.eval()
                    fitted[first.question_names_[q]][0].append(head)
                    fitted[first.question_names_[q]][1].append(state["history"])
        out = {}
        for q in index:
            name = first.question_names_[q]
            head = self.clone(main_question=name)
            for attr in ("n_features_in_shape_", "question_names_", "input_names_", "scales_", "judges_",
                         "judge_counts_", "unanswered_questions_", "n_rows_ignored_"):
                setattr(head, attr, copy.deepcopy(getattr(first, attr)))
            head.main_question_index_ = q
            head.networks_, head.history_ = fitted[name]
            out[name] = head
        return out

    def _prepare(self, X, judge_ids, targets, scales, groups, question_names, input_names, *, heads=None):
        """Check the data, set the data-derived fitted attributes and return the rows with an answer as
        ``(X, judge index, answer codes, groups, main index, scales)``; ``heads``: the questions that
        must each have an applicable answer (default: the main one)."""
        self._check_params()
        Xa = check_features(X)
        n = Xa.shape[0]
        judges = judge_names(judge_ids)
        if len(judges) != n:
            raise DataError(f"judge_ids has {len(judges)} entries for {n} rows of X", field="judge_ids")
        y = np.asarray(targets, dtype=np.float64)
        if y.ndim == 1:
            y = y[:, None]
        if y.shape[0] != n:
            raise DataError(f"targets has {y.shape[0]} rows for {n} rows of X", field="targets")
        n_q = y.shape[1]
        names = list(question_names) if question_names is not None else [f"Q{i}" for i in range(n_q)]
        if len(names) != n_q:
            raise DataError(f"{len(names)} question names for {n_q} target columns", field="question_names")
        if scales is None:
            scales = []
            na = set(float(v) for v in self.not_applicable)
            for q in range(n_q):
                seen = sorted({float(v) for v in y[:, q] if np.isfinite(v) and float(v) not in na})
                if len(seen) < 2:
                    raise DataError(f"question {names[q]!r} has {len(seen)} distinct answer(s); pass "
                                    "scales=[...] to say its answer values", field="scales")
                scales.append(seen)
        scales = [tuple(float(v) for v in s) for s in scales]
        if len(scales) != n_q:
            raise DataError(f"{len(scales)} scales for {n_q} target columns", field="scales")
        for q, s in enumerate(scales):
            if len(s) < 2 or len(set(s)) != len(s):
                raise DataError(f"scale of {names[q]!r} needs at least 2 distinct values, got {list(s)}",
                                field="scales")
        main = self._main_index(names)
        heads = [main] if heads is None else [self._main_index(names, h) for h in heads]
        codes = encode_targets(y, scales, self.not_applicable)
        answered = (codes >= 0).sum(axis=0)
        for q in heads:
            if answered[q] == 0:
                raise DataError(f"the {'main ' if q == main else ''}question {names[q]!r} has no applicable answer in "
                                "the training data", field="targets")
        unanswered = [names[q] for q in range(n_q) if answered[q] == 0]
        if unanswered:
            warnings.warn(f"questions never answered in the training data (their heads stay untrained): "
                          f"{unanswered}", stacklevel=3)
        keep = (codes >= 0).any(axis=1)
        rows = np.flatnonzero(keep)
        vocab = judge_vocabulary(judges[r] for r in rows)
        groups_arr = np.asarray([str(g) for g in groups]) if groups is not None else np.arange(n).astype(str)
        if len(groups_arr) != n:
            raise DataError(f"groups has {len(groups_arr)} entries for {n} rows", field="groups")

        self.n_features_in_shape_ = tuple(Xa.shape[1:])
        self.question_names_ = names
        self.input_names_ = list(input_names) if input_names is not None else None
        self.scales_ = scales
        self.main_question_index_ = main
        self.judges_ = vocab
        kept = Counter(judges[r] for r in rows)  # one pass (not one per judge)
        self.judge_counts_ = {j: int(kept[j]) for j in vocab}
        self.unanswered_questions_ = unanswered
        self.n_rows_ignored_ = int((~keep).sum())

        Xf = Xa.reshape(n, -1)[rows].astype(np.float32)
        J = judge_index(vocab, [judges[r] for r in rows])
        Y = codes[rows]
        G = groups_arr[rows]
        return Xf, J, Y, G, main, scales


    def _pretrained(self, Xf, J, Y, G, seed: int, scales) -> tuple[Any, dict[str, Any]]:
        """A new network (seeded) and its trainer state, after the multi-task pre-training phase."""
        torch = require_torch()
        from rubric_induce.calibration.network import CalibrationNetwork

        torch.manual_seed(seed)
        net = CalibrationNetwork(Xf.shape[1], len(self.judges_), [len(s) for s in scales], tuple(self.hidden),
                                 personalized=self.personalized, head=self.head, init=self.init)
        trainer = self._trainer(net, Xf, J, Y, G, seed)
        if self.pretrain:
            self._phase(net, trainer, "pretrain", None, int(self.pretrain_epochs))
        return net, trainer

    def _main_index(self, names: Sequence[str], question: int | str | None = None) -> int:
        mq = self.main_question if question is None else question
        if isinstance(mq, str):
            if mq not in names:
                raise DataError(f"main question {mq!r} is not among the questions {list(names)}",
                                field="main_question")
            return list(names).index(mq)
        if not 0 <= int(mq) < len(names):
            raise DataError(f"main question index {mq} is out of range for {len(names)} questions",
                            field="main_question")
        return int(mq)

    def _trainer(self, net, X, J, Y, G, seed) -> dict[str, Any]:
        """The training state of ``net``: the early-stopping split (by group), tensors, the AdamW
        optimiser and the seeded batch-order generator, and the history the phases fill."""
        torch = require_torch()
        rng = np.random.default_rng(seed)
        train_rows, val_rows = validation_split(G, self.early_stopping, self.validation_fraction, rng)
        jwd = self.weight_decay if self.judge_weight_decay is None else self.judge_weight_decay
        groups = [{"params": net.shared_parameters(), "weight_decay": float(self.weight_decay)}]
        if self.personalized:
            groups.append({"params": net.judge_parameters(), "weight_decay": float(jwd)})
        try:
            opt = torch.optim.AdamW(groups, lr=float(self.learning_rate), fused=True)
        except (RuntimeError, TypeError):  # pragma: no cover - builds without fused CPU kernels
            opt = torch.optim.AdamW(groups, lr=float(self.learning_rate))
        return {"X": torch.from_numpy(X), "J": torch.from_numpy(J), "Y": torch.from_numpy(Y), "codes": Y,
                "train_rows": train_rows, "val_rows": val_rows, "opt": opt,
                "gen": torch.Generator().manual_seed(seed),
                "history": {"n_train_rows": int(len(train_rows)), "n_val_rows": int(len(val_rows))}}

    def _phase(self, net, trainer: dict[str, Any], name: str, qs: list[int] | None, epochs: int) -> None:
        """One training phase (``qs``: the questions of the loss, None = all) with early stopping on
        the held-out texts; the best epoch's parameters are kept and the phase recorded in the history."""
        torch = require_torch()
        from rubric_induce.calibration.network import masked_nll

        Xt, Jt, Yt, Y = trainer["X"], trainer["J"], trainer["Y"], trainer["codes"]
        train_rows, val_rows, opt, gen = trainer["train_rows"], trainer["val_rows"], trainer["opt"], trainer["gen"]
        cols = list(range(Y.shape[1])) if qs is None else qs
        rows = train_rows[(Y[train_rows][:, cols] >= 0).any(axis=1)]
        vrows = val_rows[(Y[val_rows][:, cols] >= 0).any(axis=1)] if len(val_rows) else val_rows
        best, best_state, best_epoch, since = math.inf, None, 0, 0
        curve = []
        bs = max(1, min(int(self.batch_size), len(rows)))
        rows_t = torch.from_numpy(rows)
        for epoch in range(1, epochs + 1):
            net.train()
            perm = rows_t[torch.randperm(len(rows), generator=gen)]
            for start in range(0, len(perm), bs):
                b = perm[start:start + bs]
                loss = masked_nll(net(Xt[b], Jt[b]), Yt[b], qs)
                opt.zero_grad()
                loss.backward()
                opt.step()
            if len(vrows):
                with torch.no_grad():
                    net.eval()
                    vb = torch.from_numpy(vrows)
                    v = float(masked_nll(net(Xt[vb], Jt[vb]), Yt[vb], qs))
                curve.append(v)
                if v < best - 1e-5:
                    best, best_epoch, since = v, epoch, 0
                    best_state = copy.deepcopy(net.state_dict())
                else:
                    since += 1
                    if since >= int(self.patience):
                        break
        if best_state is not None:
            net.load_state_dict(best_state)
        trainer["history"][name] = {"epochs_run": len(curve) if curve else epochs, "best_epoch": best_epoch or epochs,
                                    "val_nll": curve}

    # -- prediction ----------------------------------------------------------------------------
    def question_index(self, question: int | str | None = None) -> int:
        """Index of ``question`` (a name or an index; None: the main question)."""
        return self._question(question)

    def _question(self, question: int | str | None) -> int:
        check_fitted(self)
        if question is None:
            return self.main_question_index_
        if isinstance(question, str):
            if question not in self.question_names_:
                raise DataError(f"unknown question {question!r}; the calibrator knows {self.question_names_}",
                                field="question")
            return self.question_names_.index(question)
        if not 0 <= int(question) < len(self.question_names_):
            raise DataError(f"question index {question} out of range", field="question")
        return int(question)

    def _check_X(self, X: Any) -> np.ndarray:
        Xa = check_features(X)
        if tuple(Xa.shape[1:]) != tuple(self.n_features_in_shape_):
            raise DataError(f"X has feature shape {tuple(Xa.shape[1:])}, the calibrator was fitted on "
                            f"{tuple(self.n_features_in_shape_)}", field="X")
        return Xa.reshape(Xa.shape[0], -1).astype(np.float32)

    def _per_judge_proba(self, X: Any, judge: Any, judge_ids: Sequence[Any] | None, q: int) -> np.ndarray:
        """``[judges, rows, answers]`` ensemble-averaged distributions for question ``q``."""
        torch = require_torch()
        check_fitted(self)
        Xf = self._check_X(X)
        k = len(self.scales_[q])
        out = []
        with torch.no_grad():
            xt = torch.from_numpy(Xf)
            for idx in judge_rows(self.judges_, judge, len(Xf), judge_ids):
                jt = torch.from_numpy(idx)
                p = np.mean([net(xt, jt)[:, q, :k].exp().double().numpy() for net in self.networks_], axis=0)
                out.append(p / p.sum(axis=1, keepdims=True))
        return np.stack(out)

    def predict_proba(self, X: Any, judge: Any = None, *, judge_ids: Sequence[Any] | None = None,
                      question: int | str | None = None) -> np.ndarray:
        """Predicted answer distribution ``[rows, answers]`` for ``question`` (default: main).

        ``judge``: None or an unseen name (shared weights only), a judge name, or a list of
        trusted judges (the mean of their distributions). ``judge_ids``: one judge per row.
        """
        return self._per_judge_proba(X, judge, judge_ids, self._question(question)).mean(axis=0)

    def predict(self, X: Any, judge: Any = None, *, judge_ids: Sequence[Any] | None = None,
                question: int | str | None = None, aggregate: str = "mean") -> np.ndarray:
        """Expected answer value (the L2-optimal decode, paper eq. 2).

        With a list of trusted judges, ``aggregate="mean"`` averages and ``"max"`` takes the
        largest of their expected values.
        """
        q = self._question(question)
        values = np.asarray(self.scales_[q])
        per = self._per_judge_proba(X, judge, judge_ids, q) @ values
        if aggregate == "mean":
            return per.mean(axis=0)
        if aggregate == "max":
            return per.max(axis=0)
        raise ValueError(f"aggregate must be 'mean' or 'max', got {aggregate!r}")

    def predictive_variance(self, X: Any, judge: Any = None, *, judge_ids: Sequence[Any] | None = None,
                            question: int | str | None = None) -> np.ndarray:
        """Variance of the predicted answer distribution (of the judges' mixture for a list)."""
        q = self._question(question)
        p = self.predict_proba(X, judge, judge_ids=judge_ids, question=q)
        values = np.asarray(self.scales_[q])
        mean = p @ values
        return np.clip(p @ values ** 2 - mean ** 2, 0.0, None)

    def entropy(self, X: Any, judge: Any = None, *, judge_ids: Sequence[Any] | None = None,
                question: int | str | None = None) -> np.ndarray:
        """Entropy (nats) of the predicted answer distribution."""
        p = self.predict_proba(X, judge, judge_ids=judge_ids, question=question)
        with np.errstate(divide="ignore", invalid="ignore"):
            return -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)

    def log_likelihood(self, X: Any, judge_ids: Sequence[Any], targets: Any,
                       question: int | str | None = None) -> float:
        """Mean log-probability of the observed applicable answers to ``question``."""
        q = self._question(question)
        y = np.asarray(targets, dtype=np.float64).reshape(len(judge_ids), -1)
        col = y[:, q] if y.shape[1] == len(self.question_names_) else y[:, 0]
        codes = encode_targets(col[:, None], [self.scales_[q]], self.not_applicable)[:, 0]
        ok = codes >= 0
        if not ok.any():
            return float("nan")
        p = self.predict_proba(np.asarray(X)[ok], judge_ids=[str(j) for j, o in zip(judge_ids, ok) if o],
                               question=q)
        return float(np.mean(np.log(np.clip(p[np.arange(ok.sum()), codes[ok]], 1e-12, None))))


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """torch intra-op threads set to ``n`` inside the block (None: left as they are), then restored."""
    torch = require_torch()
    prev = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def torch_generator(state: Any) -> Any:
    """A torch generator in ``state`` (a copy of another's batch order from here on)."""
    gen = require_torch().Generator()
    gen.set_state(state)
    return gen


#: The Calibrator's parameters (its constructor's arguments): the keys of ``[calibrate] options``.
PARAMS = param_names(Calibrator)
