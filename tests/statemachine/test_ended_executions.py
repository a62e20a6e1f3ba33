"""No end is lost, and a start is counted once, on the real state machines and handlers: drills whose
status-change events never arrive (EventBridge delivers them best effort) are settled by the sweep
of ended executions running on the virtual clock; StartExecution's answers that are lost, or that
repeat an execution already running, are one execution, counted once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.steps.sweep_ended_executions import GRACE
from sandbox.fault_suite import SUITE, scenario_of
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes
from tests.conftest import EVENTS

pytestmark = pytest.mark.sandbox

FAULTS = {f.name: f for f in SUITE}


def _run(scenario: Any, tmp_path: Path) -> tuple[dict[str, Any], DrillRunner]:
    runner = DrillRunner(scenario, log_path=tmp_path / "lambda.log")
    return runner.run(), runner


def _sum(report: dict[str, Any], metric: str) -> float:
    return sum(report["metrics"].get(metric, {}).get("values", []))


def _event_received(incident: dict[str, Any]) -> float:
    return next(t["at"] for t in incident["timeline"] if t["event"] == "event received")


@pytest.mark.parametrize(
    "source", ["drill:abort-event-lost", "fault:status-change-events-lost", "fault:record-outcome-dies-and-its-event-is-lost"]
)
def test_an_end_whose_event_never_came_is_settled_by_the_next_sweep(source: str, tmp_path: Path) -> None:
    # Given a drill whose executions' status-change events never arrive
    kind, name = source.split(":")
    scenario = load_scenario(EVENTS / "drills" / f"{name}.json") if kind == "drill" else scenario_of(FAULTS[name])
    report, runner = _run(scenario, tmp_path)
    assert runner.ends_lost and runner.ends_published == set(runner.ends_lost)
    # Then every incident ends recorded, and nothing stays held
    assert all(i["outcome"] and i["execution_status"] != "RUNNING" for i in report["incidents"])
    ledger = report["ledger_at_end"]
    assert (ledger["nodes_reserved"], ledger["open_claims"], ledger["incidents_holding"]) == ([], [], [])
    # And one that ended without recording is recorded by the sweep within a period (and its grace) of its end, and notified once
    unrecorded = [i for i in report["incidents"] if i["outcome"] in ("aborted", "failed")]
    for incident in unrecorded:
        ended = next(t["at"] for t in incident["timeline"] if t["event"].startswith("execution "))
        recorded = incident["timeline"][-1]["at"]
        assert 0 < recorded - ended <= runner.sweep_period + GRACE.total_seconds(), (incident["id"], ended, recorded)
        assert sum(incident["id"] in n["message"] for n in report["notifications"]) == 1
    assert _sum(report, "EndsRecordedBySweep") == len(unrecorded) and report["metrics"]["EndSweepsCompleted"]["values"]
    assert all(v == 1.0 for v in report["metrics"]["EndSweepsCompleted"]["values"])


def test_a_record_step_whose_answers_are_all_lost_ends_as_it_decided_with_no_end_for_the_sweep(tmp_path: Path) -> None:
    # Given Record Outcome's answer lost past its retries (it ran; its answer is in the ledger), and no
    # status-change event
    scenario = with_changes(scenario_of(FAULTS["record-outcome-dies-past-retries"]), {"behaviour": {"execution_end_events_lost": True}})
    report, runner = _run(scenario, tmp_path)
    # Then the execution reads what the step answered from the ledger and ends as it decided: nothing
    # is left for the sweep, and its one page went out
    assert [(i["outcome"], i["execution_status"]) for i in report["incidents"]] == [("recovered", "SUCCEEDED")]
    assert not runner.ends_lost and len(report["notifications"]) == 1


def test_the_same_drill_ends_the_same_with_or_without_its_events(tmp_path: Path) -> None:
    # Given a recovery stopped mid-rejoin, then two faults, with and without the status-change events
    with_events, _ = _run(load_scenario(EVENTS / "drills" / "abort-mid-rejoin.json"), tmp_path)
    without, _ = _run(load_scenario(EVENTS / "drills" / "abort-event-lost.json"), tmp_path)
    # Then the incidents end alike (the sweep is minutes late, within the cap place kept for the replacement)
    outcomes = [(i["outcome"], i["error"]) for i in with_events["incidents"]]
    assert (
        outcomes
        == [(i["outcome"], i["error"]) for i in without["incidents"]]
        == [
            ("aborted", "Drill.Abort"),
            ("capped", "ClusterCapReached"),
            ("recovered", None),
        ]
    )


def test_the_sweep_runs_every_five_minutes_and_settles_nothing_twice(tmp_path: Path) -> None:
    # Given a drill whose events all arrive
    report, runner = _run(load_scenario(EVENTS / "drills" / "abort-mid-rejoin.json"), tmp_path)
    # Then the sweep ran on its schedule and found nothing left to do: the events had settled every end
    ticks = [at for at, _ in runner.sweep_responses]
    assert ticks == [runner.sweep_period * (k + 1) for k in range(len(ticks))] and len(ticks) >= 10
    assert _sum(report, "EndsRecordedBySweep") == 0 and len(report["notifications"]) == len(report["incidents"])


def test_a_start_whose_answer_was_lost_is_one_execution_counted_once(tmp_path: Path) -> None:
    # Given StartExecution's first answer lost (botocore sends it again: Step Functions answers with the running execution)
    report, _ = _run(scenario_of(FAULTS["start-execution-answer-lost"]), tmp_path)
    # Then one execution was started, once, and counted once
    assert report["api_calls"]["stepfunctions.StartExecution"] == 2 and report["executions"] == 1
    assert _sum(report, "ExecutionsStarted") == 1 and _sum(report, "IntakeDuplicates") == 0


def test_a_failure_the_poller_finds_again_while_its_recovery_runs_is_counted_once(tmp_path: Path) -> None:
    # Given a failed job found by three polls a minute apart, while its recovery waits out its backoff
    report, _ = _run(scenario_of(FAULTS["eks-failure-polled-while-its-recovery-runs"]), tmp_path)
    # Then one recovery started, and it is counted once: the later polls remember they started it (the
    # poller's memory); had they not, StartExecution's idempotent repeat is not counted either
    # (tests/contract/test_start_execution.py)
    assert report["api_calls"]["stepfunctions.StartExecution"] == 1 and report["executions"] == 1
    assert report["metrics"]["FailedJobsStarted"]["values"] == [1.0, 0.0, 0.0]
