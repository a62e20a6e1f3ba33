"""Shrink now, or wait for the replacement: the rule that compares their expected costs, from measured figures.

Let N be the job's nodes, k the nodes it would run without (its lost nodes, rounded up to what its
opt-in and checkpoint allow), T the expected wait for the replacement and R the cost of growing
back (one more restart). Waiting idles all N nodes for T; shrinking idles k of them for T and costs
one restart of all N to grow back. With the restart at the smaller size about a restart at full size,
shrinking wins when T x (1 - k/N) > R (../shared/reference/peers-2026.md §6.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.elastic.sizes import largest_size, reshard_of
from hyperpod_recovery.models.node_recovery import MAX_SHRUNK_JOBS_PER_INCIDENT, ElasticDecision, EstimateSource

if TYPE_CHECKING:
    from hyperpod_recovery.models.commands import CheckpointRef, JobSpec


@dataclass(frozen=True)
class Estimate:
    seconds: int
    source: EstimateSource  # measured (the ledger's history) or the stack's parameter


def minutes(seconds: int) -> str:
    """600 -> '10 min', 90 -> '1.5 min', 30 -> '30 s'."""
    if seconds < 60:
        return f"{seconds} s"
    value = seconds / 60
    return f"{value:.0f} min" if value >= 10 or value == int(value) else f"{value:.1f} min"


def _figure(seconds: int | None, source: EstimateSource | None) -> str:
    return f"{minutes(seconds or 0)}{' (the stack parameter: nothing measured yet)' if source == 'parameter' else ''}"


def shrink_wins(full: int, nodes: int, wait: Estimate, grow_back: Estimate) -> bool:
    """T x (1 - k/N) > R, with k = full - nodes."""
    return wait.seconds * nodes > grow_back.seconds * full  # T(1 - k/N) = T n/N, kept in integers


def decide_elastic(
    job: JobSpec,
    checkpoint: CheckpointRef,
    *,
    lost: int,
    spare: int | None,
    wait: Estimate,
    grow_back: Estimate,
    lineage_nodes: int | None = None,
) -> ElasticDecision | None:
    """The size ``job`` runs at now, or why it waits; None for a job that did not opt in (rigid, as always).

    ``lost``: its nodes out of service in this incident; ``spare``: the nodes that could take it at
    once that no other job of the incident was counted on (None: the agent did not count them);
    ``lineage_nodes``: the size its lineage ran at, proven by the ledger, when it runs shrunk already
    (it grows back to that, not to the shrunk size it ran at when this fault came)."""
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
    if job.elastic is not None:
        figures |= {"min_nodes": job.elastic.min_nodes, "multiple": job.elastic.multiple if job.elastic.multiple > 1 else None}
    if lineage_nodes is not None and lineage_nodes > full:
        figures["grow_to"] = lineage_nodes
    reshard = reshard_of(checkpoint, full)
    # The degree it grows back at: its lineage's size when it runs shrunk already, else the size it ran at.
    full_dp = reshard.data_parallel(lineage_nodes if lineage_nodes is not None and lineage_nodes > full else full)

    def waits(why: str) -> ElasticDecision:
        return ElasticDecision.model_validate({"action": "wait", "nodes": full, "full_data_parallel": full_dp, "why": why, **figures})

    if job.elastic is None:
        return waits("opt_in_unreadable")
    if spare is not None and spare >= lost:
        return ElasticDecision.model_validate(
            {
                "action": "full_size",
                "nodes": full,
                "data_parallel": reshard.data_parallel(full),
                "full_data_parallel": full_dp,
                "why": "spare_fits",
                **figures,
            }
        )
    if not reshard.reshardable:
        return waits("layout_refused" if reshard.layout_refused else "not_reshardable")
    nodes = largest_size(full, full - lost + (spare or 0), job.elastic, reshard)
    if nodes is None:
        return waits("below_minimum")
    if not shrink_wins(full, nodes, wait, grow_back):
        return waits("wait_wins")
    return ElasticDecision.model_validate(
        {
            "action": "shrink",
            "nodes": nodes,
            "data_parallel": reshard.data_parallel(nodes),
            "full_data_parallel": full_dp,
            "why": "shrink_wins",
            **figures,
        }
    )


def elastic_reason(decision: ElasticDecision, checkpoint: CheckpointRef, *, problem: str | None = None) -> str:
    """The decision in words, from its figures (what the record and the notification say)."""
    full, wait, grow = (
        decision.full_nodes,
        _figure(decision.expected_wait_seconds, decision.wait_source),
        _figure(decision.grow_back_seconds, decision.grow_back_source),
    )
    available = full - decision.lost_nodes + (decision.spare_nodes or 0)
    match decision.why:
        case "spare_fits":
            return f"{decision.spare_nodes} spare node(s) fit it: runs again at once on {full} node(s)"
        case "shrink_wins":
            back = f" (its lineage's {decision.grow_to} when it grows back)" if decision.grow_to else ""
            return f"runs on {decision.nodes} of {full} node(s){back}: replacement expected in {wait}, growing back costs ~{grow}"
        case "wait_wins":
            return (
                f"waits for its replacement: expected in {wait}; on fewer of its {full} node(s) meanwhile it would gain less than "
                f"growing back costs (~{grow})"
            )
        case "not_reshardable" | "layout_refused":
            return f"waits for its replacement: {reshard_of(checkpoint, full).why_not}"
        case "below_minimum":
            steps = f" or in other steps than {decision.multiple} node(s)" if decision.multiple else ""
            return (
                f"waits for its replacement: {available} of its {full} node(s) could run it, and it may not run on fewer than "
                f"{decision.min_nodes}{steps}"
            )
        case "opt_in_unreadable":
            return f"waits for its replacement: {problem or 'its elastic opt-in cannot be read'}"
        case "too_many_shrunk":
            return f"waits for its replacement: {MAX_SHRUNK_JOBS_PER_INCIDENT} other job(s) of this incident run shrunk already"
        case "grow_back":
            return f"grows back to {full} node(s) from step {checkpoint.step}"
