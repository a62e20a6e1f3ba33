"""The ceiling each assumption sets (planner/ceilings.py): the ETTR one loss alone allows, checked against the
figures issue 50 quotes for the fleet's default job at 2,048 nodes and Llama 3's rate."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner import plan_goodput
from hyperpod_recovery_cli.planner.model import RECOVERY_PHASES, GoodputPlan, PlannerInputs

LLAMA3 = {"failures": 419, "node_days": 2048 * 54}
PLANNER_PHASES = {"detect": 126.6, "cordon": 2.2, "replace": 0, "rejoin": 600, "health_gate": 120, "restart": 300}


def plan(**more: Any) -> GoodputPlan:
    document = {
        "nodes": 2048,
        "failure_rate": LLAMA3,
        "phases_seconds": PLANNER_PHASES,
        "checkpoint_interval_seconds": 1800,
        "checkpoint_cost_seconds": 30,  # the fleet drill's default job: a 30 s blocking save (sandbox/fleet/plan.py)
    }
    return plan_goodput(PlannerInputs.model_validate(document | more))


def ceiling(found: GoodputPlan, starts: str) -> float:
    (points,) = [c.points for c in found.ceilings if c.assumption.startswith(starts)]
    return points


def test_the_default_job_reproduces_the_issues_restart_and_spares_figures() -> None:
    # Given the fleet's default job: 2,048 nodes, Llama 3's rate, a 5-min restart, every 30 min with a 30 s save
    found = plan()
    # Then the restart alone costs 2.7 points (5 min of a 3.09 h MTTF), as the issue says
    assert round(ceiling(found, "restart"), 1) == 2.7
    # And with a spare for every failure and the best interval the estimate is about 89 % (89.3)
    together = 100 - ceiling(found, "all together")
    assert round(together) == 89 and together == pytest.approx(89.33, abs=0.01)
    # And the checkpoint and rework floor at the best interval (13.3 min) is 7.2 points: the issue's 6.7 is a 25 s save's
    assert ceiling(found, "checkpoints and rework at the best interval") == pytest.approx(7.16, abs=0.01)
    assert ceiling(plan(checkpoint_cost_seconds=25), "checkpoints and rework at the best interval") == pytest.approx(6.55, abs=0.01)


def test_each_recovery_phase_alone_costs_its_share_of_the_mttf() -> None:
    found = plan()
    mttf = f.job_mttf_minutes(2048, 419 / (2048 * 54))
    # Then each phase alone allows e^(−t/M): detection 126.6 s, the repair wait 12 min without spares
    assert 100 - ceiling(found, "detection") == pytest.approx(100 * math.exp(-126.6 / 60 / mttf))
    assert 100 - ceiling(found, "repair wait without spares") == pytest.approx(100 * math.exp(-12 / mttf))
    # And no spares kept: no line for the spares' share
    assert not [c for c in found.ceilings if c.assumption.startswith("repair wait with ")]


def test_planned_swaps_add_their_own_ceiling_and_raise_the_rework_floor() -> None:
    # Given the same job with 2 spares and planned swaps at 50 % recall (the other precursor figures assumed)
    found = plan(spare_nodes=2, precursor_recall=0.5)
    # Then their own cost is a ceiling of its own, and the rework floor with half the failures swapped first is higher
    assert ceiling(found, "planned swaps' own cost") > 0
    assert ceiling(found, "checkpoints and rework at the best interval, the 50.00 % of failures") < ceiling(
        found, "checkpoints and rework at the best interval ("
    )
    # And the spares' line says the share of failures that find none
    assert ceiling(found, "repair wait with 2 spare(s)") < 0.05


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=20_000),
    st.floats(min_value=0.01, max_value=50),
    st.fixed_dictionaries(dict.fromkeys(RECOVERY_PHASES, st.floats(min_value=0, max_value=6 * 3600))),
    st.floats(min_value=10, max_value=48 * 3600),
    st.floats(min_value=0, max_value=3600),
)
def test_no_single_assumption_allows_less_than_the_estimate(
    nodes: int, rate: float, phases: dict[str, float], interval: float, cost: float
) -> None:
    # Given any job
    found = plan(
        nodes=nodes,
        failure_rate={"per_1000_node_days": rate},
        phases_seconds=phases,
        checkpoint_interval_seconds=interval,
        checkpoint_cost_seconds=cost,
    )
    # Then every ceiling is in [0, 1], and none is below the estimate itself (one loss alone loses no more than all)
    assert all(0 <= c.ettr <= 1 for c in found.ceilings)
    alone = [c for c in found.ceilings if not c.assumption.startswith("checkpoints and rework at the best")]
    assert all(c.ettr >= found.ettr.ettr - 1e-9 for c in alone)
    # And all of them together, with a spare for every failure and the better interval, is no worse than the estimate
    assert found.ceilings[-1].ettr >= found.ettr.ettr - 1e-9
