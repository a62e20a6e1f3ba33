"""Check Swap Checkpoint (PlannedSwap): one look for the job's next verified checkpoint commit; at the
commit, the expected costs decide, and the move is the nested NodeRecovery's request.

Every look first asks whether the swap is still ours to make: the node failed or another recovery
holds it (the reactive path has it: the swap yields, no second recovery), or the job left the node.
At the commit, the cap and the breaker are read (the nested recovery enforces them again, atomically):
no room, and the verdict waits for the next commit, bounded like the wait itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified
from hyperpod_recovery.domain.elastic.estimates import MEASURED_WINDOW_DAYS, expected_wait, grow_back_cost
from hyperpod_recovery.domain.intake.execution_names import node_execution_name
from hyperpod_recovery.domain.jobs.states import still_running
from hyperpod_recovery.domain.nodes.assess import counted_compute_nodes, group_roles
from hyperpod_recovery.domain.planned_swap.decide import Measured, swap_cost
from hyperpod_recovery.domain.planned_swap.wait import MAX_CHECKS, Reading, is_next_commit, measured_interval, next_wait_seconds
from hyperpod_recovery.errors import CheckpointUnreadable
from hyperpod_recovery.models.common import one_line
from hyperpod_recovery.models.planned_swap import SwapEnding, SwapWatch
from hyperpod_recovery.models.requests import TRIGGER_REASON_LIMIT, RecoveryRequest, Trigger

if TYPE_CHECKING:
    from hyperpod_recovery.domain.policy.safety import SafetyPolicy
    from hyperpod_recovery.models.commands import JobSpec
    from hyperpod_recovery.models.planned_swap import CheckSwapCheckpointInput, SwapCost, SwapTarget
    from hyperpod_recovery.ports import CheckpointReader, Cluster, JobNodeSource, SwapChecks


@dataclass(frozen=True)
class SwapSettings:
    """The stack's figures the step needs."""

    cluster: str
    controller_groups: tuple[str, ...]  # the cap's denominator counts the other groups' nodes (Assess Nodes' rule)
    login_groups: tuple[str, ...]
    expected_replacement_seconds: int
    grow_back_seconds: int
    node_timeout_seconds: int
    orchestrator: Literal["slurm", "eks"] = "slurm"


def check_swap_checkpoint(
    step: CheckSwapCheckpointInput,
    *,
    reader: CheckpointReader,
    cluster: Cluster,
    ledger: SwapChecks,
    job_nodes: JobNodeSource | None,
    policy: SafetyPolicy,
    settings: SwapSettings,
    now: datetime,
) -> SwapWatch:
    swap = step.swap
    watch = (step.watch or SwapWatch(at=now)).model_copy(update={"at": now, "checks": (step.watch.checks if step.watch else 0) + 1})
    yielded = _not_ours_any_more(swap, cluster, ledger, now)
    if yielded is not None:
        return _end(watch, "node_failed", yielded)
    if not swap.jobs_known:
        return _end(watch, "job_unknown", "no swap is made: a failure of the node is the reactive path's")
    job = step.inspection.result.job if step.inspection is not None else None
    if swap.job_id is None:
        return _move_when_room(watch, swap, None, None, _Ports(cluster, ledger, job_nodes), policy, settings, step.execution_name, now)
    gone = _job_gone(swap, job, job_nodes, now)
    if gone is not None:
        return _end(watch, "job_gone", gone)
    assert job is not None
    if not job.checkpoint_uri:
        return _end(
            watch, "leave", f"job {swap.job_id} names no checkpoint location: no commit can be waited for, it is left to the reactive path"
        )
    try:
        found = find_newest_verified(reader, job.checkpoint_uri, job=job.name or None)
    except (CheckpointUnreadable, ValueError) as exc:
        return _waiting(watch, swap, now, f"{job.checkpoint_uri} could not be read ({str(exc)[:200]}): read again")
    reading = Reading(found.checkpoint.step if found.checkpoint else None, found.committed_at)
    first = watch.checks == 1
    if not is_next_commit(watch.baseline_step, reading, swap.request.verdict.observed_at, first):
        if first:
            watch = watch.model_copy(update={"baseline_step": reading.step, "baseline_committed_at": reading.committed_at})
        return _waiting(watch, swap, now, f"waiting for job {swap.job_id}'s next verified commit after step {watch.baseline_step}")
    watch = watch.model_copy(
        update={
            "committed_step": reading.step,
            "committed_at": reading.committed_at,
            "seen_at": now,
            "interval_seconds": measured_interval(watch.baseline_committed_at, reading.committed_at),
        }
    )
    return _move_when_room(watch, swap, job, reading, _Ports(cluster, ledger, job_nodes), policy, settings, step.execution_name, now)


def _not_ours_any_more(swap: SwapTarget, cluster: Cluster, ledger: SwapChecks, now: datetime) -> str | None:
    """Why the node is the reactive path's now (failed, or held by another recovery), or None."""
    holders = ledger.lock_holders(swap.request.verdict.cluster, [swap.node_id], now)
    if holders:
        return f"{swap.node} is held by incident {holders[swap.node_id]}: the swap yields to it (no second recovery)"
    listed = cluster.describe_nodes([swap.node_id])
    if not listed or listed[0].status != "Running":
        status = listed[0].status if listed else "gone from HyperPod's listing"
        return f"{swap.node} failed before the swap ({status}): its recovery is the reactive path's (no second recovery)"
    return None


def _job_gone(swap: SwapTarget, job: JobSpec | None, job_nodes: JobNodeSource | None, now: datetime) -> str | None:
    if job is None or not still_running(job.state, "eks" if job.kube is not None else "slurm"):
        return f"job {swap.job_id} no longer runs ({job.state if job else 'unknown to the orchestrator'}): nothing to move"
    if job.nodes and swap.node not in job.nodes:
        return f"job {swap.job_id} does not run on {swap.node}: nothing to move"
    reading = job_nodes.running_job_nodes() if job_nodes is not None else None
    if reading is not None and reading.fresh(now):
        on = [key for key, nodes in reading.jobs.items() if swap.node in nodes]
        if not on:
            return f"job {swap.job_id} left {swap.node} while the swap waited: nothing to move"
    return None


def _waiting(watch: SwapWatch, swap: SwapTarget, now: datetime, reason: str) -> SwapWatch:
    if now >= swap.wait_until or watch.checks >= MAX_CHECKS:
        return _end(
            watch,
            "no_commit",
            f"no verified commit of job {swap.job_id} by {swap.wait_until:%H:%M:%S} UTC (the wait's bound): "
            "the job stays on the node, and a failure of the node is the reactive path's",
        )
    return watch.model_copy(update={"next_wait_seconds": next_wait_seconds(now, swap.wait_until), "reason": reason[:2048]})


def _end(watch: SwapWatch, ending: SwapEnding, reason: str) -> SwapWatch:
    return watch.model_copy(update={"done": True, "ending": ending, "reason": reason[:2048], "next_wait_seconds": 0})


@dataclass(frozen=True)
class _Ports:
    cluster: Cluster
    ledger: SwapChecks
    job_nodes: JobNodeSource | None


def _move_when_room(
    watch: SwapWatch,
    swap: SwapTarget,
    job: JobSpec | None,
    reading: Reading | None,
    ports: _Ports,
    policy: SafetyPolicy,
    settings: SwapSettings,
    execution_name: str,
    now: datetime,
) -> SwapWatch:
    """At the commit (or at once, for a node without a job): decide, then move if the cap has room."""
    cost = None
    if job is not None:
        cost = swap_cost(swap.request.verdict, job, _measured(watch, swap, job, ports, settings, now))
        watch = watch.model_copy(update={"cost": cost})
        if cost.action == "leave":
            return _end(watch, "leave", f"job {swap.job_id} stays on {swap.node}: {cost.sentence}")
    full = _no_room(swap, ports, policy, settings, now)
    if full is not None:
        if now >= swap.wait_until:
            return _end(watch, "cap_full", f"{full}, until the wait's bound: no swap is made, the reactive path stays")
        # (the next commit is waited for: the one just seen would be stale by the time room comes)
        waiting = watch.model_copy(update={"baseline_step": reading.step if reading else watch.baseline_step, "committed_step": None})
        return _waiting(waiting, swap, now, f"{full}: the swap waits for room and for the next commit")
    return watch.model_copy(
        update={
            "done": True,
            "ending": "move",
            "reason": _move_reason(swap, reading, cost)[:2048],
            "node_request": _node_request(swap, reading, now),
            "node_execution_name": node_execution_name(execution_name),
            "node_timeout_seconds": settings.node_timeout_seconds,
            "next_wait_seconds": 0,
        }
    )


def _measured(watch: SwapWatch, swap: SwapTarget, job: JobSpec, ports: _Ports, settings: SwapSettings, now: datetime) -> Measured:
    log = ports.ledger.recovery_log(settings.cluster, since=now - timedelta(days=MEASURED_WINDOW_DAYS))
    return Measured(
        interval_seconds=watch.interval_seconds,
        restart=grow_back_cost(log, job.checkpoint_uri or "", parameter_seconds=settings.grow_back_seconds),
        repair_wait=expected_wait(log, [swap.instance_group], parameter_seconds=settings.expected_replacement_seconds),
        idle_nodes=_idle_nodes(swap, ports, settings, now),
    )


def _idle_nodes(swap: SwapTarget, ports: _Ports, settings: SwapSettings, now: datetime) -> int | None:
    """Running nodes of the node's instance group that run no job and are in no recovery: the spares
    a moved job can start on at once (None: the orchestrator's reading is not fresh)."""
    reading = ports.job_nodes.running_job_nodes() if ports.job_nodes is not None else None
    if reading is None or not reading.fresh(now):
        return None
    busy = {node for nodes in reading.jobs.values() for node in nodes}
    in_recovery = ports.ledger.nodes_in_recovery(settings.cluster, now)
    return sum(
        1
        for n in ports.cluster.list_nodes(swap.instance_group)
        if n.status == "Running"
        and n.node_id != swap.node_id
        and n.node_id not in in_recovery
        and (name := n.name_in(settings.orchestrator)) is not None
        and name not in busy
    )


def _no_room(swap: SwapTarget, ports: _Ports, policy: SafetyPolicy, settings: SwapSettings, now: datetime) -> str | None:
    """Why the swap may not take its node out now (the breaker open, the cap full), or None. Read
    only: the nested recovery's Apply Safety Policy decides again and reserves the place."""
    breaker = ports.ledger.breaker(settings.cluster)
    if breaker.state == "open":
        return f"the circuit breaker is open ({breaker.reason})"
    others = ports.ledger.nodes_in_recovery(settings.cluster, now) - {swap.node_id}
    limit = policy.limit(_compute_nodes(ports.cluster, settings))
    if len(others) + 1 > limit:
        return f"{len(others)} node(s) already in recovery: one more would exceed the cap of {limit}"
    return None


def _compute_nodes(cluster: Cluster, settings: SwapSettings) -> int:
    """The cap's denominator as Assess Nodes counts it: the compute groups' nodes (DescribeCluster's
    counts, else the listing)."""
    info = cluster.describe()
    roles = (
        group_roles(info, list(settings.controller_groups), list(settings.login_groups))
        if settings.orchestrator == "slurm"
        else dict.fromkeys(info.groups, "Compute")  # (EKS: every group's nodes, as Assess Nodes counts them)
    )
    compute = {g for g, role in roles.items() if role == "Compute"}
    counted = counted_compute_nodes(info, compute)
    return counted if counted is not None else sum(1 for n in cluster.list_nodes() if n.instance_group in compute)


def _move_reason(swap: SwapTarget, reading: Reading | None, cost: SwapCost | None) -> str:
    if reading is None or cost is None:
        return f"no job runs on {swap.node}: it is taken out for its {swap.repair} ({swap.repair_why})"
    return f"job {swap.job_id} committed step {reading.step}: it moves now ({cost.sentence})"


def _node_request(swap: SwapTarget, reading: Reading | None, now: datetime) -> RecoveryRequest:
    verdict = swap.request.verdict
    after = f" after job {swap.job_id}'s commit of step {reading.step}" if reading is not None and reading.step is not None else ""
    reason = one_line(f"planned swap{after}: {verdict.signal} on {swap.node} ({verdict.summary}); {swap.repair_why}", TRIGGER_REASON_LIMIT)
    # (dated now, the commit's reading: the verdict may be older than the stack's event-age limit)
    trigger = Trigger(
        source="at_risk", node_ids=[swap.node_id], reason=reason, recommends=swap.repair, event_id=verdict.verdict_id[:128], detected_at=now
    )
    return RecoveryRequest(
        cluster=verdict.cluster,
        node_ids=[swap.node_id],
        triggers=[trigger],
        dry_run=swap.request.dry_run,
        detected_at=now,
        nested_for_job=swap.job_id,
    )
