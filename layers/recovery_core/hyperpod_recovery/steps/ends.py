"""Reconciling an ended execution, shared by the two steps that reach an end: Reconcile Execution
(its status-change event) and Sweep Ended Executions (Step Functions' listing). What the end's record
says and what it left behind is the domain's (domain/record/reconcile.py, left_behind.py); here the
ledger, the history and the notifier are read and written in the order that keeps it idempotent.

An execution that recorded its outcome only has whatever it still holds settled, in case Record
Outcome died half-way; one that never recorded gets its record (outcome ``aborted`` or ``failed``),
its holdings settled, and a notification. An end already settled is left as it is without reading
its history; a delivery that stopped half-way is finished by the next one from the record; and the
one notification is claimed in the ledger before it is sent, so two deliveries at once never send it
twice (the other is tried again, and sends it if the claim's holder never did).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.record.settled import nothing_left, recorded_end_hold
from hyperpod_recovery.errors import NotificationInProgress
from hyperpod_recovery.models.records import NOTIFICATION, IncidentRecord, RecoveryLogEntry
from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.settle import settle_holdings
from hyperpod_recovery.vocabulary import UNRECORDED_ENDS, UNRECORDED_OUTCOMES

if TYPE_CHECKING:
    from hyperpod_recovery.domain.messages.advice import Deployment
    from hyperpod_recovery.models.events import ExecutionStatusDetail
    from hyperpod_recovery.ports import Effects, ExecutionHistory, IncidentEffects, IncidentEnd, Notifier

# How long one delivery holds the right to send an end's notification: longer than the functions that
# send it may run (a holder past it has stopped), shorter than the reconcile queue hides a message (the
# redelivery of a holder that died finds the right free). tests/contract/test_time_budgets.py.
NOTICE_LEASE = timedelta(minutes=5)


@dataclass(frozen=True)
class Reconciled:
    incident: str
    action: Literal["recorded", "settled", "ignored"]
    outcome: str | None = None


@dataclass(frozen=True)
class EndContext:
    """What reconciling any end needs besides the end: the stack's ports and settings (both the
    event's path and the sweep's reconcile with the same)."""

    ledger: IncidentEnd
    notifier: Notifier
    history: ExecutionHistory
    cluster: str
    job_state_machine_arn: str
    stack_dry_run: bool
    escalation_hold: timedelta
    execution_url: Callable[[str, Literal["node", "job"]], str]  # (execution name, workflow) -> console link
    log_seconds: int
    rejoin_deadline: timedelta
    orchestrator: Literal["slurm", "eks"] = "slurm"
    deployment: Deployment | None = None


def reconcile_end(detail: ExecutionStatusDetail, context: EndContext, now: datetime) -> Reconciled:
    """Record, settle and notify one ended execution (the entry of both paths)."""
    if detail.status not in UNRECORDED_ENDS:
        return Reconciled(detail.name, "ignored")
    workflow: Literal["node", "job"] = "job" if detail.stateMachineArn == context.job_state_machine_arn else "node"
    url = context.execution_url(detail.name, workflow)
    record = context.ledger.get_incident(detail.name)
    if record is not None and _nothing_left(context.ledger, detail.name, record):
        return Reconciled(detail.name, "settled", record.outcome)
    if record is not None and record.outcome not in UNRECORDED_OUTCOMES:
        return _settle_recorded(detail.name, record, context, url, now)
    return _record_unrecorded(detail, record, context, url, now)


def _notify_once(
    ledger: Effects,
    notifier: Notifier,
    name: str,
    record: IncidentRecord,
    execution_url: str,
    hold_until: datetime | None,
    deployment: Deployment | None,
    now: datetime,
    *,
    stack_dry_run: bool,
) -> None:
    """The end's one page (the incident's notification effect, begun): sent by the delivery that
    holds its lease; another delivery at the same moment is tried again, and sends it only if the
    holder never did (its lease ran out)."""
    # The page's wording loads only when a page is sent: most ends were recorded and paged by their
    # own Record step, and a cold start for those reads the ledger only.
    from hyperpod_recovery.domain.messages.notification import notification
    from hyperpod_recovery.domain.messages.severity import severity_of

    if not ledger.claim_notification(name, now, NOTICE_LEASE):
        raise NotificationInProgress(f"{name}: another delivery of this end holds the right to notify")
    subject, body = notification(record, execution_url, hold_until=hold_until, deployment=deployment)
    attributes = {"outcome": record.outcome, "cluster": record.cluster, "workflow": record.workflow}
    notifier.publish(
        subject, body, attributes | {"severity": severity_of(record, stack_dry_run=stack_dry_run), "incident": record.incident_id}
    )
    ledger.finish_effect(name, NOTIFICATION, now)


def end_settled(ledger: IncidentEffects, name: str) -> bool:
    """Nothing is left to do for this end: it is recorded, it holds nothing, and (when it never
    recorded itself) its notification went out. A redelivered event or a sweep then reads no history."""
    record = ledger.get_incident(name)
    return record is not None and _nothing_left(ledger, name, record)


def _nothing_left(ledger: IncidentEffects, name: str, record: IncidentRecord) -> bool:
    return nothing_left(record, ledger.holdings(name), ledger.effect_of(name, NOTIFICATION))


def _settle_recorded(name: str, record: IncidentRecord, context: EndContext, url: str, now: datetime) -> Reconciled:
    """It recorded its end: settle what a Record step that died half-way may have left. A page its
    Record step began and did not finish may have gone out: sent, for a page must not be lost."""
    ledger = context.ledger
    done = {r.job: r.new_job_id for r in record.resubmissions if r.new_job_id}
    hold = recorded_end_hold(record, context.escalation_hold, now)
    settle_holdings(ledger, name, resubmitted=done, hold_locks_until=hold, now=now)
    begun = ledger.effect_of(name, NOTIFICATION)
    if begun is not None and not begun.done:
        _notify_once(ledger, context.notifier, name, record, url, hold, context.deployment, now, stack_dry_run=context.stack_dry_run)
    return Reconciled(name, "settled", record.outcome)


def _record_unrecorded(
    detail: ExecutionStatusDetail, record: IncidentRecord | None, context: EndContext, url: str, now: datetime
) -> Reconciled:
    """Its record, from its history (best effort) and the ledger; then its holdings settled, then its
    page. The record is written before anything is settled, so a delivery that fails half-way is
    finished by the next one from the record (which keeps when it was written)."""
    # Only an end that never recorded itself (a stopped, timed-out or crashed execution) needs the
    # record's domain: loaded here, not at every cold start (as _notify_once's wording).
    from hyperpod_recovery.domain.record.left_behind import (
        HistoryAnswers,
        counted_by_safety,
        kept_claims,
        nodes_left,
        resubmitted,
        unknown_state_hold,
    )
    from hyperpod_recovery.domain.record.reconcile import EndedExecution, unrecorded_end_record

    ledger, cluster = context.ledger, context.cluster
    entered = context.history.states_entered(detail.executionArn)
    read = context.history.resubmissions(detail.executionArn)
    done = resubmitted([(s.plan, s.reply) for s in read.seen])
    end = EndedExecution.from_event(
        detail, context.job_state_machine_arn, states_entered=entered, resubmissions=done.entries, stopped=read.stopped
    )
    held = ledger.holdings(detail.name)
    answers = HistoryAnswers(asked=read.asked, answered={s.reply.result.old_job_id for s in read.seen}, complete=read.complete)
    claims = kept_claims(held.claims if held is not None else set(), answers, done.jobs)
    nodes = nodes_left(end, held, ledger.replacements_initiated(end.name), context.rejoin_deadline, now)
    first = record is None
    # Begun before the record is written, as Record Outcome does (its page and this are one effect).
    page = ledger.begin_effect(end.name, NOTIFICATION, now)
    hold_until = unknown_state_hold(held, now if record is None else record.recorded_at, context.escalation_hold)
    if record is None:
        if counted_by_safety(held):
            assert held is not None
            entry = RecoveryLogEntry(incident=end.name, at=now, hostnames=sorted(held.hostnames), outcome=end.outcome)
            ledger.log_recovery(cluster, entry, context.log_seconds)
        record = unrecorded_end_record(
            end,
            cluster,
            held,
            hold_until=hold_until,
            dry_run=context.stack_dry_run or bool(end.request is not None and end.request.dry_run),
            now=now,
            replaced=nodes.replaced,
            rebooted=nodes.rebooted,
            in_flight=nodes.in_flight,
            in_flight_until=nodes.in_flight_until,
            kept_claims=claims,
            orchestrator=context.orchestrator,
            specs=ledger.jobs_of(end.name) or [],
            claim_of=lambda job_id: ledger.resubmission_claim(cluster, job_id),
        )
        ledger.save_incident(record)
    settle_holdings(
        ledger,
        end.name,
        resubmitted=done.jobs,
        hold_locks_until=hold_until,
        now=now,
        in_flight=nodes.in_flight,
        in_flight_until=nodes.in_flight_until,
        keep_claims=claims,
    )
    # (``notified_at``: an end the previous version reconciled and notified)
    if not page.done and record.notified_at is None:
        _notify_once(
            ledger, context.notifier, end.name, record, url, hold_until, context.deployment, now, stack_dry_run=context.stack_dry_run
        )
    if first:
        logger.warning(
            "execution ended without recording an outcome", extra={"incident": end.name, "status": end.status, "error": end.error}
        )
    return Reconciled(detail.name, "recorded" if first else "settled", record.outcome)
