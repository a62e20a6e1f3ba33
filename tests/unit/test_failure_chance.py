"""The restart rules give a large job the room its size explains (domain/jobs/failure_chance.py): a count over
the budget or the crash-loop repeats pages only when independent faults at the job's size would reach
it with a chance under 0.1 %. Found by the fleet drill: a 2,048-node job meets 1.2 job-only faults a
day at Llama 3's rate, so a fixed 3 a day, or two faults within one checkpoint interval, paged a
human for chance."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.jobs.failure_chance import CHANCE_LIMIT, chance_of_at_least, expected_failures, exposure_seconds, is_chance
from hyperpod_recovery.domain.jobs.job_failure import plan_restart
from hyperpod_recovery.errors import CrashLoopDetected, RestartBudgetExhausted
from hyperpod_recovery.models.job_recovery import FailureClassification, RestartDecision, RestartEntry
from tests.fakes import T0
from tests.unit.test_job_recovery import POLICY, _checkpoints, _entry, _failure, _job, _request

LLAMA3_JOB_ONLY = 0.57  # template.yaml's JobFailuresPer1000NodeDays default


def _decide(nodes: int, history: list[RestartEntry], step: int = 2000, rate: float = LLAMA3_JOB_ONLY) -> RestartDecision:
    job = _job(num_nodes=nodes)
    classification = FailureClassification(at=T0, kind="application", reason="r", job=job, jobs=[job], node_execution_name="hpj-8-nodes")
    return plan_restart(
        _request(_failure()),
        classification,
        _checkpoints(step),
        claim=None,
        lineage_root="8",
        history=history,
        policy=replace(POLICY, job_failures_per_1000_node_days=rate),
        execution_name="hpj-8",
        now=T0,
    )


# --- the chance itself --------------------------------------------------------------------------------
def test_the_poisson_tail_matches_its_closed_forms() -> None:
    assert chance_of_at_least(1, 1.0) == pytest.approx(1 - math.exp(-1))
    assert chance_of_at_least(2, 0.5) == pytest.approx(1 - math.exp(-0.5) * 1.5)
    assert chance_of_at_least(0, 0.0) == 1.0 and chance_of_at_least(1, 0.0) == 0.0
    # A 2,048-node job at Llama 3's job-only rate meets 1.17 failures a day
    assert expected_failures(2048, LLAMA3_JOB_ONLY, 86_400) == pytest.approx(1.167, abs=1e-3)


@settings(max_examples=300, deadline=None)
@given(count=st.integers(0, 40), mean=st.floats(0, 50), more=st.floats(0, 10))
def test_the_chance_is_a_probability_falling_with_the_count_and_rising_with_the_mean(count: int, mean: float, more: float) -> None:
    p = chance_of_at_least(count, mean)
    assert 0.0 <= p <= 1.0
    assert chance_of_at_least(count + 1, mean) <= p + 1e-12
    assert chance_of_at_least(count, mean + more) >= p - 1e-12


@settings(max_examples=200, deadline=None)
@given(nodes=st.integers(1, 10_000), count=st.integers(1, 20), seconds=st.floats(0, 30 * 86_400))
def test_at_rate_zero_nothing_is_chance(nodes: int, count: int, seconds: float) -> None:
    assert is_chance(count, nodes, 0.0, seconds) == (False, 0.0)


# --- the crash-loop rule --------------------------------------------------------------------------------
def test_two_failures_at_a_step_half_an_hour_apart_are_chance_on_2048_nodes_and_a_loop_on_16() -> None:
    history = [_entry(2000, 0.5)]
    # Given a restart from step 2000 half an hour ago, and a failure again before the next checkpoint
    # Then a 2,048-node job is restarted again, its reason saying why this is not taken for a loop
    decision = _decide(2048, history)
    assert decision.action == "resubmit"
    assert (
        "1 failure(s) of the copies restarted from step 2000, in the 30 min they ran, are what independent faults bring a "
        "2048-node job by chance" in decision.reason
    )
    # And a 16-node job is a crash loop, as it always was
    with pytest.raises(CrashLoopDetected, match="step 2000"):
        _decide(16, history)
    # And so is the 2,048-node job when the stack says chance explains nothing (rate 0)
    with pytest.raises(CrashLoopDetected):
        _decide(2048, history, rate=0.0)


def test_a_third_failure_at_the_same_step_is_a_loop_even_on_2048_nodes() -> None:
    with pytest.raises(CrashLoopDetected, match="failed 3 times"):
        _decide(2048, [_entry(2000, 0.5, new="9"), _entry(2000, 0.25, new="10")])


def test_a_job_that_fails_at_once_from_the_same_step_is_a_loop_up_to_2048_nodes() -> None:
    # (restarted a minute ago: 0.08 % at 2,048 nodes; at 4,096 it is 0.16 %, and the third failure decides)
    with pytest.raises(CrashLoopDetected):
        _decide(2048, [_entry(2000, 1 / 60)])
    assert _decide(4096, [_entry(2000, 1 / 60)]).action == "resubmit"
    with pytest.raises(CrashLoopDetected):
        _decide(4096, [_entry(2000, 2 / 60, new="9"), _entry(2000, 1 / 60, new="10")])


# --- the budget --------------------------------------------------------------------------------------
def test_a_fourth_failure_in_a_day_is_within_what_chance_brings_a_2048_node_job() -> None:
    history = [_entry(100, 20), _entry(200, 12), _entry(300, 4)]
    decision = _decide(2048, history, step=400)
    assert decision.action == "resubmit" and decision.restarts_in_window == 3
    assert "restart 4 in 86400 s; over the budget of 3, but 3 failure(s) in the 20.0 h since the window's first restart" in decision.reason
    assert "of 3" not in decision.reason.split(";")[0]  # (never "restart 4 of 3")
    # And on 16 nodes the budget is exhausted, as before
    with pytest.raises(RestartBudgetExhausted, match="3 restarts"):
        _decide(16, history, step=400)


def test_failures_beyond_what_chance_brings_exhaust_the_budget_on_any_size() -> None:
    # Given 2,048 nodes and 7 restarts from 7 steps in a day (8 failures: expected 1.2)
    history = [_entry(100 * (k + 1), 23 - 3 * k, new=str(10 + k)) for k in range(7)]
    p = chance_of_at_least(8, expected_failures(2048, LLAMA3_JOB_ONLY, 86_400))
    assert p < CHANCE_LIMIT
    with pytest.raises(RestartBudgetExhausted, match="7 restarts"):
        _decide(2048, history, step=900)


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.integers(1, 10_000),
    hours_ago=st.lists(st.floats(0.01, 23.9), min_size=0, max_size=12),
    same_step=st.booleans(),
)
def test_the_chance_never_turns_an_escalation_into_a_restart_for_a_job_of_64_nodes_or_fewer_within_half_an_hour(
    nodes: int, hours_ago: list[float], same_step: bool
) -> None:
    """Whatever the history, the rate only ever lets a restart go on where rate 0 would escalate (never
    the reverse), and for a job of 64 nodes or fewer whose repeats came within half an hour, never."""
    history = [_entry(2000 if same_step else 100 + k, h, new=str(10 + k)) for k, h in enumerate(sorted(hours_ago, reverse=True))]

    def outcome(rate: float) -> str:
        try:
            return _decide(nodes, history, step=2000, rate=rate).action
        except (CrashLoopDetected, RestartBudgetExhausted) as exc:
            return type(exc).__name__

    with_rate, without = outcome(LLAMA3_JOB_ONLY), outcome(0.0)
    # (an escalation may be another one: a crash loop chance explains can still exhaust the budget)
    if without == "resubmit":
        assert with_rate == "resubmit"
    if nodes <= 64 and same_step and history and (T0 - history[0].restarted_at) <= timedelta(minutes=30):
        assert (with_rate == "resubmit") == (without == "resubmit")


def test_a_copy_is_at_risk_of_a_chance_fault_only_until_the_next_restart_and_at_most_an_hour() -> None:
    # Given restarts from one step 14 h, 1 h and 30 min ago
    starts = [T0 - timedelta(hours=14), T0 - timedelta(hours=1), T0 - timedelta(minutes=30)]
    # Then the copies were at risk 1 h (capped, not 13 h), 30 min and 30 min
    assert exposure_seconds(starts, T0) == 3600 + 1800 + 1800
    # So three failures from one step across 14 hours are a loop on 574 nodes, not chance
    with pytest.raises(CrashLoopDetected):
        _decide(574, [_entry(2000, 14, new="9"), _entry(2000, 1, new="10"), _entry(2000, 0.5, new="11")])


def test_four_failures_within_an_hour_exhaust_the_budget_even_on_2048_nodes() -> None:
    # (restarts 60, 40 and 20 minutes ago: 3 failures in an hour, where 0.05 are expected)
    with pytest.raises(RestartBudgetExhausted):
        _decide(2048, [_entry(100, 1.0), _entry(200, 2 / 3, new="10"), _entry(300, 1 / 3, new="11")], step=400)


@settings(max_examples=100, deadline=None)
@given(nodes=st.integers(1, 10_000), rate=st.floats(0, 100))
def test_a_budget_of_zero_never_restarts_after_an_application_failure_whatever_the_chance(nodes: int, rate: float) -> None:
    job = _job(num_nodes=nodes)
    classification = FailureClassification(at=T0, kind="application", reason="r", job=job, jobs=[job], node_execution_name="hpj-8-nodes")
    with pytest.raises(RestartBudgetExhausted):
        plan_restart(
            _request(_failure()),
            classification,
            _checkpoints(2000),
            claim=None,
            lineage_root="8",
            history=[],
            policy=replace(POLICY, budget=0, job_failures_per_1000_node_days=rate),
            execution_name="hpj-8",
            now=T0,
        )


@pytest.mark.parametrize(("count", "mean"), [(5000, 800.0), (2000, 1000.0), (40, 10.0), (31_000, 30_000.0)])
def test_the_tail_far_above_a_large_mean_is_small_not_certain(count: int, mean: float) -> None:
    # (exp(-800) underflows: a naive sum said every count was certain, and no limit ever escalated)
    p = chance_of_at_least(count, mean)
    # (under Chernoff's bound for a Poisson tail above its mean: P(N >= k) <= e^-m (e m / k)^k)
    bound = math.exp(-mean + count * (1 + math.log(mean) - math.log(count)))
    assert 0.0 <= p <= bound * (1 + 1e-9)
    assert chance_of_at_least(int(mean * 0.9), mean) > 0.5
