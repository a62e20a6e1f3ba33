"""Intake: SQS (EventBridge events) -> validate, translate, group, dedupe -> StartExecution.

Failures are reported per record (sqs_events.py), so one bad record never blocks the rest of the
batch, and a transient failure retries only the records it affected.
"""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import INTAKE_COUNTS
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.sqs_events import process_batch, sqs_records
from hyperpod_recovery.steps.intake import Intake


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    records = sqs_records(event)
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    intake = Intake(guarded=deps.guarded, dead_letters=deps.dead_letters)
    response = process_batch(records, intake.accept)
    failed = intake.start_recoveries(deps.workflows, deps.settings.episode_window_seconds)
    response["batchItemFailures"] = response.get("batchItemFailures", []) + [{"itemIdentifier": m} for m in failed]
    for name, metric in INTAKE_COUNTS.items():
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=intake.counts[name])
    return response
