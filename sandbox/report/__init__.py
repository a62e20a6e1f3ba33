"""The drill report: built from what a drill left behind (build.py; per job: jobs.py; the time
split: time_split.py), printed as a terminal shows it (text.py). It reads a drill through
source.py's DrillSource, not the runner that writes it."""

from sandbox.report.build import (
    REPORT_VERSION,
    build_report,
    compact_size,
    emitted_metrics,
    largest_payload,
    ledger_at_end,
    max_virtual,
    message_contradictions,
    notifications_sent,
    parse_emf,
    secrets_kept,
)
from sandbox.report.source import DrillSource
from sandbox.report.text import (
    DETAIL_LIMIT,
    JOBS_SHOWN,
    RUN_SHOWN,
    bounded,
    condensed_timeline,
    copy_lines,
    format_report,
    hang_verdicts,
    job_line,
    job_named,
    jobs_block,
    jobs_lines,
    kubernetes_names,
    outcome_counts,
    resubmission_text,
    verdict_lines,
)
from sandbox.report.time_split import format_time_split

__all__ = [
    "DETAIL_LIMIT",
    "JOBS_SHOWN",
    "REPORT_VERSION",
    "RUN_SHOWN",
    "DrillSource",
    "bounded",
    "build_report",
    "compact_size",
    "condensed_timeline",
    "copy_lines",
    "emitted_metrics",
    "format_report",
    "format_time_split",
    "hang_verdicts",
    "job_line",
    "job_named",
    "jobs_block",
    "jobs_lines",
    "kubernetes_names",
    "largest_payload",
    "ledger_at_end",
    "max_virtual",
    "message_contradictions",
    "notifications_sent",
    "outcome_counts",
    "parse_emf",
    "resubmission_text",
    "secrets_kept",
    "verdict_lines",
]
