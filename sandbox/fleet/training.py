"""The fleet's training jobs: each running copy trains and checkpoints (the real writer) every
interval from its start plus its restart time, until a fault hits it; what it did since its last
checkpoint is the work the fault destroyed.

Unlike sandbox/training.py, which writes every checkpoint of a drill of minutes, this commits a
copy's checkpoint only when a fault hits it, and only the newest due by then: the pipeline reads a
job's checkpoints only after a fault on it, and the ``latest`` pointer only moves forward, so a
checkpoint superseded before anyone could read it is never read (over 54 days, 8 jobs at 30 minutes,
that is 20,000 commits not made, at ~0.1 s of moto each). Its step and time are the ones the skipped
ones lead to. Hits are recorded as faults are delivered (O(copies) per fault), not searched for in
the whole trace at every moment.

Two exceptions to "only when a fault hits" (issue 50): a copy on a node an at-risk signal named is
``watched``: a planned swap waits for its next checkpoint's commit, so its checkpoints are committed
as they fall due until it stops. And a copy on fewer nodes than its job's (shrunk) keeps the global
batch: it steps, and checkpoints, at ``pace`` = its nodes / the job's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.models.manifest import RESUME_STEP_ENV
from sandbox.checkpoints import write_checkpoint_step
from sandbox.fleet.copies import Copy, FleetCopies
from sandbox.scenario_jobs import JobSpec


@dataclass
class CopyTraining:
    """One copy's training: it learns from ``start`` (its start plus the restart), checkpoints every
    ``interval`` from then, and stops at ``stop`` (a fault's hit, its end), if it stopped."""

    copy: str
    root: str  # the scenario job it is a copy of
    start: float
    from_step: int
    original: bool = False  # the job as it was submitted before the drill (resubmitted from none)
    stop: float | None = None
    written: int = 0  # checkpoints committed (the newest is the one that counts)
    pace: float = 1.0  # its nodes over its job's: a shrunk copy's steps take longer
    hit: bool = False  # a failure stopped it (else the pipeline ended it: a planned swap, a grow-back)
    watched: bool = False  # a planned swap may wait for its next commit: each is committed when due

    def checkpoints_by(self, moment: float, interval: float) -> int:
        end = moment if self.stop is None else min(moment, self.stop)
        return max(0, math.floor((end - self.start) * self.pace / interval)) if end > self.start else 0

    def checkpoint_at(self, n: int, interval: float) -> float:
        """When its ``n``-th checkpoint is committed."""
        return self.start + n * interval / self.pace


@dataclass
class FleetTraining:
    jobs: list[JobSpec]
    orchestrator: FleetCopies
    s3: Any
    epoch: datetime
    interval: float
    steps_per_checkpoint: int
    restart_seconds: float
    initial_step: int
    copies: dict[str, CopyTraining] = field(default_factory=dict)
    _root: dict[str, str] = field(default_factory=dict)
    _watched: dict[str, CopyTraining] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._specs = {job.id: job for job in self.jobs}
        self._full: dict[str, int] = {}  # each job's size: its original copy's nodes

    def root_of(self, job: Copy) -> str | None:
        """The scenario job ``job`` is a copy of (followed through what each was resubmitted from), or None."""
        chain = []
        copies = self.orchestrator.jobs
        while job.job_id not in self._root and job.resubmission_of is not None and job.resubmission_of in copies:
            chain.append(job.job_id)
            job = copies[job.resubmission_of]
        root = self._root[job.job_id] if job.job_id in self._root else self.orchestrator.scenario_job(job)
        if root is not None:
            for job_id in [*chain, job.job_id]:
                self._root[job_id] = root
        return root

    def _seconds(self, moment: datetime) -> float:
        return (moment - self.epoch).total_seconds()

    def _track(self) -> None:
        """Every copy that started since the last look begins training (restart time first)."""
        for job in self.orchestrator.jobs.values():
            original = job.resubmission_of is None
            if job.job_id in self.copies or (job.started_at is None and not original):
                continue
            root = self.root_of(job)
            if root not in self._specs:
                continue
            if original:
                self.copies[job.job_id] = CopyTraining(job.job_id, root, 0.0, self.initial_step, original=True)
                self._full[root] = len(job.nodes)
            else:
                assert job.started_at is not None
                start = self._seconds(job.started_at) + self.restart_seconds
                full = self._full.get(root, 0)
                pace = min(1.0, len(job.nodes) / full) if full and job.nodes else 1.0
                self.copies[job.job_id] = CopyTraining(
                    job.job_id, root, start, int(job.environment.get(RESUME_STEP_ENV, self.initial_step)), pace=pace
                )

    def _stop_ended(self) -> None:
        jobs = self.orchestrator.jobs
        for copy in self.copies.values():
            if copy.stop is not None:
                continue
            job = jobs[copy.copy]
            ends = [self._seconds(m) for m in (job.ended_at, job.completing_until) if m is not None]
            if ends:
                copy.stop = min(ends)

    def advance(self, moment: float) -> None:
        """Learn of the copies started and ended by ``moment``; a watched copy's checkpoints due by then are committed."""
        self._track()
        self._stop_ended()
        for key, copy in list(self._watched.items()):
            self._commit_due(copy, moment)
            if copy.stop is not None:
                del self._watched[key]

    def watch(self, nodes: set[str], moment: float) -> list[CopyTraining]:
        """An at-risk signal on ``nodes`` at ``moment``: the running copies there commit each checkpoint when due, from now."""
        self.advance(moment)
        jobs = self.orchestrator.jobs
        found = [c for c in self.copies.values() if c.stop is None and jobs[c.copy].state == "RUNNING" and nodes & set(jobs[c.copy].nodes)]
        for copy in found:
            copy.watched = True
            self._watched[copy.copy] = copy
            # (its two newest due are committed now: a planned swap measures the job's interval from its two newest manifests)
            self._commit_due(copy, copy.checkpoint_at(copy.checkpoints_by(moment, self.interval) - 1, self.interval) + 1e-3)
            self._commit_due(copy, moment)
        return found

    def _commit_due(self, copy: CopyTraining, moment: float) -> None:
        """The newest checkpoint due by ``moment`` is committed (the pipeline reads only the newest)."""
        due = copy.checkpoints_by(moment, self.interval)
        if due > copy.written:
            created = self.epoch + timedelta(seconds=copy.checkpoint_at(due, self.interval))
            step = copy.from_step + due * self.steps_per_checkpoint
            write_checkpoint_step(self.s3, self._specs[copy.root], step, created, shards=1)
            copy.written = due

    def hit(self, moment: float, *, nodes: set[str] | None = None, root: str | None = None) -> list[CopyTraining]:
        """A fault at ``moment`` stops the training of the running copies on ``nodes`` (or of job
        ``root``'s). Each first commits its newest checkpoint due by then: the pipeline reads it next
        (a checkpoint is written when someone can read it, and only the newest can be: 20 ms each)."""
        self.advance(moment)
        stopped = []
        jobs = self.orchestrator.jobs
        for copy in self.copies.values():
            job = jobs[copy.copy]
            if copy.stop is not None or job.state != "RUNNING" or copy.start > moment + self.restart_seconds:
                continue
            if (root is not None and copy.root == root) or (nodes is not None and nodes & set(job.nodes)):
                self._commit_due(copy, moment)
                copy.stop, copy.hit = moment, True
                stopped.append(copy)
        return stopped

    def running(self, root: str) -> bool:
        """A copy of job ``root`` runs now (a job fault can only hit a job that runs)."""
        jobs = self.orchestrator.jobs
        return any(c.root == root and c.stop is None and jobs[c.copy].state == "RUNNING" for c in self.copies.values())

    def last_checkpoint_before(self, copy: CopyTraining, moment: float) -> float:
        """When the copy's last checkpoint before ``moment`` was committed (its training start if none)."""
        if moment <= copy.start:
            return moment
        return copy.checkpoint_at(math.floor((moment - copy.start) * copy.pace / self.interval), self.interval)
