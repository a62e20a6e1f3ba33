"""What to change: each change alone, planned again with the same models, with the ETTR it buys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery_cli.planner import defaults, plan_goodput
from hyperpod_recovery_cli.planner.model import RECOVERY_PHASES, GoodputPlan
from tests.unit.goodput.test_properties import costs, intervals, phase_sets, planner_inputs

MINUTES = dict.fromkeys(RECOVERY_PHASES, 300.0)


def change(plan: GoodputPlan, kind: str) -> float | None:
    return next((c.ettr for c in plan.changes if c.kind == kind), None)


def test_the_interval_change_is_the_plan_at_the_best_interval() -> None:
    # Given a job checkpointing every 30 min at 256 nodes
    inputs = planner_inputs(256, 3.79, MINUTES, 1800, 60)
    plan = plan_goodput(inputs)
    # Then the interval change buys the ETTR of the same plan at the best interval
    again = plan_goodput(planner_inputs(256, 3.79, MINUTES, plan.interval.best_seconds, 60))
    assert change(plan, "checkpoint_interval") == pytest.approx(again.ettr.ettr, abs=1e-12)


def test_the_spares_change_is_the_plan_with_the_spares_it_advises() -> None:
    # Given no spares
    plan = plan_goodput(planner_inputs(256, 3.79, MINUTES, 1800, 60))
    # Then keeping the advised spares buys the ETTR of the plan that keeps them
    again = plan_goodput(planner_inputs(256, 3.79, MINUTES, 1800, 60, spare_nodes=plan.spares.p99_spares))
    assert change(plan, "spares") == pytest.approx(again.ettr.ettr, abs=1e-12)
    # And once kept, it is no longer a change to make
    assert change(again, "spares") is None


def test_the_detection_change_is_offered_only_when_slower_than_the_drills_measure() -> None:
    # Given a 10-minute detection, and one as fast as the drills'
    slow = plan_goodput(planner_inputs(256, 3.79, MINUTES | {"detect": 600.0}, 1800, 60))
    fast = plan_goodput(planner_inputs(256, 3.79, MINUTES | {"detect": defaults.PHASES["detect"].value}, 1800, 60))
    # Then the slow one is told what the drills' detection buys, the fast one is not
    assert change(slow, "detection") == pytest.approx(fast.ettr.ettr, abs=1e-12)
    assert change(fast, "detection") is None


def test_shrinking_is_offered_exactly_when_the_elastic_rule_says_shrink() -> None:
    # Given a long replacement against a short restart, and the other way round
    shrinks = plan_goodput(planner_inputs(256, 3.79, MINUTES | {"rejoin": 1800.0, "restart": 60.0}, 1800, 60))
    waits = plan_goodput(planner_inputs(256, 3.79, MINUTES | {"rejoin": 0.0, "replace": 0.0, "health_gate": 0.0}, 1800, 60))
    # Then shrinking is a change for the first, with more ETTR than now, and none for the second
    assert shrinks.job_sizes[0].action == "shrink" and (change(shrinks, "shrink") or 0) > shrinks.ettr.ettr
    assert waits.job_sizes[0].action == "wait" and change(waits, "shrink") is None


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=4096),
    phases=phase_sets,
    interval=intervals,
    cost=costs,
    spares=st.none() | st.integers(min_value=0, max_value=8),
)
def test_every_change_buys_ettr_and_the_most_comes_first(
    n: int, phases: dict[str, float], interval: float, cost: float, spares: int | None
) -> None:
    # Given any plan
    more = {} if spares is None else {"spare_nodes": spares}
    plan = plan_goodput(planner_inputs(n, 3.79, phases, interval, cost, **more))
    # Then each change buys at least the tables' precision, its gain is its ETTR less ETTR now, most first
    gains = [c.gain_points for c in plan.changes]
    assert all(gain >= 0.005 for gain in gains) and gains == sorted(gains, reverse=True)
    assert all(c.gain_points == pytest.approx(100 * (c.ettr - plan.ettr.ettr)) for c in plan.changes)
    assert len({c.kind for c in plan.changes}) == len(plan.changes)
