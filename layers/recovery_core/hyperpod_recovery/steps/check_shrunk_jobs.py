"""Check Shrunk Jobs (NodeRecovery, after the replacement passed the health gate): for each job
resubmitted shrunk, whether it grows back now (one at a time), waits for its shrunk copy's next
checkpoint, or stays shrunk, and why (domain/elastic/grow_back.py)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified
from hyperpod_recovery.domain.elastic.grow_back import Reading, advance
from hyperpod_recovery.errors import CheckpointUnreadable
from hyperpod_recovery.models.node_recovery import CheckShrunkJobsInput, GrowBackJob, GrowBackState
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.commands import JobSpec
    from hyperpod_recovery.ports import CheckpointReader, ClaimedJobs

# What each pass logs of a job: enough to follow its grow-back and how its restart was measured.
LOGGED_JOB_FIELDS = {"copy_id", "status", "reason", "baseline_step", "baseline_at", "restart_seconds"}


def check_shrunk_jobs(
    step: CheckShrunkJobsInput, *, reader: CheckpointReader, ledger: ClaimedJobs, grace_seconds: int, now: datetime
) -> GrowBackState:
    specs: dict[str, JobSpec] | None = None

    def newest_of(job: GrowBackJob) -> Reading | str | None:
        nonlocal specs
        if specs is None:  # (read once per pass, only when some job waits)
            specs = {j.job_id: j for j in ledger.jobs_of(step.execution_name) or []}
        spec = specs.get(job.old_job_id)
        if spec is None or not spec.checkpoint_uri:
            return f"the incident's record of job {job.old_job_id} (its checkpoint location) is gone"
        try:
            found = find_newest_verified(reader, spec.checkpoint_uri, job=spec.name or None)
        except (CheckpointUnreadable, ValueError) as exc:
            return f"cannot read {spec.checkpoint_uri}: {exc}"
        return Reading(found.checkpoint, found.committed_at) if found.checkpoint is not None else None

    if step.request.dry_run:
        return GrowBackState(at=now)  # a dry run shrank nothing
    answer = step.previous.answer if step.previous is not None else None
    if answer is not None and answer.result.new_job_id is None and not answer.result.already_submitted:
        # Declined: nothing was stopped or submitted. The claim on the copy goes back now, not at the
        # end of the loop: a fault on the copy meanwhile must find it unclaimed, and be recovered.
        ledger.release_resubmission(step.request.cluster, answer.result.old_job_id, step.execution_name)
    state = advance(
        step.previous, replies=step.replies, plans=step.plans, resume=step.resume, newest_of=newest_of, grace_seconds=grace_seconds, now=now
    )
    logger.info(
        "grow-backs checked",
        extra={
            "action": state.action,
            "jobs": [j.model_dump(mode="json", include=LOGGED_JOB_FIELDS) for j in state.jobs],
        },
    )
    return state
