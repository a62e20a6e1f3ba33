"""Reconcile Execution: SQS (Step Functions status-change events) -> record and settle every end.

An execution that was stopped, timed out or crashed before Record Outcome gets its incident record
(aborted / failed), gives back its cap places and job claims, and a human is notified. Powertools
batch processing retries only the records whose ledger or SNS call failed transiently; a body that
is not a status-change event is logged and dropped (retrying it cannot help).
"""

from datetime import timedelta

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from hyperpod_recovery.metric_names import RECONCILED
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.events import ExecutionStatusChangeEvent
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.reconcile_execution import reconcile_execution

processor = BatchProcessor(event_type=EventType.SQS)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    settings = deps.settings

    def record_handler(record: SQSRecord) -> None:
        try:
            detail = ExecutionStatusChangeEvent.model_validate_json(record.body).detail
        except ValidationError as exc:
            logger.error("not a Step Functions status-change event: dropped", extra={"reason": format_validation_error(exc)})
            return
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
        )
        if result.action == "recorded":
            metrics.add_metric(name=RECONCILED[result.outcome or "failed"], unit=MetricUnit.Count, value=1)

    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
