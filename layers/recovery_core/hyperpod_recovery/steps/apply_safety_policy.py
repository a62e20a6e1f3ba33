"""Apply Safety Policy: one recovery per logical node, breaker, repeat offenders, cluster cap; then
count the nodes against the cap."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery import errors
from hyperpod_recovery.domain.policy.safety import SafetyPolicy
from hyperpod_recovery.domain.policy.safety import apply_safety_policy as decide_safety
from hyperpod_recovery.models.node_recovery import ApplySafetyPolicyInput, Assessment, SkippedNode
from hyperpod_recovery.models.records import HOST_LOCK_PREFIX
from hyperpod_recovery.observability import logger
from hyperpod_recovery.vocabulary import error_name

if TYPE_CHECKING:
    from hyperpod_recovery.ports import NodeLocks, SafetyChecks


def apply_safety_policy(
    step: ApplySafetyPolicyInput, *, ledger: SafetyChecks, policy: SafetyPolicy, reservation_ttl: timedelta, now: datetime
) -> Assessment:
    request = step.request
    unheld = skip_held_nodes(step, ledger=ledger)
    logical = lock_logical_nodes(step.model_copy(update={"assessment": unheld}), ledger=ledger, lock_ttl=reservation_ttl, now=now)
    breaker = ledger.breaker(request.cluster)
    assessment = decide_safety(
        logical,
        policy,
        breaker=breaker,
        log=ledger.recovery_log(request.cluster, since=now - timedelta(seconds=policy.log_seconds)),
        in_recovery=ledger.nodes_in_recovery(request.cluster, now),
        now=now,
    )
    safety = assessment.safety
    assert safety is not None
    # In a dry run the ledger is behind the gate (adapters/dry_run.py): the verdict is the policy's,
    # and the breaker and the cap's places are left as they were.
    if safety.breaker_tripped_now:
        ledger.save_breaker(request.cluster, breaker.changed_to("open", reason=safety.reason, by=step.execution_name, at=now))
        logger.warning("circuit breaker opened", extra={"reason": safety.reason})
    hostnames = [t.slurm_node for t in assessment.targets]
    reserved = safety.reserved and ledger.reserve_capacity(
        request.cluster, step.execution_name, safety.reserved, safety.limit, now, reservation_ttl, hostnames
    )
    if safety.reserved and not reserved:
        # Another incident took the last room between our read and our write.
        capped = safety.model_copy(
            update={
                "capped": True,
                "error": error_name(errors.ClusterCapReached),
                "reason": f"the cap of {safety.limit} nodes filled up",
                "reserved": [],
            }
        )
        return assessment.model_copy(update={"safety": capped, "proceed": False})
    if safety.capped:
        logger.warning("recovery capped", extra={"error": safety.error, "reason": safety.reason})
    return assessment


def skip_held_nodes(step: ApplySafetyPolicyInput, *, ledger: NodeLocks) -> Assessment:
    """Leave alone every target a human holds (``hyperpod-recovery hold``), by its instance id or
    its hostname, and say so: the node is skipped as ``held`` with who, since when and why. Read
    first, before any lock or place under the cap is taken for it."""
    assessment, request = step.assessment, step.request
    holds = ledger.node_holds(request.cluster, [name for t in assessment.targets for name in (t.node_id, t.slurm_node)])
    if not holds:
        return assessment
    skipped, kept = [], []
    for target in assessment.targets:
        hold = holds.get(target.node_id) or holds.get(target.slurm_node)
        if hold is None:
            kept.append(target)
            continue
        skipped.append(
            SkippedNode(
                node_id=target.node_id,
                reason="held",
                detail=f"{target.slurm_node} is held by {hold.by} since {hold.at.isoformat(timespec='seconds')}: {hold.reason}",
            )
        )
    logger.info("nodes held by a human are left alone", extra={"skipped": [s.detail for s in skipped]})
    return assessment.model_copy(update={"targets": kept, "skipped": [*assessment.skipped, *skipped], "proceed": bool(kept)})


def lock_logical_nodes(step: ApplySafetyPolicyInput, *, ledger: NodeLocks, lock_ttl: timedelta, now: datetime) -> Assessment:
    """One recovery per logical node (hostname), whatever its instance id.

    A replacement comes up under the old node's hostname with a new instance id while the first
    incident still waits for it. A fault reported for that new instance (HyperPod's health agent
    checks it while it provisions) names an id no incident holds; without this lock a second
    incident would replace the replacement. Targets whose hostname another live incident holds are
    skipped as ``locked_elsewhere``: they join that recovery.
    """
    assessment, request = step.assessment, step.request
    by_lock = {f"{HOST_LOCK_PREFIX}{t.slurm_node}": t for t in assessment.targets}
    if not by_lock:
        return assessment
    holders = ledger.acquire_locks(step.execution_name, request.cluster, list(by_lock), now, lock_ttl).held_elsewhere
    if not holders:
        return assessment
    skipped = [
        SkippedNode(
            node_id=by_lock[key].node_id,
            reason="locked_elsewhere",
            detail=f"{by_lock[key].slurm_node} is being recovered by incident {incident} (this instance may be its replacement)",
        )
        for key, incident in sorted(holders.items())
    ]
    kept = [t for key, t in by_lock.items() if key not in holders]
    logger.info("nodes already in recovery by another incident", extra={"skipped": [s.detail for s in skipped]})
    return assessment.model_copy(update={"targets": kept, "skipped": [*assessment.skipped, *skipped], "proceed": bool(kept)})
