"""The sandbox's virtual clock: a stopped execution's thread winds down at once, and a waiting
thread whose answer came early goes on from the present (sandbox/clock.py)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from hyperpod_recovery.domain.record.phases import phases_from_states
from sandbox.clock import VirtualClock
from tests.fakes import T0


def _parked_sleeper(clock: VirtualClock, name: str, seconds: float) -> tuple[threading.Thread, list[float]]:
    woke_at: list[float] = []

    def run() -> None:
        clock.sleep(seconds, timeline=name)
        woke_at.append(clock.now(name))
        clock.sleep(seconds, timeline=name)  # a stopped timeline never parks again
        woke_at.append(clock.now(name))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    clock.wait_until_parked(lambda: {name})
    return thread, woke_at


def test_a_stopped_execution_goes_on_at_once_and_never_waits_again() -> None:
    # Given an execution parked in a 600 s wait, the runner at t=400
    clock = VirtualClock()
    clock.start_timeline("exec", parent="exec")
    thread, woke_at = _parked_sleeper(clock, "exec", 600)
    clock.run_until(400, lambda: {"exec"})
    # When it is stopped
    clock.stop("exec")
    thread.join(timeout=10)
    # Then its thread ran on at once, at the moment of the stop, and its next wait did not park
    assert not thread.is_alive() and woke_at == [400, 400]


def test_a_woken_wait_goes_on_from_the_present_and_later_waits_park_again() -> None:
    clock = VirtualClock()
    clock.start_timeline("exec", parent="exec")
    woke_at: list[float] = []

    def run() -> None:
        clock.sleep(600, timeline="exec")
        woke_at.append(clock.now("exec"))
        clock.sleep(30, timeline="exec")
        woke_at.append(clock.now("exec"))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    clock.wait_until_parked(lambda: {"exec"})
    clock.run_until(100, lambda: {"exec"})
    # When its answer comes at t=100
    assert clock.wake("exec") is True
    assert woke_at == []  # due now, but it goes only when the runner lets it (one at a time)
    clock.run_until(100, lambda: {"exec"})
    # Then it went on at t=100 and parks again for its next wait, which ends on virtual time
    assert woke_at == [100]
    clock.run_until(200, lambda: {"exec"} if thread.is_alive() else set())
    thread.join(timeout=10)
    assert woke_at == [100, 130]
    assert clock.wake("nobody") is False


def test_phases_from_states_merge_consecutive_states_of_one_phase_and_end_at_the_stop() -> None:
    at = [T0 + timedelta(seconds=s) for s in (0, 1, 5, 10, 20, 700)]
    states = [
        ("Lock Nodes", at[0]),
        ("Assess Nodes", at[1]),
        ("Cordon Nodes", at[2]),
        ("Replace Nodes", at[3]),
        ("Wait For Rejoin", at[4]),
        ("Check Rejoin", at[5]),
    ]
    phases = phases_from_states(states, T0 + timedelta(seconds=900))
    assert [(p.name, (p.start - T0).seconds, (p.end - T0).seconds) for p in phases] == [
        ("assess", 0, 5),
        ("cordon", 5, 10),
        ("replace", 10, 20),
        ("wait_for_rejoin", 20, 900),
    ]
    assert phases_from_states([], T0) == [] and phases_from_states([("Unknown", T0)], T0)[0].name == "other"


def test_the_drill_cli_reads_the_same_phases_from_a_history_in_seconds_since_the_start() -> None:
    # Given an execution's history as GetExecutionHistory gives it (other events between the states)
    from hyperpod_recovery_cli.drill import Phase as DrillPhase
    from hyperpod_recovery_cli.drill import phases_from_history

    def entered(name: str, seconds: int) -> dict[str, Any]:
        return {"type": "TaskStateEntered", "timestamp": T0 + timedelta(seconds=seconds), "stateEnteredEventDetails": {"name": name}}

    events = [
        {"type": "ExecutionStarted", "timestamp": T0},
        entered("Lock Nodes", 0),
        entered("Cordon Nodes", 5),
        {"type": "TaskScheduled", "timestamp": T0 + timedelta(seconds=6)},
        entered("A State From A Newer Stack", 9),
        entered("Replace Nodes", 10),
        {"type": "ExecutionSucceeded", "timestamp": T0 + timedelta(seconds=30)},
    ]
    # When the drill CLI turns it into phases, Then they are the record's phases (domain/record/phases.py),
    # an unknown state is "other", and the last phase runs to the history's last event
    assert phases_from_history(events) == [
        DrillPhase("assess", 0, 5),
        DrillPhase("cordon", 5, 9),
        DrillPhase("other", 9, 10),
        DrillPhase("replace", 10, 30),
    ]
    assert phases_from_history([]) == []
