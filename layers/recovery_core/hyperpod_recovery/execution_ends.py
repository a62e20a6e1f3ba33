"""What the two handlers that reconcile ended executions share (Reconcile Execution, fed by the
status-change event; Sweep Ended Executions, on a schedule): the stack's ports and settings a
reconcile needs, and the count of the ends they record. Kept apart from runtime.py, like
sqs_events.py: only these two use it."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.domain.policy.limits import execution_time_bound_seconds
from hyperpod_recovery.metric_names import RECONCILED
from hyperpod_recovery.observability import metrics
from hyperpod_recovery.steps.ends import EndContext, Reconciled

if TYPE_CHECKING:
    from hyperpod_recovery.runtime import Dependencies


def end_context(deps: Dependencies) -> EndContext:
    settings = deps.settings
    return EndContext(
        ledger=deps.ledger,
        notifier=deps.notifier,
        history=deps.history,
        cluster=settings.cluster_name,
        job_state_machine_arn=settings.job_state_machine_arn,
        stack_dry_run=settings.dry_run,
        escalation_hold=deps.escalation_hold,
        execution_url=deps.execution_url,
        log_seconds=deps.safety_policy.log_seconds,
        rejoin_deadline=timedelta(seconds=settings.rejoin_deadline_seconds),
        orchestrator=settings.orchestrator,
        deployment=deps.deployment,
    )


def count_recorded(result: Reconciled) -> None:
    """An end recorded here (not by its own Record step) is counted by outcome."""
    if result.action == "recorded":
        metrics.add_metric(name=RECONCILED[result.outcome or "failed"], unit=MetricUnit.Count, value=1)


def longest_run(deps: Dependencies) -> timedelta:
    """The longest an execution of either workflow can run under this stack's settings."""
    settings = deps.settings
    bound = execution_time_bound_seconds(
        settings.reboot_deadline_seconds,
        settings.rejoin_deadline_seconds,
        settings.job_restart_backoffs[1],
        settings.elastic_grow_back_grace_seconds,
    )
    return timedelta(seconds=bound)
