"""Replace Nodes: BatchRebootClusterNodes or BatchReplaceClusterNodes per node (the ladder), 25 per call."""

from hyperpod_recovery.metric_names import NODES_REPLACE_FAILED, NODES_REPLACE_INITIATED
from hyperpod_recovery.models.node_recovery import ReplaceNodesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.replace_nodes import replace_nodes


@workflow_step(ReplaceNodesInput)
def lambda_handler(step: ReplaceNodesInput, deps: Dependencies):
    settings = deps.settings
    replacement = replace_nodes(
        step,
        cluster=deps.cluster,
        ledger=deps.ledger,
        first_check_after_seconds=settings.rejoin_waits[0],  # derived: within the history budget (domain/policy/limits.py)
        deadline_seconds=settings.rejoin_deadline_seconds,
        reboot_deadline_seconds=settings.reboot_deadline_seconds,
        expected_replacement_seconds=settings.expected_replacement_seconds,
        now=deps.now(),
    )
    # (a hang's suspect is only checked: no replacement was initiated for it)
    deps.count_done(NODES_REPLACE_INITIATED, sum(1 for n in replacement.replaced if n.action != "check"))
    deps.count_done(NODES_REPLACE_FAILED, len(replacement.failed))
    return replacement
