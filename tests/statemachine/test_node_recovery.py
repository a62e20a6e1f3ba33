"""NodeRecovery end to end: statemachines/node_recovery.asl.json on moto's interpreter with the real
handlers, the HyperPod double and the simulated Slurm controller (sandbox/)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS
from tests.statemachine.conftest import mutating_slurm_commands, only_incident

pytestmark = pytest.mark.sandbox
Drill = Callable[..., dict[str, Any]]

REPORT_FIELDS = {"incidents", "api_calls", "state_transitions", "executions", "virtual_seconds", "pipeline_overhead_seconds"}
INCIDENT_FIELDS = {"id", "trigger", "nodes", "outcome", "phases", "resubmissions"}


def test_failed_gpu_node_is_replaced_and_its_job_resumed_from_the_newest_checkpoint(drill: Drill) -> None:
    # Given one GPU node of a 16-node job failing mid-training, three complete checkpoints
    report = drill("default")
    incident = only_incident(report)
    # Then the incident is recovered and the job resubmitted once, from the newest step
    assert incident["outcome"] == "recovered" and incident["execution_status"] == "SUCCEEDED"
    assert incident["trigger"] == ["hyperpod_node_health"]
    assert [(r["job"], r["checkpoint_step"], r["checkpoint_uri"]) for r in incident["resubmissions"]] == [
        ("1001", 3000, "s3://llm-train-checkpoints/llama-70b-pretrain/step-000003000/")
    ]
    # And the report carries every field architecture.md names
    assert set(report) >= REPORT_FIELDS and set(incident) >= INCIDENT_FIELDS
    assert all({"name", "start", "end"} == set(p) and p["start"] <= p["end"] for p in incident["phases"])
    # And the cluster and Slurm ended where they should: one new instance, node back in service, job running
    (replacement,) = report["replacements"]
    assert replacement["initiated_by"] == "api" and replacement["new_node_id"] != replacement["old_node_id"]
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1
    assert report["slurm"]["drained_nodes"] == {}
    (submission,) = report["slurm"]["submissions"]
    assert submission["checkpoint_step"] == 3000 and submission["old_job_id"] == "1001"
    # And the waiting was virtual: ten minutes of replacement, seconds of wall time
    wait = next(p for p in incident["phases"] if p["name"] == "wait_for_rejoin")
    assert 600 <= wait["end"] - wait["start"] <= 600 + 60
    assert report["virtual_seconds"] > 600 and report["wall_seconds"] < 60
    assert 0 < incident["pipeline_overhead_seconds"] < 90
    # And the page names the node as Slurm and a human know it (its hostname), not its instance id
    assert [n["subject"] for n in report["notifications"]] == [f"[hyperpod-recovery] llm-train: recovered {replacement['hostname']}"]


def test_runner_calls_are_not_counted_as_pipeline_calls(drill: Drill) -> None:
    report = drill("default")
    calls = report["api_calls"]
    assert not {"events.PutEvents", "stepfunctions.CreateStateMachine", "s3.PutObject"} & set(calls)
    # (the pipeline lists executions only in its sweeps of ended executions: two workflows by three statuses each)
    assert calls["stepfunctions.ListExecutions"] == 6 * len(report["metrics"]["EndSweepsCompleted"]["values"])


def test_duplicate_events_and_a_second_incident_for_a_locked_node_do_not_act_twice(drill: Drill) -> None:
    report = drill("duplicate-events")
    outcomes = {i["id"].split("-")[0]: i["outcome"] for i in report["incidents"]}
    # Five copies of the event started one execution; the operator's drill mid-recovery is a duplicate
    assert report["intake"]["events_put"] == 5 and report["executions"] == 2
    assert outcomes == {"hpr": "recovered", "drill": "duplicate"}
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1
    assert len(report["slurm"]["submissions"]) == 1


def test_controller_node_is_never_touched_and_escalated_to_a_human(drill: Drill) -> None:
    report = drill("controller-node")
    incident = only_incident(report)
    assert incident["outcome"] == "escalated" and incident["error"] == "ProtectedNodeUnhealthy"
    assert incident["execution_status"] == "FAILED"
    # Only the worker was replaced and resubmitted
    assert [r["hostname"] for r in report["replacements"]] == ["ip-10-3-0-7"]
    assert len(incident["resubmissions"]) == 1


def test_partial_replace_failure_recovers_what_it_can_and_escalates_the_rest(drill: Drill) -> None:
    report = drill("replace-partial-failure")
    incident = only_incident(report)
    assert incident["outcome"] == "escalated" and incident["error"] == "ReplaceNotInitiated"
    assert "InternalServerError" in incident["cause"]
    assert len(report["replacements"]) == 1
    # The node that could not be replaced stays drained under our tag for the human
    (reason,) = report["slurm"]["drained_nodes"].values()
    assert reason.startswith(f"hyperpod-recovery:{incident['id']} ")
    assert len(incident["resubmissions"]) == 1


def test_replacement_that_never_rejoins_escalates_at_the_deadline(drill: Drill) -> None:
    report = drill("rejoin-deadline")
    incident = only_incident(report)
    assert (incident["outcome"], incident["error"], incident["execution_status"]) == ("escalated", "RejoinDeadlineExceeded", "FAILED")
    # The job was resubmitted at once (ResumePolicy immediate), once: it waits in the queue for
    # capacity, and the escalation says so
    assert [r["job"] for r in incident["resubmissions"]] == ["1001"] and len(report["slurm"]["submissions"]) == 1
    assert "job 1001 (llama-70b-pretrain) resubmitted as job 1002 from step 3000 (PENDING at" in incident["summary"]
    replace_at = next(e["at"] for e in incident["timeline"] if e["event"] == "replace initiated")
    escalated_at = incident["timeline"][-1]["at"]
    assert 1200 <= escalated_at - replace_at <= 1200 + 5
    # Polling backed off: far fewer checks than one every 30 s
    assert report["api_calls"]["sagemaker.ListClusterNodes"] <= 1 + 1200 // 60 + 2


def test_job_without_a_verified_checkpoint_is_escalated_not_restarted_from_zero(drill: Drill) -> None:
    report = drill("no-checkpoint")
    incident = only_incident(report)
    assert (incident["outcome"], incident["error"]) == ("escalated", "NoVerifiedCheckpoint")
    assert report["slurm"]["submissions"] == []
    assert report["slurm"]["drained_nodes"] == {}  # the node itself was recovered


def test_torn_newest_checkpoint_resumes_from_the_previous_complete_step(drill: Drill) -> None:
    # Given the pointer names step 3000, whose last shard is truncated
    report = drill("torn-newest-checkpoint")
    incident = only_incident(report)
    # Then the job is resubmitted from step 2000, the record says why 3000 was passed over, and
    # discovery cost a handful of S3 requests
    assert incident["outcome"] == "recovered"
    assert [r["checkpoint_step"] for r in incident["resubmissions"]] == [2000]
    chosen = next(e["detail"] for e in incident["timeline"] if e["event"] == "checkpoint chosen")
    assert "newer rejected: step 3000: shard __3_0.distcp is 2048 bytes, manifest says 4096 (named by the latest pointer)" in chosen
    assert report["slurm"]["submissions"][0]["checkpoint_step"] == 2000
    assert report["api_calls"]["s3.GetObject"] + report["api_calls"]["s3.ListObjectsV2"] <= 6


def test_checkpoint_being_written_and_a_lost_shard_fall_back_two_steps(drill: Drill) -> None:
    # Given step 4000 still being written (no manifest) and step 3000 committed but missing a shard since
    incident = only_incident(drill("checkpoint-mid-write"))
    # Then neither is chosen: the job resumes from step 2000
    assert incident["outcome"] == "recovered"
    assert [r["checkpoint_step"] for r in incident["resubmissions"]] == [2000]
    chosen = next(e["detail"] for e in incident["timeline"] if e["event"] == "checkpoint chosen")
    assert "step 3000: shard __3_0.distcp is missing" in chosen and "step 4000: no manifest.json" in chosen


def test_invalid_request_fails_at_validate_request_naming_the_field_and_touches_nothing(drill: Drill) -> None:
    report = drill("invalid-drill-request")
    incident = only_incident(report)
    assert (incident["execution_status"], incident["error"], incident["outcome"]) == ("FAILED", "InvalidRecoveryRequest", "rejected")
    assert incident["cause"].startswith("node_ids.0:")
    assert not [c for c in report["api_calls"] if c.startswith(("sagemaker.", "sqs."))]


def test_dry_run_changes_nothing_in_the_cluster_but_runs_every_step(drill: Drill) -> None:
    report = drill("dry-run")
    incident = only_incident(report)
    assert incident["outcome"] == "dry_run"
    assert "sagemaker.BatchReplaceClusterNodes" not in report["api_calls"]
    assert mutating_slurm_commands(report) == [] and report["slurm"]["submissions"] == []
    assert report["replacements"] == []
    assert [e["event"] for e in incident["timeline"]][2:-1] == [
        "would lock",
        "nodes assessed",
        "would cordon",
        "affected jobs found",
        "would replace",
        "would resume",
        "checkpoint chosen",
        "would resubmit job",
    ]


# Every AWS call that changes the cluster or the pipeline's own safety state (locks, the cap, the
# breaker, the recovery log, resubmission claims). A dry run may only read, and record its incident.
READ_ONLY_PREFIXES = (
    "dynamodb.GetItem",
    "dynamodb.BatchGetItem",
    "dynamodb.Query",
    "lambda.Invoke",
    "s3.Get",
    "s3.List",
    "sagemaker.Describe",
    "sagemaker.List",
    "sqs.ReceiveMessage",
)
ALLOWED_DRY_RUN_WRITES = {
    "dynamodb.PutItem": 3,  # the incident record (what it would have done), the affected jobs' descriptions, its page begun
    "dynamodb.UpdateItem": 1,  # its page done (sent once, as a live incident's)
    "sns.Publish": 1,  # the notification saying so
    "sqs.SendMessage": 1,  # the cordon without its drain (read-only: it lists the jobs)
    "sqs.DeleteMessage": 1,  # the agent taking that command off the queue
    "stepfunctions.SendTaskSuccess": 4,  # the agent's answer, the two mutating steps answering themselves, and the wait for nothing
    "stepfunctions.StartExecution": 1,  # intake starting the execution
    "stepfunctions.SendTaskHeartbeat": 1,  # the agent checking that the cordon's task still waits
}


def test_dry_run_makes_no_mutating_call_counted_call_by_call(drill: Drill) -> None:
    report = drill("dry-run")
    writes = {call: n for call, n in report["api_calls"].items() if not call.startswith(READ_ONLY_PREFIXES)}
    assert writes == ALLOWED_DRY_RUN_WRITES
    assert [c["type"] for c in report["slurm"]["commands"]] == ["cordon_nodes"] and report["slurm"]["drained_nodes"] == {}


def test_dry_run_drill_on_a_live_stack_changes_nothing(drill: Drill) -> None:
    report = drill("default", faults=[{"at": 60, "kind": "drill", "node": "workers:7", "dry_run": True}])
    assert only_incident(report)["outcome"] == "dry_run"
    assert report["replacements"] == [] and mutating_slurm_commands(report) == []


def test_agent_failure_escalates_under_the_agents_error_name_before_anything_is_replaced(drill: Drill) -> None:
    report = drill("default", behaviour={"missing_in_slurm": ["workers:7"]})
    incident = only_incident(report)
    assert (incident["outcome"], incident["error"], incident["execution_status"]) == ("escalated", "NodeNotFound", "FAILED")
    # The agent's cause ("Slurm does not know node(s) ...") is not asserted: moto drops a
    # SendTaskFailure's Cause (../shared/reference/local-testing-toolchain.md); AWS keeps it.
    assert report["replacements"] == [] and report["slurm"]["submissions"] == []


def test_cloudwatch_alarm_triggers_the_same_recovery(drill: Drill) -> None:
    incident = only_incident(drill("alarm-trigger"))
    assert incident["outcome"] == "recovered" and incident["trigger"] == ["cloudwatch_alarm"]


def test_another_clusters_events_never_reach_the_workflow(drill: Drill) -> None:
    report = drill("foreign-cluster")
    # The EventBridge rule drops the foreign health event; the foreign drill is rejected at Validate Request
    assert report["intake"]["intake_invocations"] == 0
    incident = only_incident(report)
    assert (incident["outcome"], incident["error"]) == ("rejected", "InvalidRecoveryRequest")
    assert report["replacements"] == [] and mutating_slurm_commands(report) == []


class _SlurmStack(DrillRunner):
    """A stack deployed for Slurm (its Orchestrator parameter) in front of the drill's EKS cluster."""

    def deployed(self, overrides: Any = None) -> Any:
        return super().deployed({"Orchestrator": "Slurm", "EksClusterName": "", **(overrides or {})})


def test_a_cluster_orchestrated_otherwise_than_the_stack_is_escalated_without_any_action(tmp_path: Path) -> None:
    # Given an EKS-orchestrated cluster, guarded by a stack deployed for Slurm
    report = _SlurmStack(load_scenario(EVENTS / "drills" / "eks-default.json"), log_path=tmp_path / "lambda.log").run()
    incident = only_incident(report)
    # Then the incident escalates, naming the parameter, and nothing is touched
    assert (incident["outcome"], incident["error"]) == ("escalated", "UnsupportedOrchestrator")
    assert "Orchestrator=Eks" in incident["cause"]
    assert report["replacements"] == [] and mutating_slurm_commands(report) == [] and report["kubernetes_calls"] == {}


def test_older_cluster_without_node_types_protects_the_configured_controller_group(drill: Drill) -> None:
    report = drill(
        "controller-node", cluster={"reports_node_types": False}, settings={"controller_groups": ["controller"], "login_groups": ["login"]}
    )
    incident = only_incident(report)
    assert incident["error"] == "ProtectedNodeUnhealthy"
    assert [r["hostname"] for r in report["replacements"]] == ["ip-10-3-0-7"]


def test_node_hyperpod_is_already_repairing_is_waited_for_not_fought(drill: Drill) -> None:
    report = drill(
        "default", behaviour={"api_errors": [{"operation": "BatchReplaceClusterNodes", "node": "workers:7", "code": "InstanceIdInUse"}]}
    )
    incident = only_incident(report)
    assert incident["outcome"] == "recovered"
    assert [r["initiated_by"] for r in report["replacements"]] == ["hyperpod"]
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1


def test_throttled_replace_is_retried_and_recovers(drill: Drill) -> None:
    report = drill(
        "default", behaviour={"api_errors": [{"operation": "BatchReplaceClusterNodes", "code": "ThrottlingException", "times": 5}]}
    )
    assert only_incident(report)["outcome"] == "recovered"
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 6
    assert len(report["replacements"]) == 1


def _rack_failure(drill: Drill, **settings: object) -> dict[str, object]:
    """16 of 64 workers (25%) fail within 4 s, each reported twice."""
    nodes = [f"workers:{n}" for n in range(0, 16)]
    return drill(
        "default",
        cluster={
            "instance_groups": [
                {"name": "controller", "type": "Controller", "count": 1},
                {"name": "workers", "type": "Compute", "count": 64},
            ]
        },
        faults=[{"at": 100 + n % 4, "kind": "node_health", "node": node} for n, node in enumerate(nodes * 2)],
        settings=settings,
    )


def test_rack_failure_is_one_execution_with_few_replace_calls(drill: Drill) -> None:
    # Given a cap that allows a quarter of the cluster in recovery
    report = _rack_failure(drill, caps={"max_percent": 25})
    incident = only_incident(report)
    assert incident["outcome"] == "recovered" and len(incident["nodes"]) == 16
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1
    assert len(report["slurm"]["submissions"]) == 1


def test_rack_failure_past_the_default_cap_changes_nothing_and_pages(drill: Drill) -> None:
    # Given the default cap (20% of 64 compute nodes = 12) and 16 nodes failing at once
    report = _rack_failure(drill)
    incident = only_incident(report)
    # Then nothing is cordoned, replaced or resubmitted; a human is paged with the reason
    assert incident["outcome"] == "capped" and incident["error"] == "ClusterCapReached"
    assert incident["execution_status"] == "FAILED" and "cap of 12" in incident["cause"]
    assert "sagemaker.BatchReplaceClusterNodes" not in report["api_calls"]  # type: ignore[operator]
    assert mutating_slurm_commands(report) == [] and report["slurm"]["submissions"] == []  # type: ignore[index]
    assert [n["subject"].split(":")[1].split()[:2] for n in report["notifications"]] == [["CAPPED", "ClusterCapReached"]]  # type: ignore[attr-defined,index]


def test_failed_recoveries_open_the_breaker_and_nothing_more_is_done(drill: Drill) -> None:
    # Given a breaker that trips on one failed recovery an hour, and a replacement that never rejoins
    report = drill("breaker-open")
    first, second = report["incidents"]
    assert first["outcome"] == "escalated" and first["error"] == "RejoinDeadlineExceeded"
    # Then the next fault is not acted on: capped by the breaker, paged, nothing cordoned or replaced
    assert second["outcome"] == "capped" and second["error"] == "CircuitBreakerOpen" and second["execution_status"] == "FAILED"
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1
    assert [c["type"] for c in report["slurm"]["commands"] if c["incident"] == second["id"]] == []
    assert "breaker reset" in report["notifications"][-1]["message"]


def test_a_node_recovered_too_often_is_escalated_not_replaced_again(drill: Drill) -> None:
    # Given one recovery per node per week, and the same hostname failing again two hours later
    report = drill("repeat-offender")
    first, second = report["incidents"]
    assert first["outcome"] == "recovered"
    assert second["outcome"] == "escalated" and second["error"] == "RepeatOffender" and "ip-10-3-0-11" in second["cause"]
    # Then it was replaced once only, and its second incident keeps it locked for the human
    assert len(report["replacements"]) == 1 and report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1
    assert len(report["slurm"]["submissions"]) == 1


def test_a_rack_storm_is_one_execution_three_replace_calls_and_one_resubmission_per_job(drill: Drill) -> None:
    # Given 64 of 512 nodes failing within 5 s under two of eight 64-node jobs (events/drills/rack-storm.json)
    report = drill("rack-storm")
    incident = only_incident(report)
    # Then intake batches them into one execution that replaces them in 25-node calls
    assert incident["outcome"] == "recovered" and len(incident["nodes"]) == 64
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 3 and len(report["replacements"]) == 64
    # And each affected job is resubmitted exactly once; the other six are untouched
    assert sorted(s["old_job_id"] for s in report["slurm"]["submissions"]) == ["7002", "7003"]


def test_the_ladder_reboots_first_and_replaces_a_node_the_reboot_did_not_fix(drill: Drill) -> None:
    # Given two faults whose HyperPod recommendation is a reboot; workers:3 does not come back from it
    report = drill("reboot-ladder")
    rebooted, replaced = report["incidents"]
    # Then workers:7 is rebooted and back, with no replacement
    assert rebooted["outcome"] == "recovered"
    assert any(e["event"] == "reboot initiated" for e in rebooted["timeline"])
    # And workers:3 is replaced after the reboot deadline, and back
    assert replaced["outcome"] == "recovered"
    events = [e["event"] for e in replaced["timeline"]]
    assert events.index("reboot initiated") < events.index("reboot did not help") < events.index("node rejoined")
    assert report["api_calls"]["sagemaker.BatchRebootClusterNodes"] == 2 and report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1
    assert [r["hostname"] for r in report["replacements"]] == ["ip-10-3-0-7"]
    # And each incident resubmitted the job running on its node once
    assert [s["old_job_id"] for s in report["slurm"]["submissions"]] == ["1001", "1002"]


def test_a_reboot_hyperpod_reports_running_throughout_is_judged_by_slurmctlds_boot_time(drill: Drill) -> None:
    # Given HyperPod keeps reporting Running all through a reboot; workers:7 comes back, workers:3 does not
    report = drill("reboot-stays-running")
    back, stuck = report["incidents"]
    # Then workers:7 is back from its reboot on slurmctld's boot time, and never replaced
    assert back["outcome"] == "recovered"
    (rejoined,) = [e["detail"] for e in back["timeline"] if e["event"] == "node rejoined"]
    assert "back from reboot" in rejoined and "slurmctld BootTime" in rejoined
    assert [r["hostname"] for r in report["replacements"]] == [stuck["hostnames"][0]]
    # And workers:3, though HyperPod said Running, is replaced at the reboot deadline once slurmctld showed
    # it never booted again, and recovers
    events = [e["event"] for e in stuck["timeline"]]
    assert stuck["outcome"] == "recovered" and events.index("reboot did not help") < events.index("node rejoined")
    # And the evidence came from the controller agent
    assert {c["type"] for c in report["slurm"]["commands"]} >= {"boot_times"}


def test_a_replacement_under_a_new_hostname_is_found_by_its_logical_id_and_its_old_name_left_drained(drill: Drill) -> None:
    # Given the replacement comes back under a new hostname, with the node's NodeLogicalId
    report = drill("replacement-new-hostname")
    incident = only_incident(report)
    (replacement,) = report["replacements"]
    # Then the incident recovers, saying which identity matched and what the node is called now
    assert incident["outcome"] == "recovered"
    (rejoined,) = [e["detail"] for e in incident["timeline"] if e["event"] == "node rejoined"]
    assert "same NodeLogicalId" in rejoined and f"it is {replacement['new_hostname']} in Slurm now" in rejoined
    assert replacement["new_hostname"] in incident["summary"]
    # And no resume reaches the agent for the old name (that instance is gone; the new one was never drained by us)
    assert "resume_nodes" not in mutating_slurm_commands(report)
    assert replacement["hostname"] in report["slurm"]["drained_nodes"]
    # And the job is resubmitted
    assert [s["old_job_id"] for s in report["slurm"]["submissions"]] == ["1001"]
