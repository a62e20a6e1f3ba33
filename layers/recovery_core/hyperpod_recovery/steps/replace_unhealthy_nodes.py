"""Replace Unhealthy Nodes: a repair that failed the health gate is replaced once more
(BatchReplaceClusterNodes, once per node even when the Lambda is retried), unless the circuit
breaker opened meanwhile; the workflow then waits for the new replacement (domain/nodes/health_gate.py)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.nodes.health_gate import after_failed_gate, failed_instance, systematic_failure, to_replace_again
from hyperpod_recovery.models.cluster import BatchOutcome
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import RejoinWatch, ReplaceUnhealthyNodesInput
    from hyperpod_recovery.ports import Cluster, SafeReplacements


def replace_unhealthy_nodes(
    step: ReplaceUnhealthyNodesInput,
    *,
    cluster: Cluster,
    ledger: SafeReplacements,
    first_check_after_seconds: int,
    deadline_seconds: int,
    expected_replacement_seconds: int | None,
    now: datetime,
) -> RejoinWatch:
    unhealthy = to_replace_again(step.rejoin, step.resume)
    instances = [failed_instance(n) for n in unhealthy]
    breaker = ledger.breaker(step.request.cluster)
    refused = ""
    if step.rejoin.dry_run or step.request.dry_run:
        refused = "a dry run replaces nothing"
    elif breaker.state == "open":
        # The breaker stops every destructive call, a second replacement too: a human decides.
        refused = f"the circuit breaker is open: {breaker.reason}"
    else:
        refused = systematic_failure(step.resume)
    # A retried Lambda must not replace again what its first attempt already did.
    already = ledger.replacements_initiated(step.execution_name) & set(instances)
    todo = [i for i in instances if i not in already]
    outcome = BatchOutcome()
    if todo and not refused:  # (a retry finds what an earlier attempt started in ``already``, refusal or not)
        outcome = cluster.replace_nodes(todo)
        ledger.mark_replacements_initiated(step.execution_name, outcome.successful, now)
    logger.warning(
        "replacements failed the health gate: replacing them once more" if not refused else "replacements failed the health gate",
        extra={"nodes": [n.slurm_node for n in unhealthy], "instances": instances, "refused": refused},
    )
    return after_failed_gate(
        step.rejoin,
        step.resume,
        outcome,
        already,
        refused=refused,
        now=now,
        deadline_seconds=deadline_seconds,
        first_check_after_seconds=first_check_after_seconds,
        expected_seconds=expected_replacement_seconds,
    )
