"""The fault-injection suite: each fault the pipeline must survive, as a drill. Used by
tests/statemachine/test_fault_injection.py (which checks the invariants) and bench/fault_suite.py
(which prints the table). Each entry: a scenario from events/drills/ and changes merged into it."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyperpod_recovery.domain.safety import SafetyPolicy
from sandbox.scenario import Scenario, load_scenario
from sandbox.template import load_template

DRILLS = Path(__file__).resolve().parent.parent / "events" / "drills"
NAMED_OUTCOMES = {"recovered", "escalated", "duplicate", "rejected", "capped", "dry_run", "stale", "aborted", "failed"}


@dataclass(frozen=True)
class Fault:
    name: str
    scenario: str
    changes: dict[str, Any] = field(default_factory=dict)
    expect: tuple[str, ...] = ()  # the incidents' outcomes, in start order ("outcome" or "outcome:Error")


SUITE = [
    Fault(
        "api-throttling",
        "default",
        {
            "behaviour": {
                "api_errors": [
                    {"operation": "BatchReplaceClusterNodes", "code": "ThrottlingException", "times": 3},
                    {"operation": "ListClusterNodes", "code": "ThrottlingException", "times": 2},
                ]
            }
        },
        ("recovered",),
    ),
    Fault("partial-batch-failure", "replace-partial-failure", {}, ("escalated:ReplaceNotInitiated",)),
    Fault("replace-never-rejoins", "rejoin-deadline", {}, ("escalated:RejoinDeadlineExceeded",)),
    Fault("agent-down", "agent-down", {}, ("escalated:States.HeartbeatTimeout",)),
    # The replacement comes back sick: its health check fails, it stays drained, no job lands on it.
    Fault(
        "replacement-fails-health-check",
        "default",
        {"behaviour": {"unhealthy_replacements": ["workers:7"]}},
        ("escalated:ReplacementUnhealthy",),
    ),
    # Its first replacement comes back sick, the second healthy: replaced once more, recovered.
    Fault(
        "first-replacement-fails-health-check",
        "default",
        {"behaviour": {"unhealthy_replacements": ["workers:7"], "unhealthy_replacement_count": 1}},
        ("recovered",),
    ),
    # The replacement of a sick replacement cannot start: the node stays drained, a human decides.
    Fault(
        "second-replacement-cannot-start",
        "default",
        {
            "behaviour": {
                "unhealthy_replacements": ["workers:7"],
                "api_errors": [{"operation": "BatchReplaceClusterNodes", "node": "workers:7", "code": "InternalServerError", "after": 1}],
            }
        },
        ("escalated:ReplacementUnhealthy",),
    ),
    # Replace Unhealthy Nodes ran but its answer was lost: the retry replaces nothing twice.
    Fault(
        "replace-again-answer-lost",
        "default",
        {
            "behaviour": {
                "unhealthy_replacements": ["workers:7"],
                "unhealthy_replacement_count": 1,
                "lost_responses": [{"function": "ReplaceUnhealthyNodesFunction", "times": 1}],
            }
        },
        ("recovered",),
    ),
    # An agent restarted within the heartbeat deadline (systemd's restart) answers the command waiting for it.
    Fault("agent-restarts-within-a-minute", "agent-down", {"behaviour": {"agent_down": False, "agent_back_at": 160}}, ("recovered",)),
    Fault("agent-slow", "default", {"behaviour": {"agent_seconds": 240}}, ("recovered",)),
    Fault("corrupt-newest-checkpoint", "torn-newest-checkpoint", {}, ("recovered",)),
    Fault(
        "lock-conflict-two-incidents-one-node",
        "default",
        {"faults": [{"at": 120, "kind": "node_health", "node": "workers:7"}, {"at": 125, "kind": "drill", "node": "workers:7"}]},
        ("recovered", "duplicate"),
    ),
    Fault(
        "lost-responses-then-retries",
        "default",
        {
            "behaviour": {
                "lost_responses": [
                    {"function": "LockNodesFunction"},
                    {"function": "CordonNodesFunction"},
                    {"function": "ReplaceNodesFunction"},
                    {"function": "ResubmitJobFunction"},
                ]
            }
        },
        ("recovered",),
    ),
    Fault(
        "ledger-throttling",
        "default",
        {
            "behaviour": {
                "api_errors": [
                    {"operation": "dynamodb:PutItem", "code": "ProvisionedThroughputExceededException", "times": 6},
                    {"operation": "dynamodb:UpdateItem", "code": "ProvisionedThroughputExceededException", "times": 6},
                ]
            }
        },
        ("recovered",),
    ),
    Fault(
        "100-duplicates-of-one-event",
        "default",
        {"faults": [{"at": 120, "kind": "node_health", "node": "workers:7", "repeat": 99}]},
        ("recovered",),
    ),
    Fault("64-node-storm", "rack-storm", {}, ("recovered",)),
    Fault(
        "two-overlapping-incidents-one-job",
        "default",
        {"faults": [{"at": 120, "kind": "node_health", "node": "workers:7"}, {"at": 400, "kind": "node_health", "node": "workers:3"}]},
        ("recovered", "recovered"),
    ),
    Fault("storm-past-the-cap", "rack-storm", {"settings": {"caps": {"max_nodes": 32}}}, ("capped:ClusterCapReached",)),
    Fault("breaker-open", "breaker-open", {}, ("escalated:RejoinDeadlineExceeded", "capped:CircuitBreakerOpen")),
    # Bounded state: 64 jobs with 64 KiB scripts under a 64-node rack fault; no script in state.
    Fault("64-jobs-64-KiB-scripts", "rack-storm-64-jobs", {}, ("recovered",)),
    # Every end is recorded and releases what it held.
    Fault("aborted-mid-rejoin-then-new-faults", "abort-mid-rejoin", {}, ("aborted", "capped:ClusterCapReached", "recovered")),
    Fault(
        "record-outcome-dies-past-retries",
        "default",
        {"behaviour": {"lost_responses": [{"function": "RecordOutcomeFunction", "times": 10}]}},
        ("recovered",),
    ),
    # Exactly once.
    Fault(
        "fault-on-replacement-while-provisioning",
        "default",
        {"faults": [{"at": 120, "kind": "node_health", "node": "workers:7"}, {"at": 400, "kind": "node_health", "node": "workers:7"}]},
        ("recovered", "duplicate"),
    ),
    Fault(
        "agent-back-after-timeout",
        "agent-down",
        {"behaviour": {"agent_down": False, "agent_back_at": 1800}},
        ("escalated:States.HeartbeatTimeout",),
    ),
    Fault(
        "slurm-requeued-then-failed-again",
        "job-application-failure",
        {
            "faults": [
                {"at": 60, "kind": "job_failed", "job": "3001", "requeued_by_slurm": True},
                {"at": 3600, "kind": "job_failed", "job": "3001", "checkpoint_step": 2500},
            ]
        },
        # Slurm's own requeue is left alone (duplicate); the same job's later real failure is
        # resubmitted, not blocked by the first incident's claim.
        ("duplicate", "recovered"),
    ),
    # Time sanity: a replayed 3-day-old event and one from a clock an hour ahead.
    Fault("replayed-and-future-events", "stale-event", {}, ("stale:StaleEvent", "stale:StaleEvent")),
    # A reboot is judged by slurmctld's boot time, whatever HyperPod's status shows: one that came
    # back is never replaced, one that did not is, though HyperPod said Running all along.
    Fault("reboot-hyperpod-stays-running", "reboot-stays-running", {}, ("recovered", "recovered")),
    # A replacement under a new hostname is found by its NodeLogicalId, or (new logical id too) as the
    # only new node of its group; two such at once in one group are never guessed at.
    Fault("replacement-new-hostname-same-logical-id", "replacement-new-hostname", {}, ("recovered",)),
    Fault("replacement-new-hostname-new-logical-id", "replacement-new-identity", {}, ("recovered",)),
    Fault(
        "two-replacements-new-hostnames-new-logical-ids",
        "replacement-new-identity",
        {"faults": [{"at": 120, "kind": "node_health", "node": "workers:7"}, {"at": 121, "kind": "node_health", "node": "workers:3"}]},
        ("escalated:RejoinDeadlineExceeded",),
    ),
]


EKS_SUITE = [
    # The Kubernetes API server unavailable twice while Cordon Nodes patches: retried, recovered.
    Fault(
        "eks-api-unavailable-at-cordon",
        "eks-default",
        {"behaviour": {"kubernetes_errors": [{"call": "patch nodes", "status": 503, "times": 2}]}},
        ("recovered",),
    ),
    # Throttled while reading the job: retried, the job re-created once.
    Fault(
        "eks-api-throttled-at-jobs",
        "eks-default",
        {"behaviour": {"kubernetes_errors": [{"call": "get pytorchjobs", "status": 429, "times": 2}]}},
        ("recovered",),
    ),
    # Someone writes the node between our read and our patch, again and again: re-read, then retried.
    Fault(
        "eks-node-conflicts",
        "eks-default",
        {"behaviour": {"kubernetes_errors": [{"call": "patch nodes", "status": 409, "times": 4}]}},
        ("recovered",),
    ),
    # The RBAC manifest was never applied: refused, never retried, nothing replaced.
    Fault(
        "eks-access-refused",
        "eks-default",
        {"behaviour": {"kubernetes_errors": [{"call": "patch nodes", "status": 403, "times": 1}]}},
        ("escalated:KubeAccessDenied",),
    ),
    # The job's re-creation refused once (503): Resubmit Job is retried and makes it, one job.
    Fault(
        "eks-job-create-unavailable",
        "eks-default",
        {"behaviour": {"kubernetes_errors": [{"call": "create pytorchjobs", "status": 503, "times": 1}]}},
        ("recovered",),
    ),
]
SUITE += EKS_SUITE

# Every end is an end, and a start is counted once (docs/decisions.md, 2026-11-26: ends and starts).
ENDS_SUITE = [
    # Step Functions' status-change events never arrive (best effort): the sweep records the aborted
    # incident, releases what it held and notifies; what follows goes as when the event comes.
    Fault(
        "status-change-events-lost",
        "abort-mid-rejoin",
        {"behaviour": {"execution_end_events_lost": True}},
        ("aborted", "capped:ClusterCapReached", "recovered"),
    ),
    # Record Outcome dies past its retries (the execution fails after recording) and no event comes: settled by the sweep.
    Fault(
        "record-outcome-dies-and-its-event-is-lost",
        "default",
        {"behaviour": {"lost_responses": [{"function": "RecordOutcomeFunction", "times": 10}], "execution_end_events_lost": True}},
        ("recovered",),
    ),
    # Functions stopped at their Timeout as they finished: the steps whose rerun finds its own work are retried.
    Fault(
        "functions-stopped-at-their-timeout",
        "default",
        {
            "behaviour": {
                "lost_responses": [
                    {"function": f, "error": "Sandbox.Timedout"}
                    for f in (
                        "LockNodesFunction",
                        "CordonNodesFunction",
                        "FindNewestCheckpointFunction",
                        "ResubmitJobFunction",
                        "ResumeNodesFunction",
                    )
                ]
            }
        },
        ("recovered",),
    ),
    # Replace Nodes stopped at its Timeout is not run again (a rerun could replace twice): a human finishes it.
    Fault(
        "replace-nodes-stopped-at-its-timeout",
        "default",
        {"behaviour": {"lost_responses": [{"function": "ReplaceNodesFunction", "error": "Sandbox.Timedout"}]}},
        ("escalated:Sandbox.Timedout",),
    ),
    # StartExecution's answer lost and retried by botocore: one execution, started once.
    Fault("start-execution-answer-lost", "default", {"behaviour": {"lost_api_answers": [{"operation": "StartExecution"}]}}, ("recovered",)),
    # EKS: the poller finds the same failure at its next ticks while its recovery runs: started once, counted once.
    Fault(
        "eks-failure-polled-while-its-recovery-runs",
        "eks-job-failed",
        {
            "faults": [{"at": 600, "kind": "job_failed", "job": "1001", "reason": "BackoffLimitExceeded", "repeat": 2}],
            "settings": {"job_restarts": {"backoff_seconds": 600}},
        },
        ("recovered",),
    ),
]
SUITE += ENDS_SUITE


def merge_changes(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, dictionaries key by key (lists are replaced whole)."""
    merged = dict(base)
    for key, value in changes.items():
        merged[key] = merge_changes(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def scenario_of(fault: Fault) -> Scenario:
    base = load_scenario(DRILLS / f"{fault.scenario}.json")
    return Scenario.model_validate(merge_changes(json.loads(base.model_dump_json()), fault.changes))


def cap_limit(scenario: Scenario) -> int:
    """The cluster cap the drill ran with: the scenario's caps, else template.yaml's defaults,
    computed by the pipeline's own rule (SafetyPolicy.limit)."""
    defaults = load_template(DRILLS.parent.parent / "template.yaml")["Parameters"]
    policy = SafetyPolicy(
        max_percent=scenario.settings.caps.max_percent or float(defaults["MaxNodesInRecoveryPercent"]["Default"]),
        max_nodes=scenario.settings.caps.max_nodes or int(defaults["MaxNodesInRecovery"]["Default"]),
        breaker_max_recoveries=1,  # the cap does not depend on the rest
        breaker_max_failures=1,
        breaker_window_seconds=60,
        offender_max_recoveries=1,
        offender_window_seconds=60,
    )
    return policy.limit(sum(g.count for g in scenario.cluster.instance_groups if g.type == "Compute"))


def most_out_at_once(report: dict[str, Any]) -> int:
    """The most nodes the pipeline had out of service at one moment: its replacements and reboots
    from initiated until running again (or the end of the drill, if never), one node (hostname)
    counted once however many repairs overlap on it (a failed reboot, then its replacement).
    HyperPod's own repairs are not the pipeline's."""
    end = report["virtual_seconds"]
    ours = [r for r in report["replacements"] if r["initiated_by"] == "api"] + report["reboots"]
    by_node: dict[str, list[tuple[float, float]]] = {}
    for r in ours:
        by_node.setdefault(r["hostname"], []).append((r["initiated_at"], r["running_at"] if r["running_at"] is not None else end))
    moments: list[tuple[float, int]] = []
    for spans in by_node.values():
        merged: list[list[float]] = []
        for start, stop in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        moments += [(start, 1) for start, _ in merged] + [(stop, -1) for _, stop in merged]
    out = most = 0
    for _, change in sorted(moments):
        out += change
        most = max(most, out)
    return most


def summary(fault: Fault, scenario: Scenario, report: dict[str, Any]) -> dict[str, Any]:
    # (EKS: a resubmission is a job object re-created from another; Slurm: a job submitted again)
    made = [j["resubmitted_from"] for j in report.get("kubernetes_jobs", []) if "resubmitted_from" in j]
    per_job = Counter(made) if "kubernetes_jobs" in report else Counter(s["old_job_id"] for s in report["slurm"]["submissions"])
    return {
        "fault": fault.name,
        "outcomes": [
            f"{i['outcome']}:{i['error']}" if i["outcome"] in ("escalated", "capped", "stale", "failed") else i["outcome"]
            for i in report["incidents"]
        ],
        "replace calls": report["api_calls"].get("sagemaker.BatchReplaceClusterNodes", 0),
        "nodes replaced": len(report["replacements"]),
        "resubmissions": sum(per_job.values()),
        "max per job": max(per_job.values(), default=0),
        "past the cap": max(0, most_out_at_once(report) - cap_limit(scenario)),
        # What is still held when the drill ends: every end settles what its incident held.
        "left reserved": len(report["ledger_at_end"]["nodes_reserved"]),
        "open claims": len(report["ledger_at_end"]["open_claims"]),
        # Commands the agent found dead when it got to them (not executed).
        "expired commands": sum(1 for c in report["slurm"]["commands"] if c["status"] == "expired"),
        "max state KiB": round(report["max_state_bytes"] / 1024, 1),
        "virtual s": report["virtual_seconds"],
    }
