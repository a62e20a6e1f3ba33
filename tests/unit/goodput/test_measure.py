"""What the planner takes from a stack's records: which incidents are failures of the fleet, which
phases are real waits, how the ledger's phases make the planner's, and the checkpoint period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hyperpod_recovery.models.records import IncidentRecord, MeasuredRestart, Phase, RecoveryLogEntry
from hyperpod_recovery_cli.planner.measure import (
    commit_gap_seconds,
    is_failure,
    mean_phases,
    mean_replacement,
    mean_startup,
    phase_seconds,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def record(incident: str = "i-1", phases: list[tuple[str, int]] | None = None, **fields: Any) -> IncidentRecord:
    """An incident whose phases follow one another from T0, each (name, seconds)."""
    spans, at = [], T0
    for name, seconds in phases or []:
        spans.append(Phase.model_validate({"name": name, "start": at, "end": at + timedelta(seconds=seconds)}))
        at += timedelta(seconds=seconds)
    defaults: dict[str, Any] = {
        "incident_id": incident,
        "cluster": "llm-train",
        "outcome": "recovered",
        "dry_run": False,
        "trigger": ["hyperpod_node_health"],
        "nodes": ["i-0a"],
        "summary": "recovered",
        "recorded_at": at,
        "phases": spans,
    }
    return IncidentRecord.model_validate(defaults | fields)


FULL = [
    ("detect", 20),
    ("assess", 10),
    ("cordon", 5),
    ("replace", 3),
    ("wait_for_rejoin", 600),
    ("resume", 100),
    ("replace", 7),
    ("find_checkpoint", 2),
    ("resubmit", 8),
    ("record", 1),
]


def test_the_ledgers_phases_make_the_planners_each_the_sum_of_its_own() -> None:
    # Given a recovery whose health gate failed once (two replace phases)
    found = phase_seconds(record(phases=FULL))
    # Then detect is detect + assess, replace both replacements, restart find_checkpoint + resubmit; record is none of them
    assert found == {"detect": 30, "cordon": 5, "replace": 10, "rejoin": 600, "health_gate": 100, "restart": 10}


def test_phases_are_averaged_over_the_recovered_live_incidents_that_went_through_them() -> None:
    # Given two recoveries (one without a replacement), a dry run and an escalation with long phases
    records = [
        record("a", FULL),
        record("b", [("detect", 40), ("cordon", 15)]),
        record("c", [("detect", 9999)], dry_run=True, outcome="dry_run"),
        record("d", [("detect", 9999)], outcome="escalated"),
    ]
    means = mean_phases(records)
    # Then each phase is the mean over the recoveries that had it; the dry run's and the escalation's waits count for nothing
    assert means["detect"] == (35, 2) and means["cordon"] == (10, 2) and means["rejoin"] == (600, 1)


@pytest.mark.parametrize(
    ("fields", "counts"),
    [
        ({}, True),
        ({"outcome": "escalated"}, True),
        ({"outcome": "dry_run", "dry_run": True}, True),  # the fault was real; only the pipeline did nothing
        ({"trigger": ["cloudwatch_alarm", "manual"]}, True),
        ({"outcome": "duplicate"}, False),  # another incident's fault
        ({"outcome": "rejected"}, False),
        ({"outcome": "stale"}, False),
        ({"trigger": ["manual"]}, False),  # a drill or an operator's request
        ({"workflow": "job", "job_id": "1001", "trigger": ["job_failed"]}, False),  # a job's failure, not a node's
    ],
)
def test_which_incidents_count_as_node_failures(fields: dict[str, Any], counts: bool) -> None:
    assert is_failure(record(**fields)) is counts


def test_the_repair_window_is_the_mean_of_the_measured_replacements() -> None:
    log = [
        RecoveryLogEntry(incident="a", at=T0, hostnames=["ip-1"], outcome="recovered", replaced_seconds=600),
        RecoveryLogEntry(incident="b", at=T0, hostnames=["ip-2"], outcome="recovered", replaced_seconds=800),
        RecoveryLogEntry(incident="c", at=T0, hostnames=["ip-3"], outcome="recovered"),  # a reboot: no replacement
    ]
    assert mean_replacement(log) == (700, 2)
    assert mean_replacement(log[2:]) is None


def test_the_jobs_own_start_up_is_the_mean_of_the_restarts_shrunk_copies_measured_and_a_prefix_only_its_own() -> None:
    def logged(name: str, *restarts: tuple[str, int]) -> RecoveryLogEntry:
        measured = [MeasuredRestart(checkpoint_uri=f"s3://ckpt/{job}", seconds=seconds) for job, seconds in restarts]
        return RecoveryLogEntry(incident=name, at=T0, hostnames=["ip-1"], outcome="recovered", restarts=measured)

    log = [logged("a", ("llama", 90), ("mistral", 300)), logged("b", ("llama", 150)), logged("c")]
    assert mean_startup(log) == (180, 3)
    assert mean_startup(log, "s3://ckpt/llama/") == (120, 2)  # (either spelling of the location)
    assert mean_startup(log, "s3://ckpt/gpt") is None


def test_the_checkpoint_period_is_the_median_gap_so_a_failures_long_gap_does_not_count() -> None:
    # Given commits every 30 min, one of them 2 h late (a failure and its rework), listed out of order
    minutes = [0, 30, 60, 180, 210, 240]
    times = [T0 + timedelta(minutes=m) for m in reversed(minutes)]
    # Then the period is 30 min, over the five gaps
    assert commit_gap_seconds(times) == (1800, 5)
    assert commit_gap_seconds(times[:1]) is None
