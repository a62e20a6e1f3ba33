"""Replace Nodes (the ladder's first rung: reboot or replace) and Check Rejoin (which replaces a
rebooted node that slurmctld shows did not come back in time)."""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.ladder import first_repair
from hyperpod_recovery.domain.rejoin import escalate_to_replace, observe_rejoin, reboots_past_deadline
from hyperpod_recovery.domain.replace import classify_replacements, merge_outcomes
from hyperpod_recovery.models.cluster import BatchOutcome
from hyperpod_recovery.models.workflow import CheckRejoinInput, RejoinWatch, Replacement, ReplaceNodesInput
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Cluster, Ledger

REBOOT_MARK = "reboot:"  # ledger marks: "<id>" replace started, "reboot:<id>" reboot started


def replace_nodes(
    step: ReplaceNodesInput,
    *,
    cluster: Cluster,
    ledger: Ledger,
    first_check_after_seconds: int,
    deadline_seconds: int,
    reboot_deadline_seconds: int | None = None,
    now: datetime,
) -> Replacement:
    targets = step.assessment.targets
    dry_run = bool(step.request.dry_run)
    actions = {t.node_id: first_repair(t.node_id, step.request.triggers) if reboot_deadline_seconds else "replace" for t in targets}
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
    )


def check_rejoin(
    step: CheckRejoinInput, *, cluster: Cluster, ledger: Ledger | None = None, poll_seconds: int, max_poll_seconds: int, now: datetime
) -> RejoinWatch:
    reading = step.rejoin.boot_reading
    watch = observe_rejoin(
        step.rejoin,
        cluster.list_nodes(),
        now,
        poll_seconds,
        max_poll_seconds,
        target_counts=lambda: target_counts(cluster),
        repairs_since=step.request.detected_at,
    )
    stuck = reboots_past_deadline(watch, now, read={b.name for b in reading.result.nodes} if reading is not None else set())
    if not stuck or ledger is None:
        return watch
    ids = [n.node_id for n in stuck]
    # Idempotent on a retried Lambda: nodes whose replacement this incident already started are skipped.
    started = ledger.replacements_initiated(step.execution_name)
    todo = [i for i in ids if i not in started]
    outcome = cluster.replace_nodes(todo) if todo else BatchOutcome()
    ledger.mark_replacements_initiated(step.execution_name, outcome.successful, now)
    logger.warning(
        "rebooted nodes did not come back (slurmctld shows no boot since the reboot): replacing them",
        extra={"nodes": [n.slurm_node for n in stuck]},
    )
    watch = escalate_to_replace(watch, outcome, ids, now)
    return watch.model_copy(update={"next_wait_seconds": poll_seconds})


def target_counts(cluster: Cluster) -> dict[str, int]:
    """Each instance group's TargetCount (DescribeCluster), for a match by instance group."""
    return {name: group.target_count for name, group in cluster.describe().groups.items() if group.target_count is not None}
