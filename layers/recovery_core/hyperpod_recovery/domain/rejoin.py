"""Has every replaced node come back? And how long to wait before asking again.

A replaced node returns under the same hostname with a new instance id (the Slurm node name does
not change). A node HyperPod was already repairing may come back under the same id (a reboot):
that counts once we have seen it not Running at least once.
"""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.replace import ALREADY_IN_PROGRESS_CODES
from hyperpod_recovery.errors import RejoinDeadlineExceeded
from hyperpod_recovery.models.cluster import BatchOutcome, ClusterNode
from hyperpod_recovery.models.common import slurm_node_name
from hyperpod_recovery.models.workflow import RejoinWatch, WatchedNode

RUNNING = "Running"


def next_wait_seconds(checks_done: int, initial: int, maximum: int, seconds_to_deadline: float) -> int:
    """Exponential backoff (x2 per check) from ``initial`` capped at ``maximum``, and never past
    the deadline, so the last check happens at the deadline rather than after it."""
    wait: int = min(maximum, initial * 2 ** min(checks_done, 16))
    return max(1, min(wait, int(seconds_to_deadline) + 1))


def observe_rejoin(
    watch: RejoinWatch,
    nodes: list[ClusterNode],
    now: datetime,
    poll_seconds: int,
    max_poll_seconds: int,
) -> RejoinWatch:
    by_hostname: dict[str, list[ClusterNode]] = {}
    for node in nodes:
        if node.private_dns_hostname:
            by_hostname.setdefault(slurm_node_name(node.private_dns_hostname), []).append(node)

    updated: list[WatchedNode] = []
    for watched in watch.nodes:
        if watched.rejoined:
            updated.append(watched)
            continue
        candidates = by_hostname.get(watched.slurm_node, [])
        replacement = next((n for n in candidates if n.node_id != watched.node_id), None)
        same = next((n for n in candidates if n.node_id == watched.node_id), None)
        seen_not_running = watched.seen_not_running or (same is not None and same.status != RUNNING)
        if replacement is not None:
            current = replacement
            rejoined = replacement.status == RUNNING
        elif same is not None:
            current = same
            rejoined = same.status == RUNNING and seen_not_running
        else:
            current = None
            rejoined = False
        updated.append(
            watched.model_copy(
                update={
                    "seen_not_running": seen_not_running,
                    "status": current.status if current else "NotListed",
                    "replacement_node_id": replacement.node_id if replacement else None,
                    "rejoined": rejoined,
                }
            )
        )

    done = watch.dry_run or all(n.rejoined for n in updated)
    checks = watch.checks + 1
    if not done and now >= watch.deadline:
        pending = ", ".join(f"{n.slurm_node} ({n.node_id}: {n.status})" for n in updated if not n.rejoined)
        raise RejoinDeadlineExceeded(
            f"{sum(not n.rejoined for n in updated)} node(s) not back by {watch.deadline.strftime('%Y-%m-%d %H:%M:%S')} UTC "
            f"after {checks} checks: {pending}"
        )
    remaining = (watch.deadline - now).total_seconds()
    return watch.model_copy(
        update={
            "at": now,
            "checks": checks,
            "nodes": updated,
            "done": done,
            "next_wait_seconds": 0 if done else next_wait_seconds(checks, poll_seconds, max_poll_seconds, remaining),
        }
    )


def reboots_past_deadline(watch: RejoinWatch, now: datetime) -> list[WatchedNode]:
    """Rebooted nodes still not back at the reboot deadline: the ladder's next rung is a replace."""
    if watch.dry_run or watch.reboot_deadline is None or now < watch.reboot_deadline:
        return []
    return [n for n in watch.nodes if n.action == "reboot" and not n.rejoined]


def escalate_to_replace(watch: RejoinWatch, outcome: BatchOutcome, node_ids: list[str], now: datetime) -> RejoinWatch:
    """The watch after replacing rebooted nodes that did not come back. A node whose replacement
    could not even start keeps waiting as it is, and the overall deadline escalates it."""
    failed = {f.node_id: f.error_code for f in outcome.failed}
    updated = []
    for node in watch.nodes:
        if node.node_id in node_ids and (node.node_id not in failed or failed[node.node_id] in ALREADY_IN_PROGRESS_CODES):
            node = node.model_copy(update={"action": "replace", "escalated_to_replace_at": now, "seen_not_running": False})
        updated.append(node)
    return watch.model_copy(update={"nodes": updated, "done": False})
