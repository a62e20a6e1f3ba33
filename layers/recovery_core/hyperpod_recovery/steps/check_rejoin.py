"""Check Rejoin: are the replaced or rebooted nodes back? A rebooted node slurmctld shows did not
come back by its reboot deadline is replaced (the ladder's next rung)."""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.rejoin import escalate_to_replace, observe_rejoin, reboots_past_deadline
from hyperpod_recovery.models.cluster import BatchOutcome
from hyperpod_recovery.models.workflow import CheckRejoinInput, RejoinWatch
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Cluster, Ledger


def check_rejoin(
    step: CheckRejoinInput, *, cluster: Cluster, ledger: Ledger | None = None, poll_seconds: int, max_poll_seconds: int, now: datetime
) -> RejoinWatch:
    reading = step.rejoin.boot_reading
    watch = observe_rejoin(
        step.rejoin,
        cluster.list_nodes(),
        now,
        poll_seconds,
        max_poll_seconds,
        target_counts=lambda: target_counts(cluster),
        repairs_since=step.request.detected_at,
    )
    stuck = reboots_past_deadline(watch, now, read={b.name for b in reading.result.nodes} if reading is not None else set())
    if not stuck or ledger is None:
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


def target_counts(cluster: Cluster) -> dict[str, int]:
    """Each instance group's TargetCount (DescribeCluster), for a match by instance group."""
    return {name: group.target_count for name, group in cluster.describe().groups.items() if group.target_count is not None}
