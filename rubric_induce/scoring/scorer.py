"""Score new texts with an induced, selected (and optionally calibrated) rubric set.

A scorer artifact is a folder holding ``artifact.json`` (what to load and how the rubrics were
probed), the selected rubric set (JSONL) and, when a calibration network was trained, its
weights (``calibration/``: JSON config + safetensors or npz; never pickle). ``rubric-induce run``
writes one into every run directory, so ``RubricScorer.load("runs/demo")`` works on a run folder
as well as on a copied artifact folder.

Keys go only where the user said: an artifact is a file anyone can hand you, so the endpoint it
names (``backend``) is opened without an API key from the environment (``OPENAI_API_KEY`` /
``RUBRIC_INDUCE_API_KEY``) when it is an ``openai-compatible`` server; pass ``backend=`` (the CLI's
``--backend``) naming the endpoint to send your key. Kind ``openai`` always reaches api.openai.com,
whatever the file says, so it keeps the environment's key. :attr:`RubricScorer.endpoint` and
:attr:`RubricScorer.endpoint_note` say which endpoint is used and whether a key goes to it. The
``backend`` written into ``artifact.json`` has the credentials of its URL redacted.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.data import Example, Rubric, RubricSet
from rubric_induce.data.mapping import InputMapping
from rubric_induce.data.results import ScoreResult

if TYPE_CHECKING:  # calibration imports torch on use; the scorer imports it only when a run has a network
    from rubric_induce.calibration.adaptive import AdaptiveModel
    from rubric_induce.calibration.calibrator import Calibrator
    from rubric_induce.core.task import TaskParams

__all__ = ["ARTIFACT_NAME", "RubricScorer", "write_artifact", "read_artifact", "SCORE_CHUNK"]

#: Texts scored at a time by :meth:`RubricScorer.iter_score_probes` (and so by ``score`` and the
#: evaluate stage): about 70 MB of results per chunk, whatever the number of texts.
SCORE_CHUNK = 4096

ARTIFACT_NAME = "artifact.json"
ARTIFACT_FORMAT = "rubric-induce-scorer"
ARTIFACT_VERSION = 1
_PROBE_KEYS = ("style", "estimator", "n_samples", "temperature", "max_analysis_tokens", "max_example_tokens",
               "packing", "pack_size", "pairwise", "pairwise_ties")


def write_artifact(directory: str | Path, *, rubrics: str, threshold: float | None, label: str | None,
                   label_threshold: float | None, score_mode: str, probe: Mapping[str, Any],
                   fields: Sequence[str] | None, backend: str | None, calibration: str | None,
                   question: str | None, judges: Sequence[str] = (), task: Any = None,
                   extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``artifact.json`` (paths inside it are relative to ``directory``). ``task``: the run's
    :class:`~rubric_induce.core.task.TaskParams`, stored with its description read, so new texts are
    probed with the prompts the rubrics were selected with."""
    from rubric_induce.backends.redact import redact_spec
    from rubric_induce.data.jsonl import write_json

    backend = redact_spec(backend) if isinstance(backend, str) else backend
    doc = {"format": ARTIFACT_FORMAT, "format_version": ARTIFACT_VERSION, "rubrics": rubrics,
           "threshold": threshold, "label": label, "label_threshold": label_threshold,
           "score_mode": score_mode, "probe": {k: probe.get(k) for k in _PROBE_KEYS if k in probe},
           "fields": list(fields) if fields else None, "backend": backend, "calibration": calibration,
           "question": question, "judges": list(judges),
           "task": task.to_record() if task is not None else None, **(dict(extra) if extra else {})}
    return write_json(Path(directory) / ARTIFACT_NAME, doc)


def _is_text(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e300  # finite, no 10**400


def _opt(check):
    return lambda v: v is None or check(v)


def _text_list(v: Any) -> bool:
    return isinstance(v, list) and all(_is_text(x) for x in v)


#: What each key of ``artifact.json`` may hold: (check, what the error says it must be).
_ARTIFACT_KEYS: dict[str, tuple[Any, str]] = {
    "format_version": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "rubrics": (_is_text, "the name of the selected rubric file"),
    "threshold": (_opt(_is_number), "a finite number or null"),
    "label": (_opt(_is_text), "a label name or null"),
    "label_threshold": (_opt(_is_number), "a finite number or null"),
    "score_mode": (lambda v: v in ("expected", "argmax"), "'expected' or 'argmax'"),
    "probe": (_opt(lambda v: isinstance(v, Mapping)), "an object of probe options"),
    "fields": (_opt(_text_list), "a list of field names or null"),
    "backend": (_opt(_is_text), "a backend spec or null"),
    "calibration": (_opt(_is_text), "the name of the calibration folder or null"),
    "question": (_opt(_is_text), "a label name or null"),
    "judges": (_opt(_text_list), "a list of judge names"),
    "task": (_opt(lambda v: isinstance(v, Mapping)), "an object (the run's [task]) or null"),
    "input": (_opt(lambda v: isinstance(v, Mapping)), "an object ({text, id}) or null"),
    "backend_options": (_opt(lambda v: isinstance(v, Mapping)), "an object of [backend] options or null"),
    "kind": (lambda v: v in ("pointwise", "pairwise"), "'pointwise' or 'pairwise'"),
    "pairwise_head": (_opt(_is_text), "the name of the Bradley-Terry head file or null"),
    "pair_feature": (lambda v: v in ("difference", "preference", "both"), "'difference', 'preference' or 'both'"),
}


def read_artifact(doc_path: Path, given: Path | None = None) -> dict[str, Any]:
    """``artifact.json`` read and checked key by key: a damaged one (a wrong type, a missing key, NaN,
    an unknown probe option, a file named outside the folder) is a :class:`DataError` naming the
    file and the field, never a traceback later on."""
    if not doc_path.is_file():
        raise DataError(f"no {ARTIFACT_NAME} here; point at a run directory written by "
                        "`rubric-induce run` or at an artifact folder", path=given or doc_path)
    from rubric_induce.data.jsonl import read_json

    doc = read_json(doc_path)  # invalid JSON or UTF-8: a DataError naming the file and line
    if not isinstance(doc, dict) or doc.get("format") != ARTIFACT_FORMAT:
        shown = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise DataError(f"not a rubric-induce scorer artifact (format {shown!r})", path=doc_path, field="format")
    if "rubrics" not in doc:
        raise DataError("is missing (the selected rubric file)", path=doc_path, field="rubrics")
    for key, (ok, what) in _ARTIFACT_KEYS.items():
        if key in doc and not ok(doc[key]):
            raise DataError(f"must be {what}, got {_brief(doc[key])}", path=doc_path, field=key)
    if doc.get("format_version", 0) > ARTIFACT_VERSION:
        raise DataError(f"format version {doc['format_version']} is newer than this library's "
                        f"{ARTIFACT_VERSION}; upgrade rubric-induce", path=doc_path, field="format_version")
    _check_probe_options(doc.get("probe") or {}, doc_path)
    _check_input(doc.get("input"), doc_path)
    task = doc.get("task") or {}
    if isinstance(task.get("description"), str) and task["description"].startswith("@"):
        raise DataError("names a file (@...); an artifact holds the task description itself, and never reads a "
                        "file it names", path=doc_path, field="task.description")
    return doc


def _brief(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _check_probe_options(probe: Mapping[str, Any], doc_path: Path) -> None:
    """The artifact's probe options, as :func:`~rubric_induce.probing.api.probe` will take them."""
    from rubric_induce.probing.api import ProbeParams

    for key in probe:
        if key not in _PROBE_KEYS:
            from rubric_induce.core.params import suggest

            raise DataError(f"unknown probe option{suggest(str(key), _PROBE_KEYS)}; allowed: {', '.join(_PROBE_KEYS)}",
                            path=doc_path, field=f"probe.{key}")
    opts = _probe_overrides(probe)
    try:
        ProbeParams(**opts)
    except DataError as exc:
        name = (exc.field or "").split(".")[-1]
        raise DataError(exc.message, path=doc_path,
                        field=f"probe.{'n_samples' if name == 'samples' else name}" if name else "probe") from None


def _probe_overrides(options: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact's probe options as :class:`~rubric_induce.probing.api.ProbeParams` overrides
    (artifact.json says ``n_samples``, the params field is ``samples``); unset ones left out."""
    return {("samples" if k == "n_samples" else k): v for k, v in options.items() if v is not None}


def _check_input(value: Mapping[str, Any] | None, doc_path: Path) -> None:
    """The run's input mapping (text columns, id column) that ``score`` reads new texts with."""
    if not value:
        return
    unknown = sorted(set(value) - {"text", "id"})
    if unknown:
        raise DataError(f"unknown key {unknown[0]!r}; input holds text and id", path=doc_path,
                        field=f"input.{unknown[0]}")
    try:
        InputMapping(text=value.get("text") or None, id=value.get("id"))
    except DataError as exc:
        raise DataError(exc.message, path=doc_path, field=f"input.{(exc.field or '').split('.')[-1]}") from None


def _inside(base: Path, name: str, doc_path: Path, field: str) -> Path:
    """``base / name``, refused when it leads outside the artifact folder (``..``, an absolute path,
    a symlink out) or is no usable file name: an artifact from someone else names only its own files."""
    from rubric_induce.core.safepaths import inside_folder

    if isinstance(name, str) and any(len(part) > 255 for part in Path(name).parts):
        raise DataError(f"is not a usable file name: {name[:60]!r}", path=doc_path, field=field)
    try:
        inside_folder(base, name, path=doc_path, field=field)
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise DataError(f"names {name!r}, which cannot be resolved ({exc})", path=doc_path, field=field) from None
    return base / name


def _check_backend(spec: str, doc: Mapping[str, Any], doc_path: Path, *, from_artifact: bool) -> None:
    """The backend spec and the artifact's ``backend_options`` for it, checked before any text is
    read: a bad spec or option read from ``artifact.json`` names that file and the field."""
    from rubric_induce.backends.params import BackendParams
    from rubric_induce.core.errors import BackendError

    options = doc.get("backend_options") or {}
    try:
        BackendParams.for_spec(spec, options)
    except (DataError, BackendError) as exc:
        name = (getattr(exc, "field", None) or "backend").removeprefix("backend.")
        in_options = name.split(".")[0] in options
        if not (from_artifact or in_options):
            raise
        field = f"backend_options.{name}" if in_options else "backend"
        raise DataError(getattr(exc, "message", str(exc)), path=doc_path, field=field) from None


def _check_local_model(spec: Any, doc_path: Path) -> None:
    """An artifact's ``local/<path>`` must name a GGUF file (an artifact naming ``/etc/passwd`` is bad
    input, not a failure of the embedded model): checked by its first bytes when the backend is first
    needed (scoring existing probes opens none), before anything loads the file."""
    from rubric_induce.backends import parse_backend_spec

    if not isinstance(spec, str):
        return
    kind, model, _ = parse_backend_spec(spec)
    if kind != "local" or not model:
        return
    from rubric_induce.backends.local import gguf_problem

    problem = gguf_problem(model)
    if problem is not None:
        raise DataError(f"the local model {model!r} is {problem}: give a .gguf file, or score with --backend",
                        path=doc_path, field="backend")


def _same_rubrics(model: Any, rubric_ids: list[str], config: Path, *, exact: bool) -> None:
    """The rubrics a calibration model reads (its ``input_names_``, one input block each) are the
    selected set's (``exact``: the same, in the same order; else all in the set): a set edited
    after calibration, or a model from another run, would score with the wrong inputs."""
    names = list(getattr(model, "input_names_", None) or [])
    width = model.n_features_in_shape_[0]
    if names and len(names) != width:
        raise DataError(f"names {len(names)} rubric(s) for a model that reads {width}: rerun the calibrate stage",
                        path=config, field="input_names")
    if exact:
        wrong = names != rubric_ids if names else width != len(rubric_ids)
    else:
        wrong = any(r not in rubric_ids for r in names)
    if not wrong:
        return
    odd = [r for r in names if r not in rubric_ids] or [r for r in rubric_ids if r not in names]
    shown = f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) " if names else ""
    raise DataError(f"the model was trained on {width} rubric(s) {shown}but the selected set holds "
                    f"{len(rubric_ids)} ({', '.join(rubric_ids[:4])}{', ...' if len(rubric_ids) > 4 else ''})"
                    + (f"; {odd[0]!r} is in one only" if odd and names else "; in another order" if names else "")
                    + ": rerun the calibrate stage (or restore the selected set it was trained with)",
                    path=config, field="input_names")


def _load_rubrics(path: Path, doc_path: Path) -> RubricSet:
    """The selected rubric set; a damaged file (a row that is not an object, a bad scale) names it."""
    if not path.is_file():
        raise DataError(f"the selected rubric file {path.name!r} is missing", path=doc_path, field="rubrics")
    try:
        rubric_set = RubricSet.load(path)
    except DataError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        raise DataError(f"the selected rubric file is damaged ({type(exc).__name__}: {exc})", path=path) from None
    if rubric_set.threshold is not None and not _is_number(rubric_set.threshold):
        raise DataError(f"must be a finite number or null, got {_brief(rubric_set.threshold)}",
                        path=path.with_name(path.name.removesuffix('.jsonl') + ".manifest.json"), field="threshold")
    return rubric_set


class RubricScorer:
    """Probe texts with the selected rubrics and turn the probes into NetSAT, labels and calibrated scores.

    ``backend`` is only needed for :meth:`score` (texts); :meth:`score_probes` works offline on
    probes already computed (the evaluate stage uses it on the run's held-out probes).
    """

    def __init__(self, rubrics: Sequence[Rubric], *, threshold: float | None = None,
                 calibrator: Calibrator | None = None,
                 question: str | None = None, judges: Sequence[str] = (), score_mode: str = "expected",
                 probe_options: Mapping[str, Any] | None = None, fields: Sequence[str] | None = None,
                 backend: Any = None, label: str | None = None, source: str | None = None,
                 columns: Mapping[str, Any] | None = None, task: TaskParams | None = None,
                 adaptive: AdaptiveModel | None = None, heads: Mapping[str, Calibrator] | None = None) -> None:
        from rubric_induce.core.task import TaskParams

        self.rubrics = list(rubrics)
        if not self.rubrics:
            raise RubricInduceError("a scorer needs at least one rubric")
        self.threshold = threshold
        self.calibrator = calibrator
        #: The adaptive-scoring model (:class:`~rubric_induce.calibration.adaptive.AdaptiveModel`), when the run trained one.
        self.adaptive = adaptive
        self.question = question
        #: The other aspects' calibrators (``[calibrate] questions`` after the first), by question: each
        #: result then holds every aspect's numbers in ``aspects`` (empty: one question calibrated).
        self.heads = dict(heads or {})
        self.judges = list(judges)
        self.score_mode = score_mode
        self.probe_options = dict(probe_options or {})
        #: The run's ``[backend]`` call options (artifact ``backend_options``, with load's overrides).
        self.backend_options: dict[str, Any] = {}
        self.fields = list(fields) if fields else None
        self._backend = backend
        self._backend_spec: tuple[Any, ...] | None = None  # opened on first probe
        #: Where the backend spec came from: "argument" (backend=, --backend) or "artifact" (artifact.json).
        self.backend_source: str | None = "argument" if backend is not None else None
        self.label = label
        self.source = source
        #: The run's text columns and id column (``{"text": [...], "id": ...}``; artifact.json's "input").
        self.columns = dict(columns) if columns else None
        self.task = task if task is not None else TaskParams()  # words the probe prompts
        #: "pairwise" for a pairwise run's artifact (its texts are a prompt and a response), else "pointwise".
        self.kind = "pointwise"
        #: A pairwise run's :class:`~rubric_induce.calibration.pairwise.BradleyTerryHead` (used by :meth:`compare`).
        self.pairwise_head = None
        #: What the head reads of a pair (``[select] pair_feature``): "difference", "preference" or "both".
        self.pair_feature = "difference"

    @property
    def backend(self):
        """The LLM backend, opened on first use (loading a scorer to score probes loads no model)."""
        if self._backend is None and self._backend_spec is not None:
            if not self._backend_spec[-1] and self.source:  # a spec read from the artifact: bad input, not a failure
                _check_local_model(self._backend_spec[0], Path(self.source))
            self._backend = _open(*self._backend_spec)
        return self._backend

    @backend.setter
    def backend(self, value) -> None:
        self._backend, self._backend_spec = value, None
        self.backend_source = "argument" if value is not None else None

    @property
    def endpoint(self) -> str | None:
        """The backend :meth:`score` uses, as a spec with its URL's credentials redacted (None: none)."""
        from rubric_induce.backends.redact import redact_spec

        if self._backend_spec is not None:
            spec = self._backend_spec[0]
            if not isinstance(spec, str):
                return _describe_backend(spec)
            return redact_spec(spec)
        return _describe_backend(self._backend) if self._backend is not None else None

    @property
    def endpoint_note(self) -> str | None:
        """Why no API key goes to the endpoint, and how to send one (None when the user named it,
        or it is not an OpenAI-compatible server)."""
        if self.backend_source != "artifact" or self._backend_spec is None:
            return None
        spec = self._backend_spec[0]
        if not isinstance(spec, str) or not spec.strip().startswith("openai-compatible/"):
            return None
        return (f"the endpoint comes from {ARTIFACT_NAME}, a file that names where texts go; it gets no API "
                f"key from the environment (OPENAI_API_KEY / RUBRIC_INDUCE_API_KEY). To send your key, name "
                f"the endpoint yourself: --backend {self.endpoint} (backend=... in Python), with the real "
                "credentials if it has any")

    def __repr__(self) -> str:
        cal = f", calibrated on {self.question!r}" if self.calibrator is not None else ""
        return f"RubricScorer({len(self.rubrics)} rubrics, threshold={self.threshold}{cal})"

    # -- loading -----------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, backend: Any = None, cache: str | Path | bool | None = None,
             backend_options: Mapping[str, Any] | None = None) -> RubricScorer:
        """Load from a run directory, an artifact folder or an ``artifact.json`` file.

        ``backend``: a :class:`~rubric_induce.backends.Backend` or a spec string (default: the one
        the rubrics were probed with). ``cache``: SQLite call cache for new probes (default: the
        run's ``llm_calls.sqlite`` when present, else the user cache; ``False`` = none).
        ``backend_options``: ``[backend]`` call options (``top_logprobs``, ``timeout``, ...), over the
        run's; the run's that do not apply to the backend's kind are left out, given ones that do
        not are a DataError.
        """
        path = Path(path)
        doc_path = path / ARTIFACT_NAME if path.is_dir() else path
        doc = read_artifact(doc_path, path)
        base = doc_path.parent
        adaptive = None
        rubric_set = _load_rubrics(_inside(base, doc["rubrics"], doc_path, "rubrics"), doc_path)
        calibrator, heads = None, {}
        if doc.get("calibration"):
            from rubric_induce.calibration.artifacts import load_calibrator

            cal_dir = _inside(base, doc["calibration"], doc_path, "calibration")
            calibrator = load_calibrator(cal_dir)
            _same_rubrics(calibrator, rubric_set.ids, cal_dir / "calibrator.json", exact=True)
            from rubric_induce.calibration.artifacts import load_heads

            heads = load_heads(cal_dir, calibrator)  # the other aspects' heads (none in a one-question run)
            heads.pop(next(iter(heads)))
            from rubric_induce.calibration.adaptive import ADAPTIVE_CONFIG, ADAPTIVE_DIR, load_adaptive

            if (cal_dir / ADAPTIVE_DIR / ADAPTIVE_CONFIG).exists():
                adaptive = load_adaptive(cal_dir / ADAPTIVE_DIR)
                _same_rubrics(adaptive, rubric_set.ids, cal_dir / ADAPTIVE_DIR / ADAPTIVE_CONFIG, exact=False)
        threshold = doc["threshold"] if "threshold" in doc else rubric_set.threshold
        from rubric_induce.core.safepaths import inside_folder, inside_resolver

        task = None
        if doc.get("task"):
            from rubric_induce.core.task import TaskParams

            # an "@file" description is read now, from inside the artifact's folder only
            task = TaskParams.from_mapping(doc["task"], source=str(doc_path)).resolved(
                inside_resolver(base, path=doc_path, field="task.description"), source=str(doc_path))
        pairwise_head = None
        if doc.get("pairwise_head"):  # a pairwise run's Bradley-Terry head (compare)
            from rubric_induce.calibration.pairwise import BradleyTerryHead

            head_path = _inside(base, doc["pairwise_head"], doc_path, "pairwise_head")
            from rubric_induce.selection.pair_features import n_pair_features

            pairwise_head = BradleyTerryHead.load(head_path)
            want = n_pair_features(len(rubric_set), doc.get("pair_feature", "difference"))
            if pairwise_head.n_features_in_ != want:
                raise DataError(f"the head weighs {pairwise_head.n_features_in_} features, the set's "
                                f"{len(rubric_set)} rubrics give {want} ({doc.get('pair_feature', 'difference')})",
                                path=head_path, field="n_features_in")
        scorer = cls(list(rubric_set), threshold=threshold, calibrator=calibrator, question=doc.get("question"),
                     judges=doc.get("judges") or [], score_mode=doc.get("score_mode", "expected"),
                     probe_options=doc.get("probe") or {}, fields=doc.get("fields"), label=doc.get("label"),
                     source=str(doc_path), columns=doc.get("input"), task=task, adaptive=adaptive, heads=heads)
        scorer.backend_options = {**(doc.get("backend_options") or {}), **dict(backend_options or {})}
        scorer.kind = doc.get("kind", "pointwise")
        scorer.pairwise_head = pairwise_head
        scorer.pair_feature = doc.get("pair_feature", "difference")
        if backend is not None or doc.get("backend"):
            spec = backend if backend is not None else doc["backend"]
            if isinstance(spec, str):
                _check_backend(spec, doc, doc_path, from_artifact=backend is None)
            if backend_options and not hasattr(spec, "answer_logprobs"):
                from rubric_induce.backends.params import BackendParams

                BackendParams(spec=str(spec), **backend_options)  # given ones must apply to the spec
            options = {**(doc.get("backend_options") or {}), **dict(backend_options or {})}
            if cache is None or cache is True:  # the run's cache: a link planted there must not lead outside
                inside_folder(base, "llm_calls.sqlite", path=base / "llm_calls.sqlite", field=None)
            # A spec read from the artifact is not the user's word: no key from the environment.
            trusted = backend is not None
            if "extra_body" not in dict(backend_options or {}) and _sends_user_key(spec, trusted):
                options.pop("extra_body", None)  # nor do the artifact's request fields ride along with the key
            scorer._backend_spec = (spec, cache, base, options, trusted)
            scorer.backend_source = "argument" if trusted else "artifact"
        return scorer

    # -- scoring -----------------------------------------------------------------------------
    def input_mapping(self) -> InputMapping:
        """How :meth:`read` maps a file's columns by default: the run's text columns and id column
        (as the run read its examples), else one column per probed field, named like it."""
        if self.columns:
            return InputMapping(text=self.columns.get("text") or None, id=self.columns.get("id"))
        return InputMapping(text=tuple(self.fields) if self.fields else None)

    def read(self, path: str | Path, mapping: InputMapping | None = None, *,
             optional_run_id: bool | None = None) -> list[Example]:
        """The texts of a file (flat JSONL/JSON, rubric-induce JSONL, CSV, TSV) as examples to score,
        read through ``mapping`` (default :meth:`input_mapping`); errors name file, line and field.

        New texts often come without the run's id column: with ``optional_run_id`` (default: when
        ``mapping`` is not given) a file that lacks that column altogether gets ids as if none were
        mapped (its ``id`` column, else a hash of the texts); a file that has it must fill it on
        every row.
        """
        if optional_run_id is None:
            optional_run_id = mapping is None
        mapping = mapping or self.input_mapping()
        run_id = (self.columns or {}).get("id")
        if optional_run_id and run_id and mapping.id == run_id and not _has_column(mapping, path, run_id):
            mapping = mapping.replace(id=None)
        return mapping.load(path, unique=False)

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

    def probe(self, texts: Iterable[str | Mapping[str, Any] | Example], *, progress: bool = False,
              mapping: InputMapping | None = None):
        """Probe every rubric on every text (cached, bounded concurrency); returns a ProbeTable."""
        from rubric_induce.probing.api import probe

        if self.backend is None:
            raise RubricInduceError("this scorer has no backend; pass backend= to RubricScorer.load "
                                    "(e.g. 'local') or use score_probes on existing probes")
        from rubric_induce.scoring.options import resolve_scoring_options

        opts = resolve_scoring_options(self).probe_kwargs()
        return probe(self.to_examples(texts, mapping=mapping), self.rubrics, self.backend, fields=self.fields,
                     task=self.task, progress=progress, **opts)

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
        from rubric_induce.data.pair_examples import order_examples
        from rubric_induce.data.pairs import Pair
        from rubric_induce.selection.pair_features import pair_preferences, pair_signal, signed_units

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

    def score(self, texts: Iterable[str | Mapping[str, Any] | Example], *, judge: str | Sequence[str] | None = None,
              aggregate: str = "mean", progress: bool = False,
              mapping: InputMapping | None = None, unseen_judge: str = "error", budget: int | None = None,
              stop_at: float | None = None, adaptive: bool = False,
              criterion: str = "auto", outcomes: str = "both", answer_check: bool = True,
              guarantee: Any = None) -> list[ScoreResult]:
        """Score texts: probes, NetSAT and label, calibrated prediction with its uncertainty, drivers.

        ``judge``: a judge seen in training, ``"shared"`` (the shared weights only: a judge the
        calibrator has not seen), a list of trusted judges (aggregated by ``aggregate``: mean or
        max), or None for the mean over every judge the calibrator was trained on. Any other name
        is an error listing the known judges (checked before any LLM call), unless
        ``unseen_judge="shared"`` gives unseen names the shared weights. ``texts``: see
        :meth:`to_examples` (one plain string, or a list); ``mapping`` maps dict keys (your
        columns) onto the set's fields.

        Adaptive scoring (``adaptive=True``, the one switch, as ``score --adaptive``; ``budget`` and
        ``stop_at`` without it are an error): each text is asked
        only the rubrics expected to move its calibrated prediction, greedily, until the expected
        gain (``criterion``: variance of the prediction, or entropy of a two-answer label's
        decision) is at or below ``stop_at`` (default: 0.001 of the largest uncertainty the scale
        allows; see :class:`~rubric_induce.calibration.policy.AskPolicy`, also for ``outcomes``: how
        the policy imagines an unasked rubric's answer) or ``budget`` rubrics were asked (default:
        all). Each result says which rubrics were ``asked`` and the ``calls_saved``; NetSAT and its
        label need every rubric, so they are set only for texts asked all of them. Needs the
        adaptive model a calibrated run trains (``calibrate.adaptive``, on by default).

        ``answer_check`` (runs with an adaptive model): set each result's ``answer_surprise``
        (see :meth:`answer_shift`); reading every rubric's answer in order costs one pass of the
        answer networks per rubric, about as much again as the rest of :meth:`score_probes`, so
        ``False`` skips it where only the scores matter.

        ``guarantee`` (calibrated runs): a :class:`~rubric_induce.scoring.guarantee.Guarantee`, or a
        target fitted into the artifact by ``rubric-induce calibrate-guarantee`` (a float, or a dict
        with ``target`` / ``delta`` / ``measure``): each result gets its ``confidence`` and
        ``answered`` (False = abstained; see :mod:`rubric_induce.scoring.selective`).
        """
        _adaptive_switch(adaptive, budget, stop_at)
        _guarantee_first(self, guarantee, adaptive)
        if adaptive:
            self._require_adaptive(aggregate)
        if self.calibrator is not None:
            from rubric_induce.calibration.api import resolve_judge

            resolve_judge(self.calibrator, judge, unseen_judge)  # before paying for probes
        examples = self.to_examples(texts, mapping=mapping)
        if adaptive:
            return self._score_adaptive_live(examples, judge, unseen_judge, budget, stop_at, criterion, progress,
                                             outcomes, answer_check)
        table = self.probe(examples, progress=progress)
        return self.score_probes(table, examples, judge=judge, aggregate=aggregate, unseen_judge=unseen_judge,
                                 answer_check=answer_check, guarantee=guarantee)

    def score_probes(self, table, examples: Sequence[Example | str], *, judge: str | Sequence[str] | None = None,
                     aggregate: str = "mean", unseen_judge: str = "error", budget: int | None = None,
                     stop_at: float | None = None, adaptive: bool = False,
                     criterion: str = "auto", outcomes: str = "both", answer_check: bool = True,
                     guarantee: Any = None) -> list[ScoreResult]:
        """Score from an existing :class:`~rubric_induce.data.probes.ProbeTable` (no LLM call);
        ``judge``, ``unseen_judge`` and ``answer_check`` as in :meth:`score`.

        ``table`` may also be the :class:`~rubric_induce.data.probes.ProbeArrays` of one
        (``table.arrays(...)``): build them once to score several subsets of the same probes (the
        evaluate stage scores each judge's texts so). Either way the probes are read once, not
        once per example, so the time grows linearly with the number of examples.

        With ``adaptive=True`` (and its ``budget`` / ``stop_at``, see :meth:`score`) the adaptive policy
        is replayed on the table: a rubric is "asked" by reading its probe from the table, so the
        result shows which rubrics adaptive scoring would have paid for.
        """
        from rubric_induce.data.probes import ProbeArrays

        ids = [e.id if isinstance(e, Example) else str(e) for e in examples]
        rubric_ids = [r.id for r in self.rubrics]
        if isinstance(table, ProbeArrays):
            arr = table.take(ids, rubric_ids)
        else:
            arr = table.arrays(example_ids=ids, rubric_ids=rubric_ids)
        _adaptive_switch(adaptive, budget, stop_at)
        _guarantee_first(self, guarantee, adaptive)
        if adaptive:
            self._require_adaptive(aggregate)
            return self._score_adaptive_replay(arr, ids, judge, unseen_judge, budget, stop_at, criterion, outcomes,
                                               answer_check)
        scored = self._scored(arr, ids, judge, aggregate, unseen_judge, answer_check, guarantee)
        return scored.results(0, len(ids))

    def predict_probes(self, arr, examples: Sequence[Example | str], *, judge: str | Sequence[str] | None = None,
                       aggregate: str = "mean", unseen_judge: str = "error", aspect: str | None = None) -> np.ndarray:
        """The calibrated predictions alone (one per text, as :meth:`score_probes` gives them, without
        the drivers' extra network passes) from :class:`~rubric_induce.data.probes.ProbeArrays`;
        the evaluate stage predicts each held-out judge's texts so. Needs a calibrated run.
        ``aspect``: another calibrated question's head (:attr:`questions`; None: the main one)."""
        if self.calibrator is None:
            raise RubricInduceError("predict_probes needs a calibrated run (this scorer has no calibrator)")
        ids = [e.id if isinstance(e, Example) else str(e) for e in examples]
        sub = arr.take(ids, [r.id for r in self.rubrics])
        return self._calibration(sub, ids, judge, aggregate, unseen_judge, occlusion=False,
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
            from rubric_induce.core.params import suggest

            raise DataError(f"unknown aspect {aspect!r}{suggest(aspect, self.questions)}; this run calibrated "
                            f"{', '.join(self.questions)}", field="aspect")
        return aspect

    def _scored(self, arr, ids: list[str], judge, aggregate: str, unseen_judge: str, answer_check: bool,
                guarantee: Any) -> _Scored:
        """Every number :meth:`score_probes` puts in its results, computed over all of ``arr`` at once
        (the networks see the same batches whatever the results are later cut into), held as
        arrays; :meth:`_Scored.results` makes the result objects of any range of texts."""
        from rubric_induce.selection.scores import unit_scores

        scored = _Scored(self, arr, ids)
        # Every example's [0, 10] scores at once; a row with a failed probe is filled and not used.
        scored.units = unit_scores(arr, self.rubrics, example_ids=ids, score=self.score_mode, fill=0.0)
        if self.calibrator is not None:
            scored.cal = self._calibration(arr, ids, judge, aggregate, unseen_judge)
            scored.heads = {q: self._calibration(arr, ids, judge, aggregate, unseen_judge, occlusion=False, aspect=q)
                            for q in self.heads}
        if self.has_strength and ids:
            from rubric_induce.selection.pair_features import signed_units

            # a pairwise run's pointwise reward: each response's Bradley-Terry strength
            x = signed_units(arr, self.rubrics, ids, score=self.score_mode, fill=0.0)
            scored.strength = self.pairwise_head.strength(x)
        if answer_check and self.adaptive is not None and ids:
            from rubric_induce.scoring.adaptive import block_rubrics, probe_surprise

            cols = block_rubrics(self.adaptive, [r.id for r in self.rubrics], self.source)
            scored.surprise = probe_surprise(self.adaptive, arr.raw, arr.ok, cols)
        if guarantee is not None:
            from rubric_induce.scoring.selective import mark_results

            # the results' calibrated numbers, as the guarantee reads them from result objects
            stand_ins = [_Numbers(*scored.cal_values(i)) for i in range(len(ids))]
            mark_results(self, stand_ins, arr, guarantee)
            scored.confidence = [r.confidence for r in stand_ins]
            scored.answered = [r.answered for r in stand_ins]
        return scored

    def iter_score_probes(self, probes, example_ids: Sequence[Example | str] | None = None, *,
                          chunk_size: int | None = None, **options: Any) -> Iterator[list[ScoreResult]]:
        """:meth:`score_probes` in chunks of ``chunk_size`` texts (default :data:`SCORE_CHUNK`), one
        list of results per chunk, in order: the same results as one call, in memory that does not
        grow with the number of texts (a :class:`~rubric_induce.data.results.ScoreResult` is about
        17 KB; hand each chunk on and drop it).

        ``probes``: a :class:`~rubric_induce.data.probes.ProbeStore` (``ProbeTable.scan(path,
        rubric_ids)``, the bounded-memory reader), a ``ProbeTable`` or its ``ProbeArrays``.
        ``example_ids``: the texts (ids or examples; default: the store's, or every example in the
        table, in table order). ``options``: as for :meth:`score_probes`.

        The numbers (NetSAT, the calibration network's outputs, the answer check, a guarantee) are
        computed over every text at once, as :meth:`score_probes` computes them, from the probes'
        arrays (about 25 bytes a probe answer); only the result objects are made a chunk at a
        time, so the results equal one :meth:`score_probes` call bit for bit (a network fed other
        batches would differ in the last float32 digits). The judge, the guarantee and the
        adaptive model are checked, and the numbers computed, when this is called.
        """
        from rubric_induce.data.probes import ProbeArrays, ProbeStore, ProbeTable

        size = _chunk_size(chunk_size)
        _adaptive_switch(options.get("adaptive", False), options.get("budget"), options.get("stop_at"))
        _guarantee_first(self, options.get("guarantee"), options.get("adaptive", False))  # before any chunk
        if options.get("adaptive", False):
            self._require_adaptive(options.get("aggregate", "mean"))
        rubric_ids = [r.id for r in self.rubrics]
        if example_ids is None:
            if isinstance(probes, (ProbeStore, ProbeArrays)):
                example_ids = list(probes.example_ids)
            else:
                example_ids = list(dict.fromkeys(r.example_id for r in probes.records))
        items = list(example_ids)
        ids = [e.id if isinstance(e, Example) else str(e) for e in items]
        if isinstance(probes, ProbeTable):  # one pass over the records
            probes = ProbeStore.from_records(probes.records, rubric_ids, ids)
        # The probes of every text as arrays (about 25 bytes a probe answer); the numbers are
        # computed over all texts at once, as score_probes does, and the result objects a chunk at a time.
        if isinstance(probes, ProbeStore):
            arr = probes.arrays(ids)
        elif list(probes.example_ids) == ids and list(probes.rubric_ids) == rubric_ids:
            arr = probes  # already these rows and columns: no copy
        else:
            arr = probes.take(ids, rubric_ids)
        del probes
        opt = {"judge": None, "aggregate": "mean", "unseen_judge": "error", "budget": None, "stop_at": None,
               "adaptive": False, "criterion": "auto", "outcomes": "both", "answer_check": True, "guarantee": None}
        unknown = set(options) - set(opt)
        if unknown:
            raise TypeError(f"iter_score_probes() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        opt.update(options)
        if opt["adaptive"]:
            make = self._score_adaptive_replay(arr, ids, opt["judge"], opt["unseen_judge"], opt["budget"],
                                               opt["stop_at"], opt["criterion"], opt["outcomes"], opt["answer_check"],
                                               maker=True)
        else:
            make = self._scored(arr, ids, opt["judge"], opt["aggregate"], opt["unseen_judge"], opt["answer_check"],
                                opt["guarantee"]).results

        def chunks() -> Iterator[list[ScoreResult]]:
            for start in range(0, len(ids), size):
                yield make(start, min(start + size, len(ids)))

        return chunks()

    def iter_score(self, texts: Iterable[str | Mapping[str, Any] | Example], *, chunk_size: int | None = None,
                   mapping: InputMapping | None = None, **options: Any) -> Iterator[list[ScoreResult]]:
        """:meth:`score` with the results handed on in chunks of ``chunk_size`` texts (default
        :data:`SCORE_CHUNK`): the texts are probed a chunk at a time into a
        :class:`~rubric_induce.data.probes.ProbeStore` (arrays, no record objects kept), then scored
        as :meth:`iter_score_probes` does, so neither the probe records nor the results of every
        text are held (``rubric-induce score --input`` writes each chunk as it comes). The same
        results as :meth:`score`; the options are its options (``progress``: one bar per chunk).
        The judge, the guarantee and the adaptive model are checked before any LLM call. Adaptive
        scoring asks texts step by step over all of them, so it scores at once and only hands the
        results on in chunks."""
        from rubric_induce.data.probes import ProbeStore

        size = _chunk_size(chunk_size)
        adaptive = options.get("adaptive", False)
        _adaptive_switch(adaptive, options.get("budget"), options.get("stop_at"))
        _guarantee_first(self, options.get("guarantee"), adaptive)
        if adaptive:
            self._require_adaptive(options.get("aggregate", "mean"))
        if self.calibrator is not None:
            from rubric_induce.calibration.api import resolve_judge

            resolve_judge(self.calibrator, options.get("judge"), options.get("unseen_judge", "error"))
        examples = self.to_examples(texts, mapping=mapping)
        progress = options.pop("progress", False)
        if adaptive:
            results = self.score(examples, progress=progress, **options)
            return iter([results[start:start + size] for start in range(0, len(results), size)])
        rubric_ids = [r.id for r in self.rubrics]
        store = ProbeStore(rubric_ids, [e.id for e in examples], fixed=True)
        for start in range(0, len(examples), size):
            for rec in self.probe(examples[start:start + size], progress=progress).records:
                store.add(rec)
        store.flush()
        return self.iter_score_probes(store, examples, chunk_size=size, **options)

    def answer_shift(self, results: Sequence[ScoreResult]):
        """Whether the scored texts look unlike the training texts, from the LLM's answers alone:
        an :class:`~rubric_induce.core.stats.AnswerShift` (its ``shifted`` flag and
        ``message()``), or None without an adaptive model or with fewer than two texts read."""
        if self.adaptive is None:
            return None
        from rubric_induce.core.stats import check_answer_shift

        return check_answer_shift([r.answer_surprise for r in results],
                                  getattr(self.adaptive, "answer_surprise_reference_", None))

    def _netsat_results(self, arr, ids: Sequence[str], asked: np.ndarray | None = None, *,
                        units: np.ndarray | None = None, rows: range | None = None) -> list[ScoreResult]:
        """Per text: the probed distributions, NetSAT, label and drivers (no calibration).
        ``asked`` (adaptive scoring): only those cells count; an unasked rubric is no error.
        ``rows``: only these texts (default: all); ``units``: their [0, 10] scores, computed already."""
        from rubric_induce.selection.scores import signs_from_polarity, unit_scores

        rubric_ids = [r.id for r in self.rubrics]
        if units is None:
            # Every example's [0, 10] scores at once; a row with a failed probe is filled and not used.
            units = unit_scores(arr, self.rubrics, example_ids=ids, score=self.score_mode, fill=0.0)
        signs = signs_from_polarity(self.rubrics, len(self.rubrics))
        values = [np.asarray(r.scale.values, dtype=float) for r in self.rubrics]
        results: list[ScoreResult] = []
        for i in rows if rows is not None else range(len(ids)):
            ex_id = ids[i]
            wanted = np.ones(len(rubric_ids), dtype=bool) if asked is None else asked[i]
            ok = arr.ok[i] & wanted
            dists = {rid: [float(p) for p in arr.probs[i, j, :len(values[j])]] for j, rid in enumerate(rubric_ids) if ok[j]}
            expected = {rid: float(np.dot(dists[rid], values[j])) for j, rid in enumerate(rubric_ids) if ok[j]}
            errors = [f"probe failed or missing for rubric {rid}" for j, rid in enumerate(rubric_ids)
                      if wanted[j] and not ok[j]]
            res = ScoreResult(id=ex_id, distributions=dists, expected=expected, threshold=self.threshold,
                              errors=errors)
            if ok.all():
                unit = units[i]
                contrib = unit * signs
                res.netsat = float(contrib.sum())
                if self.threshold is not None:
                    res.label = int(res.netsat > self.threshold)
                res.drivers = [{"rubric_id": rubric_ids[j], "text": self.rubrics[j].text,
                                "polarity": self.rubrics[j].polarity, "netsat_contribution": float(contrib[j])}
                               for j in range(len(rubric_ids))]
            results.append(res)
        return results

    @property
    def has_strength(self) -> bool:
        """Whether one response has a Bradley-Terry strength of its own: a pairwise run whose head reads
        per-response score differences (``pair_feature = "difference"``). A head over the pairwise
        probe's preference margins needs both responses, so a single response has none."""
        return self.pairwise_head is not None and self.pair_feature == "difference"

    # -- adaptive scoring --------------------------------------------------------------------
    def _require_adaptive(self, aggregate: str = "mean") -> None:
        from rubric_induce.scoring.adaptive import missing_adaptive_message

        if aggregate != "mean":
            raise DataError(f"adaptive scoring averages the trusted judges' distributions; aggregate={aggregate!r} "
                            "is not supported with it (use aggregate='mean', or score every rubric)",
                            field="aggregate")
        if self.adaptive is None:
            raise DataError(missing_adaptive_message(self.source, self.calibrator is not None), field="adaptive")

    def _adaptive_judges(self, judge, unseen_judge: str):
        from rubric_induce.calibration.api import resolve_judge

        who = judge if judge is not None else (self.judges or None)
        if who is not None and not isinstance(who, str):
            who = list(who)
        return who, resolve_judge(self.calibrator if self.calibrator is not None else self.adaptive, who,
                                  unseen_judge)

    def _score_adaptive_live(self, examples: list[Example], judge, unseen_judge, budget, stop_at, criterion,
                             progress: bool, outcomes: str = "both", answer_check: bool = True) -> list[ScoreResult]:
        """Adaptive scoring of texts: probe only the chosen (text, rubric) pairs, step by step."""
        from rubric_induce.data.probes import ProbeTable
        from rubric_induce.probing.api import probe
        from rubric_induce.scoring.adaptive import block_rubrics, run_adaptive

        if self.backend is None:
            raise RubricInduceError("this scorer has no backend; pass backend= to RubricScorer.load "
                                    "(e.g. 'local') or use score_probes on existing probes")
        cols = block_rubrics(self.adaptive, [r.id for r in self.rubrics], self.source)
        from rubric_induce.scoring.options import resolve_scoring_options

        opts = resolve_scoring_options(self).probe_kwargs()
        records: list = []

        def fetch(rows: np.ndarray, block: int):
            rubric = self.rubrics[cols[block]]
            exs = [examples[i] for i in rows]
            table = probe(exs, [rubric], self.backend, fields=self.fields, task=self.task, **opts)
            records.extend(table.records)
            arr = table.arrays(example_ids=[e.id for e in exs], rubric_ids=[rubric.id])
            return arr.raw[:, 0], arr.probs[:, 0], arr.ok[:, 0]

        who, resolved = self._adaptive_judges(judge, unseen_judge)
        say = _step_echo() if progress else None
        out = run_adaptive(self.adaptive, len(examples), fetch, judges=resolved, budget=budget, stop_at=stop_at,
                           criterion=criterion, outcomes=outcomes, on_step=say)
        arr = ProbeTable(records=records).arrays(example_ids=[e.id for e in examples],
                                                 rubric_ids=[r.id for r in self.rubrics])
        return self._adaptive_results(out, arr, [e.id for e in examples], cols, who, answer_check)

    def _score_adaptive_replay(self, arr, ids: list[str], judge, unseen_judge, budget, stop_at,
                               criterion, outcomes: str = "both", answer_check: bool = True, *,
                               maker: bool = False):
        """Adaptive scoring replayed on existing probes: an asked rubric is read from ``arr``."""
        from rubric_induce.scoring.adaptive import block_rubrics, run_adaptive

        cols = block_rubrics(self.adaptive, [r.id for r in self.rubrics], self.source)

        def fetch(rows: np.ndarray, block: int):
            j = cols[block]
            return arr.raw[rows, j], arr.probs[rows, j], arr.ok[rows, j]

        who, resolved = self._adaptive_judges(judge, unseen_judge)
        out = run_adaptive(self.adaptive, len(ids), fetch, judges=resolved, budget=budget, stop_at=stop_at,
                           criterion=criterion, outcomes=outcomes)
        if maker:  # make(start, stop): the results of a range of texts (scoring in chunks)
            return self._adaptive_maker(out, arr, ids, cols, who, answer_check)
        return self._adaptive_results(out, arr, ids, cols, who, answer_check)

    def _adaptive_results(self, out, arr, ids: list[str], cols: list[int], who,
                          answer_check: bool = True) -> list[ScoreResult]:
        return self._adaptive_maker(out, arr, ids, cols, who, answer_check)(0, len(ids))

    def _adaptive_maker(self, out, arr, ids: list[str], cols: list[int], who, answer_check: bool = True):
        """``make(start, stop)``: the adaptive results of texts ``start:stop`` (checked finite first)."""
        asked = np.zeros((len(ids), len(self.rubrics)), dtype=bool)
        for i, order in enumerate(out.order):
            asked[i, [cols[b] for b in order]] = True
        _require_finite(ids, out.prediction, out.sd, out.proba, self.source)
        q = self.question or self.adaptive.question_names_[self.adaptive.main_question_index_]
        from rubric_induce.selection.scores import unit_scores

        units = unit_scores(arr, self.rubrics, example_ids=ids, score=self.score_mode, fill=0.0)

        def make(start: int, stop: int) -> list[ScoreResult]:
            results = self._netsat_results(arr, ids, asked, units=units, rows=range(start, stop))
            for i, res in zip(range(start, stop), results):
                res.prediction, res.uncertainty = float(out.prediction[i]), float(out.sd[i])
                res.proba, res.scale = [float(p) for p in out.proba[i]], [float(v) for v in out.scale]
                res.judge, res.question = who, q
                res.asked = [self.rubrics[cols[b]].id for b in out.order[i]]
                res.calls_saved = len(self.rubrics) - len(res.asked)
                res.stop_reason = out.stop[i] or None
                res.expected_gains = [float(g) for g in out.gains[i]]
                if answer_check and np.isfinite(out.surprise[i]):
                    res.answer_surprise = float(out.surprise[i])
                res.drivers.sort(key=lambda d: -abs(d.get("netsat_contribution") or 0.0))
            return results

        return make

    def _calibration(self, arr, ids: Sequence[str], judge, aggregate: str, unseen_judge: str = "error", *,
                     occlusion: bool = True, aspect: str | None = None) -> dict[str, Any]:
        """The calibrated numbers of every text of ``arr``: prediction, sd, distribution and scale,
        and (``occlusion``) each rubric's effect on the prediction (the drivers). ``aspect``: the
        head of another calibrated question (None: the main calibrator)."""
        from rubric_induce.calibration.api import calibrated_rows, fit_width, resolve_judge
        from rubric_induce.calibration.data import features_from_arrays

        cal = self.calibrator if aspect is None else self.heads[aspect]
        X = fit_width(cal, features_from_arrays(arr), source=self.source)  # the selected rubrics may be narrower
        who = judge if judge is not None else (self.judges or None)
        if isinstance(who, str):
            who_list: str | list[str] = who
        else:
            who_list = list(who) if who else None
        resolved = resolve_judge(cal, who_list, unseen_judge)  # "shared" -> None: the shared weights
        q = self.question if aspect is None else aspect
        with _torch_threads(1):  # tiny networks: thread start-up costs more than it saves
            rows = calibrated_rows(cal, X, resolved, question=q, aggregate=aggregate, unseen_judge="shared")
            _require_finite(ids, rows["prediction"], rows["sd"], rows["proba"], self.source)
            all_pred = _occluded_predictions(cal, X, resolved, q, aggregate) if occlusion else None
        pred = rows["prediction"]
        return {"prediction": pred, "sd": rows["sd"], "proba": rows["proba"], "scale": [float(v) for v in rows["scale"]],
                "judge": who_list, "question": q or rows["question"],
                "effects": None if all_pred is None else (pred[None, :] - all_pred[1:]).T}

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()


def _guarantee_first(scorer: RubricScorer, guarantee: Any, adaptive: bool) -> None:
    """Check a ``guarantee`` before any LLM call: calibrated run, not adaptive, a fitted one found."""
    if guarantee is None:
        return
    from rubric_induce.scoring.selective import require_calibrated, resolve_guarantee

    if adaptive:
        raise DataError("a guarantee was fitted on texts scored with every rubric; it does not hold for "
                        "adaptive scoring", field="guarantee")
    require_calibrated(scorer)
    resolve_guarantee(guarantee, scorer.source)


def _chunk_size(chunk_size: int | None) -> int:
    size = SCORE_CHUNK if chunk_size is None else chunk_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise RubricInduceError(f"chunk_size must be a whole number of texts, at least 1, got {chunk_size!r}")
    return size


def _adaptive_switch(adaptive: bool, budget: int | None, stop_at: float | None) -> None:
    """``budget`` and ``stop_at`` belong to adaptive scoring: without ``adaptive=True`` they are an
    error (as ``rubric-induce score`` refuses ``--budget`` / ``--stop-at`` without ``--adaptive``)."""
    if not isinstance(adaptive, bool):
        raise TypeError(f"adaptive must be True or False, got {adaptive!r}")
    given = [name for name, v in (("budget", budget), ("stop_at", stop_at)) if v is not None]
    if given and not adaptive:
        raise RubricInduceError(f"{' and '.join(given)} go with adaptive=True (adaptive scoring is off)")


def _require_finite(ids: Sequence[str], pred, sd, proba, source: str | None) -> None:
    """A NaN or infinite calibrated prediction is an error, never a score."""
    bad = ~(np.isfinite(pred) & np.isfinite(sd) & np.isfinite(np.asarray(proba)).all(axis=-1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise RubricInduceError(f"the calibration network gave a non-finite prediction ({float(pred[i])}) for text "
                                f"{ids[i]!r} ({int(bad.sum())} of {len(bad)} texts); its weights"
                                f"{f' ({source})' if source else ''} are damaged or diverged: refit the calibrator")


class _Numbers:
    """The calibrated numbers of one text, as a result holds them (what a guarantee reads)."""

    __slots__ = ("prediction", "uncertainty", "proba", "confidence", "answered")

    def __init__(self, prediction, uncertainty, proba) -> None:
        self.prediction, self.uncertainty, self.proba = prediction, uncertainty, proba
        self.confidence = self.answered = None


class _Scored:
    """The numbers of :meth:`RubricScorer.score_probes` for every text of ``arr``, as arrays, and
    the result objects of any range of texts made from them (:meth:`results`): scoring in
    chunks makes the same results as scoring at once, holding one chunk of objects at a time."""

    def __init__(self, scorer: RubricScorer, arr, ids: list[str]) -> None:
        self.scorer, self.arr, self.ids = scorer, arr, ids
        self.units: np.ndarray | None = None
        self.cal: dict[str, Any] | None = None
        self.heads: dict[str, dict[str, Any]] = {}  # the other aspects' calibrated numbers, by question
        self.surprise: np.ndarray | None = None
        self.strength: np.ndarray | None = None
        self.confidence: list[float | None] | None = None
        self.answered: list[bool | None] | None = None

    def cal_values(self, i: int) -> tuple[float, float, list[float]]:
        c = self.cal
        return float(c["prediction"][i]), float(c["sd"][i]), [float(p) for p in c["proba"][i]]

    def results(self, start: int, stop: int) -> list[ScoreResult]:
        sc = self.scorer
        results = sc._netsat_results(self.arr, self.ids, units=self.units, rows=range(start, stop))
        if self.cal is not None:
            c = self.cal
            effects = c["effects"]
            for i, res in zip(range(start, stop), results):
                res.prediction, res.uncertainty, res.proba = self.cal_values(i)
                res.scale = list(c["scale"])
                res.judge, res.question = c["judge"], c["question"]
                if not res.drivers:
                    res.drivers = [{"rubric_id": r.id, "text": r.text, "polarity": r.polarity} for r in sc.rubrics]
                by_id = {d["rubric_id"]: d for d in res.drivers}
                for j, r in enumerate(sc.rubrics):
                    by_id[r.id]["prediction_effect"] = float(effects[i, j])
                if self.heads:  # several aspects: each one's numbers, the main one first
                    res.aspects = {res.question: _aspect_numbers(c, i)}
                    res.aspects.update({q: _aspect_numbers(h, i) for q, h in self.heads.items()})
        if self.strength is not None:
            for res, v in zip(results, self.strength[start:stop]):
                if res.netsat is not None:  # every rubric probed (a failed probe leaves it unset, as NetSAT)
                    res.strength = float(v)
        if self.surprise is not None:
            for res, v in zip(results, self.surprise[start:stop]):
                res.answer_surprise = float(v) if np.isfinite(v) else None
        key = "prediction_effect" if self.cal is not None else "netsat_contribution"
        for res in results:  # strongest drivers first
            res.drivers.sort(key=lambda d: -abs(d.get(key) or 0.0))
        if self.confidence is not None:
            for res, c, a in zip(results, self.confidence[start:stop], self.answered[start:stop]):
                res.confidence, res.answered = c, a
        return results


def _aspect_numbers(c: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Text ``i``'s calibrated numbers of one aspect, as a result's ``aspects`` holds them."""
    return {"prediction": float(c["prediction"][i]), "uncertainty": float(c["sd"][i]),
            "proba": [float(p) for p in c["proba"][i]], "scale": list(c["scale"])}


_OCCLUSION_ROWS = 1 << 13  # network rows per occlusion batch: bounded memory, whatever the number of texts


def _occluded_predictions(cal: Any, X: np.ndarray, who: Any, question: Any, aggregate: str) -> np.ndarray:
    """``[rubrics + 1, texts]`` predictions: row 0 on the real input, row ``j + 1`` with rubric
    ``j``'s probe treated as missing (its block zeroed): how far each rubric moves the prediction.

    Texts go through the network in batches of about ``_OCCLUSION_ROWS`` rows (each text is
    ``rubrics + 1`` rows), so memory stays bounded and the time linear in the number of texts.
    """
    n, r = X.shape[0], X.shape[1]
    per_batch = max(1, _OCCLUSION_ROWS // (r + 1))
    out = np.empty((r + 1, n))
    for start in range(0, n, per_batch):
        block = X[start:start + per_batch]
        m = block.shape[0]
        stacked = np.repeat(block[None], r + 1, axis=0)
        for j in range(r):
            stacked[j + 1, :, j, :] = 0.0
        stacked = stacked.reshape(m * (r + 1), *X.shape[1:])
        out[:, start:start + m] = cal.predict(stacked, who, question=question, aggregate=aggregate).reshape(r + 1, m)
    return out


def _step_echo():
    """An ``on_step`` callback printing each adaptive step's number of probes (stderr)."""
    import sys

    def say(step: int, pairs: int) -> None:
        print(f"adaptive step {step}: probing {pairs} (text, rubric) pair(s)", file=sys.stderr)

    return say


class _torch_threads:
    """Temporarily set torch's intra-op thread count (restored on exit)."""

    def __init__(self, n: int) -> None:
        self.n, self.old = n, None

    def __enter__(self):
        import torch

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc) -> None:
        import torch

        torch.set_num_threads(self.old)


def _describe_backend(backend: Any) -> str:
    """``kind/model[@url]`` of a backend object, its URL's credentials redacted."""
    from rubric_induce.backends.redact import redact_text

    inner = getattr(backend, "inner", backend)
    label = getattr(inner, "_label", None)
    if callable(label):
        return redact_text(label())
    return f"{getattr(inner, 'kind', type(inner).__name__)}/{getattr(inner, 'model', '')}".rstrip("/")


def _sends_user_key(spec: Any, trusted: bool) -> bool:
    """Whether requests to ``spec`` carry the user's API key: a backend the user named, or the
    OpenAI API (its fixed host gets the environment's key whoever named it)."""
    if trusted or not isinstance(spec, str):
        return True
    from rubric_induce.backends import parse_backend_spec
    from rubric_induce.core.errors import BackendError

    try:
        return parse_backend_spec(spec)[0] == "openai"
    except BackendError:  # an unparsable spec fails when opened; until then assume the key goes
        return True


def _open(backend: Any, cache: str | Path | bool | None, base: Path, options: Mapping[str, Any] | None = None,
          trusted: bool = True):
    """A backend object from a spec string (with the ``[backend]`` ``options`` that apply to its
    kind), wrapped in a call cache unless ``cache`` is False. ``trusted=False`` (a spec read from an
    artifact): an OpenAI-compatible endpoint gets no API key from the environment."""
    from rubric_induce.backends import Backend
    from rubric_induce.backends.cache import CachedBackend, CallCache, default_cache_path
    from rubric_induce.backends.params import BackendParams

    if isinstance(backend, Backend):
        return backend
    try:
        params = BackendParams.for_spec(str(backend), options)
    except DataError as exc:
        raise DataError(exc.message, field=exc.field or "backend") from None
    inner = params.open(key_from_env=trusted)
    if cache is False:
        return inner
    if cache is None or cache is True:
        run_cache = base / "llm_calls.sqlite"
        cache = run_cache if run_cache.exists() else default_cache_path()
    return CachedBackend(inner, CallCache(Path(cache)))


def _has_column(mapping: InputMapping, path: str | Path, column: str) -> bool:
    """Whether the file's header (CSV/TSV) or first row (JSON; a dotted path's first key) has ``column``."""
    try:
        columns = mapping.columns(path)
    except Exception:  # unreadable: let the load say why, naming the file and line
        return True
    return column in columns or column.split(".", 1)[0] in columns
