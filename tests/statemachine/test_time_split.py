"""The report's time split, for every drill: phases come from what happened whatever the outcome,
the parts add up to the workflow time (in the JSON and as printed), and waiting on AWS, on the
agent, on a backoff or on another incident is never called pipeline overhead (sandbox/report/)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from sandbox.report import format_report, format_time_split
from tests.conftest import EVENTS
from tests.statemachine.conftest import only_incident

pytestmark = pytest.mark.sandbox
Drill = Callable[[str], dict[str, Any]]

SCENARIOS = sorted(path.stem for path in (EVENTS / "drills").glob("*.json") if path.stem != "real-slurm")
TERM = re.compile(r"(?P<label>[a-z ]+) (?:(?P<minutes>\d+)m )?(?P<seconds>\d+\.\d)s")


@pytest.fixture(scope="session")
def report_of(drill_reports: Drill) -> Drill:
    """report_of("default"): the report of events/drills/default.json, run once a session (conftest.py)."""
    return drill_reports


def _term(text: str) -> tuple[str, int]:
    """("agent", 22) for "agent 2.2s": a printed part of the split, in tenths of a second."""
    match = TERM.fullmatch(text)
    assert match, text
    return match["label"], int(match["minutes"] or 0) * 600 + round(float(match["seconds"]) * 10)


def _parts(incident: dict[str, Any]) -> list[float]:
    return [incident["provisioning_seconds"], incident["agent_seconds"], *incident["waits"].values(), incident["pipeline_overhead_seconds"]]


def _phase(incident: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in incident["phases"] if p["name"] == name)


def _length(phase: dict[str, Any]) -> float:
    return round(phase["end"] - phase["start"], 3)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_incident_split_adds_up_and_record_swallows_no_wait(report_of: Drill, scenario: str) -> None:
    report = report_of(scenario)
    printed = [line.strip().removeprefix("time: ") for line in format_report(report).splitlines() if line.startswith("  time: ")]
    assert printed == [format_time_split(i) for i in report["incidents"]]
    for incident, line in zip(report["incidents"], printed, strict=True):
        if incident["workflow_seconds"] is None:  # the request never became an incident
            assert incident["phases"] == [] and line == "workflow -"
            continue
        # The parts add up to the workflow time, to the millisecond, and none is negative
        parts = _parts(incident)
        assert min(parts) >= 0, incident["id"]
        assert sum(round(p * 1000) for p in parts) == round(incident["workflow_seconds"] * 1000), incident["id"]
        # And as printed, to the tenth: "workflow W = provisioning P + agent A [+ <wait> X ...] + pipeline overhead O"
        total, terms = line.split(" = ")
        labels = ["provisioning", "agent", *(w.replace("_", " ") for w in incident["waits"]), "pipeline overhead"]
        assert [_term(t)[0] for t in terms.split(" + ")] == labels, line
        assert sum(_term(t)[1] for t in terms.split(" + ")) == _term(total)[1], line
        # And Record Outcome is only its own work, which takes no virtual time: it never holds a wait
        # (an execution stopped or crashed before it is recorded by Reconcile Execution: no record phase)
        records = [] if incident["outcome"] in ("aborted", "failed") else [0.0]
        assert [_length(p) for p in incident["phases"] if p["name"] == "record"] == records, incident["id"]
        # And the phases run in order, the last one ending when the outcome was recorded (an end the
        # workflow did not record: when the execution stopped, which the sweep may record minutes later)
        assert incident["phases"] == sorted(incident["phases"], key=lambda p: (p["start"], p["end"]))
        stopped = [t["at"] for t in incident["timeline"] if t["event"].startswith("execution ")]
        assert incident["phases"][-1]["end"] == (stopped or [incident["timeline"][-1]["at"]])[-1]


def test_a_replacement_that_never_rejoins_is_waited_on_as_provisioning_until_the_escalation(report_of: Drill) -> None:
    report = report_of("rejoin-deadline")
    incident = only_incident(report)
    assert incident["outcome"] == "escalated" and incident["error"] == "RejoinDeadlineExceeded"
    # The wait for the rejoin is a phase that ends at the escalation, and all of it is HyperPod's
    wait = _phase(incident, "wait_for_rejoin")
    assert wait["end"] == _phase(incident, "record")["end"] and _length(wait) >= 1200
    assert incident["provisioning_seconds"] == _length(wait) and incident["pipeline_overhead_seconds"] == 0
    # And no "replace -> rejoined" figure is emitted for a node that never rejoined
    assert "ReplaceToRejoinSeconds" not in report["metrics"] and "TimeToEscalateSeconds" in report["metrics"]


def test_a_command_the_agent_never_answers_is_a_cordon_phase_booked_to_the_agent(report_of: Drill) -> None:
    report = report_of("agent-down")
    incident = only_incident(report)
    assert incident["error"] == "States.HeartbeatTimeout"
    # Cordon Nodes waited for a heartbeat for 60 s (not its 600 s timeout): a cordon phase that
    # ended without an answer, the agent's time
    assert _length(_phase(incident, "cordon")) == 60
    assert incident["agent_seconds"] == 60 and incident["pipeline_overhead_seconds"] == 0
    # And no "detect -> cordoned" figure is emitted for nodes that were never cordoned
    assert "DetectToCordonSeconds" not in report["metrics"]


def test_a_reboot_counts_as_provisioning_and_only_noticing_it_late_is_overhead(report_of: Drill) -> None:
    report = report_of("reboot-ladder")
    rebooted, reboot = report["incidents"][0], report["reboots"][0]
    assert "reboot initiated" in [e["event"] for e in rebooted["timeline"]]
    # The node was back 120 s after the reboot (the double's assumed duration); the workflow saw it at its next check
    wait = _phase(rebooted, "wait_for_rejoin")
    assert rebooted["provisioning_seconds"] == round(reboot["running_at"] - wait["start"], 3) == 120
    assert rebooted["pipeline_overhead_seconds"] == round(wait["end"] - reboot["running_at"], 3) > 0


def test_a_job_restart_backoff_is_a_named_wait_not_overhead(report_of: Drill) -> None:
    first = report_of("job-crash-loop")["incidents"][0]
    assert first["outcome"] == "recovered"
    assert first["waits"] == {"restart_backoff": _length(_phase(first, "backoff"))} and first["waits"]["restart_backoff"] >= 60
    assert first["pipeline_overhead_seconds"] == 0


def test_a_job_waiting_on_another_incident_books_that_wait_and_only_the_lag_after_it_as_overhead(report_of: Drill) -> None:
    report = report_of("job-and-health-event")
    node, nested, job = report["incidents"]
    assert (node["outcome"], nested["outcome"], job["outcome"]) == ("recovered", "duplicate", "duplicate")
    # The job waited for the node incident holding its node until that one recorded its outcome ...
    wait = _phase(job, "wait_other_recovery")
    node_recorded = node["timeline"][-1]["at"]
    assert job["waits"]["other_incident"] == round(node_recorded - wait["start"], 3)
    # ... and noticed it at its next check: that lag is the pipeline's
    assert job["pipeline_overhead_seconds"] == round(wait["end"] - node_recorded, 3)
