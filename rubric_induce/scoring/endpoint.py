"""Which endpoint a scorer sends texts to, and whether the user's API key goes with them.

Keys go only where the user said: an artifact is a file anyone can hand you, so the endpoint it
names (``backend``) is opened without an API key from the environment (``OPENAI_API_KEY`` /
``RUBRIC_INDUCE_API_KEY``) when it is an ``openai-compatible`` server; ``backend=`` (the CLI's
``--backend``) naming the endpoint sends your key. Kind ``openai`` always reaches api.openai.com,
whatever the file says, so it keeps the environment's key. Nor do the artifact's own request
fields (``extra_body``) ride along with a key the user sends.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.backends import Backend, parse_backend_spec
from rubric_induce.backends.cache import CachedBackend, CallCache, default_cache_path
from rubric_induce.backends.local import gguf_problem
from rubric_induce.backends.params import BackendParams
from rubric_induce.backends.redact import redact_spec, redact_text
from rubric_induce.core.errors import BackendError, DataError
from rubric_induce.core.safepaths import inside_folder
from rubric_induce.scoring.artifact import ARTIFACT_NAME

__all__ = ["Endpoint", "resolve_endpoint", "describe_backend", "sends_user_key"]


@dataclass(frozen=True)
class Endpoint:
    """A backend not opened yet: its spec (or a Backend object), the call cache, the ``[backend]``
    options for its kind, and whether the user named it (``trusted``: the key goes along)."""

    spec: Any
    base: Path
    cache: str | Path | bool | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    trusted: bool = True

    @property
    def shown(self) -> str:
        """The spec with its URL's credentials redacted (a Backend object: its ``kind/model[@url]``)."""
        return redact_spec(self.spec) if isinstance(self.spec, str) else describe_backend(self.spec)

    def note(self) -> str | None:
        """Why no API key goes to the endpoint, and how to send one (None when the user named it, or it
        is not an OpenAI-compatible server)."""
        if self.trusted or not isinstance(self.spec, str) or not self.spec.strip().startswith("openai-compatible/"):
            return None
        return (f"the endpoint comes from {ARTIFACT_NAME}, a file that names where texts go; it gets no API "
                f"key from the environment (OPENAI_API_KEY / RUBRIC_INDUCE_API_KEY). To send your key, name "
                f"the endpoint yourself: --backend {self.shown} (backend=... in Python), with the real "
                "credentials if it has any")

    def open(self, source: str | None = None) -> Backend:
        """The backend object, wrapped in a call cache unless ``cache`` is False. ``source``: the
        artifact a spec was read from (its ``local/<path>`` must name a GGUF file)."""
        if isinstance(self.spec, Backend):
            return self.spec
        if not self.trusted and source:  # a spec read from the artifact: bad input, not a failure
            _check_local_model(self.spec, Path(source))
        try:
            params = BackendParams.for_spec(str(self.spec), self.options)
        except DataError as exc:
            raise DataError(exc.message, field=exc.field or "backend") from None
        inner = params.open(key_from_env=self.trusted)
        if self.cache is False:
            return inner
        cache = self.cache
        if cache is None or cache is True:
            run_cache = self.base / "llm_calls.sqlite"
            cache = run_cache if run_cache.exists() else default_cache_path()
        return CachedBackend(inner, CallCache(Path(cache)))


def resolve_endpoint(doc: Mapping[str, Any], doc_path: Path, *, backend: Any = None,
                     cache: str | Path | bool | None = None,
                     backend_options: Mapping[str, Any] | None = None) -> Endpoint | None:
    """The endpoint a loaded artifact scores with: ``backend`` (the user's) or the artifact's, with
    the artifact's ``backend_options`` under the given ones; checked before any text is read."""
    if backend is None and not doc.get("backend"):
        return None
    spec = backend if backend is not None else doc["backend"]
    if isinstance(spec, str):
        _check_backend(spec, doc, doc_path, from_artifact=backend is None)
    given = dict(backend_options or {})
    if given and not hasattr(spec, "answer_logprobs"):
        BackendParams(spec=str(spec), **given)  # given ones must apply to the spec
    options = {**(doc.get("backend_options") or {}), **given}
    base = doc_path.parent
    if cache is None or cache is True:  # the run's cache: a link planted there must not lead outside
        inside_folder(base, "llm_calls.sqlite", path=base / "llm_calls.sqlite", field=None)
    trusted = backend is not None  # a spec read from the artifact is not the user's word: no key
    if "extra_body" not in given and sends_user_key(spec, trusted):
        options.pop("extra_body", None)  # nor do the artifact's request fields ride along with the key
    return Endpoint(spec, base, cache, options, trusted)


def _check_backend(spec: str, doc: Mapping[str, Any], doc_path: Path, *, from_artifact: bool) -> None:
    """The backend spec and the artifact's ``backend_options`` for it: a bad spec or option read from
    ``artifact.json`` names that file and the field."""
    options = doc.get("backend_options") or {}
    try:
        BackendParams.for_spec(spec, options)
    except (DataError, BackendError) as exc:
        name = (getattr(exc, "field", None) or "backend").removeprefix("backend.")
        in_options = name.split(".")[0] in options
        if not (from_artifact or in_options):
            raise
        where = f"backend_options.{name}" if in_options else "backend"
        raise DataError(getattr(exc, "message", str(exc)), path=doc_path, field=where) from None


def _check_local_model(spec: Any, doc_path: Path) -> None:
    """An artifact's ``local/<path>`` must name a GGUF file (an artifact naming ``/etc/passwd`` is bad
    input, not a failure of the embedded model): checked by its first bytes when the backend is first
    needed (scoring existing probes opens none), before anything loads the file."""
    if not isinstance(spec, str):
        return
    kind, model, _ = parse_backend_spec(spec)
    if kind != "local" or not model:
        return
    problem = gguf_problem(model)
    if problem is not None:
        raise DataError(f"the local model {model!r} is {problem}: give a .gguf file, or score with --backend",
                        path=doc_path, field="backend")


def describe_backend(backend: Any) -> str:
    """``kind/model[@url]`` of a backend object, its URL's credentials redacted."""
    inner = getattr(backend, "inner", backend)
    label = getattr(inner, "_label", None)
    if callable(label):
        return redact_text(label())
    return f"{getattr(inner, 'kind', type(inner).__name__)}/{getattr(inner, 'model', '')}".rstrip("/")


def sends_user_key(spec: Any, trusted: bool) -> bool:
    """Whether requests to ``spec`` carry the user's API key: a backend the user named, or the
    OpenAI API (its fixed host gets the environment's key whoever named it)."""
    if trusted or not isinstance(spec, str):
        return True
    try:
        return parse_backend_spec(spec)[0] == "openai"
    except BackendError:  # an unparsable spec fails when opened; until then assume the key goes
        return True
