"""Time to resume (issue 18): the job runs again as soon as capacity exists, a Cluster Event ends
the wait for the replacement, and the pipeline adds seconds, not minutes. Figures are the drill
report's, on virtual time; bench/time_to_resume.py prints them over every scenario."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.statemachine.conftest import only_incident

Drill = Callable[..., dict[str, Any]]


def _job(report: dict[str, Any], job: str = "1001") -> dict[str, Any]:
    return next(j for j in report["jobs"] if j["job"] == job)


def _provisioning(report: dict[str, Any]) -> float:
    (replacement,) = report["replacements"]
    return float(replacement["running_at"] - replacement["initiated_at"])


def test_given_idle_nodes_then_the_job_runs_again_within_30_seconds_of_the_fault(drill: Drill) -> None:
    # Given a job on 16 of 18 nodes and one of its nodes failing
    report = drill("spare-capacity")
    job = _job(report)
    # Then it is resubmitted at once and Slurm starts it on the idle nodes, long before the replacement is back
    assert job["state"] == "RUNNING" and job["downtime_seconds"] <= 30
    assert job["running_again_at"] < report["replacements"][0]["running_at"]
    # And the replacement still proceeds and is resumed into service
    assert only_incident(report)["outcome"] == "recovered" and report["slurm"]["drained_nodes"] == {}


def test_given_no_idle_node_then_the_job_runs_again_on_the_replacement(drill: Drill) -> None:
    report = drill("no-spare-capacity")
    job = _job(report)
    # It waited in the queue (the drain kept it off the failed node) and started when the replacement was resumed
    assert job["state"] == "RUNNING" and job["running_again_at"] >= report["replacements"][0]["running_at"]
    assert [s["old_job_id"] for s in report["slurm"]["submissions"]] == ["1001"]


def test_given_a_cluster_that_announces_the_replacement_then_the_event_ends_the_wait(drill: Drill) -> None:
    # Given a Continuous-mode cluster, no spare node, a replacement back in 540 s (before its typical 600 s)
    report = drill("rejoin-event")
    incident, job = only_incident(report), _job(report)
    # Then the Cluster Event woke the wait: one check, no polling lag
    assert incident["outcome"] == "recovered"
    rejoined = next(e for e in incident["timeline"] if e["event"] == "node rejoined")
    assert "after 1 check(s)" in rejoined["detail"] and rejoined["at"] == report["replacements"][0]["running_at"]
    assert report["metrics"]["RejoinWaitsWoken"]["values"] == [1.0]
    # And the job is down no more than provisioning + 10 s, plus the replacement's health check (on
    # the critical path by design: no job lands on an unchecked node), with at most 5 s of overhead
    check = 2.0  # the scenario's behaviour.health_check_seconds (its default)
    assert job["downtime_seconds"] <= _provisioning(report) + 10 + check
    assert incident["pipeline_overhead_seconds"] <= 5
    # And the recovery takes fewer state transitions than a polled one
    assert report["state_transitions"] < drill("no-spare-capacity")["state_transitions"]


def test_given_a_lost_cluster_event_then_the_fallback_check_finds_the_replacement(drill: Drill) -> None:
    # Given the same cluster, but the event never reaches the stack
    report = drill("rejoin-event", behaviour={"cluster_events_lost": True})
    incident = only_incident(report)
    # Then the check at the replacement's typical duration (600 s after it started, plus the
    # resubmission made at once before the wait began) finds it back
    assert incident["outcome"] == "recovered" and "RejoinWaitsWoken" not in report["metrics"]
    replaced_at = report["replacements"][0]["initiated_at"]
    rejoined = next(e for e in incident["timeline"] if e["event"] == "node rejoined")
    assert replaced_at + 600 <= rejoined["at"] <= replaced_at + 605 and "after 1 check(s)" in rejoined["detail"]
    assert _job(report)["downtime_seconds"] <= 600 + 10 + (report["replacements"][0]["initiated_at"] - 120)


def test_given_every_replacement_failing_its_health_check_then_one_more_is_tried_and_the_node_stays_drained(drill: Drill) -> None:
    # Given a node whose every replacement comes back with a GPU fallen off the bus
    report = drill("health-gate-fails")
    incident = only_incident(report)
    # Then its first replacement is replaced once more, and no third time
    first, second = report["replacements"]
    assert second["old_node_id"] == first["new_node_id"] and second["initiated_at"] >= first["running_at"]
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 2
    # And after the second failed check the incident escalates naming both, the node drained under our tag
    assert (incident["outcome"], incident["error"]) == ("escalated", "ReplacementUnhealthy")
    assert "second replacement failed the health check too" in incident["cause"] and first["new_node_id"] in incident["cause"]
    ((node, reason),) = report["slurm"]["drained_nodes"].items()
    assert node == "ip-10-3-0-11" and reason.startswith(f"hyperpod-recovery:{incident['id']} health check failed (exit 1)")
    # And the job, resubmitted at once, runs on the idle nodes, never on a sick one
    job = _job(report)
    assert job["state"] == "RUNNING" and job["downtime_seconds"] <= 30
    assert [e["event"] for e in incident["timeline"]].count("health check failed") == 2


def test_given_a_first_replacement_failing_its_health_check_then_the_second_goes_into_service(drill: Drill) -> None:
    # Given a node whose first replacement is sick and whose second is healthy
    report = drill("health-gate-replaced-again")
    incident = only_incident(report)
    first, second = report["replacements"]
    # Then the incident recovers on the second replacement, which is in service (no drain left)
    assert incident["outcome"] == "recovered" and report["slurm"]["drained_nodes"] == {}
    assert first["new_node_id"] in incident["summary"] and "replaced again" in incident["summary"]
    # And the second replacement starts within a minute of the first one's return (the polling lag,
    # one health check, one Lambda)
    assert second["initiated_at"] <= first["running_at"] + 60
    # And the time split books both provisionings as provisioning, not as our overhead
    both = (first["running_at"] - first["initiated_at"]) + (second["running_at"] - second["initiated_at"])
    assert incident["provisioning_seconds"] == both
