"""De-duplication of a rubric pool: embedding similarity, optionally an LLM judge on borderline pairs.

The stage's one entry point is :func:`dedup` (:class:`DedupParams`, keyword overrides allowed).
"""
from rubric_induce.dedup.api import DedupParams, DedupResult, dedup

__all__ = ["DedupParams", "DedupResult", "dedup"]
