"""Replace Nodes: the ladder's first rung, a reboot or a replacement per node (BatchRebootClusterNodes,
BatchReplaceClusterNodes, 25 per call), once per node even when the Lambda is retried. (A reboot
that does not come back in time is replaced by Check Rejoin: steps/check_rejoin.py.)"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.nodes.ladder import first_repair
from hyperpod_recovery.domain.nodes.replace import REBOOT_MARK, classify_replacements, merge_outcomes

if TYPE_CHECKING:
    from hyperpod_recovery.models.cluster import BatchOutcome
    from hyperpod_recovery.models.node_recovery import Replacement, ReplaceNodesInput
    from hyperpod_recovery.ports import Cluster, Replacements


def replace_nodes(
    step: ReplaceNodesInput,
    *,
    cluster: Cluster,
    ledger: Replacements,
    first_check_after_seconds: int,
    deadline_seconds: int,
    reboot_deadline_seconds: int | None = None,
    expected_replacement_seconds: int | None = None,
    now: datetime,
) -> Replacement:
    targets = step.assessment.targets
    dry_run = bool(step.request.dry_run)
    # (without a reboot deadline a reboot could never be replaced in time: replace at once)
    actions = {t.node_id: first_repair(t.node_id, step.request.triggers) for t in targets}
    if not reboot_deadline_seconds:
        actions = {node: "replace" if action == "reboot" else action for node, action in actions.items()}
    outcomes: list[BatchOutcome] = []
    # A retried Lambda must not call BatchReplace/BatchReboot again for nodes it already started. (In a
    # dry run the cluster and the ledger are behind the gate, adapters/dry_run.py: nothing is started.)
    already = {mark.removeprefix(REBOOT_MARK) for mark in ledger.replacements_initiated(step.execution_name)}
    for action, call, mark in (("reboot", cluster.reboot_nodes, REBOOT_MARK), ("replace", cluster.replace_nodes, "")):
        todo = [t.node_id for t in targets if actions[t.node_id] == action and t.node_id not in already]
        if todo:
            outcome = call(todo)
            ledger.mark_replacements_initiated(step.execution_name, [mark + n for n in outcome.successful], now)
            outcomes.append(outcome)
    return classify_replacements(
        targets,
        merge_outcomes(*outcomes),
        already,
        now,
        first_check_after_seconds,
        deadline_seconds,
        dry_run,
        actions=actions,
        reboot_deadline_seconds=reboot_deadline_seconds,
        expected_seconds=expected_replacement_seconds,
        # A cluster that announces a replacement's end (Cluster Events) is not checked before it is expected.
        announced=step.assessment.cluster_events and step.announced_wait,
        orchestrator=step.assessment.orchestrator,
    )
