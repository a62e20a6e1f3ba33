"""What a fleet run cost, from the drill's own report (sandbox/report/) and the fleet's bookkeeping:
per job its effective training time ratio (ETTR) and where the rest went; the incidents, the pages,
the safety limits met; what the pipeline costs per day and a month at list prices
(sandbox/fleet/cost.py, prices.py); the largest item and state it made; and the run over time, its
``series`` (sandbox/fleet/series.py: downtime per hit, ETTR per day, executions running).

ETTR = time training that was kept / the run's time. What is not kept, per failure that hit a job:
* lost work: from the job's last checkpoint to the failure (training done, then thrown away);
* detection: from the failure to the execution that handles it (the trace's time to the event,
  then the intake's batching window); for a failure folded into an incident already running (no
  execution of its own: ``folded``), its own time to the event;
* provisioning wait: while HyperPod had not brought the failed nodes back (replacement or reboot,
  from the double's ground truth), between that execution's start and the job's next copy starting;
  a reboot that did not help counts from its start to the node's replacement starting, and is also
  shown apart (``failed_reboot_wait``: what the reboot-first choice cost);
* pipeline: the rest of the time until the next copy started (the workflow's own steps, its polls'
  lag, the agent, the health gate, a restart backoff);
* restart: the next copy's start to its first step (the plan's ``restart_seconds``, modelled);
and, failure or not, each checkpoint's blocking cost (the plan's ``checkpoint_cost_seconds``);
and the pipeline's own stops of a job with no failure on it (issue 50, sandbox/fleet/swaps.py): a
planned swap's (``swaps``), one on a false alarm (``false_alarms``), and a shrunk copy's lost pace
with its grow-back (``shrunk``), each its work since the checkpoint, its downtime and its restart.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.messages.severity import severity_of
from hyperpod_recovery.models.records import IncidentRecord
from sandbox.aws import SandboxAWS
from sandbox.clock import VirtualClock
from sandbox.fleet.copies import FleetCopies
from sandbox.fleet.cost import lambda_memory_mb, monthly_cost, price_table
from sandbox.fleet.goodput import format_goodput, planner_inputs
from sandbox.fleet.plan import FleetPlan, Hit
from sandbox.fleet.series import fleet_series
from sandbox.fleet.swaps import PLANNED_PARTS, planned_stops, precursors_summary, shrunk_seconds, stop_seconds
from sandbox.fleet.trace import Failure, Trace
from sandbox.fleet.training import FleetTraining
from sandbox.hyperpod import HyperPodDouble

# The limits the run is held against.
DYNAMODB_ITEM_LIMIT = 400 * 1024  # bytes (DynamoDB counts 400 KB as 400 × 1,024)
STATE_PAYLOAD_LIMIT = 256 * 1024  # bytes, a state's input or output (States.DataLimitExceeded)
ITEM_GOAL = 100 * 1024  # issue 34's goal: no item over 100 KB
RECOVERY_DOWNTIME_GOAL_PERCENT = 0.5  # issue 34's goal, of the run's time, at 2,048 nodes with spares or shrink
TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
# When template.yaml names none (Lambda's own default is 128 MB; the project's Globals say 256).
DEFAULT_LAMBDA_MEMORY_MB = 256


class FleetSource(Protocol):
    """What the fleet report reads of a fleet run (sandbox/fleet/runner.py's FleetRunner, which
    imports this report to write it)."""

    plan: FleetPlan
    trace: Trace
    epoch: datetime
    clock: VirtualClock
    aws: SandboxAWS
    double: HyperPodDouble
    hits: list[Hit]
    skipped: list[Failure]
    watched_copies: dict[str, Any]
    signals_sent: list[Any]
    averted: set[Failure]
    not_sent: list[Failure]
    handled_at: dict[Failure, float]
    found_by_detector: set[Failure]
    fleet_training: FleetTraining | None
    fleet_copies: FleetCopies | None
    largest_item: tuple[int, str]
    progress_bytes_per_tick: int
    wall_seconds: float
    detector_ticks: list[tuple[float, Any]]
    quiet_sweeps: int
    quiet_sweep_calls: Counter[str] | None
    quiet_ticks: int
    quiet_tick_calls: Counter[str] | None
    quiet_poll_calls: Counter[str]

    @property
    def quiet_polls(self) -> int: ...
    def counted_api_calls(self) -> Counter[str]: ...
    def counted_kubernetes_calls(self) -> int: ...
    def counted_detector_ticks(self) -> int: ...
    def throttling_met(self) -> int: ...
    def orchestrator_second_copies(self) -> list[dict[str, Any]]: ...
    def hostnames_of(self, failure: Failure) -> set[str]: ...


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return round(ordered[rank], 1)


def _union_length(intervals: list[tuple[float, float]], window: tuple[float, float]) -> float:
    clipped = sorted((max(a, window[0]), min(b, window[1])) for a, b in intervals if min(b, window[1]) > max(a, window[0]))
    total, cursor = 0.0, window[0]
    for start, end in clipped:
        start = max(start, cursor)
        if end > start:
            total += end - start
            cursor = end
    return total


def fleet_report(runner: FleetSource, drill: dict[str, Any]) -> dict[str, Any]:
    plan, trace = runner.plan, runner.trace
    end = plan.days * 86_400.0
    weeks = plan.days / 7
    training = runner.fleet_training
    assert training is not None
    ledger = DynamoLedger(runner.aws.ledger_table, dynamodb=runner.aws.client("dynamodb"))
    records: dict[str, IncidentRecord] = {}
    for incident in drill["incidents"]:
        record = ledger.get_incident(incident["id"])
        if record is not None:
            records[incident["id"]] = record

    # Each hit's downtime and its parts.
    hits: list[dict[str, Any]] = []
    for hit in runner.hits:
        hits.append(_hit_parts(runner, hit, end))
    stops = planned_stops(runner, end)
    jobs = _jobs(plan, training, hits, end, stops)
    downtimes = [h["downtime"] for h in hits if h["restarted_at"] is not None]

    # Incidents, pages, safety.
    outcomes = Counter(f"{i['workflow']}:{i['outcome']}" for i in drill["incidents"])
    pages = [r for r in records.values() if severity_of(r, stack_dry_run=bool(drill["dry_run"])) == "page"]
    why = Counter(f"{r.outcome}{' ' + r.error if r.error else ''}" for r in pages)
    breaker = ledger.breaker(plan.cluster)
    openings = [entry for entry in breaker.history if " open by " in entry]

    # Cost per day.
    calls = runner.counted_api_calls()
    by_service: Counter[str] = Counter()
    for call, n in calls.items():
        by_service[call.split(".", 1)[0]] += n
    invocations = calls.get("lambda.Invoke", 0)
    executions = runner.aws.executions()
    spans = [(runner.clock.started_at(e.name), runner.clock.now(e.name)) for e in executions]
    series = fleet_series([*hits, *stops], jobs, end, spans)

    goodput_inputs = planner_inputs(plan, len(trace.failures), hits, records, precursors_summary(runner), stops)
    largest_item = runner.largest_item
    scan_units_per_tick = math.ceil(runner.progress_bytes_per_tick / 4096) / 2  # (a Scan reads eventually consistent: half a unit per 4 KB)
    report = {
        "fleet_report_version": 1,
        "plan": _plan(plan, trace),
        "trace": _trace(runner),
        "hangs": _hangs(runner),
        "precursors": precursors_summary(runner),
        "planned_stops": stops,
        "jobs": jobs,
        "job_downtime_seconds": {
            "hits": len(hits),
            "p50": _percentile(downtimes, 50),
            "p90": _percentile(downtimes, 90),
            "p99": _percentile(downtimes, 99),
            "max": round(max(downtimes), 1) if downtimes else None,
            "never_restarted": sum(1 for h in hits if h["restarted_at"] is None),
            "folded_into_a_running_incident": sum(1 for h in hits if h["folded"]),
        },
        "incidents": {"total": len(drill["incidents"]), "by_outcome": dict(outcomes.most_common())},
        "pages": {"total": len(pages), "per_week": round(len(pages) / weeks, 2), "why": dict(why.most_common())},
        "safety": {
            "capped_incidents": sum(1 for i in drill["incidents"] if i["outcome"] == "capped"),
            "breaker_openings": openings,
            "breaker_state_at_end": breaker.state,
            # Never two copies of one job: each moment two copies of one job ran at once (a defect if any),
            # and the orchestrator's own count, which also counts a copy pending or partly placed.
            "second_copies": second_copies(runner, end),
            "orchestrator_second_copies": runner.orchestrator_second_copies(),
        },
        "cost_per_day": {
            "state_transitions": round(drill["state_transitions"] / plan.days, 1),
            "lambda_invocations": round(invocations / plan.days, 1),
            "aws_calls_by_service": {k: round(v / plan.days, 1) for k, v in sorted(by_service.items())},
            "aws_calls_by_call": {k: round(v / plan.days, 3) for k, v in sorted(calls.items())},
            "quiet_sweeps_counted_not_run": runner.quiet_sweeps,
            "quiet_detector_ticks_counted_not_run": runner.quiet_ticks,
            # EKS: Find Failed Jobs lists the jobs every minute; run where a job failed, the rest counted.
            "quiet_job_polls_counted_not_run": runner.quiet_polls,
            "kubernetes_calls": round(runner.counted_kubernetes_calls() / plan.days, 1),
            # Detect Hung Jobs scans the progress table each tick: its read units are the table's size,
            # not one item's (a lower bound: a live table also keeps earlier copies' silent rows until TTL).
            "progress_scan_read_units": round(scan_units_per_tick * runner.counted_detector_ticks() / plan.days, 1),
        },
        "cost_per_incident": _per_incident(runner, calls, drill["state_transitions"], len(drill["incidents"])),
        "executions": {"total": len(executions), "peak_concurrent": series["concurrent_executions"]["peak"]},
        "limits": {
            "largest_dynamodb_item_bytes": largest_item[0],
            "largest_dynamodb_item": largest_item[1],
            "dynamodb_item_limit_bytes": DYNAMODB_ITEM_LIMIT,
            "item_goal_bytes": ITEM_GOAL,
            "largest_state_payload_bytes": drill["max_state_bytes"],
            "largest_state_payload_at": drill["max_state_at"],
            "state_payload_limit_bytes": STATE_PAYLOAD_LIMIT,
            "throttling_errors_met": runner.throttling_met(),
        },
        "goodput_inputs": goodput_inputs,
        "hits": hits,
        "series": series,
        "wall_seconds": round(runner.wall_seconds, 1),
    }
    report["monthly_cost"] = monthly_cost(report, lambda_memory_mb(TEMPLATE) or DEFAULT_LAMBDA_MEMORY_MB)
    report["prices"] = price_table()
    return report


def _jobs(
    plan: FleetPlan, training: FleetTraining, hits: list[dict[str, Any]], end: float, stops: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Per job: its hits, its ETTR, and the seconds lost by where they went."""
    jobs = []
    for job_id, first, last in plan.job_ranges():
        mine = [h for h in hits if h["job"] == job_id]
        copies = [c for c in training.copies.values() if c.root == job_id]
        checkpoints = sum(c.checkpoints_by(end, plan.checkpoint_interval_seconds) for c in copies)
        own = [s for s in stops or [] if s["job"] == job_id]
        parts = {
            "lost_work": sum(h["lost_work"] for h in mine),
            "detection": sum(h["detection"] for h in mine),
            "pipeline": sum(h["pipeline"] for h in mine),
            "provisioning_wait": sum(h["provisioning_wait"] for h in mine),
            "restart": sum(h["restart"] for h in mine),
            "checkpoint_cost": checkpoints * plan.checkpoint_cost_seconds,
            "swaps": sum(stop_seconds(s) for s in own if s["kind"] == "swap"),
            "false_alarms": sum(stop_seconds(s) for s in own if s["kind"] == "false_alarm"),
            "shrunk": sum(stop_seconds(s) for s in own if s["kind"] == "restart") + sum(shrunk_seconds(c, end) for c in copies),
        }
        lost = sum(parts.values())
        jobs.append(
            {
                "job": job_id,
                "nodes": last - first + 1,
                "hits": len(mine),
                "planned_swaps": sum(1 for s in own if s["kind"] == "swap"),
                # (of ``shrunk``: the pace a shrunk copy did not have, spread over its time, not a stop's)
                "shrunk_pace_seconds": round(sum(shrunk_seconds(c, end) for c in copies), 1),
                "false_alarm_swaps": sum(1 for s in own if s["kind"] == "false_alarm"),
                "not_running_at_end": any(h["restarted_at"] is None for h in [*mine, *own]),
                "ettr": round(max(0.0, end - lost) / end, 5),
                "seconds_lost": {k: round(v, 1) for k, v in parts.items()},
                # Of the provisioning wait: reboots that did not help, until the ladder replaced the node.
                "failed_reboot_wait_seconds": round(sum(h["failed_reboot_wait"] for h in mine), 1),
                "ettr_points_lost": {k: round(100 * v / end, 3) for k, v in parts.items()},
                # Issue 34's goal (<= 0.5 % at 2,048 nodes with spares or shrink): the downtime the recovery
                # itself made, its own steps and the wait for HyperPod's repair it chose to wait for; not the
                # fault's lost work and detection, nor the job's own start-up.
                "recovery_downtime_percent": round(100 * (parts["pipeline"] + parts["provisioning_wait"]) / end, 3),
            }
        )
    return jobs


def _plan(plan: FleetPlan, trace: Trace) -> dict[str, Any]:
    """The run as planned: the fleet, its failure trace's draw, its checkpointing."""
    return {
        "nodes": plan.nodes,
        "days": plan.days,
        "jobs": f"{plan.mix.count}x{plan.mix.nodes_each}",
        "spares": plan.spares,
        "orchestrator": plan.orchestrator,
        "seed": trace.spec.seed,
        "rate_per_1000_node_days": trace.spec.rate_per_1000_node_days,
        "correlated_share": trace.spec.correlated_share,
        "checkpoint_interval_seconds": plan.checkpoint_interval_seconds,
        "checkpoint_cost_seconds": plan.checkpoint_cost_seconds,
        "restart_seconds": plan.restart_seconds,
    }


def _trace(runner: FleetSource) -> dict[str, Any]:
    """What the trace held, and the job-only faults that could not happen."""
    trace = runner.trace
    return {
        "failures": len(trace.failures),
        "by_remedy": dict(trace.by_remedy()),
        "by_fault": dict(trace.counts().most_common()),
        "racks": sum(1 for f in trace.failures if f.correlated),
        "gate_fails": sum(1 for f in trace.failures if f.gate_fails),
        "reboot_fails": sum(1 for f in trace.failures if f.reboot_fails),
        "job_faults_on_a_job_not_running": len(runner.skipped),
        "job_faults_not_sent": len(runner.not_sent),
    }


def second_copies(runner: FleetSource, end: float) -> list[dict[str, Any]]:
    """Each moment a copy of a job began while another copy of it still ran (or had not ended:
    a cancelled Slurm job until its KillWait is over, or for ever if it never ends), from the
    orchestrator's own record of when each ran; the pipeline must never make one."""
    training, orchestrator = runner.fleet_training, runner.fleet_copies
    assert training is not None and orchestrator is not None
    found: list[dict[str, Any]] = []
    for root in sorted({c.root for c in training.copies.values()}):
        spans = []
        for copy in (c for c in training.copies.values() if c.root == root):
            job = orchestrator.jobs[copy.copy]
            if job.started_at is None and not copy.original:
                continue
            start = 0.0 if copy.original or job.started_at is None else (job.started_at - runner.epoch).total_seconds()
            ended = job.ended_at or job.completing_until
            live = job.state == "RUNNING" or ended is None
            stop = end if live else (ended - runner.epoch).total_seconds()
            spans.append((start, stop, copy.copy))
        spans.sort()
        latest: tuple[float, str] | None = None  # (the latest end so far, whose)
        for start, stop, copy_id in spans:
            if latest is not None and start < latest[0]:
                found.append({"job": root, "copies": [latest[1], copy_id], "at": round(start, 1)})
            if latest is None or stop > latest[0]:
                latest = (stop, copy_id)
    return found


def _hangs(runner: FleetSource) -> dict[str, Any]:
    """The hang detector over the run: its ticks, its verdicts, and the failures it found first (a
    silent hang is found by nothing else; an NCCL watchdog's fault before the watchdog ends it)."""
    answers = [answer for _, answer in runner.detector_ticks if isinstance(answer, dict)]
    hangs = [f for f in runner.trace.failures if f.remedy == "hang"]
    found = [f for f in runner.found_by_detector if f in runner.handled_at]
    seconds = [runner.handled_at[f] - f.at for f in found]
    return {
        "silent_hangs_in_trace": len(hangs),
        "silent_hangs_found": sum(1 for f in hangs if f in runner.found_by_detector),
        "silent_hangs_on_a_job_not_running": sum(1 for f in hangs if f in runner.skipped),
        "failures_found_first_by_the_detector": dict(Counter(f.fault for f in found).most_common()),
        "detection_seconds": {"p50": _percentile(seconds, 50), "max": round(max(seconds), 1) if seconds else None},
        "ticks": runner.counted_detector_ticks(),
        "ticks_run": len(runner.detector_ticks),
        "ticks_counted_quiet": runner.quiet_ticks,
        "stall_verdicts": sum(a.get("stall_verdicts", 0) for a in answers),
        "recoveries_started": sum(a.get("recoveries_started", 0) for a in answers),
        # (a stall another incident already ends: domain/hangs/handled.py)
        "left_to_another_incident": sum(a.get("left_to_another_incident", 0) for a in answers),
        "tick_errors": sum(1 for _, a in runner.detector_ticks if not isinstance(a, dict) or "errorMessage" in a),
        "largest_table_read_bytes": runner.progress_bytes_per_tick,
    }


def _per_incident(runner: FleetSource, calls: Counter[str], transitions: int, incidents: int) -> dict[str, Any]:
    """What one incident costs, whatever the fleet's size should not change it (issue 34): the run's
    calls less the quiet sweeps', ticks' and polls' (a cost per day, not per incident), and its transitions, over its
    incidents; the SageMaker calls by API, where a read of the whole cluster would show."""
    if not incidents:
        return {"incidents": 0}
    quiet = Counter({call: n * runner.quiet_sweeps for call, n in (runner.quiet_sweep_calls or Counter()).items()})
    quiet += Counter({call: n * runner.quiet_ticks for call, n in (runner.quiet_tick_calls or Counter()).items()})
    quiet += Counter({call: n * runner.quiet_polls for call, n in runner.quiet_poll_calls.items()})
    own = calls - quiet
    by_service: Counter[str] = Counter()
    for call, n in own.items():
        by_service[call.split(".", 1)[0]] += n
    return {
        "incidents": incidents,
        "aws_calls": round(sum(own.values()) / incidents, 1),
        "aws_calls_by_service": {k: round(v / incidents, 1) for k, v in sorted(by_service.items())},
        "sagemaker_calls_by_call": {
            call.removeprefix("sagemaker."): round(n / incidents, 2) for call, n in sorted(own.items()) if call.startswith("sagemaker.")
        },
        "state_transitions": round(transitions / incidents, 1),
    }


def _hit_parts(runner: FleetSource, hit: Hit, end: float) -> dict[str, Any]:
    training = runner.fleet_training
    assert training is not None
    later = sorted(
        (training.orchestrator.jobs[c.copy].started_at for c in training.copies.values() if c.root == hit.root and c.copy != hit.copy),
        key=lambda m: m.timestamp() if m is not None else 0.0,
    )
    starts = [(m - runner.epoch).total_seconds() for m in later if m is not None]
    restarted_at = next((s for s in starts if s >= hit.at), None)
    back = restarted_at if restarted_at is not None else end
    # A failure folded into an incident already running starts no execution of its own: its
    # detection is its own delay to delivery; what follows is split as for any other hit.
    folded = hit.failure not in runner.handled_at
    handled_at = hit.at + hit.failure.detect_seconds if folded else runner.handled_at[hit.failure]
    detection = max(0.0, min(handled_at, back) - hit.at)
    names = runner.hostnames_of(hit.failure)

    def on_failed_node(hostname: str) -> bool:
        return hostname.split(".", 1)[0] in names

    replacements = [r for r in runner.double.replacements if on_failed_node(r.hostname) and r.initiated_at >= hit.at]
    repairs = [(r.initiated_at, r.running_at if r.running_at is not None else end) for r in replacements]
    failed_reboots: list[tuple[float, float]] = []
    for reboot in runner.double.reboots:
        if not on_failed_node(reboot.hostname) or reboot.initiated_at < hit.at:
            continue
        if reboot.running_at is not None:
            repairs.append((reboot.initiated_at, reboot.running_at))
            continue
        # A reboot that did not help: the node waited from it until the ladder replaced it (the
        # replacement's own wait is its interval above).
        replaced_at = min(
            (r.initiated_at for r in replacements if r.hostname == reboot.hostname and r.initiated_at >= reboot.initiated_at), default=end
        )
        failed_reboots.append((reboot.initiated_at, replaced_at))
    repairs += failed_reboots
    window = (min(handled_at, back), back)
    provisioning = _union_length(repairs, window)
    downtime = back - hit.at
    return {
        "job": hit.root,
        "copy": hit.copy,
        "fault": hit.failure.fault,
        "remedy": hit.failure.remedy,
        "at": round(hit.at, 3),
        "restarted_at": None if restarted_at is None else round(restarted_at, 3),
        "downtime": round(downtime, 3),
        "lost_work": round(hit.at - hit.last_checkpoint_at, 3),
        "detection": round(detection, 3),
        "provisioning_wait": round(provisioning, 3),
        "failed_reboot_wait": round(_union_length(failed_reboots, window), 3),  # of provisioning_wait
        "folded": folded,
        "pipeline": round(max(0.0, downtime - detection - provisioning), 3),
        "restart": runner.plan.restart_seconds if restarted_at is not None else 0.0,
    }


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def _format_per_incident(cost: dict[str, Any]) -> str:
    if not cost.get("incidents"):
        return "per incident: no incident"
    sagemaker = ", ".join(f"{call} {n:g}" for call, n in cost["sagemaker_calls_by_call"].items())
    return f"per incident: {cost['aws_calls']:g} AWS calls, {cost['state_transitions']:g} state transitions; SageMaker: {sagemaker}"


def format_monthly_cost(cost: dict[str, Any]) -> list[str]:
    """Two lines: the total and its services, then where the figures come from."""
    services = ", ".join(f"{k} ${v:.2f}" for k, v in sorted(cost["by_service"].items(), key=lambda kv: -kv[1]))
    return [
        f"monthly cost ({cost['days']} days) at {cost['region']} list prices of {cost['prices_taken']}: "
        f"${cost['total_usd']:.2f} ({services}); of which ${cost['assumed_usd']:.2f} from assumed counts (idle SQS long polls)",
        f"  requests only, no free tier; {len(cost['assumptions'])} assumptions and the prices' sources in the JSON (monthly_cost, prices)",
    ]


def _format_hangs(hangs: dict[str, Any] | None, not_sent: int) -> list[str]:
    if not hangs:
        return []
    found = ", ".join(f"{k} {v}" for k, v in hangs["failures_found_first_by_the_detector"].items()) or "none"
    return [
        f"hang detector: {hangs['silent_hangs_found']} of {hangs['silent_hangs_in_trace']} silent hangs found "
        f"({hangs['silent_hangs_on_a_job_not_running']} on a job already down); failures it found first: {found} "
        f"(p50 {_minutes(hangs['detection_seconds']['p50'])}, max {_minutes(hangs['detection_seconds']['max'])} after they began); "
        f"job faults whose job it had ended before their own event: {not_sent}",
        f"  {hangs['ticks']} ticks ({hangs['ticks_run']} run, {hangs['ticks_counted_quiet']} counted quiet), "
        f"{hangs['stall_verdicts']} stall verdicts, {hangs['recoveries_started']} recoveries started, "
        f"{hangs.get('left_to_another_incident', 0)} left to the incident already ending the job, {hangs['tick_errors']} ticks failed",
    ]


def _format_precursors(summary: dict[str, Any] | None) -> list[str]:
    if not summary or not (summary["announced"] or summary["false_alarms"]):
        return []
    lead = "-" if summary["lead_seconds_p50"] is None else f"{summary['lead_seconds_p50'] / 60:.0f} min"
    precision = "-" if summary["precision"] is None else f"{100 * summary['precision']:.0f} %"
    return [
        f"  precursors: {summary['announced']} of {summary['announceable_failures']} node faults announced "
        f"(recall {100 * summary['recall']:g} %, lead p50 {lead}), {summary['false_alarms']} false alarms (precision {precision}); "
        f"{summary['signals_sent']} sent as at-risk signals, {summary['failures_averted']} failures averted"
    ]


def format_fleet_report(report: dict[str, Any]) -> str:
    """The report as a person reads it in a terminal."""
    plan, trace = report["plan"], report["trace"]
    lines = [
        f"fleet drill: {plan['nodes']} nodes (+{plan['spares']} spare) x {plan['days']:g} days, jobs {plan['jobs']}, "
        f"seed {plan['seed']}, {plan['rate_per_1000_node_days']} failures / 1,000 node-days",
        f"trace: {trace['failures']} failures {dict(trace['by_remedy'])}; racks {trace['racks']}, "
        f"failed gates {trace['gate_fails']}, failed reboots {trace['reboot_fails']}; "
        f"job faults on a job already down (skipped) {trace['job_faults_on_a_job_not_running']}",
        "",
        f"checkpoint every {plan['checkpoint_interval_seconds']:g} s (blocking cost {plan['checkpoint_cost_seconds']:g} s), "
        f"restart {plan['restart_seconds']:g} s (modelled)",
        "ETTR per job, and the points lost to: lost work | detection | pipeline | provisioning wait | restart | checkpoints"
        " | planned swaps | false alarms | shrunk",
    ]
    for job in report["jobs"]:
        p = job["ettr_points_lost"]
        lines.append(
            f"  job {job['job']} ({job['nodes']} nodes, {job['hits']} hits, {job.get('planned_swaps', 0)} planned swaps, "
            f"{job.get('false_alarm_swaps', 0)} on false alarms){' NOT RUNNING AT END' if job['not_running_at_end'] else ''}: "
            f"ETTR {100 * job['ettr']:.2f} %   {p['lost_work']:.2f} | {p['detection']:.2f} | {p['pipeline']:.2f} | "
            f"{p['provisioning_wait']:.2f} | {p['restart']:.2f} | {p['checkpoint_cost']:.2f} | "
            + " | ".join(f"{p.get(k, 0.0):.2f}" for k in PLANNED_PARTS)
        )
    lines += _format_precursors(report.get("precursors"))
    worst = max(report["jobs"], key=lambda job: job["recovery_downtime_percent"])
    lines.append(
        f"  downtime the recovery made (pipeline + provisioning wait): at most {worst['recovery_downtime_percent']:.2f} % of the run "
        f"(job {worst['job']}; goal <= {RECOVERY_DOWNTIME_GOAL_PERCENT:g} % at 2,048 nodes with spares or shrink)"
    )
    down = report["job_downtime_seconds"]
    second = report["safety"].get("second_copies", [])
    failed_reboots = sum(job["failed_reboot_wait_seconds"] for job in report["jobs"])
    lines += [
        f"  of the provisioning wait, reboots that did not help (until the node's replacement): {_minutes(failed_reboots)} over all jobs",
        f"job downtime per hit ({down['hits']} hits): p50 {_minutes(down['p50'])}, p90 {_minutes(down['p90'])}, "
        f"p99 {_minutes(down['p99'])}, max {_minutes(down['max'])}; never running again: {down['never_restarted']}; "
        f"folded into an incident already running: {down['folded_into_a_running_incident']}",
        "",
        f"incidents: {report['incidents']['total']} " + ", ".join(f"{k} {v}" for k, v in report["incidents"]["by_outcome"].items()),
        f"pages to a human: {report['pages']['total']} ({report['pages']['per_week']:.2f} per week)"
        + "".join(f"\n  {n} x {why}" for why, n in report["pages"]["why"].items()),
        *_format_hangs(report.get("hangs"), report["trace"].get("job_faults_not_sent", 0)),
        f"safety: capped incidents {report['safety']['capped_incidents']}, breaker openings "
        f"{len(report['safety']['breaker_openings'])} (state at end: {report['safety']['breaker_state_at_end']}), "
        f"two copies of one job at once {len(second)} (by the orchestrator's own count, pending ones too: "
        f"{len(report['safety'].get('orchestrator_second_copies', []))})"
        + "".join(f"\n  {entry}" for entry in report["safety"]["breaker_openings"])
        + "".join(f"\n  job {c['job']}: copies {' and '.join(c['copies'])} both ran at {c['at']:g} s" for c in second),
        "",
    ]
    cost = report["cost_per_day"]
    lines += [
        f"per day: {cost['state_transitions']:g} state transitions, {cost['lambda_invocations']:g} Lambda invocations; AWS calls "
        + ", ".join(f"{k} {v:g}" for k, v in cost["aws_calls_by_service"].items()),
        *([f"  Kubernetes API calls {cost['kubernetes_calls']:g}"] if plan.get("orchestrator") == "eks" else []),
        f"  ({cost['quiet_sweeps_counted_not_run']} quiet sweeps of ended executions, "
        + (f"{cost['quiet_job_polls_counted_not_run']} quiet polls of Find Failed Jobs, " if plan.get("orchestrator") == "eks" else "")
        + f"{cost.get('quiet_detector_ticks_counted_not_run', 0)} quiet ticks of Detect Hung Jobs counted at their measured cost, not run; "
        f"the detector's scans read {cost.get('progress_scan_read_units', 0):g} read units a day)",
        f"executions: {report['executions']['total']}, peak concurrent {report['executions']['peak_concurrent']}",
        _format_per_incident(report.get("cost_per_incident", {})),
        *format_monthly_cost(report["monthly_cost"]),
    ]
    limits = report["limits"]
    lines += [
        f"largest DynamoDB item: {limits['largest_dynamodb_item_bytes']:,} B ({limits['largest_dynamodb_item']}) "
        f"of {limits['dynamodb_item_limit_bytes']:,} (goal {limits['item_goal_bytes']:,})",
        f"largest state payload: {limits['largest_state_payload_bytes']:,} B ({limits['largest_state_payload_at']}) "
        f"of {limits['state_payload_limit_bytes']:,}",
        f"throttling errors met: {limits['throttling_errors_met']}",
        f"wall time: {report['wall_seconds']:.1f} s",
        "",
        *format_goodput(report),
    ]
    return "\n".join(lines)
