"""The drill report (JSON, fields named in architecture.md) and its printed timeline.

Per incident: id, trigger, nodes, outcome, phases (virtual start/end), resubmissions, plus the
ledger's timeline and the time split. Top level: api_calls, state_transitions, executions,
virtual_seconds, pipeline_overhead_seconds.

The time split cuts the workflow's time (event received -> outcome recorded) into parts that add
up to it exactly: provisioning (HyperPod bringing a replaced or rebooted node back), agent (the
controller agent's commands, answered or not), a Retry or SDK retry backoff, the other named waits
(a job's restart backoff, its nested node recovery, another incident it waited for) and pipeline
overhead: what is left, i.e. our handler work and state transitions (no virtual time in a drill)
and the polling lag between a node coming back and the workflow noticing it. Where two overlap,
the first of that list counts: a job resubmitted while the replacement provisions is work done
in the shadow of provisioning, not time the pipeline added.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.durations import format_duration
from hyperpod_recovery.models.records import IncidentRecord
from hyperpod_recovery.vocabulary import ORCHESTRATOR_PHASES
from sandbox.aws import RETRY_BACKOFF
from sandbox.clock import EPOCH
from sandbox.message_check import contradictions
from sandbox.real_slurm import RealController

if TYPE_CHECKING:
    from sandbox.runner import DrillRunner

# 2: virtual time no longer counts handler work, and the time split has named waits: version 1's
# pipeline overhead is not comparable.
REPORT_VERSION = 2


def _seconds(moment: datetime | None, epoch: datetime = EPOCH) -> float | None:
    return None if moment is None else round((moment - epoch).total_seconds(), 3)


def build_report(runner: DrillRunner, wall_seconds: float) -> dict[str, Any]:
    aws = runner.aws
    sfn = aws.client("stepfunctions")
    ledger = DynamoLedger(aws.ledger_table, dynamodb=aws.client("dynamodb"))
    found: list[tuple[str, dict[str, Any], IncidentRecord | None]] = []
    transitions = 0
    executions = 0
    largest: tuple[int, str] = (0, "")
    for arn in aws.state_machines.values():
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=arn):
            for summary in sorted(page["executions"], key=lambda e: e["startDate"]):
                executions += 1
                detail = sfn.describe_execution(executionArn=summary["executionArn"])
                history = [
                    e
                    for p in sfn.get_paginator("get_execution_history").paginate(
                        executionArn=summary["executionArn"], PaginationConfig={"PageSize": 1000}
                    )
                    for e in p["events"]
                ]
                transitions += sum(1 for event in history if event["type"].endswith("StateEntered"))
                largest = max(largest, largest_payload(history, summary["name"]))
                found.append((summary["name"], detail, ledger.get_incident(summary["name"])))
    records = [record for _, _, record in found if record is not None]
    incidents = [_incident(runner, name, detail, record, records) for name, detail, record in found]
    api_calls = dict(sorted(aws.api_calls.counts.items()))
    notifications = _notifications(aws)
    # EKS: every request the Kubernetes API server served, by verb and resource (as AWS calls are counted).
    kubernetes = (
        {
            "kubernetes_calls": dict(sorted(Counter(f"{verb} {resource}" for verb, resource in runner.eks.kube.calls).items())),
            "kubernetes_jobs": runner.eks.jobs_at_end(),
        }
        if runner.eks is not None
        else {}
    )
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
        **kubernetes,
        "state_transitions": transitions,
        # Step Functions fails an execution whose state input/output passes 256 KiB (States.DataLimitExceeded).
        "max_state_bytes": largest[0],
        "max_state_at": largest[1],
        "executions": executions,
        "virtual_seconds": round(
            max([0.0] + [p["end"] for i in incidents for p in i["phases"]] + [f.at for f in runner.scenario.faults]), 3
        ),
        "pipeline_overhead_seconds": round(sum(i["pipeline_overhead_seconds"] or 0.0 for i in incidents), 3),
        "wall_seconds": round(wall_seconds, 3),
        "intake": _intake(runner),
        "jobs": _job_downtime(runner),
        "replacements": [
            {
                "old_node_id": r.old_node_id,
                "new_node_id": r.new_node_id,
                "hostname": r.hostname.split(".", 1)[0],
                "initiated_at": round(r.initiated_at, 3),
                "running_at": None if r.running_at is None else round(r.running_at, 3),
                "initiated_by": r.initiated_by,
                # The replacement came up under another hostname (behaviour.replacement_hostname: new).
                **({"new_hostname": r.new_hostname.split(".", 1)[0]} if r.new_hostname and r.new_hostname != r.hostname else {}),
            }
            for r in runner.double.replacements
        ],
        "reboots": [
            {
                "node_id": r.node_id,
                "hostname": r.hostname.split(".", 1)[0],
                "initiated_at": round(r.initiated_at, 3),
                "running_at": None if r.running_at is None else round(r.running_at, 3),
            }
            for r in runner.double.reboots
        ],
        "slurm": {
            "submissions": [s.__dict__ for s in runner.slurm.submissions],
            "drained_nodes": runner.slurm.drained_nodes(),
            "commands": runner.slurm.commands,
            **({"mode": "real", "queue": runner.slurm.queue()} if isinstance(runner.slurm, RealController) else {"mode": "simulated"}),
        },
        "notifications": notifications,
        # Two live copies of one job at one moment (pending or running): what the pipeline exists to prevent.
        "second_copies": _second_copies(runner),
        # Every notification and record summary checked against its incident's record (sandbox/message_check.py).
        "message_contradictions": message_contradictions(records, notifications),
        "ledger_at_end": ledger_at_end(aws.client("dynamodb"), aws.ledger_table, runner.epoch + timedelta(seconds=max_virtual(incidents))),
        "metrics": emitted_metrics(runner.log_path),
    }


# The history fields that carry a state's data: what entered and left each state, task parameters
# and results, and the execution's own input and output.
_PAYLOAD_FIELDS = ("input", "output", "parameters")


def compact_size(text: str) -> int:
    """Bytes of a payload as Step Functions serializes it (compact JSON, UTF-8); moto's history
    writes some with spaces after separators."""
    try:
        return len(json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode())
    except ValueError:
        return len(text.encode())


def largest_payload(history: list[dict[str, Any]], execution: str) -> tuple[int, str]:
    """(bytes, "<execution>: <event type> <state>") of the largest state input/output in a history.

    Step Functions measures payloads as UTF-8; the limit (256 KiB) applies to each of them."""
    largest = (0, "")
    entered = ""
    for event in history:
        for key, details in event.items():
            if not key.endswith("EventDetails") or not isinstance(details, dict):
                continue
            entered = details.get("name", entered)
            for field in _PAYLOAD_FIELDS:
                value = details.get(field)
                if isinstance(value, str):
                    size = compact_size(value)
                    if size > largest[0]:
                        largest = (size, f"{execution}: {event['type']} {entered}".strip())
    return largest


def max_virtual(incidents: list[dict[str, Any]]) -> float:
    return max([0.0] + [p["end"] for i in incidents for p in i["phases"]] + [e["at"] for i in incidents for e in i["timeline"]])


def ledger_at_end(dynamodb: Any, table: str, end: datetime) -> dict[str, Any]:
    """What is still held in the ledger when the drill ends: places under the cluster cap, open
    (never completed) resubmission claims, incidents that still hold something, node locks. Every
    end settles what its incident held, so the first three must be empty after any scenario."""
    reserved: list[str] = []
    claims: list[str] = []
    holding: list[str] = []
    locks: list[str] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if sk == "IN_RECOVERY":
                entries = json.loads(item.get("reservations", {}).get("S", "{}"))
                reserved += [n for n, (_, expires) in entries.items() if expires >= end.timestamp()]
            elif sk == "RESUBMISSION" and "new_job_id" not in item:
                claims.append(pk.split("#")[-1])
            elif sk == "HOLDINGS" and any(item.get(k, {}).get("SS") for k in ("locks", "reserved", "claims")):
                holding.append(pk.removeprefix("INCIDENT#"))
            elif sk == "LOCK" and int(item["expires_at"]["N"]) >= end.timestamp():
                locks.append(pk.split("#")[-1])  # escalated nodes stay locked on purpose, for a while
    return {
        "nodes_reserved": sorted(reserved),
        "open_claims": sorted(claims),
        "incidents_holding": sorted(holding),
        "locks_held": sorted(locks),
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


def _incident(
    runner: DrillRunner, name: str, execution: dict[str, Any], record: IncidentRecord | None, records: list[IncidentRecord]
) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": name,
        "execution_status": execution["status"],
        "error": execution.get("error"),
        "cause": execution.get("cause"),
    }
    if record is None:
        # No record at all: neither Record Outcome nor Reconcile Execution wrote one (a defect:
        # every end is recorded), or a dry run's execution that records nothing.
        return {
            **base,
            "workflow": "job" if execution["stateMachineArn"].endswith("-job-recovery") else "node",
            "job": None,
            "trigger": [],
            "nodes": [],
            "hostnames": [],
            "outcome": "unrecorded",
            "phases": [],
            "resubmissions": [],
            "timeline": [],
            "summary": "no incident record",
            **_no_split(),
        }
    phases = [{"name": p.name, "start": _seconds(p.start, runner.epoch), "end": _seconds(p.end, runner.epoch)} for p in record.phases]
    started = next((e.at for e in record.timeline if e.event == "event received"), None)
    split = _time_split(runner, name, record, started, records)
    return {
        **base,
        "workflow": record.workflow,
        "job": record.job_id,
        "trigger": record.trigger,
        "nodes": record.nodes,
        "hostnames": [h.split(".", 1)[0] for h in record.hostnames],
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
        **split,
    }


Intervals = list[tuple[int, int]]  # [start, end) in virtual milliseconds: exact sums, no float drift
Phases = list[tuple[str, int, int]]  # (name, start, end), in virtual milliseconds


def _time_split(
    runner: DrillRunner, execution: str, record: IncidentRecord, started: datetime | None, records: list[IncidentRecord]
) -> dict[str, Any]:
    """workflow_seconds = provisioning_seconds + agent_seconds + sum(waits) + pipeline_overhead_seconds,
    exactly (in milliseconds), from the incident's phases and what the sandbox saw happen."""
    if started is None:  # the request never became an incident (it was rejected as unreadable)
        return _no_split()
    epoch = runner.epoch
    window = (_ms((started - epoch).total_seconds()), _ms((record.recorded_at - epoch).total_seconds()))
    phases = [(p.name, _ms((p.start - epoch).total_seconds()), _ms((p.end - epoch).total_seconds())) for p in record.phases]
    retries = [(_ms(start), _ms(end)) for timeline, why, start, end in runner.clock.waits if timeline == execution and why == RETRY_BACKOFF]
    categories: list[tuple[str, Intervals]] = [
        ("provisioning", _provisioning(runner, record, phases)),
        ("agent", [(start, end) for name, start, end in phases if name in ORCHESTRATOR_PHASES]),
        ("retry_backoff", retries),
        ("restart_backoff", [(start, end) for name, start, end in phases if name == "backoff"]),
        ("node_recovery", [(start, end) for name, start, end in phases if name == "recover_nodes"]),
        ("other_incident", _other_incident(epoch, record, phases, records)),
    ]
    booked: Intervals = []
    parts: dict[str, int] = {}
    for category, intervals in categories:
        new = _minus(_clip(_union(intervals), window), booked)
        parts[category] = sum(end - start for start, end in new)
        booked = _union(booked + new)
    workflow = window[1] - window[0]
    waits = {category: ms / 1000 for category, ms in parts.items() if category not in ("provisioning", "agent") and ms}
    return {
        "provisioning_seconds": parts["provisioning"] / 1000,
        "agent_seconds": parts["agent"] / 1000,
        "waits": waits,
        "workflow_seconds": workflow / 1000,
        "pipeline_overhead_seconds": (workflow - sum(parts.values())) / 1000,
    }


def _no_split() -> dict[str, Any]:
    return {"provisioning_seconds": None, "agent_seconds": None, "waits": {}, "workflow_seconds": None, "pipeline_overhead_seconds": None}


def _provisioning(runner: DrillRunner, record: IncidentRecord, phases: Phases) -> Intervals:
    """The part of each wait for rejoin during which HyperPod had not yet brought the incident's
    nodes back (a replacement or a reboot, ground truth from the double); the rest of the wait is
    the workflow's polling lag. A node that never came back keeps the whole wait."""
    repairs = [(r.old_node_id, r.initiated_at, r.running_at) for r in runner.double.replacements]
    repairs += [(r.node_id, r.initiated_at, r.running_at) for r in runner.double.reboots]
    # A node's line of instances: a replacement that failed the health gate is replaced in turn.
    successor = {r.old_node_id: r.new_node_id for r in runner.double.replacements}
    found: Intervals = []
    for name, start, end in phases:
        if name != "wait_for_rejoin":
            continue
        ready = start
        for node in record.nodes:
            line = {node}
            while successor.get(node) and successor[node] not in line:
                node = successor[node]
                line.add(node)
            ours = [(at, running) for node_id, at, running in repairs if node_id in line and _ms(at) <= end]
            if ours:
                # The node's newest repair by then: a replacement after a reboot that did not help supersedes it.
                running = max(ours, key=lambda repair: repair[0])[1]
                ready = max(ready, end if running is None else _ms(running))
        found.append((start, min(ready, end)))
    return found


def _other_incident(epoch: datetime, record: IncidentRecord, phases: Phases, records: list[IncidentRecord]) -> Intervals:
    """The part of a job's wait for another incident (a node incident on its nodes, begun by the
    wait's end) until that incident recorded its outcome; the rest of the wait is the job's polling lag."""
    holders: Intervals = []
    for other in records:
        if other.workflow == "node" and other.incident_id != f"{record.incident_id}-nodes" and set(other.hostnames) & set(record.nodes):
            began = next((e.at for e in other.timeline if e.event == "event received"), other.recorded_at)
            holders.append((_ms((began - epoch).total_seconds()), _ms((other.recorded_at - epoch).total_seconds())))
    found: Intervals = []
    for name, start, end in phases:
        if name == "wait_other_recovery":
            done = max((stop for began, stop in holders if began <= end), default=end)
            found.append((start, min(end, max(start, done))))
    return found


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _union(intervals: Intervals) -> Intervals:
    merged: Intervals = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _clip(intervals: Intervals, window: tuple[int, int]) -> Intervals:
    return [(max(start, window[0]), min(end, window[1])) for start, end in intervals if min(end, window[1]) > max(start, window[0])]


def _minus(intervals: Intervals, taken: Intervals) -> Intervals:
    """``intervals`` (disjoint, sorted) without what ``taken`` (disjoint, sorted) covers."""
    left: Intervals = []
    for start, end in intervals:
        for taken_start, taken_end in taken:
            if taken_end <= start or taken_start >= end:
                continue
            if taken_start > start:
                left.append((start, taken_start))
            start = max(start, taken_end)
        if end > start:
            left.append((start, end))
    return left


def format_time_split(incident: dict[str, Any]) -> str:
    """``workflow 1m 07.7s = provisioning 0.0s + agent 6.7s + restart backoff 1m 00.0s + pipeline
    overhead 1.0s``: the parts are rounded to tenths together (largest remainder), so the printed
    sum adds up to the printed total, not just the exact one."""
    if incident["workflow_seconds"] is None:
        return "workflow -"
    parts = [("provisioning", incident["provisioning_seconds"]), ("agent", incident["agent_seconds"])]
    parts += [(category.replace("_", " "), seconds) for category, seconds in incident.get("waits", {}).items()]
    parts += [("pipeline overhead", incident["pipeline_overhead_seconds"])]
    millis = [_ms(seconds) for _, seconds in parts]
    tenths = [ms // 100 for ms in millis]
    short = (_ms(incident["workflow_seconds"]) + 50) // 100 - sum(tenths)
    for index in sorted(range(len(parts)), key=lambda i: -(millis[i] % 100))[:short]:
        tenths[index] += 1
    total = format_duration((_ms(incident["workflow_seconds"]) + 50) // 100 / 10)
    return f"workflow {total} = " + " + ".join(f"{label} {format_duration(t / 10)}" for (label, _), t in zip(parts, tenths, strict=True))


def _job_downtime(runner: DrillRunner) -> list[dict[str, Any]]:
    """Per scenario job, what its users measure: from the first fault that hit it (a fault on one of
    its nodes, or its own failure) to its newest incarnation running again in Slurm (virtual
    seconds). ``downtime_seconds`` is None when it was never hit, or is not running again by the
    drill's end (left pending, never resubmitted, restarted by Slurm itself). Simulated Slurm only."""
    if isinstance(runner.slurm, RealController):
        return []
    slurm = runner.slurm.slurm
    jobs = []
    for spec in runner.scenario.jobs:
        original = slurm.jobs.get(spec.id)
        if original is None:
            continue
        names = set(original.nodes)
        hit = [
            fault.at
            for fault in runner.scenario.faults
            if fault.job == spec.id or (fault.kind != "abort" and names & {runner.double.slurm_name(ref) for ref in fault.node_refs})
        ]
        current = slurm.current_incarnation(spec.id)
        running_again = _seconds(current.started_at, runner.epoch) if current is not original and current.state == "RUNNING" else None
        fault_at = min(hit) if hit else None
        jobs.append(
            {
                "job": spec.id,
                "fault_at": fault_at,
                "running_as": current.job_id if current is not original else None,
                "state": current.state,
                "running_again_at": running_again,
                "downtime_seconds": None if fault_at is None or running_again is None else round(running_again - fault_at, 3),
            }
        )
    return jobs


def _intake(runner: DrillRunner) -> dict[str, Any]:
    failures = sum(len(r.get("batchItemFailures", [])) for r in runner.intake_responses if isinstance(r, dict))
    dlq = runner.aws.client("sqs").get_queue_attributes(
        QueueUrl=runner.aws.queue_urls["IntakeDeadLetterQueue"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    return {
        "events_put": runner.events_put,
        "intake_invocations": len(runner.intake_responses),
        # Executions that ended failed, timed out or aborted: their status-change event went to
        # Reconcile Execution (which records those that never recorded themselves).
        "ends_reconciled": sorted(runner.ends_published),
        "reconcile_invocations": len(runner.reconcile_responses),
        # Invocations that failed or reported records they could not process (left on the queue).
        "reconcile_failures": sum(
            1 for r in runner.reconcile_responses if not isinstance(r, dict) or "errorType" in r or r.get("batchItemFailures")
        ),
        "aborted_by_operator": list(runner.aborted),
        "record_failures": failures,
        "dead_lettered": int(dlq),
        "drills_started": runner.drill_count,
    }


def _second_copies(runner: DrillRunner) -> list[dict[str, Any]]:
    """Every moment two copies of one training job were live, in the drill's virtual seconds."""
    if runner.eks is not None:
        second_copies = getattr(runner.eks.kube, "second_copies", None)  # (the API server's view of job objects)
        return list(second_copies()) if second_copies is not None else []
    if isinstance(runner.slurm, RealController):
        return []  # a real slurmctld's history is not kept by the drill
    return [{**copy, "at": _seconds(copy["at"], runner.epoch)} for copy in runner.slurm.slurm.second_copies()]


def message_contradictions(records: list[IncidentRecord], notifications: list[dict[str, str]]) -> list[dict[str, str]]:
    """What a human read that its incident's record contradicts: each notification (found by the
    incident id it names) and each record's summary."""
    by_id = {r.incident_id: r for r in records}
    found = [
        {"incident": r.incident_id, "in": "summary", "problem": problem} for r in records for problem in contradictions(r, "", r.summary)
    ]
    for note in notifications:
        named = re.search(r"^Incident: (\S+)", note["message"], re.MULTILINE)
        record = by_id.get(named.group(1)) if named else None
        if record is None:
            found.append({"incident": named.group(1) if named else "?", "in": "notification", "problem": "names no recorded incident"})
            continue
        found += [
            {"incident": record.incident_id, "in": "notification", "problem": p}
            for p in contradictions(record, note["subject"], note["message"])
        ]
    return found


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
        lines.append(f"  time: {format_time_split(incident)}")
        lines.append("")
    calls = ", ".join(f"{name} {count}" for name, count in report["api_calls"].items())
    intake = report["intake"]
    lines += [
        f"intake: {intake['events_put']} events put, {intake['intake_invocations']} intake invocations, "
        f"{intake['dead_lettered']} dead-lettered, {intake['drills_started']} drills started",
        f"api calls: {report['api_calls_total']} ({calls})",
        *([_kubernetes_calls_line(report["kubernetes_calls"])] if "kubernetes_calls" in report else []),
        f"executions: {report['executions']}   state transitions: {report['state_transitions']}   "
        f"virtual time: {format_duration(report['virtual_seconds'])}   pipeline overhead: "
        f"{format_duration(report['pipeline_overhead_seconds'])}   wall time: {report['wall_seconds']:.1f}s",
    ]
    for job in report.get("jobs", []):
        if job["fault_at"] is None:
            continue
        if job["downtime_seconds"] is not None:
            down = format_duration(job["downtime_seconds"])
        elif job["running_as"] is None and job["state"] == "RUNNING":
            down = "still the same job in Slurm (not resubmitted)"
        else:
            down = f"not running again ({job['state']})"
        again = f" as job {job['running_as']}" if job["running_as"] else ""
        lines.append(f"job {job['job']} down from T+{format_duration(job['fault_at'])}: {down}{again}")
    if report["slurm"].get("mode") == "real":
        lines += ["", "real Slurm queue (squeue), answered by the agent process:"]
        lines += [
            f"  {job['job_id']:>6}  {job['state']:<10} {job['name']:<24} {job['nodes'] or '-':<18} {job['comment'] or ''}"
            for job in report["slurm"]["queue"]
        ] or ["  (empty)"]
    return "\n".join(lines)


def _kubernetes_calls_line(calls: dict[str, int]) -> str:
    return f"kubernetes calls: {sum(calls.values())} ({', '.join(f'{name} {count}' for name, count in calls.items())})"
