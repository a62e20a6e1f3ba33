"""The fleet's comparison runs (issue 50): the goal set, the recalls side by side on one trace, the
planner's recommended settings for the run's inputs, and the enforced signal's prior."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.at_risk.settings import parse_signal_settings
from hyperpod_recovery_cli.goodput_inputs import combine, defaults_layer
from hyperpod_recovery_cli.planner import plan_goodput
from sandbox.fleet.compare import GOAL_RECALL, TRACE_SIGNALS, RunSpec, at_risk_signals, compare_specs, expected_precision, goal_specs
from sandbox.fleet.runner import FleetRunner
from sandbox.fleet.settings import JOB_KINDS, run_inputs
from sandbox.fleet.trace import generate

BASE = RunSpec(nodes=2048, days=54, recall=0.5, false_alarm_rate=0.28)


def test_the_goal_set_is_each_job_kind_planner_recommended_without_and_with_planned_swaps_at_half_recall() -> None:
    runs = goal_specs(BASE)
    assert [(r.job_kind, r.recommended, r.planned_swaps, r.recall) for r in runs] == [
        ("default", True, False, GOAL_RECALL),
        ("default", True, True, GOAL_RECALL),
        ("async", True, False, GOAL_RECALL),
        ("async", True, True, GOAL_RECALL),
    ]


def test_runs_side_by_side_share_one_trace_and_differ_only_in_the_failures_announced() -> None:
    runs = compare_specs(RunSpec(nodes=512, days=20, false_alarm_rate=0.28), (0.0, 0.25, 0.5, 0.75))
    traces = [generate(r.trace_spec()) for r in runs]
    # Given the run without planned swaps first, then one per recall
    assert [r.planned_swaps for r in runs] == [False, True, True, True, True]
    # Then every run has the same failures, and a higher recall announces a superset
    assert all(t.failures == traces[0].failures for t in traces)
    announced = [{p for p in t.precursors if p.failure is not None} for t in traces[1:]]
    assert all(a <= b for a, b in itertools.pairwise(announced))


def test_planner_recommended_settings_are_the_planners_for_the_runs_inputs() -> None:
    spec = RunSpec(nodes=2048, days=54, recall=0.5, false_alarm_rate=0.28, recommended=True, job_kind="async")
    plan, advice = spec.plan()
    kind = JOB_KINDS["async"]
    first = plan_goodput(
        combine([run_inputs(2048, spec.rate, kind, spec.checkpoint_interval_seconds, 0, spec.precursor_figures()), defaults_layer()])
    )
    # (planned again with the spares it recommends: the interval and the swap rule the run will have)
    spares = first.spares.p99_spares
    expected = plan_goodput(
        combine([run_inputs(2048, spec.rate, kind, spec.checkpoint_interval_seconds, spares, spec.precursor_figures()), defaults_layer()])
    )
    # Then the interval, the spares and the job's figures are the planner's and the kind's
    assert plan.checkpoint_interval_seconds == round(expected.interval.best_seconds, 1)
    assert plan.spares == expected.spares.p99_spares
    assert (plan.checkpoint_cost_seconds, plan.restart_seconds) == (5.0, 180.0)
    assert plan.planned_swaps == (expected.planned_swaps is not None and expected.planned_swaps.action != "leave")
    assert advice is not None and advice["plan"]["interval"]["best_seconds"] == expected.interval.best_seconds


def test_a_run_without_planned_swaps_gets_the_interval_the_planner_gives_a_job_without_them() -> None:
    with_swaps = RunSpec(nodes=2048, days=54, recall=0.5, false_alarm_rate=1.58, recommended=True, planned_swaps=True)
    without = RunSpec(nodes=2048, days=54, recall=0.5, false_alarm_rate=1.58, recommended=True, planned_swaps=False)
    kind = JOB_KINDS["default"]
    alone = plan_goodput(combine([run_inputs(2048, without.rate, kind, without.checkpoint_interval_seconds, 0, None), defaults_layer()]))
    # When each is planned
    (swapping, _), (plain, advice) = with_swaps.plan(), without.plan()
    # Then the run without swaps checkpoints at the planner's best interval over every failure
    assert plain.checkpoint_interval_seconds == round(alone.interval.best_seconds, 1)
    assert advice is not None and advice["plan"]["planned_swaps"] is None
    # And the run with swaps at a longer one: the failures they take first lose no rework
    assert swapping.checkpoint_interval_seconds > plain.checkpoint_interval_seconds


def test_without_planned_swaps_no_signal_is_enforced_and_none_is_in_the_scenario() -> None:
    spec = RunSpec(nodes=64, days=30, recall=0.75, false_alarm_rate=5.0, recommended=True, planned_swaps=False)
    plan, _ = spec.plan()
    trace = generate(spec.trace_spec())
    assert trace.precursors and not plan.planned_swaps and plan.at_risk_signals == ""
    assert all(fault.kind != "at_risk" for fault in plan.scenario(trace).faults)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32), recall=st.floats(min_value=0.2, max_value=0.9), rate=st.floats(0.1, 2.0))
def test_the_enforced_signals_prior_is_the_precision_the_trace_gives(seed: int, recall: float, rate: float) -> None:
    spec = RunSpec(nodes=2048, days=200, seed=seed, recall=recall, false_alarm_rate=rate)
    trace = generate(spec.trace_spec())
    true = sum(1 for p in trace.precursors if p.failure is not None)
    measured = true / len(trace.precursors)
    # Then the expected precision is the trace's, within 5 binomial standard deviations
    p = expected_precision(spec)
    assert abs(measured - p) <= 5 * math.sqrt(p * (1 - p) / len(trace.precursors)) + 0.005, (measured, p)
    # And every signal the trace sends is enforced at that prior (the pipeline's own reading of the setting)
    table = parse_signal_settings(at_risk_signals(spec)).table
    assert all(table[signal].mode == "enforce" and table[signal].prior == max(0.01, round(p, 2)) for signal in [*TRACE_SIGNALS, "*"])


def test_with_planned_swaps_an_announced_failure_is_swapped_away_and_a_false_alarm_costs_a_swap() -> None:
    # Given one trace (64 nodes, 1 day: a failure announced 72 min before it, a false alarm), a spare,
    # run without planned swaps and with them at 100 % recall, through the real pipeline
    without, with_swaps = (spec.run() for spec in compare_specs(RunSpec(nodes=64, days=1, seed=9, false_alarm_rate=4.0, spares=1), (1.0,)))
    # Then without: the failure hits the job, nothing is sent, no stop of the pipeline's own
    assert len(without["hits"]) == 1 and without["precursors"]["signals_sent"] == 0 and without["planned_stops"] == []
    # And with: every signal is sent, the announced failure never happens, and the job moved once per signal
    assert with_swaps["precursors"]["signals_sent"] == 2 and with_swaps["precursors"]["failures_averted"] == 1
    assert with_swaps["hits"] == [] and [s["kind"] for s in with_swaps["planned_stops"]] == ["swap", "false_alarm"]
    # And each swap ran again on the spare at the commit, and its cost is its own part of the job's loss
    assert all(s["restarted_at"] is not None for s in with_swaps["planned_stops"])
    (job,) = with_swaps["jobs"]
    assert job["planned_swaps"] == 1 and job["false_alarm_swaps"] == 1
    assert job["ettr_points_lost"]["lost_work"] == 0 < job["ettr_points_lost"]["swaps"]
    assert job["ettr_points_lost"]["false_alarms"] > 0
    assert 100 * (1 - job["ettr"]) == pytest.approx(sum(job["ettr_points_lost"].values()), abs=0.01)
    # And never two copies of one job
    assert with_swaps["safety"]["second_copies"] == [] and without["safety"]["second_copies"] == []


def test_the_fleet_stack_is_told_the_jobs_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shrink rule and a planned swap's cost read ElasticGrowBackSeconds until the ledger measured a restart:
    a run of the async job (3-minute restart) deployed with the template's 5 minutes had its swaps priced too dear."""
    spec = RunSpec(nodes=64, days=1, recall=0.5, false_alarm_rate=1.58, recommended=True, planned_swaps=True, job_kind="async")
    plan, _ = spec.plan()
    runner = FleetRunner(plan, generate(spec.trace_spec()), tmp_path / "fleet.log")
    deployed_with: dict[str, str] = {}

    class Deployed(Exception):
        pass

    def deployed(overrides: dict[str, str] | None = None) -> None:
        deployed_with.update(overrides or {})
        raise Deployed

    monkeypatch.setattr(runner, "deployed", deployed)
    # When the run deploys its stack
    with pytest.raises(Deployed):
        runner.run_fleet()
    # Then the stack has the job's own restart and the run's at-risk settings
    assert deployed_with == {"ElasticGrowBackSeconds": "180", "AtRiskSignals": plan.at_risk_signals}
