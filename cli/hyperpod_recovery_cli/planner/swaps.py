"""Planned swaps in the planner's terms: what a share of failures announced by an at-risk verdict changes in
a job's ETTR, decided per verdict by the pipeline's own rule (domain/planned_swap/cost.py ``decide_swap``, called,
not copied: the swap workflow, this planner and the fleet report share it).

Of the failures (rate 1/M), a share ρ (the recall) is announced a lead time L before it comes. Where the rule
swaps, each announced failure that comes after the job's next commit (the rule's ``before_commit_share`` of them
do not) leaves the job at that commit: no rework past it, no detection, one swap's cost instead of a failure's.
Each verdict whose node would not have failed (a share f of the verdicts: ρ·f/(1−f) per failure) costs a swap
too. So the failures that still cost rework and recovery come at 1/M_r = (1 − saved)/M, and the swaps take
their own share of wall time:

    ETTR = Daly(τ, δ, R, M_r) · (1 − swaps per failure · one swap's cost / M)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hyperpod_recovery.domain.planned_swap.cost import SwapDecision, SwapFigures, decide_swap
from hyperpod_recovery_cli.planner import defaults
from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner.model import PlannerInputs

SWAPS = (
    "planned swaps: a share ρ of failures announced a lead time L ahead; where the expected-cost rule "
    "(domain/planned_swap/cost.py) swaps, each one that comes after the next commit costs a swap instead of "
    "rework, detection and recovery; each false verdict (ρ·f/(1−f) per failure) costs a swap: "
    "ETTR = Daly(τ, δ, R, M/(1 − saved)) · (1 − swaps·C/M)"
)
SWAPS_ASSUMES = [
    "every announced failure comes L after its verdict (one L, or a lognormal spread of them around it); the commit at "
    "an even phase of its period; one verdict decided at that L",
    "the verdict's chance of failing is its precision, 1 − f (the rule's failure_chance)",
    "a swap costs the work past the commit, one restart, and the node's place (a spare when spares are kept, else the "
    "wait for the replacement); a swapped node's repair is not counted against the spares",
    "an announced failure that comes before the commit costs what an unannounced one does",
]


@dataclass(frozen=True)
class Precursors:
    recall: float
    lead_seconds: float  # every lead's, or the median of a lognormal spread of them (lead_shape its σ)
    false_positive: float
    swap_lost_seconds: float
    swap_restart_seconds: float | None  # None: the restart phase
    lead_shape: float = 0.0


def before_commit_share(lead_seconds: float, shape: float, period_seconds: float) -> float:
    """The share of foreseen failures that come before the next commit, the commit at an even phase of its period P:
    E[max(0, 1 − L/P)], L the lead (fixed, or lognormal with median ``lead_seconds`` and σ ``shape``, in closed form:
    Φ(d) − (E[L]/P)·Φ(d − σ), d = ln(P/median)/σ)."""
    if period_seconds <= 0:
        return 0.0
    if shape == 0 or lead_seconds == 0:
        return max(0.0, 1 - lead_seconds / period_seconds)
    d = math.log(period_seconds / lead_seconds) / shape
    mean = lead_seconds * math.exp(shape**2 / 2)
    return max(0.0, _phi(d) - mean / period_seconds * _phi(d - shape))


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def precursors_of(inputs: PlannerInputs, *, recall: float | None = None) -> Precursors | None:
    """The inputs' precursor figures (the defaults where they give none); ``recall`` in place of theirs. None: no recall."""
    given = recall if recall is not None else inputs.precursor_recall.value if inputs.precursor_recall is not None else None
    if given is None:
        return None
    return Precursors(
        recall=given,
        lead_seconds=(inputs.precursor_lead_seconds or defaults.PRECURSOR_LEAD).value,
        false_positive=(inputs.precursor_false_positive or defaults.PRECURSOR_FALSE_POSITIVE).value,
        swap_lost_seconds=(inputs.swap_lost_seconds or defaults.SWAP_LOST).value,
        swap_restart_seconds=inputs.swap_restart_seconds.value if inputs.swap_restart_seconds is not None else None,
        lead_shape=inputs.precursor_lead_shape or 0.0,
    )


@dataclass(frozen=True)
class SwapEffect:
    """What planned swaps change: the share of failures they take (saved), the swaps per failure (foreseen and
    false), one swap's cost to the job in minutes of its wall clock, and the rule's decision behind them."""

    saved_share: float = 0.0
    swaps_per_failure: float = 0.0
    swap_minutes: float = 0.0
    decision: SwapDecision | None = None
    before_commit_share: float = 0.0

    def mttf_unforeseen(self, mttf: float) -> float:
        """M_r: the mean time between the failures that still cost rework and recovery."""
        return mttf / (1 - self.saved_share) if self.saved_share < 1 else f.LONGEST_MTTF_MINUTES

    def swap_loss(self, mttf: float) -> float:
        return min(1.0, self.swaps_per_failure * self.swap_minutes / mttf)

    def ettr(self, tau: float, delta: float, recovery: float, mttf: float) -> float:
        return f.daly_ettr(tau, delta, recovery, self.mttf_unforeseen(mttf)) * (1 - self.swap_loss(mttf))


NO_SWAPS = SwapEffect()


def swap_effect(
    precursors: Precursors | None,
    *,
    job_nodes: int,
    tau: float,
    delta: float,
    detect_seconds: float,
    restart_seconds: float,
    repair_seconds: float,
    spare_fits: bool,
) -> SwapEffect:
    """The effect of ``precursors`` on one job (τ, δ in minutes, as the formulas take them); none without them."""
    if precursors is None:
        return NO_SWAPS
    figures = SwapFigures(
        failure_chance=1 - precursors.false_positive,
        horizon_seconds=max(precursors.lead_seconds, 1.0),
        job_nodes=job_nodes,
        checkpoint_interval_seconds=tau * 60,
        checkpoint_cost_seconds=delta * 60,
        detect_seconds=detect_seconds,
        restart_seconds=restart_seconds,
        repair_wait_seconds=repair_seconds,
        spare_fits=spare_fits,
        may_shrink=False,
        swap_lost_seconds=precursors.swap_lost_seconds,
        lead_seconds=precursors.lead_seconds,
        swap_restart_seconds=precursors.swap_restart_seconds,
    )
    # (one verdict is decided at the median lead; the failures' share before the commit is over the spread of leads)
    decision = decide_swap(figures)
    before = before_commit_share(precursors.lead_seconds, precursors.lead_shape, (tau + delta) * 60)
    if not decision.swaps or precursors.recall == 0:
        return SwapEffect(decision=decision, before_commit_share=before)
    saved = precursors.recall * (1 - before)
    false_alarms = precursors.recall * precursors.false_positive / (1 - precursors.false_positive)
    return SwapEffect(
        saved_share=saved,
        swaps_per_failure=saved + false_alarms,
        swap_minutes=decision.swap_cost_node_seconds / job_nodes / 60,
        decision=decision,
        before_commit_share=before,
    )
