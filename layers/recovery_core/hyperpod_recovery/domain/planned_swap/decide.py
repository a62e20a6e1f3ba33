"""The swap's decision at the commit: the figures the pipeline has for this job and node, each with
where it came from, handed to the one expected-cost rule (cost.py). Pure.

Decided at the commit, not at the verdict: only then is the job's checkpoint period measured (its two
newest manifests), the spare counted, and the chance of a failure before the commit gone (it did not
fail: ``seconds_to_commit`` is 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.planned_swap.cost import SwapFigures, decide_swap
from hyperpod_recovery.domain.planned_swap.wait import POLL_SECONDS
from hyperpod_recovery.models.planned_swap import CostFigure, SwapCost

if TYPE_CHECKING:
    from hyperpod_recovery.domain.elastic.decide import Estimate
    from hyperpod_recovery.models.at_risk import AtRiskVerdict
    from hyperpod_recovery.models.commands import JobSpec

# ASSUMPTION: an unannounced node failure reaches the pipeline about a minute after it happens (HyperPod's
# health event; the fleet drill's measured detection is of this order). Not measured per stack yet.
DETECT_SECONDS = 60.0
# The swap's own loss past the commit: the polling interval (the most it can add) plus the stop's start.
SWAP_LOST_SECONDS = float(POLL_SECONDS) + 5.0
# A period only one commit was seen of: a common interval (docs/goodput.md), said as assumed in the record.
ASSUMED_INTERVAL_SECONDS = 1800.0


@dataclass(frozen=True)
class Measured:
    """What the step read for the decision."""

    interval_seconds: float | None  # from the job's two newest commits
    restart: Estimate  # the job's measured restart (ledger), else ElasticGrowBackSeconds
    repair_wait: Estimate  # the group's measured replacement (ledger), else ExpectedReplacementSeconds
    idle_nodes: int | None  # Running nodes of the group that run no job and are in no recovery (None: unknown)


def may_shrink(job: JobSpec) -> bool:
    """The job opted in to run on fewer nodes (models/elastic.py), and one fewer is allowed."""
    return job.elastic is not None and job.num_nodes - 1 >= job.elastic.min_nodes


def swap_cost(verdict: AtRiskVerdict, job: JobSpec, measured: Measured) -> SwapCost:
    """The rule's answer for moving ``job`` off the verdict's node now, with every figure's source."""
    interval, interval_from = (
        (measured.interval_seconds, "measured: the job's two newest manifests")
        if measured.interval_seconds
        else (ASSUMED_INTERVAL_SECONDS, "assumed: 30 min (one commit seen, no period measured)")
    )
    spare_fits = (measured.idle_nodes or 0) >= 1 if measured.idle_nodes is not None else (job.spare_nodes or 0) >= 1
    spare_from = (
        f"{measured.idle_nodes} idle node(s) in the node's instance group"
        if measured.idle_nodes is not None
        else f"the job's partition: {job.spare_nodes if job.spare_nodes is not None else 'not counted'}"
    )
    figures = SwapFigures(
        failure_chance=verdict.failure_chance,
        horizon_seconds=float(verdict.horizon_seconds),
        job_nodes=job.num_nodes,
        checkpoint_interval_seconds=interval,
        checkpoint_cost_seconds=0.0,
        detect_seconds=DETECT_SECONDS,
        restart_seconds=float(measured.restart.seconds),
        repair_wait_seconds=float(measured.repair_wait.seconds),
        spare_fits=spare_fits,
        may_shrink=may_shrink(job),
        swap_lost_seconds=SWAP_LOST_SECONDS,
        seconds_to_commit=0.0,
    )
    decision = decide_swap(figures)
    said = [
        CostFigure(name="failure_chance", value=verdict.failure_chance, source=f"the verdict: {verdict.failure_chance_from}"[:160]),
        CostFigure(name="horizon_seconds", value=verdict.horizon_seconds, source="the verdict"),
        CostFigure(name="job_nodes", value=job.num_nodes, source="the orchestrator (Capture Job Spec)"),
        CostFigure(name="checkpoint_interval_seconds", value=interval, source=interval_from),
        CostFigure(name="checkpoint_cost_seconds", value=0.0, source="not measured: 0 (understates a failure's cost)"),
        CostFigure(name="detect_seconds", value=DETECT_SECONDS, source="assumed: HyperPod's health event within a minute"),
        CostFigure(
            name="restart_seconds", value=measured.restart.seconds, source=_estimate_source(measured.restart, "ElasticGrowBackSeconds")
        ),
        CostFigure(
            name="repair_wait_seconds",
            value=measured.repair_wait.seconds,
            source=_estimate_source(measured.repair_wait, "ExpectedReplacementSeconds"),
        ),
        CostFigure(name="spare_fits", value=float(spare_fits), source=spare_from[:160]),
        CostFigure(
            name="may_shrink", value=float(may_shrink(job)), source="the job's elastic opt-in" if job.elastic else "no elastic opt-in"
        ),
        CostFigure(name="swap_lost_seconds", value=SWAP_LOST_SECONDS, source=f"the wait's poll ({POLL_SECONDS} s) and the stop"),
    ]
    return SwapCost(
        action=decision.action,
        keep_node_seconds=round(decision.keep_node_seconds, 1),
        swap_node_seconds=round(decision.swap_node_seconds, 1),
        sentence=decision.sentence[:2048],
        figures=said,
    )


def _estimate_source(estimate: Estimate, parameter: str) -> str:
    return "measured: the ledger's recovery log" if estimate.source == "measured" else f"the stack's {parameter}"
