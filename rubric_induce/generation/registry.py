"""The generator registry: each rubric generator (``rubicon``, ``spur``, ``autocalibrate``, ``contrastive``) is a
:class:`Generator` that its module registers with the :func:`generator` decorator; a module is
imported the first time its name is asked for (the same pattern as backends and hand-off formats)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_induce.core.params import Params
from rubric_induce.core.registry import Registry
from rubric_induce.core.task import TaskParams
from rubric_induce.data import RubricPool

__all__ = ["GENERATORS", "Generator", "generator", "GenerateResult", "GenerateContext", "POOL_FILE"]

POOL_FILE = "pool.jsonl"


@dataclass
class GenerateResult:
    """A generated pool, what it cost in replies, and the generator's own extras."""

    pool: RubricPool
    method: str
    n_examples: int
    n_included: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def stats(self) -> dict[str, Any]:
        return self.pool.manifest.get("stats") or {}

    def summary(self) -> dict[str, Any]:
        return {"method": self.method, "n_train": self.n_examples,
                "generated": len(self.pool) - self.n_included, "generation_stats": self.stats or None,
                "rejected": dict(self.stats.get("rejected") or {}),
                "included": self.n_included, "pool": len(self.pool),
                **({"generation_error": self.extra["generation_error"]} if "generation_error" in self.extra else {})}

    def save(self, out: str | Path) -> Path:
        """Write the pool as ``pool.jsonl`` in a run directory (or to ``out`` when it ends in .jsonl)."""
        out = Path(out)
        path = out if out.suffix == ".jsonl" else out / POOL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        self.pool.save(path)
        return path


@dataclass(frozen=True)
class GenerateContext:
    """What a generator is told about the run besides its own settings (its Params).

    Attributes:
        label: The label it learns; None: the method's default (``sat`` for RUBICON/SPUR, the
            aspect for AutoCalibrate).
        label_threshold: Makes a graded label binary (``label >= threshold`` is positive).
        domain: The domain text itself (RUBICON's DS; callers resolve ``@file``).
        seed: The run seed every call's seed derives from.
        fields: The example fields shown to the LLM, in order (default: all).
        progress: Draw progress bars.
        task: What is judged and what the label means; it words every prompt (None: the generic
            task).
    """

    label: str | None = None
    label_threshold: float | None = None
    domain: str | None = None
    seed: int = 0
    fields: Sequence[str] | None = None
    progress: bool = False
    task: TaskParams | None = None


@dataclass(frozen=True)
class Generator:
    """A registered generation method: its options class and the function that runs it."""

    name: str
    params: type[Params]
    run: Callable[..., GenerateResult]
    binary: bool  # learns from 0/1 labels (else a graded aspect)
    description: str = ""


GENERATORS: Registry[Generator] = Registry("generator")
GENERATORS.declare("rubicon", "rubric_induce.generation.rubicon")
GENERATORS.declare("spur", "rubric_induce.generation.rubicon")
GENERATORS.declare("autocalibrate", "rubric_induce.generation.autocalibrate")
GENERATORS.declare("contrastive", "rubric_induce.generation.contrastive")


def generator(name: str, params: type[Params], *, binary: bool, description: str = ""
              ) -> Callable[[Callable[..., GenerateResult]], Callable[..., GenerateResult]]:
    """Register the decorated run function ``(examples, backend, opts, ctx: GenerateContext) ->
    GenerateResult`` as generator ``name`` with its options class."""
    def add(run: Callable[..., GenerateResult]) -> Callable[..., GenerateResult]:
        GENERATORS.register(name, Generator(name, params, run, binary, description))
        return run
    return add
