"""Replace Nodes and Check Rejoin."""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.rejoin import observe_rejoin
from hyperpod_recovery.domain.replace import classify_replacements
from hyperpod_recovery.models.cluster import BatchOutcome
from hyperpod_recovery.models.workflow import CheckRejoinInput, RejoinWatch, Replacement, ReplaceNodesInput
from hyperpod_recovery.steps.ports import Cluster, Ledger


def replace_nodes(
    step: ReplaceNodesInput,
    *,
    cluster: Cluster,
    ledger: Ledger,
    first_check_after_seconds: int,
    deadline_seconds: int,
    now: datetime,
) -> Replacement:
    targets = step.assessment.targets
    dry_run = bool(step.request.dry_run)
    already: set[str] = set()
    outcome = BatchOutcome()
    if not dry_run:
        # A retried Lambda must not call BatchReplace again for nodes it already started.
        already = ledger.replacements_initiated(step.execution_name)
        todo = [t.node_id for t in targets if t.node_id not in already]
        if todo:
            outcome = cluster.replace_nodes(todo)
            ledger.mark_replacements_initiated(step.execution_name, outcome.successful, now)
    return classify_replacements(targets, outcome, already, now, first_check_after_seconds, deadline_seconds, dry_run)


def check_rejoin(step: CheckRejoinInput, *, cluster: Cluster, poll_seconds: int, max_poll_seconds: int, now: datetime) -> RejoinWatch:
    return observe_rejoin(step.rejoin, cluster.list_nodes(), now, poll_seconds, max_poll_seconds)
