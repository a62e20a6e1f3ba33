"""Record Outcome (also Escalate Incident, Record Duplicate, Record Rejection): decide the outcome,
save the incident record, release or hold the node locks, notify."""

from __future__ import annotations

from datetime import datetime, timedelta

from hyperpod_recovery.domain.durations import phase_durations
from hyperpod_recovery.domain.incident import submitted_here
from hyperpod_recovery.domain.notification import notification
from hyperpod_recovery.domain.outcome import build_incident_record, decide_outcome, summarize
from hyperpod_recovery.models.records import RecoveryLogEntry
from hyperpod_recovery.models.workflow import OutcomeResult, RecordOutcomeInput
from hyperpod_recovery.ports import Ledger, Notifier
from hyperpod_recovery.steps.settle import settle_holdings


def with_jobs_from_ledger(step: RecordOutcomeInput, ledger: Ledger) -> RecordOutcomeInput:
    """The step with the affected jobs' descriptions the workflow forgot (Forget Job Details) back
    from the ledger, where Find Newest Checkpoint put them."""
    jobs = step.state.jobs
    if jobs is None or jobs.result.jobs or not jobs.result.count:
        return step
    found = ledger.jobs_of(step.execution_name) or []
    restored = jobs.model_copy(update={"result": jobs.result.model_copy(update={"jobs": found})})
    return step.model_copy(update={"state": step.state.model_copy(update={"jobs": restored})})


def record_outcome(
    step: RecordOutcomeInput,
    *,
    ledger: Ledger,
    notifier: Notifier,
    cluster: str,
    escalation_hold: timedelta,
    execution_url: str,
    now: datetime,
    log_seconds: int = 7 * 86_400,
) -> OutcomeResult:
    step = with_jobs_from_ledger(step, ledger)
    outcome, error, cause = decide_outcome(step)
    result = OutcomeResult(
        at=now,
        incident_id=step.execution_name,
        outcome=outcome,
        error=error,
        cause=cause,
        summary=summarize(step.state, outcome, cause),
    )
    record = build_incident_record(step, result, cluster)
    ledger.save_incident(record)
    result = result.model_copy(update={"durations": phase_durations(record)})

    state = step.state
    safety = state.assessment.safety if state.assessment else None
    if safety is not None and safety.reserved and outcome in ("recovered", "escalated") and state.assessment:
        # It acted on these nodes: the breaker and repeat-offender windows count it (idempotent per
        # incident, and written before settling so a retried step cannot skip it).
        hostnames = [t.slurm_node for t in state.assessment.targets]
        ledger.log_recovery(
            cluster, RecoveryLogEntry(incident=step.execution_name, at=now, hostnames=hostnames, outcome=outcome), log_seconds
        )
    # Escalated nodes stay locked for a while so the automation does not loop on a node a human is
    # looking at; everything else is released at once.
    hold_until = now + escalation_hold if outcome == "escalated" else None
    resubmitted = {r.result.old_job_id: r.result.new_job_id for r in state.replies if r.result.new_job_id and submitted_here(r)}
    settle_holdings(ledger, step.execution_name, resubmitted=resubmitted, hold_locks_until=hold_until, now=now)
    if state.lock is None or not state.lock.locked or state.lock.dry_run:
        hold_until = None  # nothing was locked: the notification promises no hold

    subject, body = notification(record, execution_url, hold_until=hold_until)
    notifier.publish(subject, body, {"outcome": outcome, "cluster": cluster})
    return result
