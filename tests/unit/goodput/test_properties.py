"""What must hold for any inputs: ETTR is a ratio, slower phases never raise it, the recommended
interval beats its neighbours, a larger fleet never needs fewer spares, the shrink-or-wait advice
is the elastic rule's."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.domain.elastic.decide import Estimate, shrink_wins
from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner import plan_goodput
from hyperpod_recovery_cli.planner.model import RECOVERY_PHASES, PlannerInputs

nodes = st.integers(min_value=1, max_value=20_000)
rates = st.floats(min_value=0.01, max_value=50)  # per 1,000 node-days
seconds = st.floats(min_value=0, max_value=6 * 3600)
intervals = st.floats(min_value=10, max_value=48 * 3600)
costs = st.floats(min_value=0, max_value=3600)
phase_sets = st.fixed_dictionaries(dict.fromkeys(RECOVERY_PHASES, seconds))


def planner_inputs(n: int, rate: float, phases: dict[str, float], interval: float, cost: float, **more: Any) -> PlannerInputs:
    return PlannerInputs.model_validate(
        {
            "nodes": n,
            "failure_rate": {"per_1000_node_days": rate},
            "phases_seconds": phases,
            "checkpoint_interval_seconds": interval,
            "checkpoint_cost_seconds": cost,
        }
        | more
    )


@settings(max_examples=200, deadline=None)
@given(nodes, rates, phase_sets, intervals, costs)
def test_ettr_is_a_ratio_in_both_models(n: int, rate: float, phases: dict[str, float], interval: float, cost: float) -> None:
    # Given any cluster, failure rate, phases and checkpointing
    # When the planner runs
    plan = plan_goodput(planner_inputs(n, rate, phases, interval, cost))
    # Then both ETTRs lie in [0, 1], and so does every point of both curves
    assert 0 <= plan.ettr.ettr <= 1 and 0 <= plan.ettr.first_order_ettr <= 1
    assert all(0 <= p.ettr <= 1 for curve in (plan.recovery_curve, plan.interval_curve) for p in curve.points)
    # And a spare for every failure never lowers it (equal, to rounding, when no failure waits for a repair)
    assert plan.ettr.ettr <= plan.spares.ettr_with_spare + 1e-12 and plan.spares.ettr_with_spare <= 1


@settings(max_examples=200, deadline=None)
@given(nodes, rates, phase_sets, intervals, costs, st.sampled_from(RECOVERY_PHASES), st.floats(min_value=1, max_value=3600))
def test_a_slower_phase_never_raises_ettr(
    n: int, rate: float, phases: dict[str, float], interval: float, cost: float, phase: str, slower_by: float
) -> None:
    # Given a plan, and the same plan with one phase slower
    before = plan_goodput(planner_inputs(n, rate, phases, interval, cost))
    after = plan_goodput(planner_inputs(n, rate, phases | {phase: phases[phase] + slower_by}, interval, cost))
    # Then ETTR (Daly's, and the first order's) is not higher, and that phase costs more
    assert after.ettr.ettr <= before.ettr.ettr
    assert after.ettr.first_order_ettr <= before.ettr.first_order_ettr
    cost_of = {c.phase: c.ettr_points for c in before.phases}, {c.phase: c.ettr_points for c in after.phases}
    assert cost_of[1][phase] > cost_of[0][phase]


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0.01, max_value=600), st.floats(min_value=1, max_value=100_000), st.floats(min_value=0, max_value=600))
def test_the_best_interval_beats_its_neighbours(cost: float, mttf: float, recovery: float) -> None:
    # Given a checkpoint cost, an MTTF and a recovery time (minutes)
    # When the interval that maximizes ETTR is found
    best = f.best_interval(cost, mttf)
    at_best = f.daly_ettr(best, cost, recovery, mttf)
    # Then an interval 5 % shorter or longer does no better, nor do Young's and Daly's closed forms
    for other in (best * 0.95, best * 1.05, f.young_interval(cost, mttf), f.daly_interval(cost, mttf)):
        assert f.daly_ettr(other, cost, recovery, mttf) <= at_best * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=50_000),
    st.integers(min_value=0, max_value=50_000),
    rates,
    st.floats(min_value=1, max_value=30 * 86_400),
)
def test_a_larger_fleet_never_needs_fewer_spares(small: int, more: int, rate: float, repair: float) -> None:
    phases = dict.fromkeys(RECOVERY_PHASES, 60.0)
    # Given two fleets, one larger, with the same failure rate and repair window
    spares = [
        plan_goodput(planner_inputs(n, rate, phases, 1800, 60, repair_seconds=repair)).spares.p99_spares for n in (small, small + more)
    ]
    # Then the larger one needs at least as many spares
    assert spares[0] <= spares[1]


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.001, max_value=5000), st.floats(min_value=0.0, max_value=0.99))
def test_the_spares_quantile_is_the_smallest_that_covers_the_percentile(mean: float, percentile: float) -> None:
    # Given a Poisson mean and a percentile
    k = f.poisson_quantile(mean, percentile)
    # Then P(X <= k) reaches it and P(X <= k - 1) does not
    assert f.poisson_cdf(k, mean) >= percentile - 1e-9
    assert k == 0 or f.poisson_cdf(k - 1, mean) < percentile + 1e-9


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=2, max_value=4096), phase_sets)
def test_shrink_or_wait_is_the_elastic_rule(n: int, phases: dict[str, float]) -> None:
    # Given a job of n nodes and any phases
    plan = plan_goodput(planner_inputs(n, 3.79, phases, 1800, 60))
    (advice,) = plan.job_sizes
    # Then it shrinks exactly when the elastic rule says so, on one node less, with T the repair phases
    wait = round(phases["replace"] + phases["rejoin"] + phases["health_gate"])
    expected = shrink_wins(n, n - 1, Estimate(wait, "parameter"), Estimate(round(phases["restart"]), "parameter"))
    assert (advice.action == "shrink") == expected
    assert advice.wait_seconds == wait


def test_a_one_node_job_waits() -> None:
    # Given a one-node job whose replacement is slow and restart quick
    phases = dict.fromkeys(RECOVERY_PHASES, 1.0) | {"rejoin": 3600.0}
    (advice,) = plan_goodput(planner_inputs(1, 3.79, phases, 1800, 60)).job_sizes
    # Then it waits: there is no smaller size
    assert advice.action == "wait" and "one-node" in advice.why


def test_every_output_names_its_model_and_assumptions() -> None:
    plan = plan_goodput(planner_inputs(256, 3.79, dict.fromkeys(RECOVERY_PHASES, 60.0), 1800, 60))
    modelled = [plan.ettr, plan.interval, plan.spares, *plan.phases, *plan.job_sizes, plan.recovery_curve, plan.interval_curve]
    assert all(m.model and m.assumptions for m in modelled)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"phases_seconds": {"detect": 1}}, "lacks cordon"),
        ({"failure_rate": {"per_1000_node_days": 3.79, "failures": 3, "node_days": 10}}, "not both"),
        ({"failure_rate": {"failures": 3}}, "both failures and node_days"),
        ({"job_sizes": [512]}, "larger than the cluster"),
        ({"checkpoint_interval_seconds": 0}, "more than 0"),
        ({"nodes": 2.5}, "nodes"),
    ],
)
def test_inputs_that_cannot_be_planned_are_refused_naming_the_field(change: dict[str, Any], said: str) -> None:
    document = planner_inputs(256, 3.79, dict.fromkeys(RECOVERY_PHASES, 60.0), 1800, 60).model_dump() | change
    with pytest.raises(ValidationError, match=said):
        PlannerInputs.model_validate(document)


def test_the_largest_inputs_still_plan_quickly_to_ratios() -> None:
    # Given a million nodes, the highest rate, and every figure at its longest
    longest = 10 * 365 * 86_400
    plan = plan_goodput(planner_inputs(1_000_000, 1_000_000, dict.fromkeys(RECOVERY_PHASES, longest), longest, longest))
    # Then the plan is made (the spares from the normal tail) and its ETTRs are ratios
    assert 0 <= plan.ettr.ettr <= 1 and plan.spares.p99_spares > plan.spares.expected_in_repair


@pytest.mark.parametrize("mean", [2e5, 1e7])
def test_the_normal_tail_of_a_large_mean_is_the_quantile_it_approximates(mean: float) -> None:
    # Given a mean past the exact sum's range
    k = f.poisson_quantile(mean, 0.99)
    # Then it lies 2.326 standard deviations above the mean, to within a node
    assert abs(k - (mean + 2.3263 * mean**0.5)) <= 1.5
