"""Semantic de-duplication of a rubric pool with sentence embeddings, plus an optional LLM pass.

Grouping is **greedy leader clustering in pool order** over the cosine matrix of the rubric texts
(all-MiniLM-L6-v2 by default, see :mod:`rubric_induce.core.embeddings`):

* rubrics are compared only within the same (polarity, aspect): a SAT and a DSAT rubric with
  near-identical wording mean opposite things and are never merged;
* walking the pool in order, a rubric joins the *most similar* representative seen so far when
  that cosine is ``>= threshold`` (ties go to the earliest), otherwise it becomes a representative;
* so the **representative of a group is its first rubric in pool order** (the earliest generated),
  and every member is within ``threshold`` of its representative (no chaining of A~B~C into one
  group when A and C are far apart, as connected components would do).

Cosines are rounded to 6 decimals before comparing, so the grouping is deterministic for a given
pool, model and threshold. With ``llm_judge_backend``, pairs of representatives whose cosine lies
in the ``borderline`` band ``[lo, hi)`` (``hi`` defaults to the threshold) are shown to the LLM
(``prompts/dedup_judge.txt``), most similar first; a "same" verdict merges the later group into the
earlier one. The markdown report lists every merged group with its similarities and reasons.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rubric_induce.backends import parse_backend_spec
from rubric_induce.backends.base import Backend
from rubric_induce.backends.structured import GenerationStats, ask_json, derive_seed
from rubric_induce.core.embeddings import SentenceEmbedder, default_embedder
from rubric_induce.core.errors import BackendError, DataError, ReplyParseError, RubricInduceError
from rubric_induce.core.mdtext import md_text
from rubric_induce.core.params import Params, param, resolve_params
from rubric_induce.core.templates import load_prompt
from rubric_induce.data.jsonl import atomic_write_text
from rubric_induce.data.model import Rubric, RubricPool

__all__ = ["DedupMember", "DedupGroup", "DedupResult", "DedupParams", "dedup",
           "group_by_similarity", "Embedder", "DEDUP_POOL_FILE", "DEDUP_REPORT_FILE"]

DEDUP_POOL_FILE = "pool.dedup.jsonl"
DEDUP_REPORT_FILE = "dedup_report.md"

log = logging.getLogger("rubric_induce.dedup.api")


class Embedder(Protocol):
    """Anything with ``encode(texts) -> unit-norm array`` (e.g. :class:`~.embeddings.SentenceEmbedder`)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class DedupMember:
    """A rubric merged into a group: its cosine to the representative and why it was merged."""

    rubric: Rubric
    similarity: float
    via: str  # "embedding" or "llm"
    reason: str | None = None


@dataclass
class DedupGroup:
    """One representative kept, and the rubrics merged into it (empty when it had no duplicate)."""

    representative: Rubric
    members: list[DedupMember] = field(default_factory=list)

    @property
    def size(self) -> int:
        return 1 + len(self.members)


@dataclass
class DedupResult:
    """The de-duplicated pool, every group (in pool order), the markdown report and counters."""

    pool: RubricPool
    groups: list[DedupGroup]
    report_markdown: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def merged_groups(self) -> list[DedupGroup]:
        return [g for g in self.groups if g.members]

    def summary(self) -> dict[str, Any]:
        n_before = self.info.get("n_before", len(self.pool))
        return {"enabled": bool(self.info.get("enabled", True)), "kept": len(self.pool),
                "merged": n_before - len(self.pool)}

    def save(self, out: str | Path, report: str | Path | None = None) -> Path:
        """Write the pool (``pool.dedup.jsonl`` in a run directory, or ``out`` itself when it ends
        in .jsonl) and, when de-duplication ran, the markdown report beside it."""
        out = Path(out)
        path = out if out.suffix == ".jsonl" else out / DEDUP_POOL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        self.pool.save(path)
        if self.report_markdown:
            if report is None:
                report = (path.with_name(path.name.removesuffix(".jsonl") + ".report.md")
                          if out.suffix == ".jsonl" else out / DEDUP_REPORT_FILE)
            atomic_write_text(Path(report), self.report_markdown)
        return path


@dataclass(frozen=True)
class DedupParams(Params):
    """The dedup stage: embedding threshold, model, and the optional LLM pass on borderline pairs."""

    section = "dedup"
    enabled: bool = param(True, help="Merge near-duplicate rubrics (off: keep the pool as is).", hidden=True)
    threshold: float = param(0.85, gt=0.0, le=1.0,
                             help="Cosine similarity at or above which a rubric is merged into an earlier one.")
    model: str | None = param(None, help="sentence-transformers model directory (default: packaged all-MiniLM-L6-v2).")
    judge: str | None = param(None, cli="--judge-backend",
                              help="Also ask this LLM backend about borderline pairs (e.g. local, openai/gpt-4o-mini).")
    borderline: float = param(0.75, ge=0.0, le=1.0,
                              help="Lower cosine of the band [borderline, threshold) sent to the LLM judge.")
    max_judge_pairs: int = param(200, ge=0, help="At most this many pairs go to the LLM judge.")

    def check(self) -> None:
        if self.judge is not None:
            try:
                parse_backend_spec(self.judge)
            except BackendError as exc:
                raise DataError(str(exc), field="dedup.judge") from None
        if self.borderline > self.threshold:
            raise DataError(f"must be at most dedup.threshold ({self.threshold:g}), got {self.borderline:g}",
                            field="dedup.borderline")


def dedup(pool: RubricPool | Sequence[Rubric], params: DedupParams | None = None, *,
          embedder: Embedder | None = None, judge_backend: Backend | None = None, seed: int = 0,
          **overrides: Any) -> DedupResult:
    """The dedup stage: merge near-duplicates as ``params`` say (or pass through).

    Args:
        pool: The generated rubrics.
        params: The stage's settings (default: :class:`DedupParams` defaults).
        embedder: The sentence embedder (default: ``params.model``).
        judge_backend: The opened backend for ``params.judge`` (callers own the cache it uses).
        seed: The seed of the judge's calls.
        **overrides: Fields of ``params``, checked like a config.

    Returns:
        The de-duplicated pool, the merged groups and the markdown report.
    """
    params = resolve_params(DedupParams, params, overrides)
    src = pool if isinstance(pool, RubricPool) else RubricPool(list(pool))
    if not params.enabled or len(src) < 2:
        return DedupResult(RubricPool(list(src), dict(src.manifest)), [], "",
                           {"enabled": params.enabled, "n_before": len(src), "n_after": len(src)})
    if embedder is None and params.model:
        embedder = SentenceEmbedder(params.model)
    res = _deduplicate(src, params.threshold, embedder=embedder, llm_judge_backend=judge_backend,
                      borderline=(params.borderline, None), max_judge_pairs=params.max_judge_pairs, seed=seed)
    res.info.setdefault("enabled", True)
    return res


def group_by_similarity(sim: np.ndarray, threshold: float) -> tuple[list[int], np.ndarray]:
    """Greedy leader clustering of items ``0..n-1`` in order on a cosine matrix.

    Returns the representatives (item indices, in order) and, per item, the index of its
    representative (itself for representatives).
    """
    n = sim.shape[0]
    sim = np.round(sim, 6)
    leader = np.arange(n)
    reps: list[int] = []
    for i in range(n):
        if reps:
            s = sim[i, reps]
            j = int(np.argmax(s))  # first maximum: ties go to the earliest representative
            if s[j] >= threshold:
                leader[i] = reps[j]
                continue
        reps.append(i)
    return reps, leader


def _bucket_key(r: Rubric) -> tuple[str, str]:
    return (r.polarity or "", r.aspect or "")


def _judge(backend: Backend, a: Rubric, b: Rubric, *, seed: int, stats) -> tuple[bool, str] | None:
    schema = {"type": "object", "required": ["same", "reason"],
              "properties": {"same": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 200}}}

    def parse(value: Any) -> tuple[bool, str]:
        if not isinstance(value, dict) or not isinstance(value.get("same"), bool):
            raise ReplyParseError("reply needs a boolean 'same'")
        return value["same"], str(value.get("reason", "")).strip()

    messages = load_prompt("dedup_judge").render(a=a.text, b=b.text)
    return ask_json(backend, messages, schema, parse, step="dedup_judge", stats=stats, seed=seed,
                    temperature=0.0, max_tokens=120, context={"a": a.id, "b": b.id})


def _deduplicate(
    pool: RubricPool | Sequence[Rubric],
    threshold: float = 0.85,
    embedder: Embedder | None = None,
    llm_judge_backend: Backend | None = None,
    borderline: tuple[float, float | None] = (0.75, None),
    *,
    max_judge_pairs: int = 200,
    seed: int = 0,
) -> DedupResult:
    """Merge near-duplicate rubrics; keep one representative per group (see the module docstring).

    ``threshold``: cosine at or above which a rubric joins a representative. ``embedder``: an
    object with ``encode`` (default: the packaged all-MiniLM-L6-v2). ``llm_judge_backend``: asks
    an LLM about representative pairs with cosine in ``borderline = (lo, hi)`` (``hi`` None =
    ``threshold``), at most ``max_judge_pairs`` of them.
    """
    if not 0.0 < threshold <= 1.0:
        raise RubricInduceError(f"threshold must be in (0, 1], got {threshold}")
    src = pool if isinstance(pool, RubricPool) else RubricPool(list(pool))
    rubrics = list(src.rubrics)
    if not rubrics:
        raise RubricInduceError("nothing to de-duplicate: the pool is empty")
    if embedder is None:
        embedder = default_embedder()
    emb = _unit_embeddings(embedder, rubrics)
    leader, sims = _group_in_buckets(rubrics, emb, threshold)
    via: dict[int, tuple[str, str | None]] = {i: ("embedding", None) for i in range(len(rubrics))
                                               if leader[i] != i}
    judge_info: dict[str, Any] = {}
    if llm_judge_backend is not None:
        lo, hi = borderline
        hi = threshold if hi is None else hi
        if not lo < hi:
            raise RubricInduceError(f"borderline band must have lo < hi, got ({lo}, {hi})")
        merger = _LLMMerger(llm_judge_backend, rubrics, leader, via, seed)
        judge_info = merger.merge(_borderline_pairs(sims, leader, lo, hi), (lo, hi), max_judge_pairs)

    ordered = _groups(rubrics, emb, leader, via)
    kept = []
    for g in ordered:
        rep = g.representative
        if g.members:
            rep = rep.with_provenance(dedup_merged=[m.rubric.id for m in g.members])
        kept.append(rep)
    ident = getattr(embedder, "identity", None)
    info = {"threshold": threshold, "embedder": ident() if callable(ident) else {"model": type(embedder).__name__},
            "grouping": "greedy leader in pool order within (polarity, aspect); representative = first in pool order",
            "n_before": len(rubrics), "n_after": len(kept), "n_merged_groups": sum(1 for g in ordered if g.members)}
    if judge_info:
        info["llm_judge"] = judge_info
    out = RubricPool(kept, {**src.manifest, "dedup": info})
    result = DedupResult(out, ordered, "", info)
    result.report_markdown = _report(result)
    log.info("dedup: %d -> %d rubrics (threshold %.2f)", len(rubrics), len(kept), threshold)
    return result


def _unit_embeddings(embedder: Embedder, rubrics: Sequence[Rubric]) -> np.ndarray:
    """The rubric texts' embeddings scaled to unit length (a zero vector stays zero)."""
    emb = np.asarray(embedder.encode([r.text for r in rubrics]), dtype=np.float32)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    return emb / np.where(norms > 0, norms, 1.0)


def _group_in_buckets(rubrics: Sequence[Rubric], emb: np.ndarray, threshold: float
                      ) -> tuple[np.ndarray, dict[tuple[str, str], tuple[list[int], np.ndarray]]]:
    """Each rubric's leader (greedy, in pool order, within its (polarity, aspect) bucket) and each
    bucket's members with their rounded cosine matrix."""
    buckets: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rubrics):
        buckets.setdefault(_bucket_key(r), []).append(i)
    leader = np.arange(len(rubrics))
    sims: dict[tuple[str, str], tuple[list[int], np.ndarray]] = {}
    for key, idx in buckets.items():
        e = emb[idx]
        s = np.round(e @ e.T, 6)
        _reps_local, lead_local = group_by_similarity(s, threshold)
        for pos, g in enumerate(idx):
            leader[g] = idx[int(lead_local[pos])]
        sims[key] = (idx, s)
    return leader, sims


def _borderline_pairs(sims: Mapping[tuple[str, str], tuple[list[int], np.ndarray]], leader: np.ndarray,
                      lo: float, hi: float) -> list[tuple[float, int, int]]:
    """``(-cosine, a, b)`` for representative pairs of one bucket with cosine in ``[lo, hi)``, closest first."""
    pairs = []
    for idx, s in sims.values():
        reps = [p for p, g in enumerate(idx) if leader[g] == g]
        for a_pos, a in enumerate(reps):
            for b in reps[a_pos + 1:]:
                v = float(s[a, b])
                if lo <= v < hi:
                    pairs.append((-v, idx[a], idx[b]))
    pairs.sort()
    return pairs


@dataclass
class _LLMMerger:
    """Asks the LLM judge about borderline pairs and merges the groups it calls the same
    (``leader`` and ``via`` are updated in place)."""

    backend: Backend
    rubrics: Sequence[Rubric]
    leader: np.ndarray
    via: dict[int, tuple[str, str | None]]
    seed: int

    def merge(self, pairs: list[tuple[float, int, int]], band: tuple[float, float], max_pairs: int) -> dict[str, Any]:
        rubrics, leader, jstats = self.rubrics, self.leader, GenerationStats()
        judged = merged = 0
        for neg_v, a, b in pairs[:max_pairs]:
            if leader[a] != a or leader[b] != b:
                continue  # one side was merged already
            verdict = _judge(self.backend, rubrics[a], rubrics[b], seed=derive_seed(self.seed, "dedup", a, b),
                             stats=jstats)
            judged += 1
            if verdict is None or not verdict[0]:
                continue
            merged += 1
            for m in range(len(rubrics)):
                if leader[m] == b:
                    leader[m] = a
                    self.via[m] = ("llm", f"LLM judged rubric {rubrics[b].id} (cos {-neg_v:.3f} to {rubrics[a].id}) "
                                          f"the same: {verdict[1]}" if m == b else
                                   f"merged with its group {rubrics[b].id}, which the LLM judged the same")
        return {"band": list(band), "candidate_pairs": len(pairs), "judged": judged, "merged": merged,
                "model": f"{self.backend.kind}/{self.backend.model}", "stats": jstats.to_dict()}


def _groups(rubrics: Sequence[Rubric], emb: np.ndarray, leader: np.ndarray,
            via: Mapping[int, tuple[str, str | None]]) -> list[DedupGroup]:
    """One group per representative, in pool order, with its members and their cosine to it."""
    groups: dict[int, DedupGroup] = {}
    for i, r in enumerate(rubrics):
        rep = int(leader[i])
        if rep == i:
            groups.setdefault(i, DedupGroup(r))
        else:
            how, reason = via[i]
            cos = float(np.round(float(emb[i] @ emb[rep]), 6))
            groups.setdefault(rep, DedupGroup(rubrics[rep])).members.append(DedupMember(r, cos, how, reason))
    return [groups[i] for i in sorted(groups)]


def _md(text: str) -> str:
    """Rubric texts and judge reasons as Markdown text: HTML, links, ``|`` and newlines escaped."""
    return md_text(text)


def _report(res: DedupResult) -> str:
    info = res.info
    lines = ["# De-duplication report", "",
             f"- rubrics before: {info['n_before']}, after: {info['n_after']} "
             f"({info['n_before'] - info['n_after']} merged into {info['n_merged_groups']} groups)",
             f"- embedding model: `{info['embedder'].get('model')}`; cosine threshold: {info['threshold']}",
             f"- grouping: {info['grouping']}; only rubrics of the same polarity and aspect are compared"]
    judge = info.get("llm_judge")
    if judge:
        lines.append(f"- LLM judge `{judge['model']}` on representative pairs with cosine in "
                     f"[{judge['band'][0]}, {judge['band'][1]}): {judge['candidate_pairs']} candidates, "
                     f"{judge['judged']} judged, {judge['merged']} merged, "
                     f"{judge['stats']['n_failures']} unparseable")
    lines.append("")
    merged = res.merged_groups
    if not merged:
        lines.append("No rubrics were merged.")
    for k, g in enumerate(merged, 1):
        rep = g.representative
        tag = rep.polarity or rep.aspect or "-"
        lines += [f"## Group {k} ({tag}): kept `{rep.id}`", "", f"> {_md(rep.text)}", "",
                  "| merged rubric | id | cosine to kept | why |", "|---|---|---|---|"]
        for m in g.members:
            why = (f"cosine {m.similarity:.3f} >= {info['threshold']}" if m.via == "embedding"
                   else (m.reason or "LLM judge"))
            lines.append(f"| {_md(m.rubric.text)} | `{m.rubric.id}` | {m.similarity:.3f} | {_md(why)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
