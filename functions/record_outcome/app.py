"""Record Outcome / Escalate Incident / Record Duplicate / Record Rejection: ledger + SNS."""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import NODE_OUTCOMES
from hyperpod_recovery.models.workflow import RecordOutcomeInput
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.record import record_outcome


@workflow_step(RecordOutcomeInput)
def lambda_handler(step: RecordOutcomeInput, deps: Dependencies):
    settings = deps.settings
    result = record_outcome(
        step,
        ledger=deps.ledger,
        notifier=deps.notifier,
        cluster=settings.cluster_name,
        escalation_hold=deps.escalation_hold,
        execution_url=deps.execution_url(step.execution_name),
        now=deps.now(),
        log_seconds=deps.safety_policy.log_seconds,
    )
    metrics.add_metric(name=NODE_OUTCOMES[result.outcome], unit=MetricUnit.Count, value=1)
    for name, seconds in result.durations.items():
        metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=seconds)
    logger.info(
        "incident recorded",
        extra={"outcome": result.outcome, "error": result.error, "summary": result.summary, "durations": result.durations},
    )
    return result
