"""JobRecovery end to end: statemachines/job_recovery.asl.json (and the NodeRecovery it nests) on
moto's interpreter with the real handlers, the HyperPod double and the simulated Slurm answered by
the real agent code (sandbox/). Each scenario of events/drills/job-*.json is asserted on its outcome,
the number of resubmissions and the checkpoint step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.statemachine.conftest import mutating_slurm_commands

pytestmark = pytest.mark.sandbox
Drill = Callable[..., dict[str, Any]]


def _by_kind(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Incidents grouped: "job" (JobRecovery), "nested" (its NodeRecovery), "node" (health events, drills)."""
    groups: dict[str, list[dict[str, Any]]] = {"job": [], "nested": [], "node": []}
    for incident in report["incidents"]:
        kind = "job" if incident["workflow"] == "job" else "nested" if incident["id"].endswith("-nodes") else "node"
        groups[kind].append(incident)
    return groups


def _resubmissions(report: dict[str, Any]) -> list[tuple[str, int]]:
    """Every resubmission Slurm actually received: (old job, checkpoint step)."""
    return [(s["old_job_id"], s["checkpoint_step"]) for s in report["slurm"]["submissions"]]


def test_node_caused_failure_recovers_exactly_that_node_then_resubmits_once(drill: Drill) -> None:
    # Given a 4-node job ended NODE_FAIL because workers:2 stopped responding
    report = drill("job-node-failure")
    groups = _by_kind(report)
    (job,), (nested,) = groups["job"], groups["nested"]
    # Then the failure is classified node-caused and NodeRecovery runs nested, for that node only
    assert job["outcome"] == "recovered" and job["execution_status"] == "SUCCEEDED"
    assert any(e["event"] == "classified: node caused" and "ip-10-2-0-6" in e["detail"] for e in job["timeline"])
    assert nested["trigger"] == ["job_failed"] and nested["outcome"] == "recovered"
    assert [r["hostname"] for r in report["replacements"]] == ["ip-10-2-0-6"]
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1
    # And the job is resubmitted once, from the newest verified checkpoint, at once (ResumePolicy
    # immediate): while the replacement provisions, not after it
    assert _resubmissions(report) == [("2001", 2000)]
    assert [(r["job"], r["checkpoint_step"]) for r in nested["resubmissions"]] == [("2001", 2000)]
    assert job["resubmissions"] == []  # the nested recovery did it; the job incident records who
    rejoined = next(e["at"] for e in nested["timeline"] if e["event"] == "node rejoined")
    resubmitted = next(e["at"] for e in nested["timeline"] if e["event"] == "job resubmitted")
    assert resubmitted < rejoined
    # And the node is back in service, and the nested execution started at the parent's time
    assert report["slurm"]["drained_nodes"] == {}
    assert job["phases"][0]["start"] == 60 and any(p["name"] == "recover_nodes" for p in job["phases"])
    assert nested["timeline"][0]["at"] == 60


def test_application_failure_is_resubmitted_with_backoff_and_counts_against_the_budget(drill: Drill) -> None:
    # Given a crash on healthy nodes at step 2000, then, after progress to step 3000, another crash
    report = drill("job-application-failure")
    jobs = _by_kind(report)["job"]
    # Then each failure is recovered by resubmitting from the newest checkpoint
    assert [i["outcome"] for i in jobs] == ["recovered", "recovered"]
    assert _resubmissions(report) == [("3001", 2000), ("3002", 3000)]
    assert [[(r["job"], r["checkpoint_step"]) for r in i["resubmissions"]] for i in jobs] == [[("3001", 2000)], [("3002", 3000)]]
    # And no node was touched
    assert "sagemaker.BatchReplaceClusterNodes" not in report["api_calls"]
    assert mutating_slurm_commands(report) == ["resubmit_job", "resubmit_job"]
    # And the backoff doubles with each restart of the lineage in the window: 60 s, then 120 s
    backoffs = [next(p["end"] - p["start"] for p in i["phases"] if p["name"] == "backoff") for i in jobs]
    assert 60 <= backoffs[0] < 61 and 120 <= backoffs[1] < 121


def test_crash_loop_is_escalated_instead_of_restarted_again(drill: Drill) -> None:
    # Given a job that crashes again before writing a checkpoint newer than the one it resumed from
    report = drill("job-crash-loop")
    first, second = _by_kind(report)["job"]
    # Then the first failure is restarted and the second escalated as a crash loop
    assert first["outcome"] == "recovered"
    assert second["outcome"] == "escalated" and second["error"] == "CrashLoopDetected"
    assert second["execution_status"] == "FAILED" and "step 2000" in second["cause"]
    # And there was exactly one resubmission, from step 2000
    assert _resubmissions(report) == [("3101", 2000)]
    assert any("CrashLoopDetected" in n["message"] for n in report["notifications"])


def test_a_job_its_launcher_said_not_to_requeue_is_never_resubmitted_nor_its_node_replaced(drill: Drill) -> None:
    # Given a 4-node job whose launcher exits 93 (do not requeue) as workers:2 dies under it (NODE_FAIL)
    report = drill("job-exit-93")
    (job,) = _by_kind(report)["job"]
    # Then JobRecovery escalates at once with the launcher's verdict: no nested node recovery
    assert (job["outcome"], job["error"], job["execution_status"]) == ("escalated", "DoNotRequeue", "FAILED")
    assert "exit code 93" in job["cause"] and _by_kind(report)["nested"] == []
    # And nothing is resubmitted, drained or replaced
    assert _resubmissions(report) == [] and mutating_slurm_commands(report) == []
    assert not report["replacements"] and "sagemaker.BatchReplaceClusterNodes" not in report["api_calls"]
    # And the human is told how to overrule it: the orchestrator's command and the pipeline's own
    (message,) = [n["message"] for n in report["notifications"]]
    assert message.startswith("ACTION NEEDED") and "`squeue -j 2001`" in message
    assert "`hyperpod-recovery drill --stack sandbox --job 2001 --live --yes`" in message


def test_a_dry_run_of_a_do_not_requeue_verdict_changes_nothing_and_says_what_a_real_run_would_not_do(drill: Drill) -> None:
    # Given the same failure during the dry-run period
    report = drill("job-exit-93", settings={"dry_run": True})
    (job,) = _by_kind(report)["job"]
    # Then it is recorded as the same verdict, and nothing on the cluster changed
    assert job["error"] == "DoNotRequeue" and _resubmissions(report) == [] and not report["replacements"]
    assert "would not be resubmitted (dry run)" in report["notifications"][0]["message"]


def test_jobs_already_restarted_by_hyperpod_or_slurm_are_left_alone(drill: Drill) -> None:
    # Given a job under srun --auto-resume=1 and a job Slurm requeued itself, both reported failed
    report = drill("job-auto-resumed")
    auto, requeued = _by_kind(report)["job"]
    # Then both incidents are recorded, and nothing is done to either
    assert (auto["job"], auto["outcome"]) == ("4001", "duplicate") and "auto-resume" in auto["summary"]
    assert (requeued["job"], requeued["outcome"]) == ("4002", "duplicate") and "requeued" in requeued["summary"]
    assert _resubmissions(report) == []
    assert mutating_slurm_commands(report) == [] and not report["replacements"]


def test_health_event_and_job_failure_for_the_same_node_resubmit_the_job_exactly_once(drill: Drill) -> None:
    # Given HyperPod's health event and, 2 s later, the job failure for the same node
    report = drill("job-and-health-event")
    groups = _by_kind(report)
    (node,), (job,), (nested,) = groups["node"], groups["job"], groups["nested"]
    # Then one node recovery replaces the node and resubmits the job
    assert node["outcome"] == "recovered" and len(report["replacements"]) == 1
    assert _resubmissions(report) == [("5001", 3000)]
    # And the job recovery finds the nodes taken, waits for that recovery, and leaves the job to it
    assert nested["outcome"] == "duplicate"
    assert job["outcome"] == "duplicate" and node["id"] in job["summary"]
    waited = next(p for p in job["phases"] if p["name"] == "wait_other_recovery")
    node_done = next(e["at"] for e in node["timeline"] if e["event"].startswith("outcome:"))
    assert waited["end"] >= node_done  # it saw the outcome no earlier than it was recorded


def test_job_failure_first_and_health_event_later_still_resubmit_exactly_once(drill: Drill) -> None:
    # Given the job failure arrives first and the health event for the same node 30 s later
    report = drill(
        "job-and-health-event",
        faults=[
            {"at": 60, "kind": "job_failed", "job": "5001", "job_state": "NODE_FAIL", "node": "workers:2"},
            {"at": 90, "kind": "node_health", "node": "workers:2"},
        ],
    )
    groups = _by_kind(report)
    # Then the job's nested node recovery holds the node and the health event's recovery is a duplicate
    assert [i["outcome"] for i in groups["nested"]] == ["recovered"]
    assert [i["outcome"] for i in groups["node"]] == ["duplicate"]
    assert [i["outcome"] for i in groups["job"]] == ["recovered"]
    assert _resubmissions(report) == [("5001", 3000)] and len(report["replacements"]) == 1


def test_repeated_job_failed_events_start_one_job_recovery(drill: Drill) -> None:
    report = drill("job-application-failure", faults=[{"at": 60, "kind": "job_failed", "job": "3001", "repeat": 4}])
    assert report["intake"]["events_put"] == 5 and report["executions"] == 1
    assert _resubmissions(report) == [("3001", 2000)]


def test_an_exhausted_restart_budget_escalates(drill: Drill) -> None:
    # Given a budget of one restart per day, and two application failures with progress between them
    report = drill("job-application-failure", settings={"job_restarts": {"budget": 1}})
    first, second = _by_kind(report)["job"]
    # Then the second failure is not restarted: a human looks first
    assert first["outcome"] == "recovered"
    assert second["outcome"] == "escalated" and second["error"] == "RestartBudgetExhausted"
    assert _resubmissions(report) == [("3001", 2000)]


def test_a_dry_run_job_drill_changes_nothing(drill: Drill) -> None:
    # Given an operator drilling the recovery of a running job, dry run
    report = drill("job-application-failure", faults=[{"at": 30, "kind": "drill", "job": "3001", "dry_run": True}])
    (job,) = _by_kind(report)["job"]
    # Then every step ran and said what it would do; nothing was resubmitted or cancelled
    assert job["outcome"] == "dry_run" and job["trigger"] == ["manual"]
    assert "would resubmit it from step 2000" in job["summary"]
    assert _resubmissions(report) == [] and mutating_slurm_commands(report) == []
    assert {"stepfunctions.StartExecution", "sagemaker.BatchReplaceClusterNodes"}.isdisjoint(report["api_calls"])


def test_a_manual_request_for_a_foreign_cluster_is_rejected(drill: Drill) -> None:
    report = drill("job-application-failure", faults=[{"at": 30, "kind": "drill", "job": "3001", "foreign_cluster": True}])
    (job,) = _by_kind(report)["job"]
    assert job["outcome"] == "rejected" and job["error"] == "InvalidRecoveryRequest" and "other-cluster" in job["cause"]
    assert _resubmissions(report) == []
