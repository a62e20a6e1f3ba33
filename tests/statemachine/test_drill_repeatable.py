"""The drill is an instrument: the same scenario gives the same report every time, however busy the
machine and however many drills run at once, and it never hangs (sandbox/clock.py, sandbox/slurm/)."""

from __future__ import annotations

import math
import multiprocessing
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.models.commands import CommandEnvelope, JobsOnNodes
from sandbox.clock import EPOCH, VirtualClock
from sandbox.runner import DrillRunner
from sandbox.scenario import Scenario, load_scenario, with_changes
from tests.conftest import EVENTS

pytestmark = pytest.mark.sandbox

# One node, every signal for it: a health event, an alarm and the job on it failing NODE_FAIL. Three
# executions (the node recovery, the job recovery and its nested node recovery, a duplicate) that
# touch the same node, job and ledger at the same virtual moments. A two-minute replacement: fewer
# polls to interpret, the same interplay.
ONE_NODE_EVERY_SIGNAL = {
    "faults": [
        {"at": 60, "kind": "node_health", "node": "workers:2"},
        {"at": 61, "kind": "alarm", "node": "workers:2"},
        {"at": 62, "kind": "job_failed", "job": "5001", "job_state": "NODE_FAIL", "node": "workers:2"},
    ],
    "behaviour": {"replacement_seconds": 120},
}
RUNS_AT_ONCE = 8
# The one field read from real time. Everything else is virtual time, counts and text: handler work
# takes no virtual time, and executions take turns on the virtual clock in a fixed order.
WALL_CLOCK_FIELDS = {"wall_seconds"}


def _scenario() -> Scenario:
    base = load_scenario(EVENTS / "drills" / "job-and-health-event.json")
    return with_changes(base, ONE_NODE_EVERY_SIGNAL)


def _report(run: int, log_dir: str) -> dict[str, Any]:
    report = DrillRunner(_scenario(), log_path=Path(log_dir) / f"run-{run}-lambda.log").run()
    return {field: value for field, value in report.items() if field not in WALL_CLOCK_FIELDS}


# Python 3.12+ warns about fork() in a process with threads. Under pytest-xdist the worker has one:
# execnet's channel to the controller, which a child never touches; the drill's own threads have ended.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_a_multi_execution_drill_run_eight_at_once_gives_the_same_report_every_time(tmp_path: Path) -> None:
    # Given the three-execution scenario, run once on its own
    reference = _report(0, str(tmp_path))
    assert [i["outcome"] for i in reference["incidents"]] == ["recovered", "duplicate", "duplicate"]
    # When it runs eight times at once (forked, so each starts warm: a drill leaves no thread behind to
    # fork mid-lock), on two cores: the runs load the machine themselves
    with multiprocessing.get_context("fork").Pool(RUNS_AT_ONCE) as pool:
        reports = pool.map_async(partial(_report, log_dir=str(tmp_path)), range(1, RUNS_AT_ONCE + 1)).get(timeout=600)
    # Then every run finished, and every report is the reference: timeline, phases and time split to
    # the millisecond, API calls, commands, notifications, metrics
    for report in reports:
        assert [f for f in reference if report[f] != reference[f]] == []


def test_a_lambda_answers_only_its_own_task_command_so_no_thread_parks_under_another_execution(tmp_path: Path) -> None:
    # Given two executions' commands on the command queue, each sent by the Lambda of one task
    runner = DrillRunner(_scenario(), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        runner.clock.run_until(3600, set)  # no execution to wait for: the agent's latency jumps, it does not park
        node = runner.double.slurm_name("workers:2")
        for name in ("first", "second"):
            envelope = CommandEnvelope(
                command_id=f"{name}:jobs",
                incident_id=name,
                execution_name=name,
                task_token=f"token-{name}",
                requested_at=EPOCH,
                command=JobsOnNodes(nodes=[node]),
            )
            aws.client("sqs").send_message(QueueUrl=aws.queue_urls["CommandQueue"], MessageBody=envelope.model_dump_json())
        # When the first task's Lambda invocation ends and its controller pump runs
        runner.slurm.pump("token-first")
        # Then only the first command is answered (on the first execution's timeline and thread)
        assert [c["incident"] for c in runner.slurm.commands] == ["first"]
        # And the second is answered when its own task's Lambda returns, not lost
        runner.slurm.pump("token-second")
        assert [c["incident"] for c in runner.slurm.commands] == ["first", "second"]


def test_timelines_waking_at_the_same_moment_take_turns_in_name_order() -> None:
    # Given two executions started at the same virtual moment, each doing a step, a 5 s wait, a step
    clock = VirtualClock()
    steps: list[tuple[str, float]] = []

    def execution(name: str) -> None:
        with clock.on(name):
            clock.hold(name)
            steps.append((name, clock.now()))
            clock.sleep(5)
            steps.append((name, clock.now()))

    threads = {name: threading.Thread(target=execution, args=(name,)) for name in ("b", "a")}
    for thread in threads.values():
        thread.start()
    # When the runner lets them run to the end
    clock.run_until(math.inf, lambda: {name for name, thread in threads.items() if thread.is_alive()})
    for thread in threads.values():
        thread.join()
    # Then they ran one at a time, in the same order at each moment, whichever thread started first
    assert steps == [("a", 0.0), ("b", 0.0), ("a", 5.0), ("b", 5.0)]
