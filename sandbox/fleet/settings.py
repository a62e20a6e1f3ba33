"""The fleet's job kinds and the settings the goodput planner recommends for a run (issue 50).

Two job kinds: the fleet's default job (a 5-minute restart, a 30 s blocking checkpoint: what the fleet
drill has always run) and a job that checkpoints asynchronously (5 s of blocking) and restarts within
3 minutes. "Planner-recommended settings" are what ``plan_goodput`` (the code ``hyperpod-recovery
goodput`` runs, not a copy) says for the run's own inputs: the checkpoint interval that maximizes
Daly's ETTR, the spares 99 % of failures find free, shrink where the elastic rule says so, and planned
swaps where the expected-cost rule (domain/planned_swap/cost.py, through the planner) says they pay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hyperpod_recovery_cli.goodput_inputs import combine, defaults_layer
from hyperpod_recovery_cli.planner import plan_goodput
from hyperpod_recovery_cli.planner.model import GoodputPlan

JobKindName = Literal["default", "async"]


@dataclass(frozen=True)
class JobKind:
    name: JobKindName
    checkpoint_cost_seconds: float  # the blocking part of one checkpoint
    restart_seconds: float  # a copy's start to its first step
    what: str


JOB_KINDS: dict[str, JobKind] = {
    # ASSUMPTION (the fleet's since issue 34): a synchronous save stalls 30 s; Meta's u0 is 5-20 min.
    "default": JobKind("default", 30.0, 300.0, "5-minute restart, 30 s blocking checkpoint (the fleet's default job)"),
    # Issue 50's second goal: asynchronous checkpoints (Meta: "O(10s), achievable with asynchronous
    # checkpoint writing"; Kokolis et al., HPCA 2025) and a restart within 3 minutes.
    "async": JobKind("async", 5.0, 180.0, "3-minute restart, 5 s blocking checkpoint (asynchronous saves)"),
}


@dataclass(frozen=True)
class Recommended:
    """What the planner recommends for a run, and the plan it comes from."""

    checkpoint_interval_seconds: float
    spares: int
    shrink: bool
    planned_swaps: bool
    plan: GoodputPlan

    def line(self) -> str:
        swaps = self.plan.planned_swaps
        said = (
            "no precursor figures: no planned swaps"
            if swaps is None
            else f"planned swaps {'on' if self.planned_swaps else 'off'} ({swaps.action})"
        )
        return (
            f"planner-recommended settings: checkpoint every {self.checkpoint_interval_seconds:.0f} s (Daly's ETTR at its maximum), "
            f"{self.spares} spare nodes (99 % of failures find one free), "
            f"{'shrink' if self.shrink else 'wait'} where no spare fits (the elastic rule), {said}"
        )


def run_inputs(
    nodes: int,
    rate_per_1000_node_days: float,
    kind: JobKind,
    interval_seconds: float,
    spares: int = 0,
    precursors: dict[str, float] | None = None,
) -> dict:
    """The run's figures as the planner's input layer: what the run sets (with its trace's precursor figures:
    recall, lead, the share of signals that are false), the planner's defaults for the rest (the recovery
    phases the pipeline's drills measured, the replacement's expected wait)."""
    given = "given"
    swaps = {}
    if precursors is not None and precursors["recall"] > 0:
        swaps = {
            "precursor_recall": {"value": precursors["recall"], "provenance": given, "source": "fleet drill: --recall (an ASSUMPTION)"},
            "precursor_lead_seconds": {
                "value": precursors["lead_seconds"],
                "provenance": given,
                "source": "fleet drill: --lead-time-median (an ASSUMPTION)",
            },
            "precursor_lead_shape": precursors.get("lead_shape", 1.0),
            "precursor_false_positive": {
                "value": min(0.99, round(precursors["false_positive"], 4)),
                "provenance": given,
                "source": "fleet drill: --false-alarm-rate against the announced failures (an ASSUMPTION)",
            },
        }
    return {
        **swaps,
        "nodes": {"value": nodes, "provenance": given, "source": "fleet drill: --nodes"},
        "failure_rate": {"per_1000_node_days": rate_per_1000_node_days, "provenance": given, "source": "fleet drill: --rate"},
        "checkpoint_interval_seconds": {"value": interval_seconds, "provenance": given, "source": "fleet drill: the interval"},
        "checkpoint_cost_seconds": {"value": kind.checkpoint_cost_seconds, "provenance": given, "source": f"fleet drill: {kind.what}"},
        "spare_nodes": {"value": spares, "provenance": given, "source": "fleet drill: --spares"},
        "phases_seconds": {"restart": {"value": kind.restart_seconds, "provenance": given, "source": f"fleet drill: {kind.what}"}},
    }


def recommended(
    nodes: int, rate_per_1000_node_days: float, kind: JobKind, interval_seconds: float, precursors: dict[str, float] | None = None
) -> Recommended:
    """The planner's recommendations for a run of ``nodes`` at the rate, for job ``kind`` (and its precursors)."""
    first = plan_goodput(combine([run_inputs(nodes, rate_per_1000_node_days, kind, interval_seconds, 0, precursors), defaults_layer()]))
    # Planned again with the spares it recommends: the interval and the swap rule are then the run's own
    # (a swap that finds a spare takes its failure first, so the interval is over the others).
    spares = first.spares.p99_spares
    inputs = combine([run_inputs(nodes, rate_per_1000_node_days, kind, interval_seconds, spares, precursors), defaults_layer()])
    plan = plan_goodput(inputs)
    return Recommended(
        checkpoint_interval_seconds=round(plan.interval.best_seconds, 1),
        spares=plan.spares.p99_spares,
        shrink=plan.job_sizes[0].action == "shrink",
        planned_swaps=plan.planned_swaps is not None and plan.planned_swaps.action != "leave",
        plan=plan,
    )
