"""Check Rejoin: are the replaced or rebooted nodes back? A rebooted node slurmctld shows did not
come back by its reboot deadline is replaced (the ladder's next rung)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.nodes.rejoin import escalate_to_replace, observe_rejoin, reboots_past_deadline
from hyperpod_recovery.models.cluster import BatchOutcome, ClusterNode
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import CheckRejoinInput, RejoinWatch
    from hyperpod_recovery.ports import Cluster, Replacements

# ASSUMPTION: HyperPod's LaunchTime (what CreationTimeAfter filters on) and our clocks (the event's
# time, the Lambda's) disagree by less than this; a replacement launched just before the repairs
# began by our reckoning is still listed.
CLOCK_SKEW_MARGIN = timedelta(minutes=5)


def check_rejoin(
    step: CheckRejoinInput, *, cluster: Cluster, ledger: Replacements, poll_seconds: int, max_poll_seconds: int, now: datetime
) -> RejoinWatch:
    reading = step.rejoin.boot_reading
    watch = observe_rejoin(
        step.rejoin,
        nodes_to_watch(step, cluster),
        now,
        poll_seconds,
        max_poll_seconds,
        target_counts=lambda: target_counts(cluster),
        group_nodes=cluster.list_nodes,
        repairs_since=step.request.detected_at,
    )
    stuck = reboots_past_deadline(watch, now, read={b.name for b in reading.result.nodes} if reading is not None else set())
    if not stuck:
        return watch
    ids = [n.node_id for n in stuck]
    # Idempotent on a retried Lambda: nodes whose replacement this incident already started are skipped.
    started = ledger.replacements_initiated(step.execution_name)
    todo = [i for i in ids if i not in started]
    outcome = cluster.replace_nodes(todo) if todo else BatchOutcome()
    ledger.mark_replacements_initiated(step.execution_name, outcome.successful, now)
    logger.warning(
        "rebooted nodes did not come back (slurmctld shows no boot since the reboot): replacing them",
        extra={"nodes": [n.slurm_node for n in stuck]},
    )
    watch = escalate_to_replace(watch, outcome, ids, now)
    return watch.model_copy(update={"next_wait_seconds": poll_seconds})


def nodes_to_watch(step: CheckRejoinInput, cluster: Cluster) -> list[ClusterNode]:
    """What a look needs (domain/nodes/rejoin.py): every instance launched since the repairs began (a
    replacement, by its logical id, hostname or group) and each watched node's own instance (back
    from a reboot keeps its id). Not the whole cluster: a look's cost follows the incident, not the fleet."""
    watch = step.rejoin
    since = min(watch.started_at, step.request.detected_at) - CLOCK_SKEW_MARGIN
    return cluster.nodes_since(since, [w.node_id for w in watch.nodes])


def target_counts(cluster: Cluster) -> dict[str, int]:
    """Each instance group's TargetCount (DescribeCluster), for a match by instance group."""
    return {name: group.target_count for name, group in cluster.describe().groups.items() if group.target_count is not None}
