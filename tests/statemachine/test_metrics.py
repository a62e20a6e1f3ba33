"""The metrics each workflow emits, read back from the Powertools EMF lines the handlers wrote
during a drill (the report's "metrics"), and checked against the incident's own phases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hyperpod_recovery import metric_names as m
from tests.statemachine.conftest import only_incident

pytestmark = pytest.mark.sandbox
Drill = Callable[..., dict[str, Any]]
DURATIONS = set(m.DURATIONS)


def _values(report: dict[str, Any], name: str) -> list[float]:
    # Whatever a drill emitted must be a name the dashboard and alarms know (metric_names.ALL).
    assert set(report["metrics"]) <= m.ALL, sorted(set(report["metrics"]) - m.ALL)
    return report["metrics"].get(name, {}).get("values", [])


def _phase(incident: dict[str, Any], name: str) -> dict[str, float]:
    return next(p for p in incident["phases"] if p["name"] == name)


def test_given_a_recovered_node_then_counts_and_every_phase_duration_are_emitted_by_cluster(drill: Drill) -> None:
    # Given the default drill: one node replaced, its job resubmitted
    report = drill("default")
    incident = only_incident(report)
    # Then one start and one recovery were counted, dimensioned by cluster (and Powertools' service)
    assert _values(report, m.RECOVERIES_STARTED) == [1.0] and _values(report, m.NODE_OUTCOMES["recovered"]) == [1.0]
    assert all(entry["dimensions"] == {"cluster": "llm-train", "service": "hyperpod-recovery"} for entry in report["metrics"].values())
    # And each duration is the incident's own phases: the figure, the ledger and the report agree
    detected = _phase(incident, "detect")["start"]
    rejoin = _phase(incident, "wait_for_rejoin")
    assert _values(report, m.DETECT_TO_CORDON) == [pytest.approx(_phase(incident, "cordon")["end"] - detected, abs=0.01)]
    assert _values(report, m.REPLACE_TO_REJOIN) == [pytest.approx(rejoin["end"] - rejoin["start"], abs=0.01)]
    # The job was resubmitted at once (ResumePolicy immediate): fault -> resubmitted, and no
    # "rejoined -> resubmitted" figure for a job that did not wait for the rejoin
    assert _values(report, m.DETECT_TO_RESUBMIT) == [pytest.approx(_phase(incident, "resubmit")["end"] - detected, abs=0.01)]
    assert _phase(incident, "resubmit")["end"] < rejoin["end"] and _values(report, m.REJOIN_TO_RESUBMIT) == []
    assert _values(report, m.TIME_TO_RECOVER) == [pytest.approx(_phase(incident, "record")["end"] - detected, abs=0.01)]
    assert report["metrics"][m.TIME_TO_RECOVER]["unit"] == "Seconds"
    # And nothing that did not happen is reported
    assert _values(report, m.TIME_TO_ESCALATE) == [] and _values(report, m.NODE_OUTCOMES["escalated"]) == []
    assert _values(report, m.NODES_REPLACE_INITIATED) == [1.0]


def test_given_jobs_resubmitted_now_and_after_the_rejoin_then_each_point_has_its_figure(drill: Drill) -> None:
    # Given one job that waits for the rejoin (its comment says so) and one resubmitted at once
    report = drill("resume-per-job")
    incident = only_incident(report)
    detected = _phase(incident, "detect")["start"]
    rejoined = _phase(incident, "wait_for_rejoin")["end"]
    first, second = sorted((p for p in incident["phases"] if p["name"] == "resubmit"), key=lambda p: p["end"])
    # Then fault -> first resubmission, and rejoined -> the resubmission that waited for it
    assert _values(report, m.DETECT_TO_RESUBMIT) == [pytest.approx(first["end"] - detected, abs=0.01)]
    assert _values(report, m.REJOIN_TO_RESUBMIT) == [pytest.approx(second["end"] - rejoined, abs=0.01)]
    assert first["end"] < rejoined <= second["start"]


def test_given_a_replacement_that_never_rejoins_then_time_to_escalate_not_time_to_recover(drill: Drill) -> None:
    report = drill("rejoin-deadline")
    assert _values(report, m.NODE_OUTCOMES["escalated"]) == [1.0]
    assert len(_values(report, m.TIME_TO_ESCALATE)) == 1 and _values(report, m.TIME_TO_RECOVER) == []
    assert _values(report, m.REJOIN_TO_RESUBMIT) == []


def test_given_a_dry_run_then_it_counts_as_a_dry_run_and_reports_no_duration(drill: Drill) -> None:
    report = drill("dry-run")
    assert _values(report, m.NODE_OUTCOMES["dry_run"]) == [1.0]
    assert not DURATIONS & set(report["metrics"]), "a dry run's waits are not waits"


def test_given_the_breaker_trips_then_tripped_and_capped_are_counted(drill: Drill) -> None:
    report = drill("breaker-open")
    assert _values(report, m.BREAKER_TRIPPED) == [1.0]
    assert _values(report, m.NODE_OUTCOMES["capped"]) == [1.0]


def test_given_duplicate_events_then_one_recovery_and_one_duplicate(drill: Drill) -> None:
    report = drill("duplicate-events")
    assert sum(_values(report, m.INTAKE_COUNTS["received"])) == 5
    assert sum(_values(report, m.INTAKE_COUNTS["started"])) == 1
    assert _values(report, m.NODE_OUTCOMES["recovered"]) == [1.0] and _values(report, m.NODE_OUTCOMES["duplicate"]) == [1.0]


@pytest.mark.parametrize(
    ("scenario", "outcomes", "durations"),
    [
        ("job-application-failure", {"recovered": 2}, {m.JOB_TIME_TO_RECOVER: 2}),
        ("job-crash-loop", {"recovered": 1, "escalated": 1}, {m.JOB_TIME_TO_RECOVER: 1, m.JOB_TIME_TO_ESCALATE: 1}),
        ("job-auto-resumed", {"duplicate": 2}, {}),
    ],
)
def test_given_a_failed_job_then_job_outcomes_and_job_durations_are_emitted(
    drill: Drill, scenario: str, outcomes: dict[str, int], durations: dict[str, int]
) -> None:
    report = drill(scenario)
    emitted = {o: len(_values(report, name)) for o, name in m.JOB_OUTCOMES.items() if _values(report, name)}
    assert emitted == outcomes
    assert sum(_values(report, m.JOB_RECOVERIES_STARTED)) == sum(outcomes.values())
    assert sum(_values(report, m.INTAKE_COUNTS["jobs_started"])) == sum(outcomes.values())
    assert {name: len(_values(report, name)) for name in DURATIONS if _values(report, name)} == durations
    # A job's time to recover includes its deliberate backoff: at least the 60 s first wait
    assert all(value >= 60 for value in _values(report, m.JOB_TIME_TO_RECOVER) if scenario == "job-application-failure")
