"""Planned swaps in the goodput planner (planner/swaps.py): a share of failures announced ahead, decided per verdict
by the pipeline's own expected-cost rule (domain/planned_swap/cost.py), counted in Daly's ETTR."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.planned_swap.cost import SwapFigures, decide_swap
from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner import plan_goodput
from hyperpod_recovery_cli.planner.model import RECOVERY_PHASES, PlannerInputs
from hyperpod_recovery_cli.planner.swaps import before_commit_share

shares = st.floats(min_value=0, max_value=1)
false_positives = st.floats(min_value=0, max_value=0.99)
phase_seconds = st.floats(min_value=0, max_value=3600)


def inputs(**more: Any) -> PlannerInputs:
    """The fleet's default job: 2,048 nodes at Llama 3's rate, every 30 min with a 30 s save, the planner's phases."""
    document: dict[str, Any] = {
        "nodes": 2048,
        "failure_rate": {"failures": 419, "node_days": 2048 * 54},
        "phases_seconds": {"detect": 126.6, "cordon": 2.2, "replace": 0, "rejoin": 600, "health_gate": 120, "restart": 300},
        "checkpoint_interval_seconds": 1800,
        "checkpoint_cost_seconds": 30,
    }
    return PlannerInputs.model_validate(document | more)


def with_recall(given: PlannerInputs, recall: float) -> PlannerInputs:
    return PlannerInputs.model_validate(given.model_dump() | {"precursor_recall": recall})


@st.composite
def any_inputs(draw: st.DrawFn) -> PlannerInputs:
    return inputs(
        nodes=draw(st.integers(min_value=1, max_value=20_000)),
        failure_rate={"per_1000_node_days": draw(st.floats(min_value=0.01, max_value=50))},
        phases_seconds=draw(st.fixed_dictionaries(dict.fromkeys(RECOVERY_PHASES, phase_seconds))),
        checkpoint_interval_seconds=draw(st.floats(min_value=10, max_value=24 * 3600)),
        checkpoint_cost_seconds=draw(st.floats(min_value=0, max_value=3600)),
        spare_nodes=draw(st.integers(min_value=0, max_value=8)),
        precursor_lead_seconds=draw(st.floats(min_value=0, max_value=7 * 86400)),
        precursor_false_positive=draw(false_positives),
        swap_lost_seconds=draw(st.floats(min_value=0, max_value=600)),
    )


@settings(max_examples=100, deadline=None)
@given(any_inputs())
def test_a_recall_of_zero_is_the_plan_without_planned_swaps(given_inputs: PlannerInputs) -> None:
    # Given any job, planned with no at-risk signals and with signals that announce no failure
    without = plan_goodput(given_inputs)
    zero = plan_goodput(with_recall(given_inputs, 0.0))
    # Then both plans give the same ETTR, split alike, with no share lost to swaps
    assert zero.ettr.ettr == without.ettr.ettr
    assert zero.ettr.swap_loss == 0 and zero.ettr.rework_loss == without.ettr.rework_loss


@settings(max_examples=100, deadline=None)
@given(any_inputs(), shares)
def test_ettr_with_planned_swaps_is_a_ratio_and_the_recall_rows_hold_it(given_inputs: PlannerInputs, recall: float) -> None:
    # Given any job and any recall
    plan = plan_goodput(with_recall(given_inputs, recall))
    # Then every ETTR is in [0, 1], the saved share never exceeds the recall, and the recalls shown start at 0
    assert 0 <= plan.ettr.ettr <= 1 and 0 <= plan.ettr.first_order_ettr <= 1
    assert plan.planned_swaps is not None and 0 <= plan.planned_swaps.saved_share <= recall
    assert [row.recall for row in plan.recalls] == [0.0, 0.25, 0.5, 0.75]
    assert all(0 <= row.ettr <= 1 and 0 <= row.recommended_ettr <= 1 for row in plan.recalls)


@settings(max_examples=100, deadline=None)
@given(any_inputs(), shares, shares)
def test_where_the_rule_leaves_the_job_a_recall_changes_nothing(given_inputs: PlannerInputs, one: float, other: float) -> None:
    # Given a job whose verdicts the expected-cost rule would leave alone
    first = plan_goodput(with_recall(given_inputs, one))
    assume(first.planned_swaps is not None and first.planned_swaps.action == "leave")
    second = plan_goodput(with_recall(given_inputs, other))
    # Then no recall moves its ETTR: nothing is swapped
    assert first.ettr.ettr == second.ettr.ettr and first.ettr.swap_loss == 0


@settings(max_examples=100, deadline=None)
@given(any_inputs(), shares, shares)
def test_a_higher_recall_never_shortens_the_recommended_interval(given_inputs: PlannerInputs, one: float, other: float) -> None:
    low, high = sorted((one, other))
    # Given the same job at a lower and a higher recall
    at_low = plan_goodput(with_recall(given_inputs, low))
    at_high = plan_goodput(with_recall(given_inputs, high))
    # Then the best interval is no shorter: the failures swapped first lose no rework
    assert at_high.interval.best_seconds >= at_low.interval.best_seconds * (1 - 1e-6)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=0.05, max_value=1),
    st.floats(min_value=0.05, max_value=1),
    st.floats(min_value=60, max_value=3600),
    st.floats(min_value=0, max_value=600),
)
def test_faultless_precursors_with_a_spare_never_lower_ettr_and_more_recall_buys_more(
    one: float, other: float, interval: float, restart: float
) -> None:
    low, high = sorted((one, other))
    # Given a job with spares whose verdicts are never false, lead time past the commit, nothing lost past it
    # (well inside the models' range: τ + δ + R a small share of the job's MTTF)
    base = inputs(
        nodes=128,
        spare_nodes=2,
        checkpoint_interval_seconds=interval,
        phases_seconds={"detect": 60, "cordon": 2, "replace": 0, "rejoin": 600, "health_gate": 120, "restart": restart},
        precursor_false_positive=0.0,
        precursor_lead_seconds=2 * (interval + 30),
        swap_lost_seconds=0,
    )
    ettr = {r: plan_goodput(with_recall(base, r)).ettr.ettr for r in (0.0, low, high)}
    # Then each swap replaces a failure's rework, detection and restart with a restart alone: ETTR does not fall
    # (to rounding: where a swap buys nothing, two recalls a bit apart differ in the 12th digit)
    slack = 1e-9
    assert ettr[0.0] <= ettr[low] + slack and ettr[low] <= ettr[high] + slack


def test_the_planner_decides_each_verdict_with_the_pipelines_rule() -> None:
    # Given the default job with 2 spares and planned swaps at 50 % recall, the other precursor figures assumed
    plan = plan_goodput(inputs(spare_nodes=2, precursor_recall=0.5))
    swaps = plan.planned_swaps
    assert swaps is not None
    # Then the decision is the rule's for the same figures (failure chance = precision, the lead time, a spare fits)
    rule = decide_swap(
        SwapFigures(
            failure_chance=0.5,
            horizon_seconds=3600,
            job_nodes=2048,
            checkpoint_interval_seconds=1800,
            checkpoint_cost_seconds=30,
            detect_seconds=126.6,
            restart_seconds=300,
            repair_wait_seconds=720,
            spare_fits=True,
            may_shrink=False,
            swap_lost_seconds=10,
            lead_seconds=3600,
        )
    )
    assert (swaps.action, swaps.decision) == (rule.action, rule.sentence) == ("spare", rule.sentence)
    # And with a 1 h lead past the 30.5 min period every foreseen failure is swapped first: half of all failures
    assert swaps.before_commit_share == 0 and swaps.saved_share == pytest.approx(0.5)
    # And as many false alarms as foreseen failures (half the verdicts false): 7.76 failures a day, so 3.88 of each
    assert swaps.false_alarms_per_day == pytest.approx(3.88, abs=0.01) and swaps.swaps_per_day == pytest.approx(7.76, abs=0.01)
    # And each swap costs the job 10 s + 5 min, the share of time they take the ETTR's split says
    assert swaps.swap_seconds == pytest.approx(310)
    mttf = f.job_mttf_minutes(2048, 419 / (2048 * 54))
    assert plan.ettr.swap_loss == pytest.approx(swaps.swaps_per_day / f.MINUTES_PER_DAY * 310 / 60)
    assert plan.ettr.rework_loss == pytest.approx(30 / 2 / (2 * mttf))
    # And the headline is Daly's over the failures left (M doubled) times the time the swaps leave
    daly = f.daly_ettr(30, 0.5, plan.ettr.recovery_seconds / 60, 2 * mttf)
    assert plan.ettr.ettr == pytest.approx(daly * (1 - plan.ettr.swap_loss))


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1, max_value=7 * 86400), st.floats(min_value=0.05, max_value=3), st.floats(min_value=60, max_value=86400))
def test_the_share_before_the_commit_over_lognormal_leads_is_the_average_over_them(median: float, shape: float, period: float) -> None:
    # Given leads spread lognormally around a median, and a checkpoint period
    closed = before_commit_share(median, shape, period)
    # Then the closed form is the mean of max(0, 1 − L/P) over the leads' quantiles (a midpoint sum of 4,000)
    quantiles = [NormalDist(math.log(median), shape).inv_cdf((i + 0.5) / 4000) for i in range(4000)]
    averaged = sum(max(0.0, 1 - math.exp(q) / period) for q in quantiles) / 4000
    assert closed == pytest.approx(averaged, abs=2e-3)
    # And without a spread it is the fixed lead's: the rule's own share
    assert before_commit_share(median, 0.0, period) == pytest.approx(max(0.0, 1 - median / period))


def test_spread_leads_leave_some_foreseen_failures_before_the_commit_and_buy_less() -> None:
    # Given the default job with 2 spares at 50 % recall, leads of 1 h: all the same, or spread (σ 1, as the fleet drill draws them)
    fixed = plan_goodput(inputs(spare_nodes=2, precursor_recall=0.5))
    spread = plan_goodput(inputs(spare_nodes=2, precursor_recall=0.5, precursor_lead_shape=1.0))
    assert fixed.planned_swaps is not None and spread.planned_swaps is not None
    # Then the spread's short leads come before the commit now and then: fewer failures swapped first, a lower ETTR
    assert fixed.planned_swaps.before_commit_share == 0 < spread.planned_swaps.before_commit_share
    assert spread.planned_swaps.saved_share < fixed.planned_swaps.saved_share and spread.ettr.ettr < fixed.ettr.ettr
