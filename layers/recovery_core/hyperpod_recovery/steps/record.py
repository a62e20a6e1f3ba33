"""Record Outcome (also Escalate Incident, Record Duplicate, Record Rejection): decide the outcome,
save the incident record, release or hold the node locks, notify."""

from __future__ import annotations

from datetime import datetime, timedelta

from hyperpod_recovery.domain.durations import phase_durations
from hyperpod_recovery.domain.notification import notification
from hyperpod_recovery.domain.outcome import build_incident_record, decide_outcome, summarize
from hyperpod_recovery.models.records import RecoveryLogEntry
from hyperpod_recovery.models.workflow import OutcomeResult, RecordOutcomeInput
from hyperpod_recovery.steps.ports import Ledger, Notifier


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
    hold_until = None
    if state.lock is not None and state.lock.locked and not state.lock.dry_run:
        # Escalated nodes stay locked for a while so the automation does not loop on a node a
        # human is looking at; everything else is released at once.
        hold_until = now + escalation_hold if outcome == "escalated" else None
        ledger.release_locks(step.execution_name, cluster, state.lock.locked, hold_until)
    safety = state.assessment.safety if state.assessment else None
    if safety is not None and safety.reserved and not (state.request and state.request.dry_run):
        ledger.release_capacity(cluster, safety.reserved)
        if outcome in ("recovered", "escalated") and state.assessment:
            # It acted on these nodes: the breaker and repeat-offender windows count it.
            hostnames = [t.slurm_node for t in state.assessment.targets]
            ledger.log_recovery(
                cluster, RecoveryLogEntry(incident=step.execution_name, at=now, hostnames=hostnames, outcome=outcome), log_seconds
            )
    for reply in state.resubmissions:
        if not reply.dry_run and not reply.result.already_submitted and reply.result.new_job_id:
            ledger.complete_resubmission(cluster, reply.result.old_job_id, step.execution_name, reply.result.new_job_id)

    subject, body = notification(record, execution_url, hold_until=hold_until)
    notifier.publish(subject, body, {"outcome": outcome, "cluster": cluster})
    return result
