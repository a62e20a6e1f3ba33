"""The planned swap's expected-cost rule (domain/planned_swap/cost.py): swap at the next commit, by the
cheapest action that fits, only when it costs less than leaving the job on the node at risk."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.elastic.decide import Estimate, shrink_wins
from hyperpod_recovery.domain.planned_swap.cost import SwapFigures, decide_swap

chances = st.floats(min_value=0, max_value=1)
seconds = st.floats(min_value=0, max_value=6 * 3600)


@st.composite
def figures(draw: st.DrawFn, **fixed: Any) -> SwapFigures:
    values: dict[str, Any] = {
        "failure_chance": draw(chances),
        "horizon_seconds": draw(st.floats(min_value=60, max_value=90 * 86400)),
        "job_nodes": draw(st.integers(min_value=1, max_value=20_000)),
        "checkpoint_interval_seconds": draw(st.floats(min_value=1, max_value=24 * 3600)),
        "checkpoint_cost_seconds": draw(seconds),
        "detect_seconds": draw(seconds),
        "restart_seconds": draw(seconds),
        "repair_wait_seconds": draw(seconds),
        "spare_fits": draw(st.booleans()),
        "may_shrink": draw(st.booleans()),
        "swap_lost_seconds": draw(st.floats(min_value=0, max_value=600)),
        "shrunk_pace": draw(st.none() | st.floats(min_value=0.01, max_value=1)),
        "seconds_to_commit": draw(st.none() | seconds),
        "lead_seconds": draw(st.none() | st.floats(min_value=0, max_value=7 * 86400)),
        "swap_restart_seconds": draw(st.none() | seconds),
    }
    return SwapFigures(**(values | fixed))


# The default fleet job: 2,048 nodes, every 30 min with a 60 s save, 5-min restart, the drills' detection, a 12-min repair.
DEFAULT_JOB = SwapFigures(
    failure_chance=0.5,
    horizon_seconds=86_400,
    job_nodes=2048,
    checkpoint_interval_seconds=1800,
    checkpoint_cost_seconds=60,
    detect_seconds=127,
    restart_seconds=300,
    repair_wait_seconds=720,
    spare_fits=True,
    may_shrink=False,
    swap_lost_seconds=10,
)


@settings(max_examples=300, deadline=None)
@given(figures(failure_chance=0.0))
def test_a_node_that_cannot_fail_is_never_swapped(given_figures: SwapFigures) -> None:
    # Given a verdict whose node has no chance of failing
    # When the rule decides
    decision = decide_swap(given_figures)
    # Then the job stays where it is, and leaving it costs nothing
    assert decision.action == "leave"
    assert decision.keep_node_seconds == 0


@settings(max_examples=300, deadline=None)
@given(figures(), chances, chances)
def test_a_higher_failure_chance_never_turns_a_swap_into_a_leave(given_figures: SwapFigures, one: float, other: float) -> None:
    low, high = sorted((one, other))
    # Given the same figures at a lower and a higher failure chance
    at_low, at_high = decide_swap(replace(given_figures, failure_chance=low)), decide_swap(replace(given_figures, failure_chance=high))
    # Then what the swap saves does not shrink, and a swap at the lower chance is a swap at the higher one
    assert at_high.keep_node_seconds - at_high.swap_node_seconds >= at_low.keep_node_seconds - at_low.swap_node_seconds - 1e-6 * (
        1 + at_high.failure_node_seconds
    )
    if at_low.swaps:
        assert at_high.action == at_low.action


@settings(max_examples=300, deadline=None)
@given(figures(spare_fits=True))
def test_a_spare_that_fits_is_preferred_to_a_shrink_or_a_wait(given_figures: SwapFigures) -> None:
    # Given a spare that fits
    # When the rule decides
    decision = decide_swap(given_figures)
    # Then the job moves onto the spare or stays; it never waits or shrinks for a swap
    assert decision.action in ("spare", "leave")
    assert decision.cheapest_swap == "spare"


@settings(max_examples=300, deadline=None)
@given(figures())
def test_the_action_is_the_cheaper_of_its_two_expected_costs(given_figures: SwapFigures) -> None:
    # Given any figures
    decision = decide_swap(given_figures)
    # Then a swap is made only when it costs strictly less than leaving the job, and every cost is a cost
    assert decision.swaps == (decision.swap_node_seconds < decision.keep_node_seconds)
    assert min(decision.keep_node_seconds, decision.swap_node_seconds, decision.swap_cost_node_seconds) >= 0
    # And the swap's own action is the cheapest place that fits
    assert decision.place_node_seconds[decision.cheapest_swap] == min(decision.place_node_seconds.values())


@settings(max_examples=300, deadline=None)
@given(figures())
def test_a_failure_sure_to_come_before_the_commit_is_left_to_the_recovery(given_figures: SwapFigures) -> None:
    # Given a next commit no sooner than the horizon ends: the node fails, if at all, before the swap could start
    late = replace(given_figures, seconds_to_commit=given_figures.horizon_seconds, lead_seconds=None)
    # Then the job is left on the node (a swap would only add its own cost where no failure came)
    assert decide_swap(late).action == "leave"


@settings(max_examples=300, deadline=None)
@given(figures(), st.floats(min_value=0, max_value=7 * 86400), st.floats(min_value=0, max_value=7 * 86400))
def test_a_longer_lead_time_never_turns_a_swap_into_a_leave(given_figures: SwapFigures, one: float, other: float) -> None:
    short, long = sorted((one, other))
    # Given the same verdict whose failure comes a fixed time after it, sooner and later
    early, late = decide_swap(replace(given_figures, lead_seconds=short)), decide_swap(replace(given_figures, lead_seconds=long))
    # Then the later failure beats the commit no more often, and a swap for the sooner one is a swap for the later
    assert late.failure_before_commit_chance <= early.failure_before_commit_chance
    if early.swaps:
        assert late.swaps


def test_a_lead_time_of_one_checkpoint_period_always_leaves_time_for_the_commit() -> None:
    # Given the default job whose at-risk node fails exactly one checkpoint period (31 min) after the verdict
    decision = decide_swap(replace(DEFAULT_JOB, lead_seconds=1860))
    # Then the next commit always comes first: the swap loses no rework, and it pays at an even chance
    assert decision.failure_before_commit_chance == 0
    assert decision.action == "spare"
    # And a lead of half the period leaves half of those failures to come before the commit
    assert decide_swap(replace(DEFAULT_JOB, lead_seconds=930)).failure_before_commit_chance == pytest.approx(0.5 * 0.5)


def test_a_swap_restart_shorter_than_a_failures_costs_the_swap_less() -> None:
    # Given the default job whose swap restarts in 60 s (a spare made ready before the stop) against 5 min after a failure
    decision = decide_swap(replace(DEFAULT_JOB, swap_restart_seconds=60))
    # Then the swap costs 2,048 × (10 s + 60 s), the failure still 2,048 × (15.5 min + 127 s + 5 min)
    assert decision.swap_cost_node_seconds == pytest.approx(2048 * 70)
    assert decision.failure_node_seconds == pytest.approx(2048 * (930 + 127 + 300))
    assert "10 s past the commit, 1.0 min restart" in decision.sentence


@settings(max_examples=300, deadline=None)
@given(figures(spare_fits=False, may_shrink=True, shrunk_pace=None), st.integers(min_value=2, max_value=20_000))
def test_shrink_or_wait_is_the_elastic_rule(given_figures: SwapFigures, nodes: int) -> None:
    sized = replace(given_figures, job_nodes=nodes)
    # Given no spare and a job that may shrink by one node, at the pace of its nodes
    decision = decide_swap(sized)
    # Then the swap shrinks exactly when the elastic recovery would (T·n/N > R, n = N − 1), else waits
    # (the integer rule, on seconds rounded the same way)
    wait, grow = round(sized.repair_wait_seconds), round(sized.restart_seconds)
    rounded = replace(sized, repair_wait_seconds=wait, restart_seconds=grow)
    expected = "shrink" if shrink_wins(nodes, nodes - 1, Estimate(wait, "measured"), Estimate(grow, "measured")) else "wait_for_replacement"
    assert decide_swap(rounded).cheapest_swap == expected
    assert decision.cheapest_swap in ("shrink", "wait_for_replacement")


@settings(max_examples=200, deadline=None)
@given(figures(may_shrink=False), st.integers(min_value=1, max_value=20_000))
def test_the_job_size_scales_both_costs_but_not_the_decision(given_figures: SwapFigures, nodes: int) -> None:
    # Given the same rigid job at two sizes
    one, other = decide_swap(replace(given_figures, job_nodes=1)), decide_swap(replace(given_figures, job_nodes=nodes))
    # Then both costs scale with the nodes, and the decision stays
    assert other.keep_node_seconds == pytest.approx(nodes * one.keep_node_seconds)
    assert other.swap_node_seconds == pytest.approx(nodes * one.swap_node_seconds)
    if one.keep_node_seconds != pytest.approx(one.swap_node_seconds):
        assert other.action == one.action


def test_the_default_job_at_an_even_chance_moves_onto_a_spare_and_says_its_numbers() -> None:
    # Given the default fleet job, a spare, and a node with an even chance of failing within a day
    # When the rule decides
    decision = decide_swap(DEFAULT_JOB)
    # Then the job moves onto the spare: a failure costs 2,048 × (15.5 min rework + 2.1 min + 5 min) = 772 node-h,
    # the swap 2,048 × (10 s + 5 min) = 176.4 node-h; left: 0.5 × 772 = 386 node-h
    assert decision.action == "spare"
    assert decision.failure_node_seconds == pytest.approx(2048 * (930 + 127 + 300))
    assert decision.swap_cost_node_seconds == pytest.approx(2048 * 310)
    assert decision.sentence.startswith("swap onto a spare at the next checkpoint commit: expected ")
    said = ("386.0 node-h if left", "a 50 % chance of failing within 24.0 h", "15.5 min of work since the last commit", "= 772.0 node-h")
    assert all(words in decision.sentence for words in said)


def test_a_low_chance_without_a_spare_leaves_the_job_and_says_what_a_swap_would_cost() -> None:
    # Given the default job with no spare, no shrink, and a 10 % chance
    decision = decide_swap(replace(DEFAULT_JOB, spare_fits=False, failure_chance=0.1))
    # Then it stays: the swap would wait for the replacement, which costs more than the expected failure
    assert decision.action == "leave" and decision.cheapest_swap == "wait_for_replacement"
    # And both the failure and the swap pay for the node's empty place: 2,048 nodes × 12 min
    assert decision.swap_cost_node_seconds == pytest.approx(2048 * (310 + 720))
    assert decision.failure_node_seconds == pytest.approx(2048 * (930 + 127 + 300 + 720))
    assert decision.sentence.startswith("left on the node: a swap (waiting for the replacement) would cost ")
    assert "409.6 node-h for the node's place" in decision.sentence


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("failure_chance", -0.1),
        ("failure_chance", 1.5),
        ("failure_chance", float("nan")),
        ("horizon_seconds", 0.0),
        ("job_nodes", 0),
        ("checkpoint_interval_seconds", 0.0),
        ("checkpoint_cost_seconds", -1.0),
        ("detect_seconds", float("inf")),
        ("restart_seconds", -1.0),
        ("repair_wait_seconds", float("nan")),
        ("swap_lost_seconds", -5.0),
        ("shrunk_pace", 0.0),
        ("shrunk_pace", 1.2),
        ("seconds_to_commit", -1.0),
        ("lead_seconds", float("nan")),
        ("swap_restart_seconds", -1.0),
    ],
)
def test_a_figure_out_of_range_is_refused(name: str, value: float) -> None:
    # Given one figure out of its range (a trust boundary: the verdict's chance, the ledger's measurements)
    # Then the figures are refused, naming it
    with pytest.raises(ValueError, match=name):
        replace(DEFAULT_JOB, **{name: value})
