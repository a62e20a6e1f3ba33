"""Notice Cluster Event: a "SageMaker HyperPod Cluster Event" about a watched node wakes the
recovery waiting for it (domain/nodes/rejoin_events.py says which), which then checks for itself.

Best effort by design: every waiting recovery also has its fallback check (the wait's timeout), so
an event lost, late or misread never decides anything; it only saves the wait.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.nodes.rejoin_events import wakes
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.events import ClusterEventDetails
    from hyperpod_recovery.ports import RejoinWaits, Workflows

# A wait whose timeout passed this long ago belongs to a task that timed out and went on (or an
# execution that ended): nobody answers it any more, so it is removed.
STALE_AFTER = timedelta(minutes=5)


def notice_cluster_event(
    event: ClusterEventDetails, *, ledger: RejoinWaits, workflows: Workflows, cluster: str, cluster_arn: str, now: datetime
) -> list[str]:
    """The executions this event woke."""
    if event.ClusterName not in (None, cluster) and event.ClusterArn != cluster_arn:
        logger.warning("cluster event of another cluster: ignored", extra={"event_cluster": event.ClusterName})
        return []
    woken: list[str] = []
    for wait in ledger.rejoin_waits(cluster):
        if wait.until + STALE_AFTER < now:
            ledger.end_rejoin_wait(cluster, wait.execution, wait.task_token)
            continue
        if not wakes(event, wait, now):
            continue
        output = json.dumps({"woken_by": "cluster_event", "event_id": event.EventId, "description": event.Description[:256]})
        if workflows.wake(wait.task_token, output):
            woken.append(wait.execution)
        ledger.end_rejoin_wait(cluster, wait.execution, wait.task_token)
    logger.info(
        "cluster event",
        extra={
            "event_id": event.EventId,
            "instance": event.InstanceId,
            "level": event.EventLevel,
            "description": event.Description[:256],
            "woke": woken,
        },
    )
    return woken
