"""Lock Nodes: take the per-node locks in the ledger (a locked node belongs to another incident)."""

from hyperpod_recovery.models.node_recovery import LockNodesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.lock_nodes import lock_nodes


@workflow_step(LockNodesInput)
def lambda_handler(step: LockNodesInput, deps: Dependencies):
    return lock_nodes(step, ledger=deps.ledger, lock_ttl=deps.lock_ttl, now=deps.now())
