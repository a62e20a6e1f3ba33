"""What the training scripts of a drill report (hyperpod_recovery.checkpointing.Progress), as of any
virtual moment: each node's newest step, when it got there, its pace, a pause it declared, and the
waits it timed. The runner writes these items into the stack's progress table (as the training
nodes' reporters would) before every tick of Detect Hung Jobs and whenever the executions pause,
so the detector and Classify Failure read what a live table would hold.

A job steps every ``step_seconds`` from the drill's start; a declared pause (fault ``pause``)
stops its steps for its length; a slowdown (fault ``slow``) makes every step take ``factor`` times
as long from its moment (the job is synchronous: its slowest node sets the pace), the slow node
waiting on nobody and the others on it; a hang (fault ``hang``) stops its steps (the node it names
one step behind the others, the one that stopped first), until it clears (``seconds``) if ever.
A job Slurm no longer runs (cancelled, ended) reports ended, as its reporter's last write does.
A job that ``forges`` another writes rows under that job's key too (sandbox drill
job-hang-forged-progress): they must change nothing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from hyperpod_recovery.models.progress import (
    DEFAULT_PAUSE_LIMIT_SECONDS,
    HEARTBEAT_SECONDS,
    PROGRESS_IDLE_WRITE_SECONDS,
    Pause,
    ProgressReport,
    progress_item,
)
from sandbox.scenario import FaultSpec, Scenario
from sandbox.scenario_jobs import JobSpec

# How long before the drill's start each job began (its baseline is long established).
STARTED_BEFORE_SECONDS = 3600.0
# The share of a step a healthy node waits on the others in collectives (the rest is compute).
HEALTHY_WAIT_SHARE = 0.05


@dataclass(frozen=True)
class _Job:
    spec: JobSpec
    nodes: list[str]
    pauses: list[FaultSpec]
    slow: FaultSpec | None
    hang: FaultSpec | None


class ProgressSimulator:
    def __init__(
        self,
        scenario: Scenario,
        nodes_of: Callable[[JobSpec], list[str]],
        name_of: Callable[[str], str],
        epoch: datetime,
        key_of: Callable[[JobSpec], str] = lambda job: job.id,
    ) -> None:
        """``nodes_of``: a job's node names (Slurm's, or Kubernetes'); ``name_of``: a fault's node
        reference's; ``key_of``: what the job reports as (a Slurm job id; an EKS job's namespace/name)."""
        self.epoch = epoch
        self.name_of = name_of
        self.key_of = key_of
        self.jobs: list[_Job] = []
        self._write_log: dict[str, list[float]] = {}  # job id -> its reporter's writes so far (virtual seconds)
        for job in scenario.jobs:
            if job.progress is None:
                continue
            faults = [f for f in scenario.faults if f.job == job.id and f.of_progress]
            self.jobs.append(
                _Job(
                    spec=job,
                    nodes=nodes_of(job),
                    pauses=sorted((f for f in faults if f.kind == "pause"), key=lambda f: f.at),
                    slow=next((f for f in faults if f.kind == "slow"), None),
                    hang=next((f for f in faults if f.kind == "hang"), None),
                )
            )

    @property
    def active(self) -> bool:
        return bool(self.jobs)

    @staticmethod
    def horizon_of(scenario: Scenario) -> float:
        """Until when the detector's ticks matter: past the last pause, slowdown or hang (and a hang's
        clearing) by ten minutes (a stall threshold, the evaluation's minute and the recovery it starts)."""
        moments = [0.0] + [f.at + (f.seconds or 0) for f in scenario.faults if f.of_progress]
        return max(moments) + 600.0

    # --- the job's clock ------------------------------------------------------------------------------
    def _step_time(self, job: _Job, t: float) -> float:
        """Seconds per step at ``t``."""
        assert job.spec.progress is not None
        pace = job.spec.progress.step_seconds
        return pace * (job.slow.factor or 1.0) if job.slow is not None and t >= job.slow.at else pace

    def _stopped(self, job: _Job, t: float) -> tuple[float, float] | None:
        """The pause or hang covering ``t``: (start, end) of the time without steps, or None."""
        for p in job.pauses:
            if p.at <= t < p.at + (p.seconds or 0):
                return p.at, p.at + (p.seconds or 0)
        hang = job.hang
        if hang is not None and t >= hang.at and (hang.seconds is None or t < hang.at + hang.seconds):
            return hang.at, math.inf if hang.seconds is None else hang.at + hang.seconds
        return None

    def _stretches(self, job: _Job, t: float) -> list[tuple[float, float, float]]:
        """The stretches up to ``t`` in which the job steps: (start, end, seconds a step). Between two
        changes (a pause, a slowdown, a hang and their ends) it steps at that stretch's pace, each
        stretch starting a step afresh; the first starts ``step_phase_seconds`` before the drill."""
        assert job.spec.progress is not None
        changes = {-job.spec.progress.step_phase_seconds, t} | {p.at for p in job.pauses} | {p.at + (p.seconds or 0) for p in job.pauses}
        for fault in (job.slow, job.hang):
            if fault is not None:
                changes |= {fault.at} | ({fault.at + fault.seconds} if fault.kind == "hang" and fault.seconds else set())
        moments = sorted(m for m in changes if m <= t)
        return [
            (start, end, self._step_time(job, start)) for start, end in itertools.pairwise(moments) if self._stopped(job, start) is None
        ]

    def _steps_until(self, job: _Job, t: float) -> tuple[int, float]:
        """Steps the job completed by ``t`` (virtual seconds) and when the last one did."""
        assert job.spec.progress is not None
        steps, last = 0, -job.spec.progress.step_phase_seconds  # (a step completed then)
        for start, end, each in self._stretches(job, t):
            done = int((end - start) // each)
            if done > 0:
                steps, last = steps + done, start + done * each
        return steps, last

    def _next_step_after(self, job: _Job, moment: float, until: float) -> float:
        """When the job completes its first step after ``moment`` (inf: none by ``until``)."""
        found = math.inf
        for start, end, each in self._stretches(job, until):
            if end <= moment:
                continue
            k = int((moment - start) // each) + 1 if moment >= start else 1
            if start + k * each <= end:
                found = min(found, start + k * each)
        return found

    def _writes(self, job: _Job, t: float, boundaries: list[float]) -> float:
        """The reporter's last write by ``t``. It writes a newer step at once when its last write is
        ``write_seconds`` old, else when it is (hyperpod_recovery.checkpointing.Progress); with no
        newer step, PROGRESS_IDLE_WRITE_SECONDS after its last write; and at once at a pause's
        beginning or end. An earlier version's reporter (``write_seconds`` 30) wrote every HEARTBEAT_SECONDS."""
        assert job.spec.progress is not None
        every = job.spec.progress.write_seconds
        if every >= HEARTBEAT_SECONDS:
            return max([t - (t % HEARTBEAT_SECONDS), *boundaries])
        writes = self._write_log.setdefault(job.spec.id, [0.0])
        forced = sorted({*(m for p in job.pauses for m in (p.at, p.at + (p.seconds or 0)))})
        idle = PROGRESS_IDLE_WRITE_SECONDS
        while writes[-1] < t:
            last = writes[-1]
            step = self._next_step_after(job, last, last + idle)
            due = max(last + every, step) if step < last + idle else last + idle
            writes.append(min([due, *(m for m in forced if m > last)]))
        return max(w for w in writes if w <= t)

    # --- what each node reports -----------------------------------------------------------------------
    def reports(self, t: float, running: Callable[[str], bool]) -> list[ProgressReport]:
        """Every node's report as of ``t``; ``running(job_id)``: the orchestrator still runs the job
        (the drill's job id: the reporters of a cancelled or stopped job last wrote that it ended)."""
        reports: list[ProgressReport] = []
        for job in self.jobs:
            spec, progress = job.spec, job.spec.progress
            assert progress is not None
            # The reporter writes a newer step at most ``write_seconds`` after it, else every
            # HEARTBEAT_SECONDS, and at once when a pause begins or ends: what the table holds at
            # ``t`` is its last write's.
            boundaries = [m for p in job.pauses for m in (p.at, p.at + (p.seconds or 0)) if m <= t]
            if job.hang is not None and job.hang.seconds is not None:
                # (steps again after a silence: the reporter writes at the first one, not at its next beat)
                first = job.hang.at + job.hang.seconds + self._step_time(job, job.hang.at + job.hang.seconds)
                boundaries += [first] if first <= t else []
            written = self._writes(job, t, boundaries)
            beat = self.epoch + timedelta(seconds=written)
            steps, last = self._steps_until(job, written)
            pace = self._step_time(job, written)
            ended_pauses = [p for p in job.pauses if p.at + (p.seconds or 0) <= written]
            pause_now = next((p for p in job.pauses if p.at <= written < p.at + (p.seconds or 0)), None)
            for node in job.nodes:
                node_steps, node_last, node_beat = steps, last, beat
                hang = job.hang
                if hang is not None and node == self._ref(hang.node) and self._hung_first(job, hang, written):
                    # (it stopped first, one step behind: it never reports the step the others reached)
                    node_steps, node_last = self._steps_until(job, hang.at - self._step_time(job, hang.at))
                    if hang.reporter_dies:
                        node_beat = self.epoch + timedelta(seconds=hang.at - hang.at % HEARTBEAT_SECONDS)
                waits = None
                if progress.reports_waits:
                    slow_node = self._slow_node(job, written)
                    waits = 0.02 if slow_node == node else (pace - progress.step_seconds if slow_node else HEALTHY_WAIT_SHARE * pace)
                reports.append(
                    ProgressReport(
                        job=self.key_of(spec),
                        node=node,
                        ranks=8,
                        step=progress.step + node_steps,
                        step_at=self.epoch + timedelta(seconds=node_last),
                        heartbeat_at=node_beat,
                        started_at=self.epoch - timedelta(seconds=STARTED_BEFORE_SECONDS),
                        intervals_seen=int(STARTED_BEFORE_SECONDS / progress.step_seconds) + node_steps,
                        step_seconds=round(pace, 3),
                        baseline_step_seconds=progress.step_seconds,
                        wait_seconds=round(waits, 3) if waits is not None else None,
                        pause=Pause(
                            kind=pause_now.pause_kind,
                            since=self.epoch + timedelta(seconds=pause_now.at),
                            limit_seconds=pause_now.pause_limit_seconds or DEFAULT_PAUSE_LIMIT_SECONDS,
                        )
                        if pause_now is not None and node == job.nodes[0]  # (rank 0's node saves; the others wait)
                        else None,
                        pause_ended_at=self.epoch + timedelta(seconds=ended_pauses[-1].at + (ended_pauses[-1].seconds or 0))
                        if ended_pauses
                        else None,
                        ended=not running(spec.id),
                    )
                )
        return reports

    def items(self, t: float, running: Callable[[str], bool]) -> list[dict[str, dict[str, str]]]:
        return [progress_item(r) for r in self.reports(t, running) + self.forged(t, running)]

    def forged(self, t: float, running: Callable[[str], bool]) -> list[ProgressReport]:
        """Rows a job's reporters write under another job's key (``progress.forges``), from their own
        nodes: a step each tenth of a second, stamped now, inside a declared day-long pause."""
        rows: list[ProgressReport] = []
        for job in self.jobs:
            progress = job.spec.progress
            victim = next((j.spec for j in self.jobs if progress is not None and j.spec.id == progress.forges), None)
            if victim is None or not running(job.spec.id):
                continue
            written = self.epoch + timedelta(seconds=t - (t % HEARTBEAT_SECONDS))
            for node in job.nodes:
                rows.append(
                    ProgressReport(
                        job=self.key_of(victim),
                        node=node,
                        step=10**6 + int(t * 10),
                        step_at=written,
                        heartbeat_at=written,
                        started_at=self.epoch - timedelta(seconds=STARTED_BEFORE_SECONDS),
                        intervals_seen=10**6,
                        step_seconds=0.1,
                        baseline_step_seconds=0.1,
                        pause=Pause(kind="other", since=written, limit_seconds=24 * 3600),
                    )
                )
        return rows

    def _hung_first(self, job: _Job, hang: FaultSpec, written: float) -> bool:
        """The hang's node is stuck as of ``written``: from a step before the others stopped."""
        if hang.seconds is not None and written >= hang.at + hang.seconds:
            return False
        return written >= hang.at - self._step_time(job, hang.at)

    def _slow_node(self, job: _Job, t: float) -> str | None:
        return self._ref(job.slow.node) if job.slow is not None and t >= job.slow.at else None

    def _ref(self, ref: str | None) -> str | None:
        """A fault's ``workers:3`` as the node's Slurm name."""
        return self.name_of(ref) if ref else None
