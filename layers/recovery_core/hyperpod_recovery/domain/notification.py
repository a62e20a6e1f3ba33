"""The message a human reads at 2 a.m.: subject says cluster, outcome and nodes; the body says what
failed, what was done (with times), what happens next or what the human must do (domain/advice.py,
from the record's facts), and where the execution is. Plain text: SNS e-mail, Slack and PagerDuty
integrations all show it as-is.
"""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.advice import Deployment, next_steps
from hyperpod_recovery.domain.durations import offset_text
from hyperpod_recovery.models.records import IncidentRecord, TimelineEntry
from hyperpod_recovery.vocabulary import Outcome

SUBJECT_LIMIT = 100  # SNS: at most 100 printable ASCII characters
FAULT_EVENTS = ("fault detected", "job failed", "recovery requested")

HEADLINES: dict[Outcome, str] = {
    "recovered": "RECOVERED - no action needed.",
    "dry_run": "DRY RUN - nothing was changed.",
    "duplicate": "NO ACTION - this incident changed nothing (someone else had, or nothing needed to); no action needed.",
    "rejected": "REJECTED - nothing was changed.",
    "escalated": "ACTION NEEDED - the pipeline stopped and a human must decide.",
    "capped": "ACTION NEEDED - a safety limit stopped this recovery; nothing was changed.",
    "stale": "ACTION NEEDED - the signal was too old (or from the future) to act on; nothing was changed.",
    "aborted": "ACTION NEEDED - the recovery was stopped before it finished; what it held was released.",
    "failed": "ACTION NEEDED - the recovery died before it finished; what it held was released.",
}


def _clock(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S")


def _since(start: datetime | None, moment: datetime) -> str:
    return "" if start is None else "+" + offset_text((moment - start).total_seconds())


def duration_text(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def subject(record: IncidentRecord) -> str:
    """``[hyperpod-recovery] <cluster>: <OUTCOME>[ error][ job N] <nodes>``, cut to 100 characters."""
    names = record.hostnames or record.nodes
    nodes = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
    outcome = record.outcome.upper() if record.outcome in ("escalated", "capped") else record.outcome
    error = f" {record.error}" if record.error and record.outcome in ("escalated", "capped") else ""
    job = f" job {record.job_id}" if record.job_id else ""
    text = f"[hyperpod-recovery] {record.cluster}: {outcome}{error}{job} {nodes}".rstrip()
    # SNS refuses a subject with characters outside printable ASCII.
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    return text if len(text) <= SUBJECT_LIMIT else text[: SUBJECT_LIMIT - 3] + "..."


def _line(entry: TimelineEntry, start: datetime | None) -> str:
    return f"  {_clock(entry.at)}  {_since(start, entry.at):>8}  {entry.event}: {entry.detail}"


def notification(
    record: IncidentRecord, execution_url: str, *, hold_until: datetime | None = None, deployment: Deployment | None = None
) -> tuple[str, str]:
    """(subject, plain-text body), every line of it from the record."""
    start = record.detected_at
    failed = [e for e in record.timeline if e.event in FAULT_EVENTS]
    done = [e for e in record.timeline if e.event not in FAULT_EVENTS and not e.event.startswith("outcome:")]
    lines = [HEADLINES[record.outcome], record.summary, ""]
    lines.append("WHAT FAILED")
    lines += [f"  {_clock(e.at)}  {e.detail}" for e in failed] or [f"  {', '.join(record.hostnames or record.nodes) or 'nothing named'}"]
    lines += ["", "WHAT WAS DONE (UTC, time since the fault)"]
    lines += [_line(e, start) for e in done] or ["  nothing"]
    lines += ["", "WHAT HAPPENS NEXT", *(f"  {step}" for step in next_steps(record, deployment or Deployment(), hold_until)), ""]
    if record.error:
        lines += [f"Error: {record.error}", f"Cause: {record.cause or '-'}", ""]
    if start is not None:
        lines.append(f"Fault to this message: {duration_text((record.recorded_at - start).total_seconds())}.")
    lines += [f"Incident: {record.incident_id} ({record.workflow} recovery, cluster {record.cluster})", f"Execution: {execution_url}"]
    return subject(record), "\n".join(lines)
