"""The planner's formulas against figures published or derived from published data.

Sources:
- Daly, J. T., "A higher order estimate of the optimum checkpoint interval for restart dumps",
  Future Generation Computer Systems 22(3), 2006, doi:10.1016/j.future.2004.11.016. Figs 3-5 (R = 10 min,
  δ = 5 min) give τ_opt = 117, 57 and 9.1 min for M = 24 h, 6 h and 15 min.
- Llama Team, AI @ Meta, "The Llama 3 Herd of Models", arXiv 2407.21783, §3.3.4 and Table 5: 419
  unexpected interruptions on 2,048 hosts of 8 H100 over 54 days, i.e. 3.79 per 1,000 node-days.
- The worked example of ../shared/reference/goodput-models.md §3 (arithmetic re-checked for this
  test): 256 p5.48xlarge at that rate, τ = 30 min, δ = 60 s, R = 15 / 5 / 1 min. M = 1,484 min; Daly's
  ETTR 94.80 / 95.45 / 95.70 %; Meta's first order 94.82 / 95.47 / 95.73 %; Young 54.5 min, Daly
  53.8 min; at 2,048 nodes (M = 3.09 h) τ = 30 min gives 82.01 / 86.55 / 88.44 %, Daly's τ* = 18.6 min.
- Spares (same note §3): 256 nodes, 2-day repair, nodes in repair ~ Poisson(1.94), P99 = 6.
"""

from __future__ import annotations

import pytest

from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner import plan_goodput
from hyperpod_recovery_cli.planner.model import PlannerInputs

LLAMA3_PER_NODE_DAY = 419 / (2048 * 54)


def inputs(nodes: int, *, recovery_minutes: float, interval_minutes: float = 30, cost_seconds: float = 60, **more: object) -> PlannerInputs:
    """A recovery of ``recovery_minutes`` all in one phase (the split does not change ETTR)."""
    phases = dict.fromkeys(("detect", "cordon", "replace", "rejoin", "health_gate"), 0.0) | {"restart": recovery_minutes * 60}
    return PlannerInputs.model_validate(
        {
            "nodes": nodes,
            "failure_rate": {"failures": 419, "node_days": 2048 * 54},
            "phases_seconds": phases,
            "checkpoint_interval_seconds": interval_minutes * 60,
            "checkpoint_cost_seconds": cost_seconds,
        }
        | more
    )


@pytest.mark.parametrize(("mttf_minutes", "published_minutes"), [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_interval_reproduces_dalys_figures(mttf_minutes: float, published_minutes: float) -> None:
    # Given Daly's δ = 5 min and his three MTTFs
    # When the higher-order interval is computed
    interval = f.daly_interval(5, mttf_minutes)
    # Then it is the published optimum, within the figure's rounding
    assert interval == pytest.approx(published_minutes, abs=0.5 if published_minutes > 10 else 0.05)


def test_the_numeric_optimum_agrees_with_dalys_closed_form() -> None:
    # Given Daly's M = 6 h, δ = 5 min
    # When the interval that maximizes Daly's ETTR is searched for
    # Then it is the closed form's, within a tenth of a minute (the closed form is an approximation)
    assert f.best_interval(5, 360) == pytest.approx(f.daly_interval(5, 360), abs=0.1)


def test_llama3_rate_gives_the_notes_job_mttf_at_256_nodes() -> None:
    # Given Llama 3's 419 failures over 2,048 nodes x 54 days
    # When the MTTF of a 256-node job is computed
    # Then it is 24.7 h (1,485 min)
    assert f.job_mttf_minutes(256, LLAMA3_PER_NODE_DAY) / 60 == pytest.approx(24.7, abs=0.05)


@pytest.mark.parametrize(("recovery", "daly", "first_order"), [(15, 94.80, 94.82), (5, 95.45, 95.47), (1, 95.70, 95.73)])
def test_worked_example_ettr_at_256_nodes(recovery: float, daly: float, first_order: float) -> None:
    # Given the worked example: 256 nodes, τ = 30 min, δ = 60 s
    # When the planner runs with a recovery of 15, 5 or 1 min
    plan = plan_goodput(inputs(256, recovery_minutes=recovery))
    # Then Daly's and Meta's ETTR are the published ones to two decimals of a percent
    assert 100 * plan.ettr.ettr == pytest.approx(daly, abs=0.005)
    assert 100 * plan.ettr.first_order_ettr == pytest.approx(first_order, abs=0.005)


def test_worked_example_intervals_at_256_nodes() -> None:
    # Given the worked example
    plan = plan_goodput(inputs(256, recovery_minutes=15))
    # Then Young says 54.5 min, Daly 53.8 min, and ETTR at that interval is 95.41 %
    assert plan.interval.young_seconds / 60 == pytest.approx(54.5, abs=0.05)
    assert plan.interval.daly_seconds / 60 == pytest.approx(53.8, abs=0.05)
    assert 100 * plan.interval.ettr_at_best == pytest.approx(95.41, abs=0.005)


def test_worked_example_recovery_15_to_1_min_buys_090_points() -> None:
    # Given the worked example at 15 and at 1 min of recovery
    slow, fast = plan_goodput(inputs(256, recovery_minutes=15)), plan_goodput(inputs(256, recovery_minutes=1))
    # Then the 14 minutes buy 0.90 ETTR points
    assert 100 * (fast.ettr.ettr - slow.ettr.ettr) == pytest.approx(0.90, abs=0.005)
    # And the 15-min phase costs R/M = 1.0 % at first order (the note's 0.067 points a minute, 1/M),
    # while Daly's ETTR falls by ETTR/M a minute: 0.064 points
    (restart,) = [cost for cost in slow.phases if cost.phase == "restart"]
    assert restart.ettr_points == pytest.approx(15 * 0.067, abs=0.01)
    assert restart.minute_less_points == pytest.approx(100 * slow.ettr.ettr / f.job_mttf_minutes(256, LLAMA3_PER_NODE_DAY), abs=0.0005)


@pytest.mark.parametrize(("recovery", "published"), [(15, 82.01), (5, 86.55), (1, 88.44)])
def test_worked_example_at_llama3_scale(recovery: float, published: float) -> None:
    # Given 2,048 nodes (M = 3.09 h), τ = 30 min, δ = 60 s
    plan = plan_goodput(inputs(2048, recovery_minutes=recovery))
    # Then ETTR is the note's table C, and Daly's interval 18.6 min
    assert plan.ettr.mttf_hours == pytest.approx(3.09, abs=0.005)
    assert 100 * plan.ettr.ettr == pytest.approx(published, abs=0.005)
    assert plan.interval.daly_seconds / 60 == pytest.approx(18.6, abs=0.05)


def test_worked_example_spares_for_a_two_day_repair() -> None:
    # Given 256 nodes at Llama 3's rate (3.79 per 1,000 node-days) and a two-day repair
    plan = plan_goodput(inputs(256, recovery_minutes=15, failure_rate={"per_1000_node_days": 3.79}, repair_seconds=2 * 86_400))
    # Then about 1.94 nodes are in repair at once, 6 at the 99th percentile (the note's figure), and
    # 7 spares let 99 % of failures find one (the failing node needs one besides those 6)
    assert plan.spares.expected_in_repair == pytest.approx(1.94, abs=0.005)
    assert plan.spares.p99_in_repair == 6
    assert plan.spares.p99_spares == 7
