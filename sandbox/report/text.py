"""The drill report as a terminal shows it: its lines, long lists bounded, long runs condensed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from hyperpod_recovery.domain.record.durations import format_duration
from sandbox.report.time_split import format_time_split

# What a terminal (and the HTML page's lead) shows before "and N more": a 64-node storm stays readable.
JOBS_SHOWN = 8
DETAIL_LIMIT = 240
RUN_SHOWN = 3  # a run of entries of one kind (64 "job resubmitted"): its first ones, then a count


def job_line(job: dict[str, Any], verdicts: Sequence[dict[str, Any]] = ()) -> str | None:
    """What a training team asks first, from the report's facts: ``job 1001 (llama): down 7.4s, from its
    stop at T+2m 00.0s to its copy running at T+2m 07.4s; running again as job 1002 on spare nodes, from
    step 3000``. The downtime says what it measures, so it is never read against a step's time (a
    resubmission is recorded after its copy starts). None for a job no fault hit."""
    if job["fault_at"] is None:
        return None
    label, copy, step = job["label"], job["copy"], job.get("checkpoint_step")
    from_step = f", from step {step}" if step is not None else ""
    if job["downtime_seconds"] is not None:
        on = f" on {job['on']}" if job["on"] is not None else ""  # (EKS: where its pods are is the scheduler's)
        return f"{label}: {_downtime_text(job)}; running again as {copy}{on}{from_step}"
    if copy is None:
        if job["fate"] == "would_resubmit":
            return f"{label}: dry run: would be resubmitted{from_step.removeprefix(',')}; still {job['state']} as the same job"
        why = f" ({job['reason']})" if job["reason"] else "" if job["fate"] else f" ({_unrecorded(job, verdicts)})"
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


def _unrecorded(job: dict[str, Any], verdicts: Sequence[dict[str, Any]]) -> str:
    """Why no incident names a hit job: a verdict that only observed it, or nothing at all."""
    seen = [v for v in verdicts if v["job"] == job["job"]]
    if not seen:
        return "no incident record names it"
    rules = " and ".join(sorted({f"{v['rule']} verdict ({v['mode']})" for v in seen}))
    if all(v["action"].startswith("observed") for v in seen):
        return f"no incident: its {rules} changed nothing, see verdicts"
    return f"its {rules}: no incident record names it, see verdicts"


def _downtime_text(job: dict[str, Any]) -> str:
    """``down 7.4s, from its stop at T+2m 00.0s to its copy running at T+2m 07.4s``: each gap is from
    the moment no copy trained (a fault, a stop) to the moment one ran again."""
    down, gaps = format_duration(job["downtime_seconds"]), job["down"]
    if not gaps:
        return f"down {down}"
    if len(gaps) == 1:
        start, end = gaps[0]
        return f"down {down}, from its stop at T+{format_duration(start)} to its copy running at T+{format_duration(end)}"
    spans = ", ".join(f"T+{format_duration(start)} to T+{format_duration(end)}" for start, end in gaps)
    return f"down {down} in {len(gaps)} interruptions, each from its stop to a copy running: {bounded(spans)}"


def copy_lines(job: dict[str, Any]) -> list[str]:
    """Every copy made of a job a fault hit, in order: its size against the job's, the step it resumed
    from, and when it ran (``job 1002 on 15 of 16 nodes, from step 3000: ran T+2m 07.4s to T+15m 34.8s
    (13m 27.4s)``). A shrink's time on fewer nodes is read here, not only in its incident's timeline."""
    if job["fault_at"] is None:
        return []
    lines = []
    full = job.get("nodes")
    # (a copy Slurm still runs that a later fault hit, nothing replacing it, stopped training then)
    stopped = job["down"][-1][0] if job["downtime_seconds"] is None and job["down"] else None
    for copy in job.get("copies") or []:
        nodes = copy["nodes"]
        size = f"{nodes if nodes is not None else '?'} node{'' if nodes == 1 else 's'}"
        if full and nodes is not None and nodes != full:
            size = f"{nodes} of {full} nodes"
        elif full and nodes == full and full > 1:
            size = f"all {full} nodes"
        step = f", from step {copy['from_step']}" if copy.get("from_step") is not None else ""
        lines.append(f"{_copy_name(job, copy)} on {size}{step}: {_ran(copy, stopped)}")
    return lines


def _copy_name(job: dict[str, Any], copy: dict[str, Any]) -> str:
    """A copy as its orchestrator shows it: ``job 1002``, or an EKS object by kind/namespace/name."""
    if "name" in copy:  # (EKS: the job's label is ``Kind namespace/name``)
        return f"{job['label'].rsplit('/', 1)[0]}/{copy['name']}"
    return f"job {copy['job']}"


def _ran(copy: dict[str, Any], stopped: float | None) -> str:
    started, ended = copy.get("started_at"), copy.get("ended_at")
    if started is None:
        made = f"made at T+{format_duration(copy['created_at'])}, " if copy.get("created_at") is not None else ""
        return f"{made}never ran" + (f" (ended at T+{format_duration(ended)})" if ended is not None else "")
    if ended is None and stopped is not None and stopped >= started:
        ran = format_duration(stopped - started)
        return f"ran from T+{format_duration(started)} until a fault hit it at T+{format_duration(stopped)} ({ran})"
    if ended is None:
        return f"running since T+{format_duration(started)}"
    return f"ran T+{format_duration(started)} to T+{format_duration(ended)} ({format_duration(ended - started)})"


def jobs_lines(jobs: list[dict[str, Any]], shown: int = JOBS_SHOWN, verdicts: Sequence[dict[str, Any]] = ()) -> list[str]:
    """One line per job a fault hit, at most ``shown``, then the rest counted by how they ended."""
    lines = [line for job in jobs if (line := job_line(job, verdicts)) is not None]
    if len(lines) <= shown:
        return lines
    rest = [job for job in jobs if job["fault_at"] is not None][shown:]
    again = [job["downtime_seconds"] for job in rest if job["downtime_seconds"] is not None]
    counts = [f"{len(again)} running again (down {format_duration(min(again))} to {format_duration(max(again))})"] if again else []
    counts += [f"{n} {state}" for state, n in sorted(Counter(j["state"] for j in rest if j["downtime_seconds"] is None).items())]
    return [*lines[:shown], f"and {len(rest)} more jobs: {', '.join(counts)}"]


def hang_verdicts(report: dict[str, Any]) -> list[dict[str, Any]]:
    verdicts: list[dict[str, Any]] = (report.get("hangs") or {}).get("verdicts") or []
    return verdicts


def jobs_block(report: dict[str, Any], shown: int = JOBS_SHOWN) -> list[str]:
    """The report's jobs section: each job's line with its copies under it (the first ``shown`` jobs)."""
    jobs = report.get("jobs", [])
    hit = [job for job in jobs if job["fault_at"] is not None]
    lines = jobs_lines(jobs, shown, hang_verdicts(report))
    block = []
    for index, line in enumerate(lines):
        block.append(f"  {line}")
        if index < min(len(hit), shown):
            block += [f"    {copy}" for copy in copy_lines(hit[index])]
    return block


def verdict_lines(report: dict[str, Any], shown: int = JOBS_SHOWN) -> list[str]:
    """The hang and slowdown verdicts the drill kept: when, which rule in which mode, what it found and
    what it did (an observed verdict changes nothing, and says so)."""
    verdicts = hang_verdicts(report)
    if not verdicts:
        return []
    rules = ", ".join(f"{rule} x{n}" if n > 1 else rule for rule, n in sorted(Counter(v["rule"] for v in verdicts).items()))
    lines = [f"verdicts: {len(verdicts)} ({rules})"]
    for verdict in verdicts[:shown]:
        suspects = f"; suspects {', '.join(verdict['suspects'])}" if verdict["suspects"] else ""
        rule = f"{verdict['rule']} ({verdict['mode']})"
        lines.append(f"  T+{format_duration(verdict['decided_at']):>9}  {rule}  {bounded(verdict['summary'])}")
        lines.append(f"  {'':>11}  {bounded(verdict['action'])}{suspects}")
    if len(verdicts) > shown:
        lines.append(f"  and {len(verdicts) - shown} more verdicts")
    return lines


def at_risk_lines(report: dict[str, Any], shown: int = JOBS_SHOWN) -> list[str]:
    """The at-risk verdicts the drill kept: when, which signal from where, in which mode, what it did,
    its evidence, and its outcome as the last tick settled it."""
    verdicts: list[dict[str, Any]] = (report.get("at_risk") or {}).get("verdicts") or []
    if not verdicts:
        return []
    signals = ", ".join(f"{signal} x{n}" if n > 1 else signal for signal, n in sorted(Counter(v["signal"] for v in verdicts).items()))
    lines = [f"at-risk verdicts: {len(verdicts)} ({signals})"]
    for verdict in verdicts[:shown]:
        outcome = verdict["outcome"] + (f" ({verdict['incident']})" if verdict["incident"] else "")
        lines.append(
            f"  T+{format_duration(verdict['observed_at']):>9}  {verdict['signal']} ({verdict['mode']}) on {verdict['node']}"
            f" from {verdict['source'].replace('_', ' ')}; failure chance {verdict['failure_chance']:.0%}; outcome {outcome}"
        )
        lines.append(f"  {'':>11}  {bounded(verdict['action'])}")
        lines.append(f"  {'':>11}  evidence: {bounded('; '.join(verdict['evidence'].splitlines()))}")
    if len(verdicts) > shown:
        lines.append(f"  and {len(verdicts) - shown} more at-risk verdicts")
    return lines


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
    jobs = jobs_block(report)
    verdicts = verdict_lines(report) + at_risk_lines(report)
    lines = [
        f"hyperpod-recovery drill: {report['scenario']}" + (f": {report['description']}" if report["description"] else ""),
        f"cluster {cluster['name']} ({cluster['orchestrator']}, NodeRecovery={cluster['node_recovery']}): {groups}"
        + ("   [DRY RUN]" if report["dry_run"] else ""),
        "",
        *(["jobs:", *jobs, ""] if jobs else []),
        *([*verdicts, ""] if verdicts else []),
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
