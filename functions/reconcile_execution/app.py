"""Reconcile Execution: SQS (Step Functions status-change events) -> record and settle every end.

An execution that was stopped, timed out or crashed before Record Outcome gets its incident record
(aborted / failed), gives back its cap places and job claims, and a human is notified. A record
whose ledger or SNS call failed transiently is retried; a body that is not a status-change event is
logged and dropped (sqs_events.py).
"""

from datetime import timedelta

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import RECONCILED
from hyperpod_recovery.models.events import ExecutionStatusChangeEvent
from hyperpod_recovery.observability import metrics
from hyperpod_recovery.runtime import Dependencies
from hyperpod_recovery.sqs_events import sqs_event_handler
from hyperpod_recovery.steps.reconcile_execution import reconcile_execution


@sqs_event_handler(ExecutionStatusChangeEvent, what="a Step Functions status-change event")
def lambda_handler(event: ExecutionStatusChangeEvent, deps: Dependencies) -> None:
    settings = deps.settings
    detail = event.detail
    workflow = "job" if detail.stateMachineArn == settings.job_state_machine_arn else "node"
    result = reconcile_execution(
        detail,
        ledger=deps.ledger,
        notifier=deps.notifier,
        cluster=settings.cluster_name,
        job_state_machine_arn=settings.job_state_machine_arn,
        stack_dry_run=settings.dry_run,
        escalation_hold=deps.escalation_hold,
        execution_url=deps.execution_url(detail.name, workflow),
        now=deps.now(),
        log_seconds=deps.safety_policy.log_seconds,
        rejoin_deadline=timedelta(seconds=settings.rejoin_deadline_seconds),
        history=deps.history,
        orchestrator=settings.orchestrator,
        deployment=deps.deployment,
    )
    if result.action == "recorded":
        metrics.add_metric(name=RECONCILED[result.outcome or "failed"], unit=MetricUnit.Count, value=1)
