"""Reconcile Execution: every end of an execution is recorded and releases what it held.

Run for each FAILED, TIMED_OUT or ABORTED execution of the stack's two state machines, by two
paths: Step Functions' status-change event (through EventBridge and a queue), which is delivered
best effort, and the sweep of ended executions (steps/sweep_ended_executions.py), which lists them.
Both reconcile through steps/ends.py, idempotent across both paths and their redeliveries.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.steps.ends import NOTICE_LEASE, EndContext, Reconciled, end_settled, reconcile_end

if TYPE_CHECKING:
    from hyperpod_recovery.domain.messages.advice import Deployment
    from hyperpod_recovery.models.events import ExecutionStatusDetail
    from hyperpod_recovery.ports import ExecutionHistory, IncidentEnd, Notifier

__all__ = ["NOTICE_LEASE", "EndContext", "Reconciled", "end_settled", "reconcile_end", "reconcile_execution"]


def reconcile_execution(
    detail: ExecutionStatusDetail,
    *,
    ledger: IncidentEnd,
    notifier: Notifier,
    history: ExecutionHistory,
    cluster: str,
    job_state_machine_arn: str,
    stack_dry_run: bool,
    escalation_hold: timedelta,
    execution_url: str,
    now: datetime,
    log_seconds: int,
    rejoin_deadline: timedelta,
    orchestrator: Literal["slurm", "eks"] = "slurm",
    deployment: Deployment | None = None,
) -> Reconciled:
    """One end, from its event (the handler's path, reconcile_end, takes the stack's EndContext)."""
    context = EndContext(
        ledger=ledger,
        notifier=notifier,
        history=history,
        cluster=cluster,
        job_state_machine_arn=job_state_machine_arn,
        stack_dry_run=stack_dry_run,
        escalation_hold=escalation_hold,
        execution_url=lambda _name, _workflow: execution_url,
        log_seconds=log_seconds,
        rejoin_deadline=rejoin_deadline,
        orchestrator=orchestrator,
        deployment=deployment,
    )
    return reconcile_end(detail, context, now)
