"""Per job, from its nodes' progress reports: a stall or a slowdown verdict, or none. Pure.

A **stall** is no progress for longer than max(k × the job's recent step time, a floor), outside
a declared pause: the threshold adapts to the job (a 2-second step and a 40-second step are
different jobs), and until the job's pace is known (its first steps) the start-up allowance holds.
A node's last progress is its newest step or its return from a declared pause, whichever is later.
A declared pause holds only while its reporter is alive and for as long as it said it would.

A **slowdown** is the job's recent step time over its own baseline by more than the rule's ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from statistics import median

from hyperpod_recovery.domain.hangs import suspects as blame
from hyperpod_recovery.domain.hangs.rules import MIN_INTERVALS, WRITE_GAP_HEADROOM_SECONDS, HangRules
from hyperpod_recovery.models.hangs import MAX_VERDICT_NODES, HangVerdict, NodeProgress
from hyperpod_recovery.models.progress import HEARTBEAT_SECONDS, RECENT_INTERVALS, ProgressReport

# A caller that has not watched the reporters write (no memory: the fleet model, a test) assumes the
# slowest cadence a reporter has: its heartbeat's.
WRITE_GAP_UNKNOWN = float(HEARTBEAT_SECONDS)


def node_progress(report: ProgressReport) -> NodeProgress:
    active = max(report.step_at, report.pause_ended_at) if report.pause_ended_at else report.step_at
    return NodeProgress(
        node=report.node,
        step=report.step,
        active_at=active,
        heartbeat_at=report.heartbeat_at,
        step_seconds=report.step_seconds,
        wait_seconds=report.wait_seconds,
    )


def _age(moment: datetime, now: datetime) -> float:
    return max(0.0, (now - moment).total_seconds())


def pace(reports: Sequence[ProgressReport]) -> float | None:
    """The job's recent step time: the median over its nodes that timed enough steps."""
    timed = [r.step_seconds for r in reports if r.step_seconds is not None and r.intervals_seen >= MIN_INTERVALS]
    return median(timed) if timed else None


def stall_threshold(
    reports: Sequence[ProgressReport], rules: HangRules, learned_pace: float | None = None, write_gap: float | None = WRITE_GAP_UNKNOWN
) -> float:
    """``learned_pace``: the largest pace the job's own nodes reported over the ticks remembered
    (domain/hangs/observed.py): no row brings the threshold below what that history supports.
    ``write_gap``: the longest its reporters go between two writes of a new step: a healthy job
    looks idle that long, so the threshold is never below it and a headroom (WRITE_GAP_HEADROOM_SECONDS)."""
    step = pace(reports)
    guard = write_gap + WRITE_GAP_HEADROOM_SECONDS if write_gap is not None else 0.0
    if step is None:
        startup = float(max(rules.stall_floor_seconds, rules.startup_seconds, guard))
        return max(startup, rules.stall_factor * learned_pace) if learned_pace is not None else startup
    return max(float(rules.stall_floor_seconds), guard, rules.stall_factor * max(step, learned_pace or 0.0))


def _summary_nodes(nodes: list[NodeProgress], suspects: list[str]) -> list[NodeProgress]:
    """The nodes a verdict carries: the suspects first, then the ones that stopped first."""
    ordered = sorted(nodes, key=lambda n: (n.node not in suspects, n.active_at, n.node))
    return ordered[:MAX_VERDICT_NODES]


# The ranks of one run start within this of each other (one launch); a silent row whose reporter
# started earlier than that before the run's first live one is an earlier run's (its key was reused).
RUN_START_SLACK_SECONDS = 300


def live_reports(reports: Sequence[ProgressReport], rules: HangRules, now: datetime) -> list[ProgressReport]:
    """The reports of a job that still runs, of its current run only: none when it ended cleanly or
    every reporter is gone. A key outlives a run: Slurm requeues a job under its id, and an EKS job
    deleted and applied again (or suspended and admitted again) reports under the same
    namespace/name. An earlier run's rows, silent since, would lend the new run their old pace (a 60 s
    threshold where its start-up allowance holds) and their old steps."""
    live = [r for r in reports if not r.ended]
    if not live or all(_age(r.heartbeat_at, now) > rules.job_gone_seconds for r in live):
        return []
    alive = [r for r in live if _age(r.heartbeat_at, now) <= rules.heartbeat_stale_seconds]
    if not alive:
        return live
    run_start = min(r.started_at for r in alive)
    heard = {id(r) for r in alive}
    return [r for r in live if id(r) in heard or _age(r.started_at, run_start) <= RUN_START_SLACK_SECONDS]


def stall_verdict(
    cluster: str,
    job: str,
    reports: Sequence[ProgressReport],
    rules: HangRules,
    now: datetime,
    learned_pace: float | None = None,
    write_gap: float | None = WRITE_GAP_UNKNOWN,
    confirmed: bool = True,
) -> HangVerdict | None:
    """``confirmed``: a write read since the last progress still shows its step (observed.py); without
    one, a silence is only writes not seen yet."""
    live = live_reports(reports, rules, now)
    if not live or rules.stall_mode == "off" or not confirmed:
        return None
    alive = [r for r in live if _age(r.heartbeat_at, now) <= rules.heartbeat_stale_seconds]
    if not alive:
        # Every reporter is silent: the job's processes are gone (ended, killed, or restarting under
        # the same job id, whose new ranks have not stepped yet). A hung job's reporter threads go on
        # heartbeating (NCCL waits release the GIL): this is no hang of ours to act on.
        return None
    if any(r.pause is not None and r.pause.ends_by() > now for r in alive):
        return None  # a declared pause, its reporter alive and within its bound
    nodes = [node_progress(r) for r in live]
    last = max(n.active_at for n in nodes)
    threshold = stall_threshold(live, rules, learned_pace, write_gap)
    idle = _age(last, now)
    if idle <= threshold:
        return None
    suspects, why = blame.from_progress(nodes, rules.heartbeat_stale_seconds, now)
    newest = max(n.step for n in nodes)
    step = max((p for p in (pace(live), learned_pace) if p is not None), default=None)
    return HangVerdict(
        rule="stall",
        mode=rules.stall_mode,
        cluster=cluster,
        job=job,
        decided_at=now,
        episode_at=last,
        step=newest,
        last_progress_at=last,
        threshold_seconds=round(threshold, 1),
        observed_seconds=round(idle, 1),
        step_seconds=step,
        suspects=suspects,
        suspects_why=why[:512],
        nodes=_summary_nodes(nodes, suspects),
        nodes_reporting=len(nodes),
        summary=(
            f"job {job}: no progress for {idle:.0f} s since step {newest} at {last:%H:%M:%S} UTC "
            f"(threshold {threshold:.0f} s" + _threshold_why(threshold, rules, step, write_gap) + ")"
        )[:1024],
    )


def _threshold_why(threshold: float, rules: HangRules, step: float | None, write_gap: float | None) -> str:
    if threshold <= rules.stall_floor_seconds:
        return ""
    by_gap = write_gap is not None and threshold == write_gap + WRITE_GAP_HEADROOM_SECONDS
    if by_gap and (step is None or threshold > rules.stall_factor * step):
        return f": its reporters write every {write_gap:.0f} s"
    return f": {rules.stall_factor:g} × its {step:.1f} s step" if step is not None else ""


def slow_ratios(reports: Sequence[ProgressReport]) -> list[float]:
    """Each node's recent step time over its own baseline. The recent window must lie wholly after the
    baseline's (its first window after warm-up): a node that has not stepped that far compares nothing yet."""
    return [
        r.step_seconds / r.baseline_step_seconds
        for r in reports
        if r.step_seconds is not None and r.baseline_step_seconds and r.intervals_seen >= 2 * RECENT_INTERVALS
    ]


def slow_verdict(cluster: str, job: str, reports: Sequence[ProgressReport], rules: HangRules, now: datetime) -> HangVerdict | None:
    live = live_reports(reports, rules, now)
    if not live or rules.slow_mode == "off":
        return None
    ratios = slow_ratios(live)
    if not ratios:
        return None
    ratio = median(ratios)
    if ratio <= 1 + rules.slow_ratio:
        return None
    nodes = [node_progress(r) for r in live]
    suspects, why = blame.last_to_arrive(nodes)
    step = pace(live) or 0.0
    baseline = median(r.baseline_step_seconds for r in live if r.baseline_step_seconds)
    started = min(r.started_at for r in live)
    return HangVerdict(
        rule="slow",
        mode=rules.slow_mode,
        cluster=cluster,
        job=job,
        decided_at=now,
        episode_at=started,
        step=max(n.step for n in nodes),
        last_progress_at=max(n.active_at for n in nodes),
        threshold_seconds=round(baseline * (1 + rules.slow_ratio), 2),
        observed_seconds=round(step, 2),
        step_seconds=step,
        baseline_step_seconds=baseline,
        suspects=suspects,
        suspects_why=why[:512],
        nodes=_summary_nodes(nodes, suspects),
        nodes_reporting=len(nodes),
        summary=(
            f"job {job}: steps take {step:.1f} s, {(ratio - 1) * 100:.0f} % over its baseline of {baseline:.1f} s "
            f"(threshold {rules.slow_ratio * 100:.0f} %)" + (f"; slowest node {suspects[0]}" if suspects else "")
        )[:1024],
    )


def job_verdicts(
    cluster: str,
    job: str,
    reports: Sequence[ProgressReport],
    rules: HangRules,
    now: datetime,
    learned_pace: float | None = None,
    write_gap: float | None = WRITE_GAP_UNKNOWN,
    confirmed: bool = True,
) -> list[HangVerdict]:
    """At most one verdict per job: a stall outranks a slowdown (a stalled job is not slow, it is stuck)."""
    stall = stall_verdict(cluster, job, reports, rules, now, learned_pace, write_gap, confirmed)
    if stall is not None:
        return [stall]
    slow = slow_verdict(cluster, job, reports, rules, now)
    return [slow] if slow is not None else []
