"""Intake: SQS (EventBridge events) -> validate, translate, group, dedupe -> StartExecution.

Powertools batch processing reports per-record failures, so one bad record never blocks the
rest of the batch, and a transient failure retries only the records it affected.
"""

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from hyperpod_recovery.metric_names import INTAKE_COUNTS
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.intake import Intake

processor = BatchProcessor(event_type=EventType.SQS)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    intake = Intake(guarded=deps.guarded, dead_letters=deps.dead_letters)

    def record_handler(record: SQSRecord) -> None:
        intake.accept(record.message_id, record.body)

    response = process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    failed = intake.start_recoveries(deps.workflows, deps.settings.episode_window_seconds)
    response["batchItemFailures"] = response.get("batchItemFailures", []) + [{"itemIdentifier": m} for m in failed]
    for name, metric in INTAKE_COUNTS.items():
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=intake.counts[name])
    return response
