"""Which recoveries a "SageMaker HyperPod Cluster Event" wakes.

A Continuous-mode cluster announces what happens to its instances. An event that says a watched
node's replacement ended (it "completed successfully as part of instance replacement", or failed)
completes the wait of the recovery watching it, which then looks at ListClusterNodes itself: the
event only says when to look, never what is there, so a misread event costs one early check and a
lost one costs the fallback's wait. The words matched are AWS's documented description templates
(cluster events reference, "Instance replacement"); their stability is not promised, hence only a
trigger. Events naming another node, or routine ones (lifecycle scripts starting), wake nobody.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.models.records import RejoinWait

if TYPE_CHECKING:
    from hyperpod_recovery.models.events import ClusterEventDetails
    from hyperpod_recovery.models.node_recovery import RejoinWatch

# An instance's repair ended: the documented templates' words, and any Warn or Error about it.
_ENDED = ("completed successfully", "failed", "successfully provisioned")
_LOUD_LEVELS = frozenset({"Warn", "Error"})


def announces_an_end(event: ClusterEventDetails) -> bool:
    description = event.Description.lower()
    return event.EventLevel in _LOUD_LEVELS or any(words in description for words in _ENDED)


def wakes(event: ClusterEventDetails, wait: RejoinWait, now: datetime) -> bool:
    """Whether ``event`` may be news about a node ``wait`` watches: its NodeLogicalId, its old
    instance id, or its instance group. The group is enough: whether a replacement keeps the
    node's logical id is not documented, a wake-up costs one check, and a watch is woken at most
    MAX_EVENT_WAKES times (Wait For Rejoin)."""
    if event.ResourceType != "Instance" or wait.until <= now or not announces_an_end(event):
        return False
    return (
        (event.node_logical_id is not None and event.node_logical_id in wait.logical_ids)
        or (event.InstanceId is not None and event.InstanceId in wait.instance_ids)
        or (event.InstanceGroupName is not None and event.InstanceGroupName in wait.instance_groups)
    )


def rejoin_wait(execution: str, task_token: str, watch: RejoinWatch, until: datetime) -> RejoinWait:
    """The wait a recovery registers for the nodes it watches (those not back yet)."""
    waiting = [n for n in watch.nodes if not n.rejoined]
    return RejoinWait(
        execution=execution,
        task_token=task_token,
        until=until,
        logical_ids=sorted({n.logical_id for n in waiting if n.logical_id}),
        instance_ids=sorted({n.node_id for n in waiting}),
        instance_groups=sorted({n.instance_group for n in waiting if n.instance_group}),
    )
