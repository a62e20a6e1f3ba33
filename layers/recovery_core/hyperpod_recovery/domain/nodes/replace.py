"""Classify BatchReplaceClusterNodes per-node results.

``Successful`` means the replacement was *initiated*. Of the documented per-node error codes,
InstanceIdInUse and InvalidInstanceStatus mean HyperPod is already working on the node (its own
NodeRecovery=Automatic, or our earlier call whose response was lost): we wait for the rejoin
instead of fighting it. InstanceIdNotFound means the instance is gone: if the hostname comes back
under a new instance id (or its logical id does), HyperPod replaced it. Anything else failed to start.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from hyperpod_recovery.domain.nodes.cadence import expected_within, next_wait_seconds
from hyperpod_recovery.models.cluster import BatchOutcome
from hyperpod_recovery.models.node_recovery import (
    Initiation,
    NodeTarget,
    RejoinWatch,
    ReplaceFailure,
    Replacement,
    WatchedNode,
)

MAX_NODES_PER_BATCH_CALL = 25
ALREADY_IN_PROGRESS_CODES = frozenset({"InstanceIdInUse", "InvalidInstanceStatus"})
GONE_CODES = frozenset({"InstanceIdNotFound"})
# The incident's marks in the ledger: "<id>" a replacement started, "reboot:<id>" a reboot started.
REBOOT_MARK = "reboot:"


def marked_nodes(marks: set[str]) -> tuple[list[str], list[str]]:
    """The nodes an incident's marks say it replaced, and those it rebooted, each sorted."""
    replaced = sorted(m for m in marks if not m.startswith(REBOOT_MARK))
    rebooted = sorted(m.removeprefix(REBOOT_MARK) for m in marks if m.startswith(REBOOT_MARK))
    return replaced, rebooted


def merge_outcomes(*outcomes: BatchOutcome) -> BatchOutcome:
    return BatchOutcome(
        successful=[n for o in outcomes for n in o.successful],
        failed=[f for o in outcomes for f in o.failed],
        calls=sum(o.calls for o in outcomes),
    )


def chunked(items: list[str], size: int = MAX_NODES_PER_BATCH_CALL) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def classify_replacements(
    targets: list[NodeTarget],
    outcome: BatchOutcome,
    already_initiated: set[str],
    now: datetime,
    first_check_after_seconds: int,
    deadline_seconds: int,
    dry_run: bool,
    actions: dict[str, Literal["reboot", "replace", "check"]] | None = None,
    reboot_deadline_seconds: int | None = None,
    expected_seconds: int | None = None,
    announced: bool = False,
    orchestrator: Literal["slurm", "eks"] = "slurm",
) -> Replacement:
    """``actions``: the ladder's first repair per node (default replace); rebooted nodes not back
    ``reboot_deadline_seconds`` after now are replaced by Check Rejoin. ``expected_seconds``: how
    long a replacement typically takes: the checks are paced by it (domain/nodes/rejoin.py). ``announced``:
    the cluster announces a replacement's end (Cluster Events), so no check is made before it. A
    watch with a reboot is paced by the backoff alone: a reboot's duration is not a replacement's,
    and it is never announced."""
    actions = actions or {}
    failed_by_id = {f.node_id: f for f in outcome.failed}
    initiated = set(outcome.successful) | already_initiated
    replaced: list[WatchedNode] = []
    failed: list[ReplaceFailure] = []
    for target in targets:
        action = actions.get(target.node_id, "replace")
        if action == "check":
            # A hang's suspect: nothing asked of HyperPod; it is back as it is, and Resume Nodes' gate decides.
            checked = _watched(target, "dry_run" if dry_run else "initiated", action)
            replaced.append(checked.model_copy(update={"status": "Running", "matched_by": "instance_id", "rejoined": True}))
            continue
        initiation, failure = _initiation(target.node_id, initiated, failed_by_id, dry_run)
        if failure is not None:
            failed.append(failure)
        if initiation is not None:
            replaced.append(_watched(target, initiation, action))
    paced = expected_seconds is not None and not dry_run and replaced and all(r.action == "replace" for r in replaced)
    expected_seconds = expected_within(expected_seconds, deadline_seconds) if expected_seconds is not None else None
    expected_at = now + timedelta(seconds=expected_seconds) if paced and expected_seconds is not None else None
    watch = RejoinWatch(
        at=now,
        started_at=now,
        deadline=now + timedelta(seconds=deadline_seconds),
        nodes=replaced,
        reboot_deadline=now + timedelta(seconds=reboot_deadline_seconds)
        if reboot_deadline_seconds is not None and any(r.action == "reboot" for r in replaced)
        else None,
        # A dry run's wait is answered at once (Wait For Rejoin), as is a watch of checks only (nothing
        # to wait for); a task's timeout is at least 1 s.
        next_wait_seconds=1
        if dry_run or all(r.action == "check" for r in replaced)
        else next_wait_seconds(
            0,
            first_check_after_seconds,
            first_check_after_seconds,
            deadline_seconds,
            expected_seconds if expected_at is not None else None,
            announced=announced,
        ),
        dry_run=dry_run,
        expected_at=expected_at,
        announced=announced and expected_at is not None,
        orchestrator=orchestrator,
    )
    return Replacement(
        at=now,
        failed=failed,
        calls=outcome.calls,
        dry_run=dry_run,
        proceed=bool(replaced),
        watch=watch,
    )


def _initiation(
    node_id: str, initiated: set[str], failed_by_id: dict[str, ReplaceFailure], dry_run: bool
) -> tuple[Initiation | None, ReplaceFailure | None]:
    """How one node's replacement began, or why it did not start."""
    if dry_run:
        return "dry_run", None
    if node_id in initiated:
        return "initiated", None
    if node_id in failed_by_id:
        code = failed_by_id[node_id].error_code
        if code in ALREADY_IN_PROGRESS_CODES:
            return "already_in_progress", None
        if code in GONE_CODES:
            return "vanished", None
        return None, failed_by_id[node_id]
    # Neither Successful nor Failed: the API did not account for the node. Treat as a failure
    # to start rather than waiting on something that may never happen.
    return None, ReplaceFailure(node_id=node_id, error_code="NotAccountedFor", message="absent from the response")


def _watched(target: NodeTarget, initiation: Initiation, action: Literal["reboot", "replace", "check"]) -> WatchedNode:
    return WatchedNode(
        node_id=target.node_id,
        slurm_node=target.slurm_node,
        instance_group=target.instance_group,
        logical_id=target.logical_id,
        initiation=initiation,
        action=action,
    )
