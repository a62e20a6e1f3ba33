"""The drill report: built from what a drill left behind, and printed (build.py)."""

from sandbox.report.build import (
    RUN_SHOWN,
    bounded,
    build_report,
    condensed_timeline,
    format_report,
    format_time_split,
    job_line,
    job_named,
    jobs_lines,
    kubernetes_names,
    notifications_sent,
    outcome_counts,
    parse_emf,
    resubmission_text,
)

__all__ = [
    "RUN_SHOWN",
    "bounded",
    "build_report",
    "condensed_timeline",
    "format_report",
    "format_time_split",
    "job_line",
    "job_named",
    "jobs_lines",
    "kubernetes_names",
    "notifications_sent",
    "outcome_counts",
    "parse_emf",
    "resubmission_text",
]
