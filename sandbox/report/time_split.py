"""The time split: an incident's workflow time (event received -> outcome recorded) cut into parts
that add up to it exactly: provisioning (HyperPod bringing a replaced or rebooted node back), agent
(the controller agent's commands, answered or not), a Retry or SDK retry backoff, the other named
waits (a job's restart backoff, its nested node recovery, another incident it waited for) and
pipeline overhead: what is left, i.e. our handler work and state transitions (no virtual time in a
drill) and the polling lag between a node coming back and the workflow noticing it. Where two
overlap, the first of that list counts: a job resubmitted while the replacement provisions is work
done in the shadow of provisioning, not time the pipeline added.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_recovery.domain.record.durations import format_duration
from hyperpod_recovery.models.records import IncidentRecord
from hyperpod_recovery.vocabulary import ORCHESTRATOR_PHASES
from sandbox.aws import RETRY_BACKOFF
from sandbox.clock import EPOCH
from sandbox.job_downtime import union
from sandbox.report.source import DrillSource


def seconds_since(moment: datetime | None, epoch: datetime = EPOCH) -> float | None:
    return None if moment is None else round((moment - epoch).total_seconds(), 3)


Intervals = list[tuple[int, int]]  # [start, end) in virtual milliseconds: exact sums, no float drift
Phases = list[tuple[str, int, int]]  # (name, start, end), in virtual milliseconds


def time_split(
    runner: DrillSource, execution: str, record: IncidentRecord, started: datetime | None, records: list[IncidentRecord]
) -> dict[str, Any]:
    """workflow_seconds = provisioning_seconds + agent_seconds + sum(waits) + pipeline_overhead_seconds,
    exactly (in milliseconds), from the incident's phases and what the sandbox saw happen."""
    if started is None:  # the request never became an incident (it was rejected as unreadable)
        return no_split()
    epoch = runner.epoch
    window = (as_millis((started - epoch).total_seconds()), as_millis((record.recorded_at - epoch).total_seconds()))
    phases = [(p.name, as_millis((p.start - epoch).total_seconds()), as_millis((p.end - epoch).total_seconds())) for p in record.phases]
    slept = runner.clock.waits
    retries = [(as_millis(start), as_millis(end)) for timeline, why, start, end in slept if timeline == execution and why == RETRY_BACKOFF]
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


def no_split() -> dict[str, Any]:
    return {"provisioning_seconds": None, "agent_seconds": None, "waits": {}, "workflow_seconds": None, "pipeline_overhead_seconds": None}


def _provisioning(runner: DrillSource, record: IncidentRecord, phases: Phases) -> Intervals:
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
            ours = [(at, running) for node_id, at, running in repairs if node_id in line and as_millis(at) <= end]
            if ours:
                # The node's newest repair by then: a replacement after a reboot that did not help supersedes it.
                running = max(ours, key=lambda repair: repair[0])[1]
                ready = max(ready, end if running is None else as_millis(running))
        found.append((start, min(ready, end)))
    return found


def _other_incident(epoch: datetime, record: IncidentRecord, phases: Phases, records: list[IncidentRecord]) -> Intervals:
    """The part of a job's wait for another incident (a node incident on its nodes, begun by the
    wait's end) until that incident recorded its outcome; the rest of the wait is the job's polling lag."""
    holders: Intervals = []
    for other in records:
        if other.workflow == "node" and other.incident_id != f"{record.incident_id}-nodes" and set(other.hostnames) & set(record.nodes):
            began = next((e.at for e in other.timeline if e.event == "event received"), other.recorded_at)
            holders.append((as_millis((began - epoch).total_seconds()), as_millis((other.recorded_at - epoch).total_seconds())))
    found: Intervals = []
    for name, start, end in phases:
        if name == "wait_other_recovery":
            done = max((stop for began, stop in holders if began <= end), default=end)
            found.append((start, min(end, max(start, done))))
    return found


def as_millis(seconds: float) -> int:
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
    millis = [as_millis(seconds) for _, seconds in parts]
    tenths = [ms // 100 for ms in millis]
    short = (as_millis(incident["workflow_seconds"]) + 50) // 100 - sum(tenths)
    for index in sorted(range(len(parts)), key=lambda i: -(millis[i] % 100))[:short]:
        tenths[index] += 1
    total = format_duration((as_millis(incident["workflow_seconds"]) + 50) // 100 / 10)
    return f"workflow {total} = " + " + ".join(f"{label} {format_duration(t / 10)}" for (label, _), t in zip(parts, tenths, strict=True))
