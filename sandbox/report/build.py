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
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.jobs.eks_jobs import RESUBMITTED_FROM_ANNOTATION
from hyperpod_recovery.domain.messages.verdict_notice import verdict_id
from hyperpod_recovery.domain.record.durations import format_duration
from hyperpod_recovery.domain.record.fates import job_label
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.models.manifest import RESUME_STEP_ENV
from hyperpod_recovery.models.records import IncidentRecord, JobFate
from hyperpod_recovery.vocabulary import ORCHESTRATOR_PHASES
from sandbox.aws import RETRY_BACKOFF
from sandbox.clock import EPOCH
from sandbox.job_downtime import CopyRun, down_intervals, node_time_lost, total, union
from sandbox.message_check import contradictions, verdict_contradictions
from sandbox.planted import PLANTED, channel_copies, found_in
from sandbox.real_slurm import RealController
from sandbox.scenario import expand_range

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
    # (a drill whose hung job printed secrets: every place they could be kept or sent is searched)
    planted = any(f.kind == "hang" and f.stacks == "secret_in_log" for f in runner.scenario.faults)
    states: list[tuple[str, Any]] = []
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
                if planted:
                    states.append((f"execution {summary['name']}", history))
                largest = max(largest, largest_payload(history, summary["name"]))
                found.append((summary["name"], detail, ledger.get_incident(summary["name"])))
    records = [record for _, _, record in found if record is not None]
    incidents = [_incident(runner, name, detail, record, records) for name, detail, record in found]
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
        "jobs": _jobs(runner, records, max([max_virtual(incidents)] + [f.at for f in runner.scenario.faults])),
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
        **(
            {"hangs": _hangs(runner, ledger)}
            if runner.progress is not None or any(f.kind == "hyperpod_hang" for f in runner.scenario.faults)
            else {}
        ),
        # Two live copies of one job at one moment (pending or running): what the pipeline exists to prevent.
        "second_copies": _second_copies(runner),
        # Every notification and record summary checked against its incident's record (sandbox/message_check.py).
        "message_contradictions": message_contradictions(records, notifications, ledger.verdicts(runner.scenario.cluster.name)),
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


def _hangs(runner: DrillRunner, ledger: DynamoLedger) -> dict[str, Any]:
    """What the hang detector did: its ticks, the verdicts it kept (when each was decided after the
    job's last progress), and, for every hang, when a copy of the job ran again after it began."""
    verdicts = ledger.verdicts(runner.scenario.cluster.name)
    slurm = runner.slurm.slurm
    hangs = []
    for fault in (f for f in runner.scenario.faults if f.kind == "hang"):
        if runner.eks is not None:
            running_again = _kube_copy_running_at(runner, next(j for j in runner.scenario.jobs if j.id == fault.job))
        else:
            copies = [s for s in runner.slurm.submissions if s.old_job_id == fault.job]
            started = [j.started_at for s in copies if (j := slurm.jobs.get(s.new_job_id)) is not None and j.started_at is not None]
            running_again = _seconds(min(started), runner.epoch) if started else None
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
                "decided_at": _seconds(v.verdict.decided_at, runner.epoch),
                "last_progress_at": _seconds(v.verdict.last_progress_at, runner.epoch),
                "detected_after_seconds": round((v.verdict.decided_at - v.verdict.last_progress_at).total_seconds(), 3),
                "suspects": v.verdict.suspects,
                "summary": v.verdict.summary,
                "action": v.action,
            }
            for v in verdicts
        ],
        "hangs": hangs,
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
        # (a shrunk job's wait for its next checkpoint, and its grow-back: planned, the job training meanwhile)
        ("grow_back", [(start, end) for name, start, end in phases if name == "grow_back"]),
    ]
    booked: Intervals = []
    parts: dict[str, int] = {}
    for category, intervals in categories:
        new = _minus(_clip(union(intervals), window), booked)
        parts[category] = sum(end - start for start, end in new)
        booked = union(booked + new)
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


def _jobs(runner: DrillRunner, records: list[IncidentRecord], end: float) -> list[dict[str, Any]]:
    """Per scenario job, what its users measure (virtual seconds): the first fault that hit it, the
    intervals its lineage was down (sandbox/job_downtime.py), its newest copy and where that runs.
    ``downtime_seconds`` is their sum once a copy runs again at the drill's end; None when it was
    never hit or is not running again (left pending, never resubmitted, restarted by Slurm itself)."""
    fates = [fate for record in records for fate in record.job_fates]
    if runner.eks is not None:
        return [_kubernetes_job(runner, spec, fates, end) for spec in runner.scenario.jobs]
    if isinstance(runner.slurm, RealController):
        return []
    return [job for spec in runner.scenario.jobs if (job := _slurm_job(runner, spec, fates, end)) is not None]


def _lineage_fate(fates: list[JobFate], ids: set[str], current: str | None) -> JobFate | None:
    """What the records say became of the job's newest copy: an incident about that copy itself,
    else the one that made it, else any record of the lineage."""
    about = [f for f in fates if f.job == current]
    made = [f for f in fates if f.job in ids and f.copy_id == current]
    found = about or made or [f for f in fates if f.job in ids]
    return found[-1] if found else None


def _ms_faults(runner: DrillRunner, spec: Any, nodes_at: Any) -> list[tuple[int, set[str] | None]]:
    """Each fault that may hit the job: (moment, the node names it hit then; None: the job's own failure)."""
    found: list[tuple[int, set[str] | None]] = []
    for fault in runner.scenario.faults:
        if fault.job == spec.id:
            found.append((_ms(fault.at), None))
        elif fault.kind != "abort" and fault.node_refs:
            found.append((_ms(fault.at), {nodes_at(ref, fault.at) for ref in fault.node_refs}))
    return found


def _slurm_job(runner: DrillRunner, spec: Any, fates: list[JobFate], end: float) -> dict[str, Any] | None:
    slurm = runner.slurm.slurm
    original = slurm.jobs.get(spec.id)
    if original is None:
        return None

    def root(job: Any) -> str:
        while job.resubmission_of is not None:
            job = slurm.jobs[job.resubmission_of]
        return str(job.job_id)

    lineage = [job for job in slurm.jobs.values() if root(job) == spec.id]
    faults = _ms_faults(runner, spec, lambda ref, at: runner.double.current(ref, t=at).hostname.split(".", 1)[0])
    end_ms = _ms(end)

    def hits(job: Any) -> list[int]:
        return [at for at, names in faults if names is None or names & set(job.nodes)]

    runs: list[CopyRun] = []
    runs_of: dict[str, list[CopyRun]] = {}
    for job in lineage:
        stop = _ms((job.ended_at - runner.epoch).total_seconds()) if job.ended_at is not None else end_ms
        starts = [0] if job is original else []
        if job.started_at is not None:
            starts.append(_ms((job.started_at - runner.epoch).total_seconds()))
        runs_of[job.job_id] = [CopyRun(start, stop, hits(job)) for start in starts]
        runs += runs_of[job.job_id]
    first_hits = [at for job in lineage for at in hits(job)]
    current = slurm.current_incarnation(spec.id)
    copy = current if current is not original else None
    running = copy is not None and current.state == "RUNNING"
    down = down_intervals(runs, first_hits, end_ms)
    fate = _lineage_fate(fates, {j.job_id for j in lineage}, current.job_id)
    hit_nodes = {name for _, names in faults if names for name in names}
    # A replacement that came back under a new hostname is the hit node repaired, not a spare.
    hit_nodes |= {
        r.new_hostname.split(".", 1)[0] for r in runner.double.replacements if r.new_hostname and r.hostname.split(".", 1)[0] in hit_nodes
    }
    full = len(original.nodes)
    sized = [(run, len(job.nodes) or job.node_count or full) for job in lineage for run in runs_of[job.job_id]]
    return {
        "job": spec.id,
        "label": _label(fates, spec.id) or f"job {spec.id} ({spec.name})",
        "fault_at": min(first_hits) / 1000 if first_hits else None,
        # Every copy made, in order: its size and the step it resumed from (a shrink, a grow-back).
        "copies": [
            {
                "job": job.job_id,
                "nodes": len(job.nodes) or job.node_count,
                "from_step": _step_number(job.environment.get(RESUME_STEP_ENV)),
                "started_at": _seconds(job.started_at, runner.epoch),
                "ended_at": _seconds(job.ended_at, runner.epoch),
            }
            for job in sorted(lineage, key=lambda j: int(j.job_id))
            if job is not original
        ],
        "node_seconds_lost": node_time_lost(sized, first_hits, end_ms, full) / 1000 if first_hits else None,
        "running_as": copy.job_id if copy is not None else None,
        "copy": f"job {copy.job_id}" if copy is not None else None,
        "state": current.state,
        "running_again_at": _seconds(current.started_at, runner.epoch) if running else None,
        "pending_since": _seconds(current.submitted_at, runner.epoch) if copy is not None and current.state == "PENDING" else None,
        "on": _placement(original.nodes, current.nodes, hit_nodes) if running else None,
        "checkpoint_step": _copy_step(fates, {j.job_id for j in lineage}, copy.job_id if copy is not None else None),
        "fate": fate.fate if fate is not None else None,
        "reason": fate.reason if fate is not None else "",
        "down": [[s / 1000, e / 1000] for s, e in down],
        # (a copy a later fault hit, and nothing replaced, is RUNNING in Slurm but not training)
        "downtime_seconds": total(down) / 1000 if first_hits and running and not _down_at(down, end_ms) else None,
    }


def _down_at(down: list[tuple[int, int]], end: int) -> bool:
    """No copy is training at the drill's end."""
    return bool(down) and down[-1][1] >= end


def _placement(before: list[str], now: list[str], hit: set[str]) -> str:
    """Where the running copy is, against the nodes the job ran on and those the faults hit."""
    if set(now) & hit:
        return "its repaired nodes"
    return "spare nodes" if set(now) - set(before) else "its own nodes"


def _label(fates: list[JobFate], job_id: str) -> str | None:
    """The job as its orchestrator shows it, from the first record that named it."""
    return next((job_label(f) for f in fates if f.job == job_id), None)


def _copy_step(fates: list[JobFate], lineage: set[str], copy_id: str | None) -> int | None:
    """The checkpoint step the newest copy resumed from (in a dry run: would have), from the records."""
    steps = [
        f.checkpoint_step
        for f in fates
        if f.job in lineage and f.checkpoint_step is not None and (f.copy_id == copy_id if copy_id else f.fate == "would_resubmit")
    ]
    return steps[-1] if steps else None


def _pod_phases(pods: list[dict[str, Any]]) -> str:
    """``2 Pending``: the copy's pods by phase (no pod: the operator has not made them)."""
    phases = Counter(str(p["status"].get("phase")) for p in pods)
    return ", ".join(f"{count} {phase}" for phase, count in sorted(phases.items())) or "no pod"


def _kube_copy_running_at(runner: DrillRunner, spec: Any) -> float | None:
    """When the first re-creation of the scenario's job object was made, if its pods all run now
    (the sandbox's operator starts a job's pods as it is created)."""
    assert runner.eks is not None
    kube = runner.eks.kube
    namespace = spec.kubernetes.namespace
    original = kube.jobs.get((spec.kubernetes.kind, namespace, spec.name))
    if original is None:
        return None
    made = []
    for (_, ns, _), obj in kube.jobs.items():
        if ns != namespace or _annotation(obj, RESUBMITTED_FROM_ANNOTATION) != original["metadata"]["uid"]:
            continue
        owned = [
            p
            for (pod_ns, _), p in kube.pods.items()
            if pod_ns == namespace and any(o.get("uid") == obj["metadata"]["uid"] for o in p["metadata"].get("ownerReferences") or [])
        ]
        stamp = obj["metadata"].get("creationTimestamp")
        if stamp and owned and all(p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"] for p in owned):
            made.append(_seconds(datetime.fromisoformat(stamp), runner.epoch))
    return min(made) if made else None


def _kubernetes_job(runner: DrillRunner, spec: Any, fates: list[JobFate], end: float) -> dict[str, Any]:
    """An EKS job by the names kubectl shows; its copies are the objects re-created from it (by the
    annotation that names the uid they came from). A copy runs when every pod it owns is Running."""
    assert runner.eks is not None
    kube = runner.eks.kube
    kind, namespace = spec.kubernetes.kind, spec.kubernetes.namespace
    objects = {obj["metadata"]["uid"]: (k, n, obj) for (k, ns, n), obj in kube.jobs.items() if ns == namespace}
    original = next((uid for uid, (k, n, _) in objects.items() if (k, n) == (kind, spec.name)), None)
    lineage = [original] if original else []
    while lineage:
        newer = [uid for uid, (_, _, obj) in objects.items() if _annotation(obj, RESUBMITTED_FROM_ANNOTATION) == lineage[-1]]
        if not newer:
            break
        lineage.append(newer[-1])
    pods: dict[str, list[dict[str, Any]]] = {}
    for (ns, _), pod in kube.pods.items():
        owner = next((o["uid"] for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
        if ns == namespace and owner is not None:
            pods.setdefault(owner, []).append(pod)

    def runs_now(uid: str) -> bool:
        owned = pods.get(uid, [])
        return bool(owned) and all(p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"] for p in owned)

    def nodes_of(uid: str) -> set[str]:
        return {str(p["spec"].get("nodeName")) for p in pods.get(uid, []) if p["spec"].get("nodeName")}

    eks = runner.eks
    assert eks is not None
    faults = _ms_faults(runner, spec, eks.node_of)
    seeded = {eks.node_of(f"{g}:{i}") for g, i in expand_range(spec.nodes)}
    hits_original = [at for at, names in faults if names is None or names & seeded]
    end_ms = _ms(end)
    runs = [CopyRun(0, end_ms, hits_original)] if original else []
    created: dict[str, float | None] = {}
    trained = kube.runs()  # (when each copy's pods all ran: a copy stopped since ran until then)
    for uid in lineage[1:]:
        stamp = objects[uid][2]["metadata"].get("creationTimestamp")
        created[uid] = _seconds(datetime.fromisoformat(stamp), runner.epoch) if stamp else None
        hit = [at for at, names in faults if names is None or names & nodes_of(uid)]
        for start, stop in trained.get(uid, []):
            runs.append(CopyRun(_ms(start or 0), end_ms if stop is None else _ms(stop), hit))
    copy = lineage[-1] if len(lineage) > 1 else None
    running = copy is not None and runs_now(copy)
    down = down_intervals(runs, hits_original, end_ms)
    fate = _lineage_fate(fates, set(lineage), lineage[-1] if lineage else None)
    copy_kind, copy_name = (objects[copy][0], objects[copy][1]) if copy is not None else (None, None)
    state = _kube_state(objects[lineage[-1]][2]) if lineage else "absent"
    return {
        "job": spec.id,
        "label": f"{kind} {namespace}/{spec.name}",
        "uid": original,
        "fault_at": min(hits_original) / 1000 if hits_original else None,
        # Every copy made, in order: its size (its pods, one a node) and the step it resumed from.
        "copies": [
            {
                "job": uid,
                "name": objects[uid][1],
                "nodes": _kube_size(objects[uid][2]),
                "from_step": _step_number(_kube_env(objects[uid][2]).get(RESUME_STEP_ENV)),
                "created_at": created[uid],
            }
            for uid in lineage[1:]
        ],
        "running_as": copy,
        "copy": f"{copy_kind} {namespace}/{copy_name}" if copy is not None else None,
        "state": state,
        "running_again_at": created[copy] if running and copy is not None else None,
        "pending_since": created[copy] if copy is not None and not running else None,
        "on": None,
        "checkpoint_step": _copy_step(fates, set(lineage), copy),
        "pods": _pod_phases(pods.get(copy, [])) if copy is not None else None,
        "fate": fate.fate if fate is not None else None,
        "reason": fate.reason if fate is not None else "",
        "down": [[s / 1000, e / 1000] for s, e in down],
        # (running: its pods all run at the drill's end, even one started at that very moment: a grow-back
        # made once the copy it replaces is gone, the incident's last step)
        "downtime_seconds": total(down) / 1000 if hits_original and running else None,
    }


def _kube_size(obj: dict[str, Any]) -> int:
    """A job object's pods, every replica type's (Kubeflow's default: 1 where none is given)."""
    spec = obj.get("spec") or {}
    replicas = list((spec.get("pytorchReplicaSpecs") or {}).values()) or list(spec.get("replicaSpecs") or [])
    return sum(1 if r.get("replicas") is None else int(r["replicas"]) for r in replicas)


def _kube_env(obj: dict[str, Any]) -> dict[str, str]:
    """The environment the job object gives its first replica's first container."""
    spec = obj.get("spec") or {}
    replicas = list((spec.get("pytorchReplicaSpecs") or {}).values()) or list(spec.get("replicaSpecs") or [])
    containers = ((replicas[0].get("template") or {}).get("spec") or {}).get("containers") or [{}] if replicas else [{}]
    return {str(e.get("name")): str(e.get("value")) for e in containers[0].get("env") or [] if isinstance(e, dict)}


def _annotation(obj: dict[str, Any], key: str) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(key)


def _kube_state(obj: dict[str, Any]) -> str:
    """The job object's newest true condition (Created, Running, Suspended, Failed ...)."""
    held = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return str(held[-1].get("type")) if held else "no condition yet"


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


def message_contradictions(
    records: list[IncidentRecord], notifications: list[dict[str, str]], verdicts: Sequence[RecordedVerdict] = ()
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


# What a terminal (and the HTML page's lead) shows before "and N more": a 64-node storm stays readable.
JOBS_SHOWN = 8
DETAIL_LIMIT = 240
RUN_SHOWN = 3  # a run of entries of one kind (64 "job resubmitted"): its first ones, then a count


def job_line(job: dict[str, Any]) -> str | None:
    """What a training team asks first, from the report's facts: ``job 1001 (llama): down 7.4s,
    running again as job 1002 on spare nodes, from step 3000``. None for a job no fault hit."""
    if job["fault_at"] is None:
        return None
    label, copy, step = job["label"], job["copy"], job.get("checkpoint_step")
    from_step = f", from step {step}" if step is not None else ""
    if job["downtime_seconds"] is not None:
        gaps = len(job["down"])
        times = f" ({gaps} interruptions)" if gaps > 1 else ""
        on = f" on {job['on']}" if job["on"] is not None else ""  # (EKS: where its pods are is the scheduler's)
        return f"{label}: down {format_duration(job['downtime_seconds'])}{times}, running again as {copy}{on}{from_step}"
    if copy is None:
        if job["fate"] == "would_resubmit":
            return f"{label}: dry run: would be resubmitted{from_step.removeprefix(',')}; still {job['state']} as the same job"
        why = f" ({job['reason']})" if job["reason"] else "" if job["fate"] else " (no incident record names it)"
        return (
            f"{label}: not resubmitted{why}; still {job['state']} as the same job, since the fault at T+{format_duration(job['fault_at'])}"
        )
    if job["state"] == "RUNNING" and job["down"]:
        hit = format_duration(job["down"][-1][0])
        return f"{label}: not running again: {copy} is RUNNING in Slurm, but a fault hit it at T+{hit} and it was not resubmitted"
    if job["pending_since"] is not None:
        pods = f", its pods {job['pods']}" if job.get("pods") else ""
        return f"{label}: not running: {copy} pending since T+{format_duration(job['pending_since'])}{pods}{from_step}"
    since = f" since T+{format_duration(job['down'][-1][0])}" if job["down"] else ""
    why = f" ({job['reason']})" if job["reason"] else ""
    return f"{label}: not running: {copy} is {job['state']}{since}{why}"


def jobs_lines(jobs: list[dict[str, Any]], shown: int = JOBS_SHOWN) -> list[str]:
    """One line per job a fault hit, at most ``shown``, then the rest counted by how they ended."""
    lines = [line for job in jobs if (line := job_line(job)) is not None]
    if len(lines) <= shown:
        return lines
    rest = [job for job in jobs if job["fault_at"] is not None][shown:]
    again = [job["downtime_seconds"] for job in rest if job["downtime_seconds"] is not None]
    counts = [f"{len(again)} running again (down {format_duration(min(again))} to {format_duration(max(again))})"] if again else []
    counts += [f"{n} {state}" for state, n in sorted(Counter(j["state"] for j in rest if j["downtime_seconds"] is None).items())]
    return [*lines[:shown], f"and {len(rest)} more jobs: {', '.join(counts)}"]


def _items(text: str, separator: str) -> list[str]:
    """``text`` split on ``separator`` outside parentheses: ``a (x, y), b`` is two items."""
    items, depth, start, index = [], 0, 0, 0
    while index < len(text):
        char = text[index]
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0 and text.startswith(separator, index):
            items.append(text[start:index])
            start = index = index + len(separator)
            continue
        index += 1
    return [*items, text[start:]]


def bounded(text: str, limit: int = DETAIL_LIMIT) -> str:
    """A long list (nodes, jobs) cut at ``limit`` characters on an item boundary, the rest counted:
    ``ip-10-2-0-147, ip-10-2-0-136 and 62 more``. A text that is no such list is left whole."""
    if len(text) <= limit:
        return text
    separator = max(("; ", ", "), key=lambda sep: len(_items(text, sep)))
    items = _items(text, separator)
    if len(items) < 5:
        return text
    kept: list[str] = []
    for item in items:
        if len(separator.join([*kept, item])) > limit:
            break
        kept.append(item)
    return separator.join(kept or items[:1]) + f" and {len(items) - len(kept or items[:1])} more"


def condensed_timeline(timeline: list[dict[str, Any]], shown: int = RUN_SHOWN) -> list[dict[str, Any]]:
    """The timeline with each run of more than ``shown`` + 1 entries of one event kept to its first
    ``shown`` and its last, the ones between counted in an entry of their own."""
    out: list[dict[str, Any]] = []
    index = 0
    while index < len(timeline):
        stop = index
        while stop < len(timeline) and timeline[stop]["event"] == timeline[index]["event"]:
            stop += 1
        run = timeline[index:stop]
        if len(run) > shown + 1:
            skipped = run[shown:-1]
            out += run[:shown]
            out.append(
                {
                    "at": skipped[0]["at"],
                    "event": "…",
                    "detail": f"and {len(skipped)} more {run[0]['event']} to T+{format_duration(skipped[-1]['at'])}",
                }
            )
            out.append(run[-1])
        else:
            out += run
        index = stop
    return out


def kubernetes_names(report: dict[str, Any]) -> dict[str, str]:
    """Each EKS job object's uid -> its name as kubectl shows it (``PyTorchJob kubeflow/llama``)."""
    return {j["uid"]: f"{j['kind']} {j['namespace']}/{j['name']}" for j in report.get("kubernetes_jobs", [])}


def job_named(job_id: str, names: dict[str, str]) -> str:
    """A job by the name its orchestrator shows: ``job 1001``, or an EKS object by kind/namespace/name."""
    return names.get(job_id, f"job {job_id}")


def resubmission_text(resubmission: dict[str, Any], names: dict[str, str]) -> str:
    """``job 1001 resubmitted as job 1002 from step 3000``; on EKS the objects by name, re-created."""
    old, new = resubmission["job"], str(resubmission["new_job_id"])
    verb = "re-created" if old in names else "resubmitted"
    return f"{job_named(old, names)} {verb} as {job_named(new, names)} from step {resubmission['checkpoint_step']}"


def outcome_counts(incidents: list[dict[str, Any]]) -> str:
    counts = Counter(i["outcome"] for i in incidents)
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def format_report(report: dict[str, Any]) -> str:
    cluster = report["cluster"]
    groups = ", ".join(f"{name} {count}" for name, count in cluster["instance_groups"].items())
    jobs = jobs_lines(report.get("jobs", []))
    lines = [
        f"hyperpod-recovery drill: {report['scenario']}" + (f": {report['description']}" if report["description"] else ""),
        f"cluster {cluster['name']} ({cluster['orchestrator']}, NodeRecovery={cluster['node_recovery']}): {groups}"
        + ("   [DRY RUN]" if report["dry_run"] else ""),
        "",
        *(["jobs:", *(f"  {line}" for line in jobs), ""] if jobs else []),
    ]
    if not report["incidents"]:
        lines.append("no incident was started (see intake below)")
    else:
        lines += [f"incidents: {len(report['incidents'])} ({outcome_counts(report['incidents'])})", ""]
    names = kubernetes_names(report)
    for incident in report["incidents"]:
        job = f" ({job_named(incident['job'], names)})" if incident.get("job") else ""
        lines.append(
            f"incident {incident['id']}{job}   trigger {','.join(incident['trigger']) or '-'}   outcome {incident['outcome'].upper()}"
        )
        for entry in condensed_timeline(incident["timeline"]):
            lines.append(f"  T+{format_duration(entry['at']):>9}  {entry['event']:<20} {bounded(entry['detail'])}")
        if incident["error"]:
            lines.append(f"  error: {incident['error']}: {incident['cause']}")
        resubmissions = incident["resubmissions"]
        for resubmission in resubmissions[:RUN_SHOWN] if len(resubmissions) > RUN_SHOWN + 1 else resubmissions:
            lines.append(f"  {resubmission_text(resubmission, names)} ({resubmission['checkpoint_uri']})")
        if len(resubmissions) > RUN_SHOWN + 1:
            lines.append(f"  and {len(resubmissions) - RUN_SHOWN} more resubmissions")
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
    if report["slurm"].get("mode") == "real":
        lines += ["", "real Slurm queue (squeue), answered by the agent process:"]
        lines += [
            f"  {job['job_id']:>6}  {job['state']:<10} {job['name']:<24} {job['nodes'] or '-':<18} {job['comment'] or ''}"
            for job in report["slurm"]["queue"]
        ] or ["  (empty)"]
    return "\n".join(lines)


def _kubernetes_calls_line(calls: dict[str, int]) -> str:
    return f"kubernetes calls: {sum(calls.values())} ({', '.join(f'{name} {count}' for name, count in calls.items())})"


def _step_number(text: str | None) -> int | None:
    return int(text) if text and text.isascii() and text.isdigit() else None
