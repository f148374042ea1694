"""Score new texts with an induced, selected (and optionally calibrated) rubric set.

:class:`RubricScorer` loads a scorer artifact (:mod:`rubric_induce.scoring.artifact`: a run
directory or a copied artifact folder) and scores texts pointwise (:meth:`RubricScorer.score`,
every rubric or adaptively: :mod:`rubric_induce.scoring.adaptive`) or pairs (:meth:`RubricScorer.compare`).
Where the texts go, and whether your API key goes along: :mod:`rubric_induce.scoring.endpoint`.
The options of a scoring call: :class:`~rubric_induce.scoring.options.ScoreParams`.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rubric_induce.calibration.predict import resolve_judge
from rubric_induce.core.answer_check import check_answer_shift
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.params import suggest
from rubric_induce.core.task import TaskParams
from rubric_induce.data import Example, Rubric
from rubric_induce.data.mapping import InputMapping
from rubric_induce.data.pair_examples import order_examples
from rubric_induce.data.pairs import Pair
from rubric_induce.data.probe_arrays import ProbeArrays
from rubric_induce.data.probes import ProbeStore, ProbeTable
from rubric_induce.data.results import ScoreResult
from rubric_induce.probing.api import probe
from rubric_induce.scoring import adaptive as adaptive_paths
from rubric_induce.scoring.artifact import (
    ARTIFACT_NAME,
    inside,
    load_calibration,
    load_pairwise_head,
    load_rubrics,
    load_task,
    read_artifact,
)
from rubric_induce.scoring.endpoint import Endpoint, describe_backend, resolve_endpoint
from rubric_induce.scoring.numbers import SCORE_CHUNK, Scored, calibration_numbers
from rubric_induce.scoring.options import ScoreParams, ScoringOptions, resolve_scoring_options, score_params
from rubric_induce.scoring.selective import require_calibrated, resolve_guarantee
from rubric_induce.selection.pair_features import pair_preferences, pair_signal, signed_units

if TYPE_CHECKING:  # calibration imports torch on use; the scorer imports it only when a run has a network
    from rubric_induce.calibration.adaptive import AdaptiveModel
    from rubric_induce.calibration.calibrator import Calibrator

__all__ = ["RubricScorer", "ScorerSettings", "SCORE_CHUNK"]


@dataclass(frozen=True)
class ScorerSettings:
    """What a scorer holds besides its rubrics and backend (the keywords of :class:`RubricScorer`)."""

    threshold: float | None = None
    calibrator: Calibrator | None = None
    #: The calibrated question (None: the calibrator's main one).
    question: str | None = None
    #: The judges the calibrator was trained on (the default prediction is their mean).
    judges: Sequence[str] = ()
    score_mode: str = "expected"
    #: The run's probe options, as ``artifact.json``'s ``probe`` section names them.
    probe_options: Mapping[str, Any] | None = None
    fields: Sequence[str] | None = None
    label: str | None = None
    #: The artifact file the scorer was loaded from (named in errors).
    source: str | None = None
    #: The run's text columns and id column (``{"text": [...], "id": ...}``; artifact.json's "input").
    columns: Mapping[str, Any] | None = None
    task: TaskParams | None = None
    #: The adaptive-scoring model, when the run trained one.
    adaptive: AdaptiveModel | None = None
    #: The other aspects' calibrators (``[calibrate] questions`` after the first), by question.
    heads: Mapping[str, Calibrator] = field(default_factory=dict)


class RubricScorer:
    """Probe texts with the selected rubrics and turn the probes into NetSAT, labels and calibrated scores.

    Load one from a run folder with :meth:`load`. :meth:`score_probes` works offline on probes
    already computed (the evaluate stage uses it on the run's held-out probes).

    Args:
        rubrics: The selected rubrics, in the run's order.
        backend: The LLM that probes; only needed for :meth:`score` (texts).
        **settings: The fields of :class:`ScorerSettings` (each becomes an attribute).
    """

    def __init__(self, rubrics: Sequence[Rubric], *, backend: Any = None, **settings: Any) -> None:
        s = ScorerSettings(**settings)
        self.rubrics = list(rubrics)
        if not self.rubrics:
            raise RubricInduceError("a scorer needs at least one rubric")
        self.threshold, self.calibrator, self.question = s.threshold, s.calibrator, s.question
        self.adaptive, self.heads, self.judges = s.adaptive, dict(s.heads or {}), list(s.judges)
        self.score_mode, self.probe_options = s.score_mode, dict(s.probe_options or {})
        self.fields = list(s.fields) if s.fields else None
        self.label, self.source = s.label, s.source
        self.columns = dict(s.columns) if s.columns else None
        self.task = s.task if s.task is not None else TaskParams()  # words the probe prompts
        #: The run's ``[backend]`` call options (artifact ``backend_options``, with load's overrides).
        self.backend_options: dict[str, Any] = {}
        self._backend = backend
        self._endpoint: Endpoint | None = None  # opened on first probe
        #: "pairwise" for a pairwise run's artifact (its texts are a prompt and a response), else "pointwise".
        self.kind = "pointwise"
        #: A pairwise run's :class:`~rubric_induce.calibration.pairwise.BradleyTerryHead` (used by :meth:`compare`).
        self.pairwise_head = None
        #: What the head reads of a pair (``[select] pair_feature``): "difference", "preference" or "both".
        self.pair_feature = "difference"

    # -- the backend -------------------------------------------------------------------------
    @property
    def backend(self):
        """The LLM backend, opened on first use (loading a scorer to score probes loads no model)."""
        if self._backend is None and self._endpoint is not None:
            self._backend = self._endpoint.open(self.source)
        return self._backend

    @backend.setter
    def backend(self, value) -> None:
        self._backend, self._endpoint = value, None

    @property
    def backend_source(self) -> str | None:
        """Where the backend came from: "argument" (backend=, --backend) or "artifact" (artifact.json)."""
        if self._endpoint is not None:
            return "argument" if self._endpoint.trusted else "artifact"
        return "argument" if self._backend is not None else None

    @property
    def endpoint(self) -> str | None:
        """The backend :meth:`score` uses, as a spec with its URL's credentials redacted (None: none)."""
        if self._endpoint is not None:
            return self._endpoint.shown
        return describe_backend(self._backend) if self._backend is not None else None

    @property
    def endpoint_note(self) -> str | None:
        """Why no API key goes to the endpoint, and how to send one (None when the user named it,
        or it is not an OpenAI-compatible server)."""
        return self._endpoint.note() if self._endpoint is not None else None

    @property
    def faults(self) -> Any:
        """The fault counters of the backend, once opened (None: not opened, or it keeps none)."""
        return getattr(self._backend, "tally", None) if self._backend is not None else None

    def require_backend(self):
        """The backend, or an error saying how to give one."""
        if self.backend is None:
            raise RubricInduceError("this scorer has no backend; pass backend= to RubricScorer.load "
                                    "(e.g. 'local') or use score_probes on existing probes")
        return self.backend

    def scoring_options(self) -> ScoringOptions:
        """The probe options this scorer asks with (the run's)."""
        return resolve_scoring_options(self)

    def __repr__(self) -> str:
        cal = f", calibrated on {self.question!r}" if self.calibrator is not None else ""
        return f"RubricScorer({len(self.rubrics)} rubrics, threshold={self.threshold}{cal})"

    # -- loading -----------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, backend: Any = None, cache: str | Path | bool | None = None,
             backend_options: Mapping[str, Any] | None = None) -> RubricScorer:
        """Load from a run directory, an artifact folder or an ``artifact.json`` file.

        ``backend``: a :class:`~rubric_induce.backends.Backend` or a spec string (default: the one
        the rubrics were probed with, opened without your API key: see
        :mod:`~rubric_induce.scoring.endpoint`). ``cache``: SQLite call cache for new probes
        (default: the run's ``llm_calls.sqlite`` when present, else the user cache; ``False`` =
        none). ``backend_options``: ``[backend]`` call options (``top_logprobs``, ``timeout``, ...),
        over the run's; the run's that do not apply to the backend's kind are left out, given ones
        that do not are a DataError.
        """
        path = Path(path)
        doc_path = path / ARTIFACT_NAME if path.is_dir() else path
        doc = read_artifact(doc_path, path)
        rubric_set = load_rubrics(inside(doc_path.parent, doc["rubrics"], doc_path, "rubrics"), doc_path)
        calibrator, heads, adaptive = load_calibration(doc, doc_path, rubric_set.ids)
        threshold = doc["threshold"] if "threshold" in doc else rubric_set.threshold
        task = load_task(doc, doc_path)
        pairwise_head = load_pairwise_head(doc, doc_path, len(rubric_set))
        scorer = cls(list(rubric_set), threshold=threshold, calibrator=calibrator, question=doc.get("question"),
                     judges=doc.get("judges") or [], score_mode=doc.get("score_mode", "expected"),
                     probe_options=doc.get("probe") or {}, fields=doc.get("fields"), label=doc.get("label"),
                     source=str(doc_path), columns=doc.get("input"), task=task, adaptive=adaptive, heads=heads)
        scorer.backend_options = {**(doc.get("backend_options") or {}), **dict(backend_options or {})}
        scorer.kind = doc.get("kind", "pointwise")
        scorer.pairwise_head = pairwise_head
        scorer.pair_feature = doc.get("pair_feature", "difference")
        scorer._endpoint = resolve_endpoint(doc, doc_path, backend=backend, cache=cache,
                                            backend_options=backend_options)
        return scorer

    # -- texts -------------------------------------------------------------------------------
    def input_mapping(self) -> InputMapping:
        """How :meth:`read` maps a file's columns by default: the run's text columns and id column
        (as the run read its examples), else one column per probed field, named like it."""
        if self.columns:
            return InputMapping(text=self.columns.get("text") or None, id=self.columns.get("id"))
        return InputMapping(text=tuple(self.fields) if self.fields else None)

    def read_mapping(self, path: str | Path, mapping: InputMapping | None = None, *,
                     optional_run_id: bool | None = None) -> InputMapping:
        """The mapping :meth:`read` reads ``path`` with (see there)."""
        if optional_run_id is None:
            optional_run_id = mapping is None
        mapping = mapping or self.input_mapping()
        run_id = (self.columns or {}).get("id")
        if optional_run_id and run_id and mapping.id == run_id and not _has_column(mapping, path, run_id):
            mapping = mapping.replace(id=None)
        return mapping

    def read(self, path: str | Path, mapping: InputMapping | None = None, *,
             optional_run_id: bool | None = None) -> list[Example]:
        """The texts of a file (flat JSONL/JSON, rubric-induce JSONL, CSV, TSV) as examples to score,
        read through ``mapping`` (default :meth:`input_mapping`); errors name file, line and field.

        New texts often come without the run's id column: with ``optional_run_id`` (default: when
        ``mapping`` is not given) a file that lacks that column altogether gets ids as if none were
        mapped (its ``id`` column, else a hash of the texts); a file that has it must fill it on
        every row.
        """
        return self.read_mapping(path, mapping, optional_run_id=optional_run_id).load(path, unique=False)

    def to_examples(self, texts: Iterable[str | Mapping[str, Any] | Example] | str | Mapping[str, Any],
                    *, mapping: InputMapping | None = None) -> list[Example]:
        """Texts as :class:`Example` objects with stable ids, through ``mapping`` (see
        :meth:`InputMapping.examples_from <rubric_induce.data.mapping.InputMapping.examples_from>`).

        Accepted: plain strings (when the set reads one text field), ``{field: text}`` dicts (with
        an optional ``id``; with ``mapping``, dicts keyed by your columns), nested example dicts
        (``{"id", "fields": {...}}``) and Examples. A plain string for a multi-field set is an
        error naming the fields.
        """
        return (mapping or InputMapping()).examples_from(texts, fields=self.fields)

    def probe(self, texts: Iterable[str | Mapping[str, Any] | Example], *, progress: bool = False):
        """Probe every rubric on every text (cached, bounded concurrency); returns a ProbeTable."""
        backend = self.require_backend()
        return probe(self.to_examples(texts), self.rubrics, backend, self.scoring_options().probe,
                     fields=self.fields, task=self.task, progress=progress)

    # -- pairs -------------------------------------------------------------------------------
    def compare(self, a: str | Mapping[str, Any], b: str | Mapping[str, Any], *, prompt: str | None = None,
                progress: bool = False) -> float:
        """P(A ≻ B): the probability that response ``a`` is preferred to ``b`` (same prompt).

        ``a``/``b``: response texts (with ``prompt``), or ``{"prompt", "response"}`` dicts. Each is
        probed on every selected rubric (pointwise, as the run probed them; with a run whose
        ``[select] pair_feature`` reads the pairwise probe, the pair is also asked in both orders)
        and the Bradley-Terry head of a pairwise run turns the rubric features into the probability
        (a tie's probability, where the head learned one, is left out: P(A ≻ B) + P(tie) + P(B ≻ A)
        = 1). Without a head (an uncalibrated or pointwise run) it is 1, 0.5 or 0 by the sign of the
        mean signed score difference (or preference margin)."""
        return float(self.compare_pairs([prompt], [a], [b], progress=progress)[0])

    def compare_pairs(self, prompts: Sequence[str | None], a: Sequence[str | Mapping[str, Any]],
                      b: Sequence[str | Mapping[str, Any]], *, progress: bool = False) -> np.ndarray:
        """:meth:`compare` for many pairs at once (one probe call batch): P(A ≻ B) per pair."""
        return self.compare_outcomes(prompts, a, b, progress=progress)[:, 0]

    def compare_outcomes(self, prompts: Sequence[str | None], a: Sequence[str | Mapping[str, Any]],
                         b: Sequence[str | Mapping[str, Any]], *, progress: bool = False) -> np.ndarray:
        """[pairs, 3]: P(A ≻ B), P(tie), P(B ≻ A) per pair (:meth:`compare_pairs` is the first column).
        Without a head: (1, 0, 0), (0.5, 0, 0.5) or (0, 0, 1) by the sign of the mean difference."""
        if not len(prompts) == len(a) == len(b):
            raise DataError(f"expected as many prompts as responses, got {len(prompts)}, {len(a)}, {len(b)}",
                            field="compare")
        examples: list[Example] = []
        for i, (p, ra, rb) in enumerate(zip(prompts, a, b)):
            for side, r in (("A", ra), ("B", rb)):
                examples.append(Example(id=f"compare-{i}/{side}", fields=self._pair_fields(p, r, f"{side.lower()}[{i}]")))
        feature = self.pair_feature
        pair_ids = [f"compare-{i}" for i in range(len(prompts))]
        probed = list(examples)
        if feature != "difference":  # the pairwise probe, in both orders
            probed += order_examples([Pair(id=pid, prompt=examples[2 * i].fields["prompt"],
                                           response_a=examples[2 * i].fields["response"],
                                           response_b=examples[2 * i + 1].fields["response"], preferred="tie")
                                      for i, pid in enumerate(pair_ids)])
        table = self.probe(probed, progress=progress)
        parts = []
        if feature in ("difference", "both"):
            x = signed_units(table, self.rubrics, [e.id for e in examples], score=self.score_mode, fill=None)
            parts.append(x[0::2] - x[1::2])
        if feature in ("preference", "both"):
            parts.append(pair_preferences(table, self.rubrics, pair_ids, fill=None))
        X = parts[0] if len(parts) == 1 else np.hstack(parts)
        if self.pairwise_head is not None:
            return self.pairwise_head.predict_proba(X)
        p = 0.5 + 0.5 * np.sign(pair_signal(X, feature).mean(axis=1))
        return np.stack([p, np.zeros_like(p), 1.0 - p], axis=1)

    def _pair_fields(self, prompt: str | None, response: str | Mapping[str, Any], where: str) -> dict[str, str]:
        if isinstance(response, Mapping):
            fields = {k: response[k] for k in ("prompt", "response") if k in response}
            if "response" not in fields:
                raise DataError("expected a response text or a {prompt, response} object", field=where)
            if "prompt" not in fields:
                fields["prompt"] = prompt or ""
        elif isinstance(response, str):
            fields = {"prompt": prompt or "", "response": response}
        else:
            raise DataError(f"expected a response text or a {{prompt, response}} object, got "
                            f"{type(response).__name__}", field=where)
        if self.fields and list(self.fields) != ["prompt", "response"]:
            raise RubricInduceError("compare needs a pairwise run's scorer (texts: prompt and response); this one "
                                    f"reads {self.fields}")
        return {k: str(v) for k, v in fields.items()}

    # -- scoring -----------------------------------------------------------------------------
    def check(self, params: ScoreParams | None = None, **overrides: Any) -> ScoreParams:
        """The options of a scoring call (:class:`~rubric_induce.scoring.options.ScoreParams`, with
        keyword ``overrides`` of its fields), checked against this scorer before any LLM call or
        reading: an adaptive model for adaptive scoring, a fitted guarantee on a calibrated run, a
        judge the calibrator knows. Every scoring method checks so; ``score`` calls it first."""
        params = score_params(params, overrides)
        if params.adaptive is not None:
            adaptive_paths.require_adaptive(self)
        if params.guarantee is not None:
            require_calibrated(self)
            resolve_guarantee(params.guarantee, self.source)
        if self.calibrator is not None:
            resolve_judge(self.calibrator, params.judges, params.unseen_judge)  # before paying for probes
        return params

    def score(self, texts: Iterable[str | Mapping[str, Any] | Example], params: ScoreParams | None = None, *,
              progress: bool = False, **overrides: Any) -> list[ScoreResult]:
        """Score texts: probes, NetSAT and label, calibrated prediction with its uncertainty, drivers.

        ``texts``: see :meth:`to_examples` (one plain string, or a list; map your columns with
        ``to_examples(texts, mapping=...)`` first). ``params``: a
        :class:`~rubric_induce.scoring.options.ScoreParams`, or its fields as keywords: ``judge``,
        ``aggregate``, ``unseen_judge`` (whose prediction), ``adaptive`` (an
        :class:`~rubric_induce.scoring.options.AdaptiveOptions`), ``answer_check``, ``guarantee``.

        Adaptive scoring asks each text only the rubrics expected to move its calibrated prediction;
        each result says which rubrics were ``asked`` and the ``calls_saved``; NetSAT and its label
        need every rubric, so they are set only for texts asked all of them. Needs the adaptive
        model a calibrated run trains (``calibrate.adaptive``, on by default).

        ``answer_check`` (runs with an adaptive model): set each result's ``answer_surprise`` (see
        :meth:`answer_shift`); it costs one pass of the answer networks per rubric, so ``False``
        skips it where only the scores matter. ``guarantee``: each result gets its ``confidence``
        and ``answered`` (False = abstained; see :mod:`rubric_induce.scoring.selective`).
        """
        params = self.check(params, **overrides)
        examples = self.to_examples(texts)
        if params.adaptive is not None:
            return adaptive_paths.score_live(self, examples, params, progress=progress)(0, len(examples))
        return self.score_probes(self.probe(examples, progress=progress), examples, params)

    def score_probes(self, table, examples: Sequence[Example | str], params: ScoreParams | None = None,
                     **overrides: Any) -> list[ScoreResult]:
        """Score from an existing :class:`~rubric_induce.data.probes.ProbeTable` (no LLM call); the
        options as in :meth:`score`.

        ``table`` may also be the :class:`~rubric_induce.data.probes.ProbeArrays` of one
        (``table.arrays(...)``): build them once to score several subsets of the same probes (the
        evaluate stage scores each judge's texts so). Either way the probes are read once, not
        once per example, so the time grows linearly with the number of examples. Adaptive
        scoring is replayed on the table: a rubric is "asked" by reading its probe, so the result
        shows which rubrics adaptive scoring would have paid for.
        """
        ids = [e.id if isinstance(e, Example) else str(e) for e in examples]
        rubric_ids = [r.id for r in self.rubrics]
        arr = table.take(ids, rubric_ids) if isinstance(table, ProbeArrays) else table.arrays(
            example_ids=ids, rubric_ids=rubric_ids)
        params = self.check(params, **overrides)
        return self._maker(arr, ids, params)(0, len(ids))

    def predict_probes(self, arr, examples: Sequence[Example | str], params: ScoreParams | None = None, *,
                       aspect: str | None = None, **overrides: Any) -> np.ndarray:
        """The calibrated predictions alone (one per text, as :meth:`score_probes` gives them, without
        the drivers' extra network passes) from :class:`~rubric_induce.data.probes.ProbeArrays`;
        the evaluate stage predicts each held-out judge's texts so. Needs a calibrated run.
        ``aspect``: another calibrated question's head (:attr:`questions`; None: the main one)."""
        if self.calibrator is None:
            raise RubricInduceError("predict_probes needs a calibrated run (this scorer has no calibrator)")
        ids = [e.id if isinstance(e, Example) else str(e) for e in examples]
        sub = arr.take(ids, [r.id for r in self.rubrics])
        return calibration_numbers(self, sub, ids, score_params(params, overrides), occlusion=False,
                                   aspect=self.resolve_aspect(aspect))["prediction"]

    @property
    def questions(self) -> list[str]:
        """Every calibrated question (aspect), the main one first (empty when uncalibrated)."""
        if self.calibrator is None:
            return []
        main = self.question or self.calibrator.question_names_[self.calibrator.main_question_index_]
        return [main, *self.heads]

    def resolve_aspect(self, aspect: str | None) -> str | None:
        """``aspect`` checked against :attr:`questions`: None for the main question (or None), else the
        name of another aspect's head; an aspect the run did not calibrate is a DataError naming those."""
        if aspect is None or aspect == self.questions[0]:
            return None
        if aspect not in self.heads:
            raise DataError(f"unknown aspect {aspect!r}{suggest(aspect, self.questions)}; this run calibrated "
                            f"{', '.join(self.questions)}", field="aspect")
        return aspect

    def _maker(self, arr, ids: list[str], params: ScoreParams) -> adaptive_paths.Maker:
        """``make(start, stop)``: the results of texts ``start:stop`` of ``arr``, their numbers computed
        over every text at once (adaptive: the policy replayed on ``arr``)."""
        if params.adaptive is not None:
            return adaptive_paths.replay(self, arr, ids, params)
        return Scored(self, arr, ids, params).results

    def iter_score_probes(self, probes, example_ids: Sequence[Example | str] | None = None,
                          params: ScoreParams | None = None, *, chunk_size: int | None = None,
                          **overrides: Any) -> Iterator[list[ScoreResult]]:
        """:meth:`score_probes` in chunks of ``chunk_size`` texts (default :data:`SCORE_CHUNK`), one
        list of results per chunk, in order: the same results as one call, in memory that does not
        grow with the number of result objects (a :class:`~rubric_induce.data.results.ScoreResult` is
        about 17 KB; hand each chunk on and drop it).

        ``probes``: a :class:`~rubric_induce.data.probes.ProbeStore` (``ProbeTable.scan(path,
        rubric_ids)``, the bounded-memory reader), a ``ProbeTable`` or its ``ProbeArrays``.
        ``example_ids``: the texts (ids or examples; default: the store's, or every example in the
        table, in table order). ``params`` / ``overrides``: as for :meth:`score`.

        The numbers (NetSAT, the calibration network's outputs, the answer check, a guarantee) are
        computed a block of :data:`SCORE_CHUNK` texts at a time from the probes' arrays, as
        :meth:`score_probes` computes them (:class:`~rubric_induce.scoring.numbers.Scored`), so the
        results equal one :meth:`score_probes` call bit for bit. The options are checked when this
        is called.
        """
        size = _chunk_size(chunk_size)
        params = self.check(params, **overrides)  # before any chunk
        ids = [e.id if isinstance(e, Example) else str(e) for e in
               (example_ids if example_ids is not None else _table_ids(probes))]
        arr = _probe_arrays(probes, ids, [r.id for r in self.rubrics])
        del probes
        return _chunks(self._maker(arr, ids, params), len(ids), size)

    def iter_score(self, texts: Iterable[str | Mapping[str, Any] | Example], params: ScoreParams | None = None, *,
                   chunk_size: int | None = None, progress: bool = False,
                   **overrides: Any) -> Iterator[list[ScoreResult]]:
        """:meth:`score` with the results handed on in chunks of ``chunk_size`` texts (default
        :data:`SCORE_CHUNK`): the texts are probed a chunk at a time into a
        :class:`~rubric_induce.data.probes.ProbeStore` (arrays, no record objects kept), then scored
        as :meth:`iter_score_probes` does. The same results as :meth:`score`; ``progress``: one bar
        per chunk. The options are checked before any LLM call. Adaptive scoring asks texts step by
        step over all of them, then hands the results on in chunks."""
        params = self.check(params, **overrides)
        examples = self.to_examples(texts)
        size = _chunk_size(chunk_size)
        if params.adaptive is not None:
            make = adaptive_paths.score_live(self, examples, params, progress=progress)
            return _chunks(make, len(examples), size)
        store = ProbeStore([r.id for r in self.rubrics], [e.id for e in examples], fixed=True)
        for start in range(0, len(examples), size):
            for rec in self.probe(examples[start:start + size], progress=progress).records:
                store.add(rec)
        store.flush()
        return self.iter_score_probes(store, examples, params, chunk_size=size)

    def answer_shift(self, results: Sequence[ScoreResult] | np.ndarray):
        """Whether the scored texts look unlike the training texts, from the LLM's answers alone:
        an :class:`~rubric_induce.core.answer_check.AnswerShift` (its ``shifted`` flag and
        ``message()``), or None without an adaptive model or with fewer than two texts read.
        ``results``: the results, or their ``answer_surprise`` values as an array (NaN: none read;
        what ``score`` keeps of the texts it has written)."""
        if self.adaptive is None:
            return None
        values = results if isinstance(results, np.ndarray) else [r.answer_surprise for r in results]
        return check_answer_shift(values, getattr(self.adaptive, "answer_surprise_reference_", None))

    @property
    def has_strength(self) -> bool:
        """Whether one response has a Bradley-Terry strength of its own: a pairwise run whose head reads
        per-response score differences (``pair_feature = "difference"``). A head over the pairwise
        probe's preference margins needs both responses, so a single response has none."""
        return self.pairwise_head is not None and self.pair_feature == "difference"

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()


def _chunk_size(chunk_size: int | None) -> int:
    size = SCORE_CHUNK if chunk_size is None else chunk_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise RubricInduceError(f"chunk_size must be a whole number of texts, at least 1, got {chunk_size!r}")
    return size


def _chunks(make: adaptive_paths.Maker, n: int, size: int) -> Iterator[list[ScoreResult]]:
    for start in range(0, n, size):
        yield make(start, min(start + size, n))


def _table_ids(probes) -> list[str]:
    """The texts of a store or arrays (theirs), or of a table (every example, in table order)."""
    if isinstance(probes, (ProbeStore, ProbeArrays)):
        return list(probes.example_ids)
    return list(dict.fromkeys(r.example_id for r in probes.records))


def _probe_arrays(probes, ids: list[str], rubric_ids: list[str]) -> ProbeArrays:
    """The probes of ``ids`` x ``rubric_ids`` as arrays (about 25 bytes a probe answer)."""
    if isinstance(probes, ProbeTable):  # one pass over the records
        probes = ProbeStore.from_records(probes.records, rubric_ids, ids)
    if isinstance(probes, ProbeStore):
        return probes.arrays(ids)
    if list(probes.example_ids) == ids and list(probes.rubric_ids) == rubric_ids:
        return probes  # already these rows and columns: no copy
    return probes.take(ids, rubric_ids)


def _has_column(mapping: InputMapping, path: str | Path, column: str) -> bool:
    """Whether the file's header (CSV/TSV) or first row (JSON; a dotted path's first key) has ``column``."""
    try:
        columns = mapping.columns(path)
    except Exception:  # unreadable: let the load say why, naming the file and line
        return True
    return column in columns or column.split(".", 1)[0] in columns
