"""The sandbox lets go of the threads moto's Step Functions interpreter ended (sandbox/aws/threads.py):
a 54-day fleet run kept some 30,000, each with its stack mapped, until the kernel refused a new one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.stepfunctions.parser.utils import TMP_THREADS

from sandbox.aws.threads import KEPT_WITHOUT_A_LOOK, release_ended_threads
from sandbox.fleet.plan import FleetPlan, JobMix
from sandbox.fleet.runner import FleetRunner
from sandbox.fleet.trace import TraceSpec, generate


@pytest.fixture
def interpreter_threads() -> Iterator[list[threading.Thread]]:
    """moto's list, emptied for the test and given back as it was (it is the process's)."""
    kept = list(TMP_THREADS)
    TMP_THREADS.clear()
    try:
        yield TMP_THREADS
    finally:
        TMP_THREADS[:] = kept + [t for t in TMP_THREADS if t not in kept]


def _ended_thread() -> threading.Thread:
    thread = threading.Thread(target=lambda: None, daemon=True)
    thread.start()
    thread.join()
    return thread


def test_given_many_ended_threads_then_they_go_and_a_running_or_unstarted_one_stays(interpreter_threads: list[threading.Thread]) -> None:
    # Given the interpreter's list with ended threads, one still running and one not started yet
    release = threading.Event()
    running = threading.Thread(target=release.wait, daemon=True)
    running.start()
    unstarted = threading.Thread(target=lambda: None, daemon=True)
    ended = [_ended_thread() for _ in range(KEPT_WITHOUT_A_LOOK)]
    interpreter_threads.extend([*ended, running, unstarted])
    try:
        # When the sandbox releases the ended ones
        released = release_ended_threads()
        # Then exactly those went; the running and the unstarted one stay
        assert released == len(ended)
        assert interpreter_threads == [running, unstarted]
    finally:
        release.set()
        running.join()


def test_given_few_threads_then_the_list_is_not_looked_at(interpreter_threads: list[threading.Thread]) -> None:
    ended = [_ended_thread() for _ in range(KEPT_WITHOUT_A_LOOK - 1)]
    interpreter_threads.extend(ended)
    assert release_ended_threads() == 0 and interpreter_threads == ended


def test_given_a_fleet_run_then_the_interpreter_keeps_no_pile_of_ended_threads(tmp_path: Path) -> None:
    # Given a fleet run with a dozen incidents (each state they evaluate is a thread of moto's)
    trace = generate(TraceSpec(nodes=64, days=3, seed=0, rate_per_1000_node_days=60.0))
    plan = FleetPlan(nodes=64, days=3, mix=JobMix.parse("1", 64), spares=2)
    # When it runs through the pipeline
    report = FleetRunner(plan, trace, tmp_path / "fleet.log").run_fleet()
    # Then it ran many executions, and fewer ended threads are kept than the sandbox looks past
    assert report["executions"]["total"] >= 10, report["executions"]
    ended = [thread for thread in TMP_THREADS if thread._started.is_set() and not thread.is_alive()]
    assert len(ended) < KEPT_WITHOUT_A_LOOK, len(ended)
