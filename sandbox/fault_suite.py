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
    Fault("agent-down", "agent-down", {}, ("escalated:States.Timeout",)),
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
]


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


def summary(fault: Fault, scenario: Scenario, report: dict[str, Any]) -> dict[str, Any]:
    per_job = Counter(s["old_job_id"] for s in report["slurm"]["submissions"])
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
        "past the cap": max(0, len(report["replacements"]) - cap_limit(scenario)),
        # What is still held when the drill ends: every end settles what its incident held.
        "left reserved": len(report["ledger_at_end"]["nodes_reserved"]),
        "open claims": len(report["ledger_at_end"]["open_claims"]),
        "max state KiB": round(report["max_state_bytes"] / 1024, 1),
        "virtual s": report["virtual_seconds"],
    }
