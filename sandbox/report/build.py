"""The drill report (JSON, fields named in architecture.md), built from what a drill left behind.

Per incident: id, trigger, nodes, outcome, phases (virtual start/end), resubmissions, plus the
ledger's timeline and the time split (sandbox/report/time_split.py). Top level: api_calls,
state_transitions, executions, virtual_seconds, pipeline_overhead_seconds.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.messages.verdict_notice import verdict_id
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.models.planned_swap import SwapRecord
from hyperpod_recovery.models.records import IncidentRecord
from sandbox.message_check import contradictions, verdict_contradictions
from sandbox.planted import PLANTED, channel_copies, found_in
from sandbox.real_slurm import RealController
from sandbox.report.jobs import kube_copy_running_at, scenario_jobs
from sandbox.report.source import DrillSource
from sandbox.report.swaps import SWAP_PREFIX, planned_swaps, swap_contradictions
from sandbox.report.time_split import no_split, seconds_since, time_split

# 2: virtual time no longer counts handler work, and the time split has named waits: version 1's
# pipeline overhead is not comparable.
REPORT_VERSION = 2


@dataclass
class _Executions:
    """Every execution of the drill as its history tells it, with its incident record (if any)."""

    found: list[tuple[str, dict[str, Any], IncidentRecord | None]] = dataclasses.field(default_factory=list)
    transitions: int = 0
    count: int = 0
    largest: tuple[int, str] = (0, "")
    states: list[tuple[str, Any]] = dataclasses.field(default_factory=list)  # (place, history), when secrets were planted


def _executions(aws: Any, ledger: DynamoLedger, planted: bool) -> _Executions:
    sfn = aws.client("stepfunctions")
    seen = _Executions()
    for arn in aws.state_machines.values():
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=arn):
            for summary in sorted(page["executions"], key=lambda e: e["startDate"]):
                seen.count += 1
                detail = sfn.describe_execution(executionArn=summary["executionArn"])
                history = [
                    e
                    for p in sfn.get_paginator("get_execution_history").paginate(
                        executionArn=summary["executionArn"], PaginationConfig={"PageSize": 1000}
                    )
                    for e in p["events"]
                ]
                seen.transitions += sum(1 for event in history if event["type"].endswith("StateEntered"))
                if planted:
                    seen.states.append((f"execution {summary['name']}", history))
                seen.largest = max(seen.largest, largest_payload(history, summary["name"]))
                seen.found.append((summary["name"], detail, ledger.get_incident(summary["name"])))
    return seen


def build_report(runner: DrillSource, wall_seconds: float) -> dict[str, Any]:
    aws = runner.aws
    ledger = DynamoLedger(aws.ledger_table, dynamodb=aws.client("dynamodb"))
    # (a drill whose hung job printed secrets: every place they could be kept or sent is searched)
    planted = any(f.kind == "hang" and f.stacks == "secret_in_log" for f in runner.scenario.faults)
    seen = _executions(aws, ledger, planted)
    found, transitions, executions, largest, states = seen.found, seen.transitions, seen.count, seen.largest, seen.states
    records = [record for _, _, record in found if record is not None]
    names = [name for name, _, _ in found]
    # (a planned swap is no incident: its record is the report's planned_swaps, its move the nested incident)
    incidents = [_incident(runner, name, detail, record, records) for name, detail, record in found if not _is_swap(name)]
    api_calls = dict(sorted(aws.api_calls.counts.items()))
    notifications = notifications_sent(aws)
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
        # The moment T+0 is (UTC): every virtual time below counts from it.
        "started_at": runner.epoch.isoformat(),
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
        "jobs": scenario_jobs(runner, records, max([max_virtual(incidents)] + [f.at for f in runner.scenario.faults])),
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
        **({"planned_swaps": planned_swaps(runner, ledger, names)} if any(n.startswith(SWAP_PREFIX) for n in names) else {}),
        **(
            {"hangs": _hangs(runner, ledger)}
            if runner.progress is not None or any(f.kind == "hyperpod_hang" for f in runner.scenario.faults)
            else {}
        ),
        **({"at_risk": _at_risk(runner, ledger)} if any(f.kind == "at_risk" for f in runner.scenario.faults) else {}),
        # Two live copies of one job at one moment (pending or running): what the pipeline exists to prevent.
        "second_copies": _second_copies(runner),
        # Every notification and record summary checked against its incident's record (sandbox/message_check.py).
        "message_contradictions": message_contradictions(
            records,
            notifications,
            ledger.verdicts(runner.scenario.cluster.name),
            [r for n in names if _is_swap(n) and (r := ledger.swap_record(n))],
        ),
        "ledger_at_end": ledger_at_end(aws.client("dynamodb"), aws.ledger_table, runner.epoch + timedelta(seconds=max_virtual(incidents))),
        **({"secrets": secrets_kept(aws, records, notifications, states)} if planted else {}),
        "metrics": emitted_metrics(runner.log_path),
    }


def secrets_kept(
    aws: Any, records: list[IncidentRecord], notifications: list[dict[str, str]], states: list[tuple[str, Any]]
) -> dict[str, Any]:
    """Where the secrets a hung job printed (sandbox/planted.py) are found: each channel's copy of each
    notification, each incident record, each ledger item, each execution's state; and how many kept
    evidence items say something was redacted (the secrets were read, not missed)."""
    items = [i for p in aws.client("dynamodb").get_paginator("scan").paginate(TableName=aws.ledger_table) for i in p["Items"]]
    places = [
        *channel_copies(notifications),
        *((f"record {r.incident_id}", r.model_dump(mode="json")) for r in records),
        *((f"ledger {i['pk']['S']} {i['sk']['S']}", i) for i in items),
        *states,
    ]
    evidence = [i for i in items if i["sk"]["S"] == "EVIDENCE"]
    return {
        "planted": sorted(PLANTED),
        "found_in": found_in(places),
        "evidence_items": len(evidence),
        "evidence_redacted": sum(1 for i in evidence if "[REDACTED:" in i["evidence"]["S"]),
    }


def _hangs(runner: DrillSource, ledger: DynamoLedger) -> dict[str, Any]:
    """What the hang detector did: its ticks, the verdicts it kept (when each was decided after the
    job's last progress), and, for every hang, when a copy of the job ran again after it began."""
    verdicts = ledger.verdicts(runner.scenario.cluster.name)
    slurm = runner.slurm.slurm
    hangs = []
    for fault in (f for f in runner.scenario.faults if f.kind == "hang"):
        if runner.eks is not None:
            running_again = kube_copy_running_at(runner, next(j for j in runner.scenario.jobs if j.id == fault.job))
        else:
            copies = [s for s in runner.slurm.submissions if s.old_job_id == fault.job]
            started = [j.started_at for s in copies if (j := slurm.jobs.get(s.new_job_id)) is not None and j.started_at is not None]
            running_again = seconds_since(min(started), runner.epoch) if started else None
        hangs.append(
            {
                "job": fault.job,
                "at": fault.at,
                "copy_running_at": running_again,
                "running_again_after_seconds": None if running_again is None else round(running_again - fault.at, 3),
            }
        )
    return {
        "ticks": [{"at": at, "answer": answer} for at, answer in runner.hang_ticks],
        **({"imported": [{"at": at, "answer": answer} for at, answer in runner.hang_imports]} if runner.hang_imports else {}),
        "verdicts": [
            {
                "rule": v.verdict.rule,
                "mode": v.verdict.mode,
                "job": v.verdict.job,
                "decided_at": seconds_since(v.verdict.decided_at, runner.epoch),
                "last_progress_at": seconds_since(v.verdict.last_progress_at, runner.epoch),
                "detected_after_seconds": round((v.verdict.decided_at - v.verdict.last_progress_at).total_seconds(), 3),
                "suspects": v.verdict.suspects,
                "summary": v.verdict.summary,
                "action": v.action,
            }
            for v in verdicts
        ],
        "hangs": hangs,
    }


def _at_risk(runner: DrillSource, ledger: DynamoLedger) -> dict[str, Any]:
    """What At Risk did: its answers (deliveries and ticks), and each verdict the ledger kept, with
    its evidence and, as the last tick settled it, its outcome."""
    return {
        "answers": [{"at": at, "answer": answer} for at, answer in runner.at_risk_answers],
        "verdicts": [
            {
                "signal": r.verdict.signal,
                "source": r.verdict.source,
                "mode": r.verdict.mode,
                "node": r.verdict.node or r.verdict.instance_id,
                "observed_at": seconds_since(r.verdict.observed_at, runner.epoch),
                "failure_chance": r.verdict.failure_chance,
                "failure_chance_from": r.verdict.failure_chance_from,
                "evidence": r.verdict.evidence,
                "action": r.action,
                "outcome": r.outcome,
                "incident": r.incident,
            }
            for r in ledger.at_risk_records(runner.scenario.cluster.name)
        ],
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
    runner: DrillSource, name: str, execution: dict[str, Any], record: IncidentRecord | None, records: list[IncidentRecord]
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
            **no_split(),
        }
    phases = [
        {"name": p.name, "start": seconds_since(p.start, runner.epoch), "end": seconds_since(p.end, runner.epoch)} for p in record.phases
    ]
    started = next((e.at for e in record.timeline if e.event == "event received"), None)
    split = time_split(runner, name, record, started, records)
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
        "timeline": [{"at": seconds_since(e.at, runner.epoch), "event": e.event, "detail": e.detail} for e in record.timeline],
        **split,
    }


def _intake(runner: DrillSource) -> dict[str, Any]:
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


def _is_swap(name: str) -> bool:
    return name.startswith(SWAP_PREFIX) and not name.endswith("-nodes")


def _second_copies(runner: DrillSource) -> list[dict[str, Any]]:
    """Every moment two copies of one training job were live, in the drill's virtual seconds."""
    if runner.eks is not None:
        second_copies = getattr(runner.eks.kube, "second_copies", None)  # (the API server's view of job objects)
        return list(second_copies()) if second_copies is not None else []
    if isinstance(runner.slurm, RealController):
        return []  # a real slurmctld's history is not kept by the drill
    return [{**copy, "at": seconds_since(copy["at"], runner.epoch)} for copy in runner.slurm.slurm.second_copies()]


def message_contradictions(
    records: list[IncidentRecord],
    notifications: list[dict[str, str]],
    verdicts: Sequence[RecordedVerdict] = (),
    swaps: Sequence[SwapRecord] = (),
) -> list[dict[str, str]]:
    """What a human read that its incident's record contradicts: each notification (found by the
    incident id it names) and each record's summary; a verdict notice (it names a verdict, not an
    incident) against the ledger's verdict."""
    by_id = {r.incident_id: r for r in records}
    by_verdict = {verdict_id(v.verdict): v for v in verdicts}
    found = [
        {"incident": r.incident_id, "in": "summary", "problem": problem} for r in records for problem in contradictions(r, "", r.summary)
    ]
    for note in notifications:
        if verdict_named := re.search(r"^Verdict: (\S+)", note["message"], re.MULTILINE):
            recorded = by_verdict.get(verdict_named.group(1))
            problems = (
                verdict_contradictions(recorded, note["subject"], note["message"])
                if recorded is not None
                else ["names no recorded verdict"]
            )
            found += [{"incident": verdict_named.group(1), "in": "verdict notice", "problem": p} for p in problems]
            continue
        if swap_named := re.search(r"^Planned swap: (\S+)", note["message"], re.MULTILINE):
            found += [
                {"incident": swap_named.group(1), "in": "swap notice", "problem": p}
                for p in swap_contradictions(swaps, swap_named.group(1), note)
            ]
            continue
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


def notifications_sent(aws: Any) -> list[dict[str, str]]:
    """What the notification topic delivered so far, subject and text (each taken off its queue: read once)."""
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
