"""Notice Cluster Event: SQS ("SageMaker HyperPod Cluster Event"s of the guarded cluster) -> wake the
recoveries waiting for the nodes an event is about.

A record whose ledger or Step Functions call failed transiently is retried; a body that is not a
cluster event is logged and dropped (sqs_events.py).
"""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import REJOIN_WAITS_WOKEN
from hyperpod_recovery.models.events import HyperPodClusterEvent
from hyperpod_recovery.observability import metrics
from hyperpod_recovery.runtime import Dependencies
from hyperpod_recovery.sqs_events import sqs_event_handler
from hyperpod_recovery.steps.notice_cluster_event import notice_cluster_event


@sqs_event_handler(HyperPodClusterEvent, what="a HyperPod cluster event")
def lambda_handler(event: HyperPodClusterEvent, deps: Dependencies) -> None:
    settings = deps.settings
    woken = notice_cluster_event(
        event.detail.EventDetails,
        ledger=deps.ledger,
        workflows=deps.workflows,
        cluster=settings.cluster_name,
        cluster_arn=settings.cluster_arn,
        now=deps.now(),
    )
    metrics.add_metric(name=REJOIN_WAITS_WOKEN, unit=MetricUnit.Count, value=len(woken))
