"""Find Newest Checkpoint: for every affected job, the newest verified checkpoint, or why not."""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.checkpoints import CheckpointReader, find_newest_verified
from hyperpod_recovery.errors import CheckpointUnreadable
from hyperpod_recovery.models.workflow import CheckpointPlan, FindNewestCheckpointInput, ResumePlan, UnresumableJob
from hyperpod_recovery.observability import logger


def find_newest_checkpoints(step: FindNewestCheckpointInput, *, reader: CheckpointReader, now: datetime) -> CheckpointPlan:
    plan = CheckpointPlan(at=now)
    for job in step.jobs:
        if job.auto_resume:
            plan.left_alone.append(
                UnresumableJob(job_id=job.job_id, name=job.name, reason="uses srun --auto-resume=1: HyperPod restarts it itself")
            )
            continue
        if not job.checkpoint_uri:
            plan.unresumable.append(
                UnresumableJob(job_id=job.job_id, name=job.name, reason="no checkpoint location in the job's comment or environment")
            )
            continue
        try:
            discovery = find_newest_verified(reader, job.checkpoint_uri)
        except CheckpointUnreadable as exc:
            plan.unresumable.append(UnresumableJob(job_id=job.job_id, name=job.name, reason=f"cannot read {job.checkpoint_uri}: {exc}"))
            continue
        except ValueError as exc:  # a location with '..' or empty segments: never guessed at
            plan.unresumable.append(UnresumableJob(job_id=job.job_id, name=job.name, reason=f"unusable checkpoint location: {exc}"))
            continue
        if discovery.checkpoint is None:
            rejected = f" (rejected: {'; '.join(discovery.rejected[:5])})" if discovery.rejected else ""
            plan.unresumable.append(
                UnresumableJob(job_id=job.job_id, name=job.name, reason=f"no verified checkpoint under {job.checkpoint_uri}{rejected}")
            )
            continue
        logger.info(
            "checkpoint chosen",
            extra={
                "job_id": job.job_id,
                "checkpoint": discovery.checkpoint.uri,
                "found_by": discovery.found_by,
                "rejected": discovery.rejected,
            },
        )
        plan.resumable.append(ResumePlan(job=job, checkpoint=discovery.checkpoint, rejected=discovery.rejected[:10]))
    return plan
