"""Reporting: a run directory as ``report.md`` with figures, the run summary and the viewer.

The stage's one entry point is :func:`report` (:class:`ReportParams`, keyword overrides allowed).
"""
from rubric_induce.reporting.report import ReportParams, report

__all__ = ["ReportParams", "report"]
