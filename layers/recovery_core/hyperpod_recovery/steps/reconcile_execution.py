"""Reconcile Execution: every end of an execution is recorded and releases what it held.

Run for each FAILED, TIMED_OUT or ABORTED execution of the stack's two state machines, by two
paths: Step Functions' status-change event (through EventBridge and a queue), which is delivered
best effort, and the sweep of ended executions (steps/sweep_ended_executions.py), which lists them.
An execution that recorded its outcome (escalated, capped, rejected and stale ones end in a Fail
state by design) only has whatever it still holds settled, in case Record Outcome died half-way; one
that never recorded gets its record (outcome ``aborted`` or ``failed``), its holdings settled, and a
notification.

Idempotent, across both paths and their redeliveries: an end already settled is left as it is
without reading its history; a delivery that stopped half-way is finished by the next one from the
record; and the one notification is claimed in the ledger before it is sent, so two deliveries at
once never send it twice (the other is tried again, and sends it if the claim's holder never did).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.domain.messages.severity import severity_of
from hyperpod_recovery.domain.record.incident import resubmission, submitted_here
from hyperpod_recovery.domain.record.reconcile import UNRECORDED_ENDS, UNRECORDED_OUTCOMES, EndedExecution, unrecorded_end_record
from hyperpod_recovery.errors import NotificationInProgress
from hyperpod_recovery.models.events import ExecutionStatusDetail
from hyperpod_recovery.models.records import IncidentRecord, RecoveryLogEntry
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Effects, EndsSweep, ExecutionHistory, IncidentEffects, IncidentEnd, Notifier, ResubmissionsRead
from hyperpod_recovery.steps.record_outcome import NOTIFICATION
from hyperpod_recovery.steps.replace_nodes import REBOOT_MARK
from hyperpod_recovery.steps.settle import settle_holdings

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

    ledger: EndsSweep
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
    workflow: Literal["node", "job"] = "job" if detail.stateMachineArn == context.job_state_machine_arn else "node"
    return reconcile_execution(
        detail,
        ledger=context.ledger,
        notifier=context.notifier,
        cluster=context.cluster,
        job_state_machine_arn=context.job_state_machine_arn,
        stack_dry_run=context.stack_dry_run,
        escalation_hold=context.escalation_hold,
        execution_url=context.execution_url(detail.name, workflow),
        now=now,
        log_seconds=context.log_seconds,
        rejoin_deadline=context.rejoin_deadline,
        history=context.history,
        orchestrator=context.orchestrator,
        deployment=context.deployment,
    )


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
    held = ledger.holdings(name)
    if held is not None and not held.empty:
        return False
    page = ledger.effect_of(name, NOTIFICATION)
    if page is not None and not page.done:
        return False  # a page begun and not sent (by a Record step, or an earlier delivery): to send
    if record.outcome not in UNRECORDED_OUTCOMES or record.notified_at is not None:
        return True
    return page is not None and page.done


def reconcile_execution(
    detail: ExecutionStatusDetail,
    *,
    ledger: IncidentEnd,
    notifier: Notifier,
    cluster: str,
    job_state_machine_arn: str,
    stack_dry_run: bool,
    escalation_hold: timedelta,
    execution_url: str,
    now: datetime,
    log_seconds: int,
    rejoin_deadline: timedelta,
    history: ExecutionHistory | None = None,
    orchestrator: Literal["slurm", "eks"] = "slurm",
    deployment: Deployment | None = None,
) -> Reconciled:
    if detail.status not in UNRECORDED_ENDS:
        return Reconciled(detail.name, "ignored")
    record = ledger.get_incident(detail.name)
    if record is not None and _nothing_left(ledger, detail.name, record):
        return Reconciled(detail.name, "settled", record.outcome)
    if record is not None and record.outcome not in UNRECORDED_OUTCOMES:
        # It recorded its end; settle what a Record step that died half-way may have left.
        resubmitted = {r.job: r.new_job_id for r in record.resubmissions if r.new_job_id}
        hold = now + escalation_hold if record.outcome == "escalated" else None
        settle_holdings(ledger, detail.name, resubmitted=resubmitted, hold_locks_until=hold, now=now)
        # Its Record step began the page and stopped before it was done (it may have gone out:
        # sent, for a page must not be lost); an end recorded by an earlier version began none.
        begun = ledger.effect_of(detail.name, NOTIFICATION)
        if begun is not None and not begun.done:
            _notify_once(ledger, notifier, detail.name, record, execution_url, hold, deployment, now, stack_dry_run=stack_dry_run)
        return Reconciled(detail.name, "settled", record.outcome)

    # Where it stopped and what each phase took, from its history (best effort: None if unreadable).
    entered = history.states_entered(detail.executionArn) if history is not None else None
    # The jobs it resubmitted before it ended (at once, while its replacement provisioned): their
    # claims are completed, not given back, and the record names them for the human.
    read = history.resubmissions(detail.executionArn) if history is not None else ResubmissionsRead(seen=[], asked=set(), complete=False)
    done = [(s.plan, s.reply) for s in read.seen if submitted_here(s.reply)]
    resubmitted = {reply.result.old_job_id: reply.result.new_job_id for _, reply in done if reply.result.new_job_id}
    end = EndedExecution.from_event(
        detail,
        job_state_machine_arn,
        states_entered=entered,
        resubmissions=[
            (entry, reply.completed_at) for plan, reply in done if plan is not None and (entry := resubmission(plan, reply)) is not None
        ],
        stopped=read.stopped,
    )
    held = ledger.holdings(detail.name)
    # A claim whose resubmission was asked for and never seen answered may have been carried out
    # (the agent ran sbatch, the answer was lost with the execution): kept until it expires, never
    # given to a second restart. Without the whole history, every claim not known done is kept.
    answered = {s.reply.result.old_job_id for s in read.seen}
    claims = held.claims if held is not None else set()
    kept_claims = (claims & (read.asked - answered) if read.complete else claims) - set(resubmitted)
    marks = ledger.replacements_initiated(end.name)
    replaced = sorted(m for m in marks if not m.startswith(REBOOT_MARK))
    rebooted = sorted(m.removeprefix(REBOOT_MARK) for m in marks if m.startswith(REBOOT_MARK))
    # Nodes it replaced or rebooted and never saw back are still out of service: their places under
    # the cap stay counted for the rejoin deadline from its end, then expire (nobody watches them).
    in_flight = [] if end.saw_nodes_back else sorted(n for n in {*replaced, *rebooted} if held is not None and n in held.reserved)
    in_flight_until = (end.stopped_at or now) + rejoin_deadline
    # First delivery: the record is written before anything is settled, so a delivery that fails
    # half-way is finished by the next one from the record (which keeps when it was written).
    first = record is None
    recorded_at = now if record is None else record.recorded_at
    # Begun before the record is written, as Record Outcome does (its page and this are one effect).
    page = ledger.begin_effect(end.name, NOTIFICATION, now)
    # Its nodes are in an unknown state (half drained, half replaced): locked for a human, for a
    # bounded time, like an escalation.
    hold_until = recorded_at + escalation_hold if held is not None and held.locks else None
    if record is None:
        if held is not None and held.reserved:
            # It passed the safety policy and was acting: the breaker and repeat-offender windows count it.
            ledger.log_recovery(
                cluster, RecoveryLogEntry(incident=end.name, at=now, hostnames=sorted(held.hostnames), outcome=end.outcome), log_seconds
            )
        dry_run = stack_dry_run or bool(end.request is not None and end.request.dry_run)
        record = unrecorded_end_record(
            end,
            cluster,
            held,
            hold_until=hold_until,
            dry_run=dry_run,
            now=now,
            replaced=replaced,
            rebooted=rebooted,
            in_flight=in_flight,
            in_flight_until=in_flight_until,
            kept_claims=kept_claims,
            orchestrator=orchestrator,
            specs=ledger.jobs_of(end.name) or [],
            claim_of=lambda job_id: ledger.resubmission_claim(cluster, job_id),
        )
        ledger.save_incident(record)
    settle_holdings(
        ledger,
        end.name,
        resubmitted=resubmitted,
        hold_locks_until=hold_until,
        now=now,
        in_flight=in_flight,
        in_flight_until=in_flight_until,
        keep_claims=kept_claims,
    )
    # (``notified_at``: an end the previous version reconciled and notified)
    if not page.done and record.notified_at is None:
        _notify_once(ledger, notifier, end.name, record, execution_url, hold_until, deployment, now, stack_dry_run=stack_dry_run)
    if first:
        logger.warning(
            "execution ended without recording an outcome", extra={"incident": end.name, "status": end.status, "error": end.error}
        )
    return Reconciled(detail.name, "recorded" if first else "settled", record.outcome)
