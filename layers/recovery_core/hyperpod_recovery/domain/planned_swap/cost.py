"""A planned swap, or leave the job on the node at risk: the expected-cost rule, from measured figures.

Every cost is in node-seconds: seconds of the job's wall clock lost, times the nodes that lose them (a
stopped job loses them on all its N nodes; a shrunk one only its pace's shortfall). An enforced verdict
says the node fails within its horizon H with chance p (assumed spread evenly over H).

* Left alone, a failure costs F = N·((τ+δ)/2 + D + R) + place: the work since the last commit (half a
  checkpoint period on average), the detection, one restart, and the failed node's place: nothing when
  a spare fits, else the cheaper of waiting for the replacement N·W and (where the job may shrink)
  running on N−1 nodes meanwhile, N·W·(1−pace) + N·R to grow back (the elastic rule's terms).
* A planned swap at the next commit, w away ((τ+δ)/2 unless known), costs S = N·(s + R') + place of its
  action: the work between the commit and the stop, one restart (R' = R unless the swap's is given), and
  the place. A failure before the commit (chance p_w = p·min(1, w/H); with a fixed lead time L instead,
  p·max(0, 1 − L/(τ+δ))) costs F either way, and then no swap happens.

    keep = p·F        swap = p_w·F + (1 − p_w)·S

The swap is made only when it costs strictly less, by the cheapest action that fits (a spare first; a
shrink only where it beats the wait): at p = 0 nothing moves, and a higher p never turns a swap into a leave.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

SwapAction = Literal["spare", "shrink", "wait_for_replacement", "leave"]
# Ties go to the first: a spare, then the wait (a shrink only when it costs strictly less, as the elastic rule).
_SWAP_ORDER: tuple[SwapAction, ...] = ("spare", "wait_for_replacement", "shrink")


def _check(name: str, value: float, *, low: float = 0.0, high: float = math.inf, above_low: bool = False) -> None:
    if not math.isfinite(value) or value < low or value > high or (above_low and value == low):
        raise ValueError(f"{name} = {value!r} is out of range")


@dataclass(frozen=True)
class SwapFigures:
    """What the rule needs, each in seconds unless named otherwise (the pipeline's measured figures where it has them)."""

    failure_chance: float  # p: the node fails within the horizon (the verdict's failure_chance)
    horizon_seconds: float  # H: the verdict's horizon
    job_nodes: int  # N
    checkpoint_interval_seconds: float  # τ: compute between commits
    checkpoint_cost_seconds: float  # δ: the blocking part of one checkpoint
    detect_seconds: float  # D: an unannounced failure until the pipeline acts on it
    restart_seconds: float  # R: the job from its stop to training again (resubmit, start-up, checkpoint load)
    repair_wait_seconds: float  # W: a failed or swapped node's place empty until its replacement is in service
    spare_fits: bool  # a spare node can take the job's place at once
    may_shrink: bool  # the job opted in to run on fewer nodes (and has more than one)
    swap_lost_seconds: float  # s: the work lost between the commit and the job's stop (the goal: ≤ 10 s)
    shrunk_pace: float | None = None  # the share of its throughput the job keeps on N−1 nodes; None: (N−1)/N
    seconds_to_commit: float | None = None  # w: until the next commit when known; None: (τ+δ)/2
    # L: when the failure comes exactly this long after the verdict (a model's fixed lead time, the planner's
    # and the fleet's), instead of evenly over the horizon: it beats the commit when w > L (w unknown: the
    # commit at an even phase of its period, chance max(0, 1 − L/(τ+δ))).
    lead_seconds: float | None = None
    # The swap's restart when it differs from a failure's (a spare made ready before the stop); None: restart_seconds.
    swap_restart_seconds: float | None = None

    def __post_init__(self) -> None:
        _check("failure_chance", self.failure_chance, high=1.0)
        _check("horizon_seconds", self.horizon_seconds, above_low=True)
        if self.job_nodes < 1:
            raise ValueError(f"job_nodes = {self.job_nodes!r} is out of range")
        _check("checkpoint_interval_seconds", self.checkpoint_interval_seconds, above_low=True)
        for name in ("checkpoint_cost_seconds", "detect_seconds", "restart_seconds", "repair_wait_seconds", "swap_lost_seconds"):
            _check(name, getattr(self, name))
        if self.shrunk_pace is not None:
            _check("shrunk_pace", self.shrunk_pace, high=1.0, above_low=True)
        for name in ("seconds_to_commit", "lead_seconds", "swap_restart_seconds"):
            if getattr(self, name) is not None:
                _check(name, getattr(self, name))

    @property
    def rework_seconds(self) -> float:
        """The work an unannounced failure throws away: half a checkpoint period on average."""
        return (self.checkpoint_interval_seconds + self.checkpoint_cost_seconds) / 2

    @property
    def commit_in_seconds(self) -> float:
        return self.rework_seconds if self.seconds_to_commit is None else self.seconds_to_commit

    @property
    def before_commit_share(self) -> float:
        """The share of the failures the verdict foresees that come before the next commit (and so before any swap)."""
        if self.lead_seconds is None:
            return min(1.0, self.commit_in_seconds / self.horizon_seconds)
        if self.seconds_to_commit is not None:
            return 1.0 if self.seconds_to_commit > self.lead_seconds else 0.0
        return max(0.0, 1 - self.lead_seconds / (self.checkpoint_interval_seconds + self.checkpoint_cost_seconds))

    @property
    def swap_restart(self) -> float:
        return self.restart_seconds if self.swap_restart_seconds is None else self.swap_restart_seconds

    @property
    def can_shrink(self) -> bool:
        return self.may_shrink and self.job_nodes > 1

    @property
    def pace(self) -> float:
        return (self.job_nodes - 1) / self.job_nodes if self.shrunk_pace is None else self.shrunk_pace


@dataclass(frozen=True)
class SwapDecision:
    """The action and its numbers; ``sentence`` is what the record and the planner show."""

    action: SwapAction
    cheapest_swap: SwapAction  # the swap action compared (the one made unless the action is ``leave``)
    keep_node_seconds: float  # p·F: the expected cost of leaving the job on the node
    swap_node_seconds: float  # p_w·F + (1 − p_w)·S: the expected cost of the planned swap
    failure_node_seconds: float  # F: what a failure of the node costs the job
    swap_cost_node_seconds: float  # S: what the swap itself costs the job
    failure_before_commit_chance: float  # p_w
    place_node_seconds: Mapping[SwapAction, float] = field(default_factory=dict)  # each action's place cost, as fits
    sentence: str = ""

    @property
    def swaps(self) -> bool:
        return self.action != "leave"


def place_costs(figures: SwapFigures) -> dict[SwapAction, float]:
    """What the node's empty place costs, per action that fits (node-seconds)."""
    n, wait = figures.job_nodes, figures.repair_wait_seconds
    costs: dict[SwapAction, float] = {}
    if figures.spare_fits:
        costs["spare"] = 0.0
    if figures.can_shrink:
        costs["shrink"] = n * wait * (1 - figures.pace) + n * figures.restart_seconds
    costs["wait_for_replacement"] = n * wait
    return costs


def decide_swap(figures: SwapFigures) -> SwapDecision:
    """Swap at the next commit (onto a spare, by shrinking, or waiting for the replacement) or leave the job on the node."""
    n = figures.job_nodes
    places = place_costs(figures)
    cheapest = min(places.values())
    action = next(a for a in _SWAP_ORDER if a in places and places[a] == cheapest)
    failure = n * (figures.rework_seconds + figures.detect_seconds + figures.restart_seconds) + cheapest
    swap_cost = n * (figures.swap_lost_seconds + figures.swap_restart) + cheapest
    p = figures.failure_chance
    before = p * figures.before_commit_share
    keep = p * failure
    swap = before * failure + (1 - before) * swap_cost
    decision = SwapDecision(
        action=action if swap < keep else "leave",
        cheapest_swap=action,
        keep_node_seconds=keep,
        swap_node_seconds=swap,
        failure_node_seconds=failure,
        swap_cost_node_seconds=swap_cost,
        failure_before_commit_chance=before,
        place_node_seconds=places,
    )
    return replace(decision, sentence=swap_sentence(figures, decision))


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _percent(chance: float) -> str:
    return f"{100 * chance:.0f} %" if chance >= 0.1 or chance == 0 else f"{100 * chance:.1f} %"


def _node_hours(node_seconds: float) -> str:
    return f"{node_seconds / 3600:,.1f} node-h"


_DOES = {
    "spare": "swap onto a spare at the next checkpoint commit",
    "shrink": "swap at the next checkpoint commit, the job shrunk by one node until the replacement is in service",
    "wait_for_replacement": "swap at the next checkpoint commit, the job waiting for the replacement (no spare fits, no shrink)",
}
_PLACE = {"spare": "a spare", "shrink": "a shrink", "wait_for_replacement": "waiting for the replacement"}


def swap_sentence(figures: SwapFigures, decision: SwapDecision) -> str:
    """The decision in words, with its numbers (what the record and the planner show)."""
    n, kind = figures.job_nodes, decision.cheapest_swap
    place = decision.place_node_seconds[kind]
    swap, keep = _node_hours(decision.swap_node_seconds), _node_hours(decision.keep_node_seconds)
    if decision.swaps:
        head = f"{_DOES[kind]}: expected {swap} against {keep} if left"
    else:
        head = f"left on the node: a swap ({_PLACE[kind]}) would cost {swap} expected against {keep} if left"
    failure_parts = (
        f"{_duration(figures.rework_seconds)} of work since the last commit, {_duration(figures.detect_seconds)} detection, "
        f"{_duration(figures.restart_seconds)} restart"
    )
    swap_parts = f"{_duration(figures.swap_lost_seconds)} past the commit, {_duration(figures.swap_restart)} restart"
    place_words = f" + {_node_hours(place)} for the node's place ({_PLACE[kind]})" if place > 0 else ""
    return (
        f"{head} (a {_percent(figures.failure_chance)} chance of failing within {_duration(figures.horizon_seconds)}, "
        f"{_percent(decision.failure_before_commit_chance)} before the commit {_duration(figures.commit_in_seconds)} away; "
        f"a failure costs {n:,} nodes × ({failure_parts}){place_words} = {_node_hours(decision.failure_node_seconds)}; "
        f"the swap {n:,} nodes × ({swap_parts}){place_words} = {_node_hours(decision.swap_cost_node_seconds)})"
    )
