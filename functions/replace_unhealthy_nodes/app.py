"""Replace Unhealthy Nodes: BatchReplaceClusterNodes, once, on each repair that failed the health gate."""

from hyperpod_recovery.metric_names import NODES_REPLACE_INITIATED
from hyperpod_recovery.models.node_recovery import ReplaceUnhealthyNodesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.replace_unhealthy_nodes import replace_unhealthy_nodes


@workflow_step(ReplaceUnhealthyNodesInput)
def lambda_handler(step: ReplaceUnhealthyNodesInput, deps: Dependencies):
    settings = deps.settings
    watch = replace_unhealthy_nodes(
        step,
        cluster=deps.cluster,
        ledger=deps.ledger,
        first_check_after_seconds=settings.rejoin_waits[0],  # derived: within the history budget (domain/policy/limits.py)
        deadline_seconds=settings.rejoin_deadline_seconds,
        expected_replacement_seconds=settings.expected_replacement_seconds,
        now=deps.now(),
    )
    deps.count_done(NODES_REPLACE_INITIATED, sum(1 for n in watch.nodes if n.replaced_again and not n.rejoined))

    return watch
