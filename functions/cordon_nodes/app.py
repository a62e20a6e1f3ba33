"""Cordon Nodes: queue the cordon (drain, then the jobs on the nodes) for the controller agent (task token; answered by the agent)."""

from hyperpod_recovery.models.node_recovery import CordonNodesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.cordon_nodes import cordon_nodes


@workflow_step(CordonNodesInput)
def lambda_handler(step: CordonNodesInput, deps: Dependencies):
    return cordon_nodes(step, orchestrator=deps.orchestrator, now=deps.now())
