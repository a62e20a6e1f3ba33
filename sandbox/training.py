"""The scenario's training jobs keep checkpointing while a drill runs: each copy of a job that is
training writes a complete checkpoint (the real writer: shards, manifest, pointer) every interval,
resuming from the step it was started from. A copy on fewer nodes than the job's full size keeps
the global batch, so each step takes longer: its interval grows by full / nodes. A copy stops
checkpointing at its end or at the first fault that hit one of its nodes (it is not training then)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.domain.jobs.eks_jobs import JOB_NAME_ANNOTATION
from hyperpod_recovery.models.manifest import RESUME_STEP_ENV
from sandbox.checkpoints import begin_checkpoint_step, write_checkpoint_step
from sandbox.scenario_jobs import JobSpec
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
                    start = (copy.started_at - self.epoch).total_seconds() + spec.training.restart_seconds
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
                due = start + (done + 1) * interval
                if spec.training.save_seconds and due - spec.training.save_seconds <= stop < due:
                    # (the next save has begun: its shards are there, its manifest is not)
                    begun = self.epoch + timedelta(seconds=due - spec.training.save_seconds)
                    begin_checkpoint_step(self.s3, spec, from_step + (done + 1) * spec.training.steps_per_checkpoint, begun)


class KubeTrainingSimulator:
    """EKS: each job object of a scenario job's lineage (the job, then each re-creation made from it)
    trains while all its pods run (FakeKube.runs(): from when the scheduler placed them until it was
    suspended, or the drill's end), from the step its environment resumes it at, its interval grown by
    full / its pods as a Slurm copy's is. A copy stops checkpointing at the first fault that hit it
    (``hit_at``: virtual seconds, given the object), as on Slurm.

    The drill runner makes it for a scenario with jobs.*.training (sandbox/runner/drill.py _populate_eks) and
    calls ``advance`` where it advances the Slurm one (_between)."""

    def __init__(
        self,
        jobs: list[JobSpec],
        kube: Any,
        epoch: datetime,
        hit_at: Callable[[dict[str, Any]], float | None],
        write: Callable[[JobSpec, int, datetime, int], None],
        begin: Callable[[JobSpec, int, datetime], None] | None = None,
    ) -> None:
        self.jobs = [job for job in jobs if job.training is not None]
        self.kube, self.epoch, self.hit_at, self.write, self.begin = kube, epoch, hit_at, write, begin
        self.written: dict[str, int] = {}  # object uid -> checkpoints it wrote so far

    def lineage(self, spec: JobSpec) -> list[dict[str, Any]]:
        namespace = spec.kubernetes.namespace
        return [
            obj
            for (kind, ns, name), obj in sorted(self.kube.jobs.items())
            if (kind, ns) == (spec.kubernetes.kind, namespace)
            and (name == spec.name or (obj["metadata"].get("annotations") or {}).get(JOB_NAME_ANNOTATION) == spec.name)
        ]

    def advance(self, moment: float) -> None:
        """Every checkpoint due up to ``moment`` (virtual seconds), in time order per copy."""
        runs = self.kube.runs()
        for spec in self.jobs:
            assert spec.training is not None
            lineage = self.lineage(spec)
            original = next((o for o in lineage if o["metadata"]["name"] == spec.name), None)
            if original is None:
                continue
            full = max(1, _pods(original))
            initial = max((c.step for c in spec.checkpoints), default=0)
            for obj in lineage:
                uid = obj["metadata"]["uid"]
                spans = runs.get(uid) or []
                if not spans:
                    continue
                start, end = spans[0]  # (a copy trains once: stopped, it is never un-suspended by us)
                if obj is original:
                    start, from_step = 0.0, initial
                else:
                    start = (start or 0.0) + spec.training.restart_seconds
                    from_step = int(_env_of(obj).get(RESUME_STEP_ENV, initial))
                stops = [moment] + ([end] if end is not None else [])
                hit = self.hit_at(obj)
                if hit is not None and hit >= (start or 0.0):
                    stops.append(hit)
                stop = min(stops)
                nodes = max(1, _pods(obj))
                interval = spec.training.checkpoint_every_seconds * full / nodes
                done = self.written.get(uid, 0)
                while (start or 0.0) + (done + 1) * interval <= stop:
                    done += 1
                    created = self.epoch + timedelta(seconds=(start or 0.0) + done * interval)
                    self.write(spec, from_step + done * spec.training.steps_per_checkpoint, created, nodes)
                self.written[uid] = done
                due = (start or 0.0) + (done + 1) * interval
                if self.begin is not None and spec.training.save_seconds and due - spec.training.save_seconds <= stop < due:
                    # (the next save has begun: its shards are there, its manifest is not)
                    begun = self.epoch + timedelta(seconds=due - spec.training.save_seconds)
                    self.begin(spec, from_step + (done + 1) * spec.training.steps_per_checkpoint, begun)


def _pods(obj: dict[str, Any]) -> int:
    replicas = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return sum(1 if r.get("replicas") is None else int(r["replicas"]) for r in replicas.values() if isinstance(r, dict))


def _env_of(obj: dict[str, Any]) -> dict[str, str]:
    replicas = [r for r in ((obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}).values() if isinstance(r, dict)]
    containers = ((replicas[0].get("template") or {}).get("spec") or {}).get("containers") or [] if replicas else []
    return {str(e.get("name")): str(e.get("value")) for e in (containers[0].get("env") or [] if containers else [])}
