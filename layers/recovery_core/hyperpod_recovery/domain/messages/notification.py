"""The message a human reads at 2 a.m.: subject says cluster, outcome and nodes; the body says what
failed, what was done (with times), what happens next or what the human must do (domain/messages/advice.py,
from the record's facts), and where the execution is. Plain text: SNS e-mail, Slack and PagerDuty
integrations all show it as-is.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.messages.advice import Deployment, needs_a_human, next_steps
from hyperpod_recovery.domain.record.durations import offset_text
from hyperpod_recovery.domain.record.fate_words import job_label

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import IncidentRecord, TimelineEntry
    from hyperpod_recovery.vocabulary import Outcome

SUBJECT_LIMIT = 100  # SNS: at most 100 printable ASCII characters
BODY_LIMIT = 250_000  # SNS: at most 256 KiB of message (UTF-8), with room for its attributes
FAULT_EVENTS = ("fault detected", "job failed", "recovery requested")

HEADLINES: dict[Outcome, str] = {
    "recovered": "RECOVERED - no action needed.",
    "dry_run": "DRY RUN - nothing was changed.",
    "duplicate": "NO ACTION - this incident changed nothing (someone else had, or nothing needed to); no action needed.",
    "rejected": "REJECTED - nothing was changed.",
    "escalated": "ACTION NEEDED - the pipeline stopped and a human must decide.",
    "capped": "ACTION NEEDED - a safety limit stopped this recovery; nothing was changed.",
    "stale": "ACTION NEEDED - the signal was too old (or from the future) to act on; nothing was changed.",
    "aborted": "ACTION NEEDED - the recovery was stopped before it finished; what it released and what it kept are below.",
    "failed": "ACTION NEEDED - the recovery died before it finished; what it released and what it kept are below.",
    "recovered_by_itself": "NO ACTION - the hang cleared by itself before anything was done; no action needed.",
}


def headline(record: IncidentRecord) -> str:
    """Is a human needed: by the outcome, and by the jobs' facts (a job left with no copy needs one)."""
    if record.outcome in ("recovered", "duplicate") and needs_a_human(record):
        return f"{record.outcome.upper()} - but a job has no copy: ACTION NEEDED for it (below)."
    return HEADLINES[record.outcome]


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
    more = len(names) - 3 + record.nodes_omitted
    nodes = ", ".join(names[:3]) + (f" +{more}" if more > 0 else "")
    outcome = record.outcome.upper() if record.outcome in ("escalated", "capped") else record.outcome
    error = f" {record.error}" if record.error and record.outcome in ("escalated", "capped") else ""
    job = f" {_job_named(record)}" if record.job_id else ""
    text = f"[hyperpod-recovery] {record.cluster}: {outcome}{error}{job} {nodes}".rstrip()
    # SNS refuses a subject with characters outside printable ASCII.
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    return text if len(text) <= SUBJECT_LIMIT else text[: SUBJECT_LIMIT - 3] + "..."


def _job_named(record: IncidentRecord) -> str:
    """The incident's job as its orchestrator names it: ``job 1001`` on Slurm; on EKS the object a
    human finds with kubectl (``PyTorchJob kubeflow/llama``), never its uid alone when its name is known."""
    fate = next((f for f in record.job_fates if f.job == record.job_id), None)
    if fate is not None and fate.kind and fate.namespace and fate.name:
        return job_label(fate)
    return f"job {record.job_id}"


def _line(entry: TimelineEntry, start: datetime | None) -> str:
    return f"  {_clock(entry.at)}  {_since(start, entry.at):>8}  {entry.event}: {entry.detail}"


def notification(
    record: IncidentRecord, execution_url: str, *, hold_until: datetime | None = None, deployment: Deployment | None = None
) -> tuple[str, str]:
    """(subject, plain-text body), every line of it from the record."""
    start = record.detected_at
    failed = [e for e in record.timeline if e.event in FAULT_EVENTS]
    done = [e for e in record.timeline if e.event not in FAULT_EVENTS and not e.event.startswith("outcome:")]
    lines = [headline(record), record.summary, ""]
    lines.append("WHAT FAILED")
    named = ", ".join(record.hostnames or record.nodes) + (f" and {record.nodes_omitted} more node(s)" if record.nodes_omitted else "")
    lines += [f"  {_clock(e.at)}  {e.detail}" for e in failed] or [f"  {named or 'nothing named'}"]
    deployment = deployment or Deployment()
    tail = ["", "WHAT HAPPENS NEXT", *(f"  {step}" for step in next_steps(record, deployment, hold_until)), ""]
    if record.error:
        tail += [f"Error: {record.error}", f"Cause: {record.cause or '-'}", ""]
    if start is not None:
        tail.append(f"Fault to this message: {duration_text((record.recorded_at - start).total_seconds())}.")
    tail += [f"Incident: {record.incident_id} ({record.workflow} recovery, cluster {record.cluster})", f"Execution: {execution_url}"]
    # What was done is cut before anything else when a storm's message would pass SNS's limit.
    room = BODY_LIMIT - sum(len(line.encode()) + 1 for line in [*lines, *tail]) - 200
    steps = [_line(e, start) for e in done] or ["  nothing"]
    kept: list[str] = []
    for step in steps:
        room -= len(step.encode()) + 1
        if room < 0:
            break
        kept.append(step)
    if len(kept) < len(steps):
        kept.append(
            f"  ... {len(steps) - len(kept)} more step(s): the incident's timeline has them ({deployment.record(record.incident_id)})"
        )
    lines += ["", "WHAT WAS DONE (UTC, time since the fault)", *kept]
    return subject(record), "\n".join([*lines, *tail])
