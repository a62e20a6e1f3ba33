"""What one minute less of each recovery phase buys: the plan made again with that phase a minute
shorter. A spare takes the repair phases (replace, rejoin, health gate) off the job's path, as the
pipeline resubmits a job on spare nodes at once: their minute buys less than one every failure waits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery_cli.planner import plan_goodput
from hyperpod_recovery_cli.planner.model import RECOVERY_PHASES, REPAIR_PHASES, GoodputPlan, PlannerInputs
from tests.unit.goodput.test_properties import costs, intervals, phase_sets, planner_inputs

ALWAYS = tuple(phase for phase in RECOVERY_PHASES if phase not in REPAIR_PHASES)
# Every phase 5 minutes; 256 nodes at Llama 3's rate; 2 spares (a failure finds none 0.01 % of the time)
FIVE_MINUTES = dict.fromkeys(RECOVERY_PHASES, 300.0)


def minute_less(plan: GoodputPlan) -> dict[str, float]:
    return {cost.phase: cost.minute_less_points for cost in plan.phases}


def shorter(inputs: PlannerInputs, phase: str) -> PlannerInputs:
    figure = inputs.phases_seconds[phase]  # type: ignore[index]
    return inputs.model_copy(
        update={"phases_seconds": inputs.phases_seconds | {phase: figure.model_copy(update={"value": max(0.0, figure.value - 60)})}}
    )


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=4096),
    phases=phase_sets,
    interval=intervals,
    cost=costs,
    spares=st.none() | st.integers(min_value=0, max_value=8),
)
def test_each_phases_minute_less_is_the_plan_again_with_that_phase_a_minute_shorter(
    n: int, phases: dict[str, float], interval: float, cost: float, spares: int | None
) -> None:
    # Given any plan, spares or none
    more = {} if spares is None else {"spare_nodes": spares}
    inputs = planner_inputs(n, 3.79, phases, interval, cost, **more)
    plan = plan_goodput(inputs)
    # Then for every phase, what one minute less buys is the headline ETTR of the plan made again without that minute
    for phase in RECOVERY_PHASES:
        again = plan_goodput(shorter(inputs, phase))
        assert minute_less(plan)[phase] == pytest.approx(100 * (again.ettr.ettr - plan.ettr.ettr), abs=1e-9), phase


@pytest.mark.parametrize("repair_phase", REPAIR_PHASES)
@pytest.mark.parametrize("always_phase", ALWAYS)
def test_with_spares_a_minute_of_a_repair_phase_buys_less_than_a_minute_every_failure_waits(repair_phase: str, always_phase: str) -> None:
    # Given 256 nodes with 2 spares, every phase 5 minutes
    plan = plan_goodput(planner_inputs(256, 3.79, FIVE_MINUTES, 1800, 60, spare_nodes=2))
    bought = minute_less(plan)
    # Then a minute less of a phase every failure waits through (detect, cordon, restart) buys more than one of a
    # phase only the failures finding no spare wait through
    assert bought[always_phase] > 100 * bought[repair_phase] > 0, bought


def test_without_spares_every_phase_of_a_minute_or_more_buys_the_same_minute() -> None:
    # Given no spares: every failure waits through every phase
    plan = plan_goodput(planner_inputs(256, 3.79, FIVE_MINUTES, 1800, 60))
    # Then each phase's minute buys the same, 100·ETTR/M points (Daly's ETTR depends on R alone)
    assert len({round(points, 12) for points in minute_less(plan).values()}) == 1


def test_a_spare_for_most_failures_lowers_the_headline_recovery_to_what_the_job_waits_through() -> None:
    # Given the same phases with and without 2 spares
    without = plan_goodput(planner_inputs(256, 3.79, FIVE_MINUTES, 1800, 60))
    spared = plan_goodput(planner_inputs(256, 3.79, FIVE_MINUTES, 1800, 60, spare_nodes=2))
    # Then with the spares the expected recovery is about the phases every failure waits through, and ETTR is higher
    assert without.ettr.recovery_seconds == pytest.approx(6 * 300)
    assert spared.ettr.recovery_seconds == pytest.approx(3 * 300, abs=1) and spared.ettr.ettr > without.ettr.ettr
