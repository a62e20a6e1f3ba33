"""The scenario's training jobs keep checkpointing while a drill runs: each copy of a job that is
training writes a complete checkpoint (the real writer: shards, manifest, pointer) every interval,
resuming from the step it was started from. A copy on fewer nodes than the job's full size keeps
the global batch, so each step takes longer: its interval grows by full / nodes. A copy stops
checkpointing at its end or at the first fault that hit one of its nodes (it is not training then)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.models.manifest import RESUME_STEP_ENV
from sandbox.checkpoints import write_checkpoint_step
from sandbox.scenario import JobSpec
from sandbox.slurm import SimulatedSlurm, SlurmJob


class TrainingSimulator:
    def __init__(
        self, jobs: list[JobSpec], slurm: SimulatedSlurm, s3: Any, epoch: datetime, hit_at: Callable[[SlurmJob], float | None]
    ) -> None:
        self.jobs = [job for job in jobs if job.training is not None]
        self.slurm, self.s3, self.epoch, self.hit_at = slurm, s3, epoch, hit_at
        self.written: dict[str, int] = {}  # copy id -> checkpoints it wrote so far

    def lineage(self, root: str) -> list[SlurmJob]:
        def root_of(job: SlurmJob) -> str:
            while job.resubmission_of is not None:
                job = self.slurm.jobs[job.resubmission_of]
            return job.job_id

        return [job for job in self.slurm.jobs.values() if root_of(job) == root]

    def advance(self, moment: float) -> None:
        """Every checkpoint due up to ``moment`` (virtual seconds), in time order per copy."""
        for spec in self.jobs:
            assert spec.training is not None
            full = max(1, len(self.slurm.jobs[spec.id].nodes))
            initial = max((c.step for c in spec.checkpoints), default=0)
            for copy in self.lineage(spec.id):
                if copy.job_id == spec.id:
                    start, from_step = 0.0, initial
                elif copy.started_at is not None:
                    start = (copy.started_at - self.epoch).total_seconds()
                    from_step = int(copy.environment.get(RESUME_STEP_ENV, initial))
                else:
                    continue
                stops = [moment]
                if copy.ended_at is not None:
                    stops.append((copy.ended_at - self.epoch).total_seconds())
                if copy.state == "COMPLETING" and copy.completing_until is not None:
                    stops.append((copy.completing_until - self.epoch).total_seconds())  # (cancelled: stopping)
                hit = self.hit_at(copy)
                if hit is not None and hit >= start:
                    stops.append(hit)
                stop = min(stops)
                nodes = max(1, len(copy.nodes) or copy.node_count)
                interval = spec.training.checkpoint_every_seconds * full / nodes
                done = self.written.get(copy.job_id, 0)
                while start + (done + 1) * interval <= stop:
                    done += 1
                    created = self.epoch + timedelta(seconds=start + done * interval)
                    write_checkpoint_step(self.s3, spec, from_step + done * spec.training.steps_per_checkpoint, created, nodes=nodes)
                self.written[copy.job_id] = done
