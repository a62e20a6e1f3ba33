"""Notice Cluster Event: SQS ("SageMaker HyperPod Cluster Event"s of the guarded cluster) -> wake the
recoveries waiting for the nodes an event is about.

Powertools batch processing retries only the records whose ledger or Step Functions call failed
transiently; a body that is not a cluster event is logged and dropped (retrying it cannot help).
"""

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from hyperpod_recovery.metric_names import REJOIN_WAITS_WOKEN
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.events import HyperPodClusterEvent
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.notice_cluster_event import notice_cluster_event

processor = BatchProcessor(event_type=EventType.SQS)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    settings = deps.settings

    def record_handler(record: SQSRecord) -> None:
        try:
            details = HyperPodClusterEvent.model_validate_json(record.body).detail.EventDetails
        except ValidationError as exc:
            logger.error("not a HyperPod cluster event: dropped", extra={"reason": format_validation_error(exc)})
            return
        woken = notice_cluster_event(
            details,
            ledger=deps.ledger,
            workflows=deps.workflows,
            cluster=settings.cluster_name,
            cluster_arn=settings.cluster_arn,
            now=deps.now(),
        )
        metrics.add_metric(name=REJOIN_WAITS_WOKEN, unit=MetricUnit.Count, value=len(woken))

    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
