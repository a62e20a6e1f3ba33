"""What a job's progress rows say once checked against the orchestrator and dated by our own clock.
Pure (docs/progress.md, "What is trusted").

* Membership: a row counts for a job only when its node is one the orchestrator says the job runs
  on now (``JobNodes.nodes_of``), one row per node. No fresh snapshot: every row counts, as before,
  and the verdict says its membership is unverified (Classify Failure re-measures on the
  orchestrator's allocation before anything is touched).
* Our clock: a node's progress is dated by our reads: between the tick before and the tick that saw
  its step change (or a return from a pause, counted once per step); its reporter's liveness the
  same way by its heartbeat. The writer's stamp only places the change inside that window (an
  honest clock's is exact), never outside it, and is said in the verdict when it lies beyond
  SKEW_BOUND_SECONDS. A row seen for the first time is dated by that first sight: after the memory
  is lost, a stall is found a threshold after the detector sees it again, never earlier.
* Pace: the threshold's pace is never below the largest pace the job's own nodes reported over the
  last hour (PACE_TICKS, one a minute): rows claiming fast steps cannot bring a slow job's stall
  threshold down.
* Write gap: how often each node's reporter writes a new step, by its own clock's stamps (skew
  cancels out): a healthy job looks idle between two writes, so the threshold is never below the
  job's largest gap and a headroom (an older reporter writes every 30 s; a current one every 5 s).
* Seen, not inferred: a stall needs a row written well after its own last progress (a reporter's
  heartbeat that found no newer step, by its own clock): writes late or lost are no evidence of a hang.
* Pauses: a declared pause holds from the job's last progress (our clock) for its declared limit:
  rewriting it, or declaring a new one, never extends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.hangs.detect import pace
from hyperpod_recovery.models.progress import HEARTBEAT_SECONDS, PROGRESS_WRITE_SECONDS, Pause, ProgressReport
from hyperpod_recovery.models.progress_memory import (
    CLEARED_KEPT,
    PACE_EVERY_SECONDS,
    PACE_TICKS,
    STARTED_KEPT,
    JobMemory,
    Sighting,
    Started,
    epoch_ms,
    from_epoch,
)

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_nodes import JobNodes

# A writer's stamp further than this from when we could have read it is said in the verdict.
SKEW_BOUND_SECONDS = 30
# A write this long after its step, by its writer's clock, found no newer step to carry (a reporter
# writes one within PROGRESS_WRITE_SECONDS; a second for the write itself).
STILL_AFTER_SECONDS = PROGRESS_WRITE_SECONDS + 1
# On first sight a heartbeat may be up to this old (a report every 30 s, a tick a minute) and not skewed.
FIRST_SIGHT_SLACK_SECONDS = 90


@dataclass(frozen=True)
class Observation:
    memory: JobMemory
    reports: list[ProgressReport]  # the job's own rows, dated by our clock
    learned_pace: float | None  # the largest pace its own nodes reported over the remembered ticks
    skew: dict[str, int] = field(default_factory=dict)  # node -> its clock minus ours (s), beyond the bound
    # The largest gap between two writes of a new step over the job's nodes (s); a node not yet seen
    # writing twice counts as an older reporter's heartbeat (HEARTBEAT_SECONDS).
    write_gap: float = float(HEARTBEAT_SECONDS)
    # Some node wrote again since its step last moved, still at that step: the job's stillness is
    # seen, not inferred from writes that did not come (a lost or late write is no stall).
    confirmed: bool = True


def own_rows(job: str, reports: Sequence[ProgressReport], membership: JobNodes | None) -> list[ProgressReport] | None:
    """The rows that count for ``job``: from its own nodes (every row when ``membership`` is None),
    one per node. None: the orchestrator does not run the job now."""
    nodes = membership.nodes_of(job) if membership is not None else None
    if membership is not None and nodes is None:
        return None
    by_node: dict[str, ProgressReport] = {}
    for report in reports:
        if report.job != job or (nodes is not None and report.node not in nodes):
            continue
        kept = by_node.get(report.node)
        if kept is None or report.heartbeat_at > kept.heartbeat_at:
            by_node[report.node] = report
    return [by_node[node] for node in sorted(by_node)]


def _skew(stamp_ms: int, since: int, tick: int) -> int:
    """The writer's clock minus ours: its heartbeat changed between our reads ``since`` and ``tick``."""
    stamp = stamp_ms / 1000
    ahead = stamp - tick if stamp > tick else (stamp - since if stamp < since else 0.0)
    return round(ahead)


def _within(stamp_ms: int, since: int, tick: int) -> int:
    """When a change happened, by our reads: between the read that did not see it and the one that
    did. The writer's stamp only places it inside that window (an honest writer's is exact), never
    outside: a clock behind dates it at our earlier read, one ahead at this one."""
    return min(max(stamp_ms // 1000, since), tick)


def sight(previous: Sighting | None, report: ProgressReport, tick: int, last_tick: int) -> Sighting:
    """The node's sighting after this tick's read of its row (``last_tick``: the read before)."""
    step_ms, heartbeat_ms, ended_ms = epoch_ms(report.step_at), epoch_ms(report.heartbeat_at), epoch_ms(report.pause_ended_at)
    limit = report.pause.limit_seconds if report.pause is not None else 0
    if previous is None:
        skew = _skew(heartbeat_ms, tick - FIRST_SIGHT_SLACK_SECONDS, tick)
        return Sighting(s=report.step, st=step_ms, hb=heartbeat_ms, pe=ended_ms, pl=limit, mv=tick, hd=tick, sk=skew)
    moved, returned = previous.mv, previous.rs
    if report.step != previous.s:
        moved = _within(step_ms, last_tick, tick)
    elif ended_ms and ended_ms != previous.pe and previous.rs != report.step:
        # (a return from a pause: once per step, however often it is rewritten)
        moved, returned = _within(ended_ms, last_tick, tick), report.step
    heard, skew = previous.hd, previous.sk
    if heartbeat_ms != previous.hb:
        heard, skew = _within(heartbeat_ms, last_tick, tick), _skew(heartbeat_ms, last_tick, tick)
    gap = _write_gap(previous, report, heartbeat_ms, ended_ms)
    return Sighting(s=report.step, st=step_ms, hb=heartbeat_ms, pe=ended_ms, pl=limit, mv=moved, hd=heard, rs=returned, sk=skew, wg=gap)


def still(report: ProgressReport) -> bool:
    """The row was written well after its last progress, by its writer's own clock (skew cancels):
    a reporter writes a newer step within PROGRESS_WRITE_SECONDS, so this write found none."""
    active = max(report.step_at, report.pause_ended_at) if report.pause_ended_at else report.step_at
    return not report.ended and (report.heartbeat_at - active).total_seconds() > STILL_AFTER_SECONDS


def _write_gap(previous: Sighting, report: ProgressReport, heartbeat_ms: int, ended_ms: int) -> int:
    """The writer's gap (ms, its own clock) between its write we saw before and this one, when both
    carried steps with no pause between: its cadence while training. A gap past a heartbeat is a
    silence (a stall that cleared, a lost write), not a cadence: the one learned before stays."""
    stepped = report.step > previous.s and report.pause is None and not previous.pl and ended_ms == previous.pe
    gap = heartbeat_ms - previous.hb
    return gap if stepped and 0 < gap <= HEARTBEAT_SECONDS * 1000 else previous.wg


def _dated(report: ProgressReport, seen: Sighting, job_moved: int) -> ProgressReport:
    """The row with our clock's times: its last progress and its heartbeat as we saw them change; a
    pause holds from the job's last progress for its declared limit, however it is rewritten."""
    pause = None
    if report.pause is not None:
        pause = Pause(kind=report.pause.kind, since=from_epoch(job_moved), limit_seconds=report.pause.limit_seconds)
    return report.model_copy(
        update={"step_at": from_epoch(seen.mv), "heartbeat_at": from_epoch(seen.hd), "pause": pause, "pause_ended_at": None}
    )


def observe(previous: JobMemory | None, job: str, reports: Sequence[ProgressReport], now: datetime) -> Observation:
    """This tick's read of a job's own rows, remembered and dated by our clock."""
    tick = int(now.timestamp())
    last_tick = int(previous.seen_at.timestamp()) if previous is not None else tick - FIRST_SIGHT_SLACK_SECONDS
    before = previous.nodes if previous is not None else {}
    nodes = {r.node: sight(before.get(r.node), r, tick, last_tick) for r in reports}
    restarted = any(r.node in before and r.step < before[r.node].s for r in reports)
    job_moved = max((s.mv for s in nodes.values()), default=tick)
    dated = [_dated(r, nodes[r.node], job_moved) for r in reports]
    paces = list(previous.paces) if previous is not None else []
    paced_at = previous.paced_at if previous is not None else 0
    current = pace(reports)
    if current is not None and (tick - paced_at >= PACE_EVERY_SECONDS or not paces):
        paces, paced_at = ([*paces, current])[-PACE_TICKS:], tick
    memory = JobMemory(
        job=job,
        seen_at=now,
        nodes=nodes,
        paces=paces,
        paced_at=paced_at,
        started=[] if restarted or previous is None else _cleared(previous.started, reports),
        cleared_at=list(previous.cleared_at) if previous is not None else [],
        told_at=previous.told_at if previous is not None else 0,
        damped=previous.damped if previous is not None else 0,
    )
    if previous is not None and not restarted:
        newly = sum(1 for old, new in zip(previous.started, memory.started, strict=True) if new.cleared and not old.cleared)
        memory.cleared_at = (memory.cleared_at + [tick] * newly)[-CLEARED_KEPT:]
    skew = {node: s.sk for node, s in nodes.items() if abs(s.sk) > SKEW_BOUND_SECONDS}
    learned = max([*paces, current] if current is not None else paces, default=None)
    gaps = [s.wg / 1000 if s.wg else float(HEARTBEAT_SECONDS) for s in nodes.values()]
    return Observation(
        memory=memory,
        reports=dated,
        learned_pace=learned,
        skew=skew,
        write_gap=max(gaps, default=float(HEARTBEAT_SECONDS)),
        confirmed=any(still(r) for r in reports),
    )


def _cleared(started: Sequence[Started], reports: Sequence[ProgressReport]) -> list[Started]:
    """The started episodes, marked cleared once the job stepped past where it stalled (same run:
    a job restarted from a checkpoint steps backwards first, and its memory starts again)."""
    newest = max((r.step for r in reports), default=-1)
    return [s.model_copy(update={"cleared": True}) if not s.cleared and newest > s.step else s for s in started]


def skew_text(skew: dict[str, int]) -> str:
    """The nodes whose clocks differ from ours beyond the bound, in words (the verdict's why)."""
    # (at least: a stamp is only known to lie between two of our reads)
    parts = [f"{node} at least {abs(s)} s {'ahead of' if s > 0 else 'behind'} ours" for node, s in sorted(skew.items())[:4]]
    more = f" and {len(skew) - 4} more" if len(skew) > 4 else ""
    return f"; clocks beyond {SKEW_BOUND_SECONDS} s (dated by our reads instead): {', '.join(parts)}{more}" if parts else ""


def remembered_start(memory: JobMemory, episode: datetime, execution: str, step: int) -> JobMemory:
    kept = [s for s in memory.started if s.episode != int(episode.timestamp())]
    started = Started(episode=int(episode.timestamp()), execution=execution, step=step)
    return memory.model_copy(update={"started": ([*kept, started])[-STARTED_KEPT:]})
