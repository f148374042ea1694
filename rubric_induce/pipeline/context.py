"""What every pipeline stage can see: the config, the run directory, the data, the split and the LLM.

Expensive things (the examples, the backend, which may load a model) are opened on first use,
so resuming a run whose LLM stages are finished never loads the model.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends.cache import CachedBackend, CallCache
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import suggest
from rubric_induce.data import Example
from rubric_induce.data.labels import is_binary, labels_from_examples
from rubric_induce.data.pair_examples import order_examples, pair_examples, pairs_in
from rubric_induce.data.params import load_examples, load_pairs
from rubric_induce.pipeline.config import RunConfig
from rubric_induce.pipeline.folder import cache_path_for
from rubric_induce.selection.split import group_split

__all__ = ["RunContext"]


@dataclass
class RunContext:
    config: RunConfig
    out: Path
    progress: bool = False
    echo: Callable[[str], None] = print
    backend_override: Any = None  # a Backend object (tests, API users); else config.backend.spec
    stage_fingerprint: str | None = None  # of the stage now running (the runner sets it): resumable stages
    _backend: Any = field(default=None, init=False, repr=False)
    _cache: Any = field(default=None, init=False, repr=False)
    _extra: list = field(default_factory=list, init=False, repr=False)

    # -- data --------------------------------------------------------------------------------
    @cached_property
    def examples(self) -> list[Example]:
        d = self.config.data
        if self.pairwise:  # each pair's two responses, <pair>/A and <pair>/B (see data.pair_examples)

            return pair_examples(self.pairs, d.label)
        examples = load_examples(d, self.config.resolve, limit=self.config.run.limit, source=self.config.source)
        missing = [e.id for e in examples if d.label not in e.labels]
        if missing:
            where = d.examples or d.dataset
            mapped = (f", or name its column: [data.mapping] labels = {{{d.label} = \"COLUMN\"}}"
                      if d.examples else "")

            have = sorted({q for e in examples for q in e.labels})
            raise DataError(f"{len(missing)} of {len(examples)} examples lack label {d.label!r}"
                            f"{suggest(d.label, have)} (e.g. {missing[0]!r}); set data.label to one of "
                            f"{have}{mapped}", path=where, field=f"labels.{d.label}")
        return examples

    @property
    def pairwise(self) -> bool:
        """Whether the run reads pairs (``[data] kind = "pairwise"``)."""
        return self.config.data.kind == "pairwise"

    @cached_property
    def pairs(self) -> list:
        """The pairs of a pairwise run (``run.limit``: the first N pairs); [] for a pointwise run."""
        if not self.pairwise:
            return []

        return load_pairs(self.config.data, self.config.resolve, limit=self.config.run.limit,
                          source=self.config.source)

    @property
    def probe_examples(self) -> list[Example]:
        """What the probe stage probes: the examples, and with ``[probe] pairwise = true`` (a pairwise
        run) each pair's two order examples after them (``<pair>/AB``, ``<pair>/BA``; see
        :mod:`rubric_induce.probing.pairwise`)."""
        if not (self.pairwise and self.config.probe.pairwise):
            return self.examples

        return [*self.examples, *order_examples(self.pairs)]

    @property
    def train_pairs(self) -> list:
        return pairs_in(self.pairs, self.train)

    @property
    def test_pairs(self) -> list:
        return pairs_in(self.pairs, self.test)

    @cached_property
    def data_hash(self) -> str:
        h = hashlib.sha256()
        for pair in self.pairs:  # a pairwise run: the preferences (ties, judges) as read
            h.update(json.dumps(pair.to_dict(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
        for ex in self.examples:
            h.update(json.dumps(ex.to_dict(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()

    @cached_property
    def y(self) -> np.ndarray:
        """The selection label of every example (thresholded when data.label_threshold is set)."""
        return labels_from_examples(self.examples, self.config.data.label, self.config.data.label_threshold)

    @cached_property
    def binary(self) -> bool:
        return is_binary(self.y)

    @cached_property
    def split(self) -> tuple[np.ndarray, np.ndarray]:
        train, test = group_split(self.examples, self.y if self.binary else None,
                                  test_size=self.config.run.test_size, random_state=self.config.run.seed)
        if len(train) == 0:
            raise DataError("the split left no training examples; lower run.test_size", field="run.test_size")
        return train, test

    @property
    def train(self) -> list[Example]:
        return [self.examples[i] for i in self.split[0]]

    @property
    def test(self) -> list[Example]:
        return [self.examples[i] for i in self.split[1]]

    # -- LLM ---------------------------------------------------------------------------------
    @property
    def backend_opened(self) -> bool:
        return self._backend is not None

    @property
    def backend(self):
        """The configured backend behind the run's SQLite call cache (opened on first use)."""
        if self._backend is None:
            inner = self.backend_override or self.config.backend.open()

            self._cache = CallCache(cache_path_for(self.config.backend.cache, self.out))
            self._backend = CachedBackend(inner, self._cache)
        return self._backend

    def open_extra_backend(self, spec: str):
        """Another backend (e.g. dedup's LLM judge) behind the run's call cache; closed with the run.

        The [backend] options travel along where they apply to its kind."""
        _ = self.backend  # opens the run's cache
        # the run's tally: its calls, tokens and faults count in the stage that made them
        extra = CachedBackend(self.config.backend.open(spec), self._cache, tally=self._backend.tally)
        self._extra.append(extra)
        return extra

    def usage(self) -> dict[str, Any]:
        return self._backend.tally.to_dict() if self._backend is not None else {}

    def close(self) -> None:
        for extra in self._extra:
            extra.close()
        self._extra.clear()
        if self._backend is not None:
            if self.backend_override is None:
                self._backend.close()
            self._cache.close()
            self._backend = self._cache = None
