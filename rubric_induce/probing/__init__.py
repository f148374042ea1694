"""Probing: every rubric asked about every example; the answer distributions form a
:class:`~rubric_induce.data.probes.ProbeTable`.

The stage's one entry point is :func:`probe` (:class:`ProbeParams`, keyword overrides allowed).
Planning, shards, batch calls and reports live in the submodules.
"""
from rubric_induce.probing.api import ProbeParams, probe

__all__ = ["ProbeParams", "probe"]
