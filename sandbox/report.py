"""The drill report (JSON, fields named in architecture.md) and its printed timeline.

Per incident: id, trigger, nodes, outcome, phases (virtual start/end), resubmissions, plus the
ledger's timeline and the time split (provisioning, agent, pipeline overhead). Top level:
api_calls, state_transitions, executions, virtual_seconds, pipeline_overhead_seconds.

pipeline_overhead_seconds is the workflow's time (execution start -> outcome recorded) not spent
waiting on HyperPod provisioning a replacement or on the controller agent: handler work, state
transitions and the lag between a node coming back and the workflow noticing it. A JobRecovery
incident's time spent waiting on its nested NodeRecovery (counted there), on another incident, or
in its deliberate restart backoff is not overhead either.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.durations import format_duration
from hyperpod_recovery.models.records import IncidentRecord
from sandbox.clock import EPOCH
from sandbox.real_slurm import RealController

if TYPE_CHECKING:
    from sandbox.runner import DrillRunner

REPORT_VERSION = 1
# JobRecovery phases that wait on something else (a node recovery, another incident, the backoff).
JOB_WAIT_PHASES = ("recover_nodes", "wait_other_recovery", "backoff")


def _seconds(moment: datetime | None, epoch: datetime = EPOCH) -> float | None:
    return None if moment is None else round((moment - epoch).total_seconds(), 3)


def build_report(runner: DrillRunner, wall_seconds: float) -> dict[str, Any]:
    aws = runner.aws
    sfn = aws.client("stepfunctions")
    ledger = DynamoLedger(aws.ledger_table, dynamodb=aws.client("dynamodb"))
    incidents: list[dict[str, Any]] = []
    transitions = 0
    executions = 0
    for arn in aws.state_machines.values():
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=arn):
            for summary in sorted(page["executions"], key=lambda e: e["startDate"]):
                executions += 1
                detail = sfn.describe_execution(executionArn=summary["executionArn"])
                history = sfn.get_execution_history(executionArn=summary["executionArn"], maxResults=1000)["events"]
                transitions += sum(1 for event in history if event["type"].endswith("StateEntered"))
                record = ledger.get_incident(summary["name"])
                incidents.append(_incident(runner, summary["name"], detail, record))
    api_calls = dict(sorted(aws.api_calls.counts.items()))
    notifications = _notifications(aws)
    return {
        "report_version": REPORT_VERSION,
        "scenario": runner.scenario.name,
        "description": runner.scenario.description,
        "cluster": {
            "name": runner.scenario.cluster.name,
            "arn": runner.double.arn,
            "orchestrator": runner.scenario.cluster.orchestrator,
            "node_recovery": runner.scenario.cluster.node_recovery,
            "instance_groups": {g.name: g.count for g in runner.scenario.cluster.instance_groups},
        },
        "dry_run": runner.scenario.settings.dry_run,
        "incidents": incidents,
        "api_calls": api_calls,
        "api_calls_total": sum(api_calls.values()),
        "state_transitions": transitions,
        "executions": executions,
        "virtual_seconds": round(
            max([0.0] + [p["end"] for i in incidents for p in i["phases"]] + [f.at for f in runner.scenario.faults]), 3
        ),
        "pipeline_overhead_seconds": round(sum(i["pipeline_overhead_seconds"] or 0.0 for i in incidents), 3),
        "wall_seconds": round(wall_seconds, 3),
        "intake": _intake(runner),
        "replacements": [
            {
                "old_node_id": r.old_node_id,
                "new_node_id": r.new_node_id,
                "hostname": r.hostname.split(".", 1)[0],
                "initiated_at": round(r.initiated_at, 3),
                "running_at": None if r.running_at is None else round(r.running_at, 3),
                "initiated_by": r.initiated_by,
            }
            for r in runner.double.replacements
        ],
        "slurm": {
            "submissions": [s.__dict__ for s in runner.slurm.submissions],
            "drained_nodes": runner.slurm.drained_nodes(),
            "commands": runner.slurm.commands,
            **({"mode": "real", "queue": runner.slurm.queue()} if isinstance(runner.slurm, RealController) else {"mode": "simulated"}),
        },
        "notifications": notifications,
        "metrics": emitted_metrics(runner.log_path),
    }


def emitted_metrics(log_path: Path) -> dict[str, dict[str, Any]]:
    """The CloudWatch metrics the handlers emitted during the drill (their Lambda log)."""
    return parse_emf(log_path.read_text())


def parse_emf(text: str) -> dict[str, dict[str, Any]]:
    """Powertools EMF lines, read as CloudWatch reads them: {name: {"unit", "namespace",
    "dimensions", "values"}}, one value per emission, in order. Other lines are ignored."""
    found: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.startswith('{"_aws"'):
            continue
        blob = json.loads(line)
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            dimensions = {name: blob[name] for group in directive["Dimensions"] for name in group}
            for metric in directive["Metrics"]:
                values = blob[metric["Name"]]
                entry = found.setdefault(
                    metric["Name"], {"unit": metric["Unit"], "namespace": directive["Namespace"], "dimensions": dimensions, "values": []}
                )
                entry["values"] += values if isinstance(values, list) else [values]
    return dict(sorted(found.items()))


def _incident(runner: DrillRunner, name: str, execution: dict[str, Any], record: IncidentRecord | None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": name,
        "execution_status": execution["status"],
        "error": execution.get("error"),
        "cause": execution.get("cause"),
    }
    if record is None:
        # The execution ended before Record Outcome could run (e.g. the ledger itself failed).
        return {
            **base,
            "workflow": "job" if execution["stateMachineArn"].endswith("-job-recovery") else "node",
            "job": None,
            "trigger": [],
            "nodes": [],
            "outcome": "escalated" if execution["status"] != "SUCCEEDED" else "unknown",
            "phases": [],
            "resubmissions": [],
            "timeline": [],
            "summary": "no incident record",
            "provisioning_seconds": None,
            "agent_seconds": None,
            "workflow_seconds": None,
            "pipeline_overhead_seconds": None,
        }
    phases = [{"name": p.name, "start": _seconds(p.start, runner.epoch), "end": _seconds(p.end, runner.epoch)} for p in record.phases]
    started = next((e.at for e in record.timeline if e.event == "event received"), None)
    workflow = (record.recorded_at - started).total_seconds() if started else None
    provisioning = _provisioning_wait(runner, record, phases)
    waited = sum(p["end"] - p["start"] for p in phases if p["name"] in JOB_WAIT_PHASES) if record.workflow == "job" else 0.0
    overhead = None if workflow is None else max(0.0, workflow - provisioning - record.agent_seconds - waited)
    return {
        **base,
        "workflow": record.workflow,
        "job": record.job_id,
        "trigger": record.trigger,
        "nodes": record.nodes,
        "outcome": record.outcome,
        "error": record.error or base["error"],
        "cause": record.cause or base["cause"],
        "summary": record.summary,
        "phases": phases,
        "resubmissions": [
            {
                "job": r.job,
                "job_name": r.job_name,
                "new_job_id": r.new_job_id,
                "checkpoint_step": r.checkpoint_step,
                "checkpoint_uri": r.checkpoint_uri,
            }
            for r in record.resubmissions
        ],
        "timeline": [{"at": _seconds(e.at, runner.epoch), "event": e.event, "detail": e.detail} for e in record.timeline],
        "provisioning_seconds": round(provisioning, 3),
        "agent_seconds": round(record.agent_seconds, 3),
        "workflow_seconds": None if workflow is None else round(workflow, 3),
        "pipeline_overhead_seconds": None if overhead is None else round(overhead, 3),
    }


def _provisioning_wait(runner: DrillRunner, record: IncidentRecord, phases: list[dict[str, Any]]) -> float:
    """Time the workflow spent waiting while HyperPod had not yet brought a replacement up."""
    wait = next((p for p in phases if p["name"] == "wait_for_rejoin"), None)
    if wait is None:
        return 0.0
    ours = [r for r in runner.double.replacements if r.old_node_id in record.nodes and r.initiated_at <= wait["end"]]
    ready = max((r.running_at if r.running_at is not None else wait["end"]) for r in ours) if ours else wait["start"]
    return max(0.0, min(ready, wait["end"]) - wait["start"])


def _intake(runner: DrillRunner) -> dict[str, Any]:
    failures = sum(len(r.get("batchItemFailures", [])) for r in runner.intake_responses if isinstance(r, dict))
    dlq = runner.aws.client("sqs").get_queue_attributes(
        QueueUrl=runner.aws.queue_urls["IntakeDeadLetterQueue"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    return {
        "events_put": runner.events_put,
        "intake_invocations": len(runner.intake_responses),
        "record_failures": failures,
        "dead_lettered": int(dlq),
        "drills_started": runner.drill_count,
    }


def _notifications(aws: Any) -> list[dict[str, str]]:
    sqs = aws.client("sqs")
    url = aws.queue_urls["__notifications__"]
    found = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return found
        for message in messages:
            envelope = json.loads(message["Body"])
            found.append({"subject": envelope.get("Subject", ""), "message": envelope.get("Message", "")})
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def format_report(report: dict[str, Any]) -> str:
    cluster = report["cluster"]
    groups = ", ".join(f"{name} {count}" for name, count in cluster["instance_groups"].items())
    lines = [
        f"hyperpod-recovery drill: {report['scenario']}" + (f": {report['description']}" if report["description"] else ""),
        f"cluster {cluster['name']} ({cluster['orchestrator']}, NodeRecovery={cluster['node_recovery']}): {groups}"
        + ("   [DRY RUN]" if report["dry_run"] else ""),
        "",
    ]
    if not report["incidents"]:
        lines.append("no incident was started (see intake below)")
    for incident in report["incidents"]:
        job = f" (job {incident['job']})" if incident.get("job") else ""
        lines.append(
            f"incident {incident['id']}{job}   trigger {','.join(incident['trigger']) or '-'}   outcome {incident['outcome'].upper()}"
        )
        for entry in incident["timeline"]:
            lines.append(f"  T+{format_duration(entry['at']):>9}  {entry['event']:<20} {entry['detail']}")
        if incident["error"]:
            lines.append(f"  error: {incident['error']}: {incident['cause']}")
        for resubmission in incident["resubmissions"]:
            lines.append(
                f"  resubmitted job {resubmission['job']} as {resubmission['new_job_id']} from step "
                f"{resubmission['checkpoint_step']} ({resubmission['checkpoint_uri']})"
            )
        lines.append(
            f"  time: workflow {format_duration(incident['workflow_seconds'])} = provisioning "
            f"{format_duration(incident['provisioning_seconds'])} + agent {format_duration(incident['agent_seconds'])} "
            f"+ pipeline overhead {format_duration(incident['pipeline_overhead_seconds'])}"
        )
        lines.append("")
    calls = ", ".join(f"{name} {count}" for name, count in report["api_calls"].items())
    intake = report["intake"]
    lines += [
        f"intake: {intake['events_put']} events put, {intake['intake_invocations']} intake invocations, "
        f"{intake['dead_lettered']} dead-lettered, {intake['drills_started']} drills started",
        f"api calls: {report['api_calls_total']} ({calls})",
        f"executions: {report['executions']}   state transitions: {report['state_transitions']}   "
        f"virtual time: {format_duration(report['virtual_seconds'])}   pipeline overhead: "
        f"{format_duration(report['pipeline_overhead_seconds'])}   wall time: {report['wall_seconds']:.1f}s",
    ]
    if report["slurm"].get("mode") == "real":
        lines += ["", "real Slurm queue (squeue), answered by the agent process:"]
        lines += [
            f"  {job['job_id']:>6}  {job['state']:<10} {job['name']:<24} {job['nodes'] or '-':<18} {job['comment'] or ''}"
            for job in report["slurm"]["queue"]
        ] or ["  (empty)"]
    return "\n".join(lines)
