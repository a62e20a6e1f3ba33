"""Shrink now, or wait for the replacement: the rule of issue 33, from measured figures.

Let N be the job's nodes, k the nodes it would run without (its lost nodes, rounded up to what its
opt-in and checkpoint allow), T the expected wait for the replacement and R the cost of growing
back (one more restart). Waiting idles all N nodes for T; shrinking idles k of them for T and costs
one restart of all N to grow back. With the restart at the smaller size about a restart at full size,
shrinking wins when T x (1 - k/N) > R (../shared/reference/peers-2026.md §6.1).
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_recovery.domain.elastic.sizes import largest_size, reshard_of
from hyperpod_recovery.models.commands import CheckpointRef, JobSpec
from hyperpod_recovery.models.workflow import ElasticDecision, EstimateSource


@dataclass(frozen=True)
class Estimate:
    seconds: int
    source: EstimateSource  # measured (the ledger's history) or the stack's parameter

    def text(self) -> str:
        return f"{minutes(self.seconds)}{'' if self.source == 'measured' else ' (the stack parameter: nothing measured yet)'}"


def minutes(seconds: int) -> str:
    """600 -> '10 min', 90 -> '1.5 min', 30 -> '30 s'."""
    if seconds < 60:
        return f"{seconds} s"
    value = seconds / 60
    return f"{value:.0f} min" if value >= 10 or value == int(value) else f"{value:.1f} min"


def shrink_wins(full: int, nodes: int, wait: Estimate, grow_back: Estimate) -> bool:
    """T x (1 - k/N) > R, with k = full - nodes."""
    return wait.seconds * nodes > grow_back.seconds * full  # T(1 - k/N) = T n/N, kept in integers


def decide_elastic(
    job: JobSpec, checkpoint: CheckpointRef, *, lost: int, spare: int | None, wait: Estimate, grow_back: Estimate
) -> ElasticDecision | None:
    """The size ``job`` runs at now, or why it waits; None for a job that did not opt in (rigid, as always).

    ``lost``: its nodes out of service in this incident; ``spare``: the nodes that could take it at
    once that no other job of the incident was counted on (None: the agent did not count them)."""
    if job.elastic is None and job.elastic_problem is None:
        return None
    full = job.num_nodes
    lost = max(1, min(lost, full))
    figures = {
        "full_nodes": full,
        "lost_nodes": lost,
        "spare_nodes": spare,
        "expected_wait_seconds": wait.seconds,
        "wait_source": wait.source,
        "grow_back_seconds": grow_back.seconds,
        "grow_back_source": grow_back.source,
    }
    reshard = reshard_of(checkpoint)
    full_dp = reshard.data_parallel(full)

    def waits(reason: str) -> ElasticDecision:
        return ElasticDecision(action="wait", nodes=full, full_data_parallel=full_dp, reason=reason, **figures)

    if job.elastic is None:
        return waits(f"waits for its replacement: {job.elastic_problem}")
    if spare is not None and spare >= lost:
        return ElasticDecision(
            action="full_size",
            nodes=full,
            data_parallel=full_dp,
            full_data_parallel=full_dp,
            reason=f"{spare} spare node(s) fit it: runs again at once on {full} node(s)",
            **figures,
        )
    if not reshard.reshardable:
        return waits(f"waits for its replacement: {reshard.why_not}")
    available = full - lost + (spare or 0)
    nodes = largest_size(full, available, job.elastic, reshard)
    if nodes is None:
        return waits(
            f"waits for its replacement: {available} of its {full} node(s) could run it, and it may not run on fewer than "
            f"{job.elastic.min_nodes}" + (f" or in other steps than {job.elastic.multiple} node(s)" if job.elastic.multiple > 1 else "")
        )
    if not shrink_wins(full, nodes, wait, grow_back):
        return waits(
            f"waits for its replacement: expected in {wait.text()}; on {nodes} of {full} node(s) meanwhile it would gain "
            f"less than growing back costs (~{grow_back.text()})"
        )
    return ElasticDecision(
        action="shrink",
        nodes=nodes,
        data_parallel=reshard.data_parallel(nodes),
        full_data_parallel=full_dp,
        reason=f"runs on {nodes} of {full} node(s): replacement expected in {wait.text()}, growing back costs ~{grow_back.text()}",
        **figures,
    )
