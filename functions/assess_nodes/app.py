"""Assess Nodes: DescribeCluster + ListClusterNodes; skip controller/login nodes; map to the orchestrator's names."""

from hyperpod_recovery.models.node_recovery import AssessNodesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.assess_nodes import assess_nodes


@workflow_step(AssessNodesInput)
def lambda_handler(step: AssessNodesInput, deps: Dependencies):
    settings = deps.settings
    return assess_nodes(
        step,
        cluster=deps.cluster,
        controller_groups=settings.controller_groups,
        login_groups=settings.login_groups,
        now=deps.now(),
        orchestrator=settings.orchestrator,
        eks_cluster_name=settings.eks_cluster_name,
    )
