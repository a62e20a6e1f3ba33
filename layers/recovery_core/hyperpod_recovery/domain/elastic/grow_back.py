"""When a shrunk job grows back: at its shrunk copy's next verified checkpoint after its replacement
passed the health gate, or, past the grace, from its newest one; never from a step before the one it
runs from. One job at a time (Check Shrunk Jobs, Grow Back Job, Check Shrunk Jobs...), every shrunk
job of the incident checked on each pass."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from pydantic import ValidationError

from hyperpod_recovery.domain.elastic.estimates import restart_seconds
from hyperpod_recovery.domain.elastic.sizes import reshard_of
from hyperpod_recovery.models.commands import CheckpointRef, CommandReply, JobRef, ResubmitResult, ResumeResult
from hyperpod_recovery.models.node_recovery import (
    MAX_GROW_BACK_CHECKS,
    MAX_SHRUNK_JOBS_PER_INCIDENT,
    ElasticDecision,
    GrowBackJob,
    GrowBackState,
    ResumePlan,
)

# The shortest wait between checks for a shrunk copy's next checkpoint (a List and a few Gets of its
# prefix each); longer when the grace needs it for the checks to last (MAX_GROW_BACK_CHECKS).
GROW_BACK_POLL_SECONDS = 60


class Reading(NamedTuple):
    """A shrunk copy's newest verified checkpoint, with its commit time when its manifest says it."""

    checkpoint: CheckpointRef
    committed_at: datetime | None = None


# The newest verified checkpoint under a job's prefix now, or why it cannot be read.
NewestOf = Callable[[GrowBackJob], Reading | str | None]


def grow_back_wait_seconds(grace_seconds: int) -> int:
    """The wait between checks: at least GROW_BACK_POLL_SECONDS, and long enough that the grace is
    over within the checks one execution may make (leaving one per shrunk job for after its grow-back)."""
    return max(GROW_BACK_POLL_SECONDS, math.ceil(grace_seconds / (MAX_GROW_BACK_CHECKS - MAX_SHRUNK_JOBS_PER_INCIDENT - 1)))


def shrunk_jobs(replies: list[dict[str, object]], plans: list[ResumePlan]) -> list[GrowBackJob]:
    """The jobs Resubmit Jobs Now submitted at a smaller size than they ran at, as the orchestrator
    answered (a copy it submitted at full size, an older agent's, has nothing to grow back)."""
    shrinks = {p.job.job_id: p for p in plans if p.elastic is not None and p.elastic.action == "shrink"}
    found = []
    for raw in replies:
        try:
            reply = CommandReply[ResubmitResult].model_validate(raw)
        except ValidationError:
            continue  # a failed resubmission: nothing runs shrunk
        result, plan = reply.result, shrinks.get(reply.result.old_job_id)
        if plan is None or plan.elastic is None or reply.dry_run or result.already_submitted or result.restarted_by_slurm:
            continue
        if result.new_job_id and result.nodes == plan.elastic.nodes:
            found.append(
                GrowBackJob(
                    old_job_id=result.old_job_id,
                    copy_id=result.new_job_id,
                    copy_label=shrunk_copy_label(result, plan.job.kube.kind if plan.job.kube is not None else None),
                    kind=plan.job.kube.kind if plan.job.kube is not None else None,
                    name=plan.job.name,
                    nodes=plan.elastic.nodes,
                    full_nodes=plan.elastic.grow_to or plan.elastic.full_nodes,
                    from_step=plan.checkpoint.step,
                    shrink=plan.elastic,
                    # The answer: the copy was submitted only once its original had ended (a checkpoint committed
                    # before it is the original's), and the wait for the answer is the record's resubmit phase.
                    restarted_at=reply.completed_at,
                )
            )
    return found


def shrunk_copy_label(result: ResubmitResult, kind: str | None) -> str:
    """``job 1002`` on Slurm; on EKS the re-created object as kubectl shows it (``PyTorchJob kubeflow/llama-r1``)."""
    if result.new_job_name:
        return f"{kind} {result.new_job_name}" if kind else result.new_job_name
    return f"job {result.new_job_id}"


def grow_back_plan(job: GrowBackJob, checkpoint: CheckpointRef) -> ResumePlan:
    """The full-size copy's plan: the shrunk copy is what is resubmitted (and stopped first), at the
    size the job ran at before it shrank, only if that many nodes can take it at once; told the
    data-parallel degree that ``checkpoint``'s own layout gives at that size (check_one made sure
    there is one)."""
    full_dp = full_size_data_parallel(job, checkpoint)
    return ResumePlan(
        job=JobRef(job_id=job.copy_id, name=job.name),
        checkpoint=checkpoint,
        elastic=ElasticDecision(
            action="full_size",
            full_nodes=job.full_nodes,
            nodes=job.full_nodes,
            data_parallel=full_dp,
            full_data_parallel=full_dp,
            why="grow_back",
        ),
        require_free_nodes=job.full_nodes,
    )


def full_size_data_parallel(job: GrowBackJob, checkpoint: CheckpointRef) -> int | None:
    """The degree a full-size copy loading ``checkpoint`` runs at, from that checkpoint's layout."""
    return reshard_of(checkpoint, job.full_nodes).data_parallel(job.full_nodes)


def layout_refusal(job: GrowBackJob, checkpoint: CheckpointRef) -> str | None:
    """Why the shrunk copy stays shrunk rather than grow back from ``checkpoint``: its layout gives no
    degree at full size (a copy told none would derive its own and could change its global batch)."""
    reshard = reshard_of(checkpoint, job.full_nodes)
    if reshard.why_not:
        return f"it stays on {job.nodes} node(s): {reshard.why_not}"
    if reshard.data_parallel(job.full_nodes) is None:
        whole = f"gives no whole data-parallel degree on {job.full_nodes} node(s)"
        return f"it stays on {job.nodes} node(s): its checkpoint at step {checkpoint.step} {whole}"
    return None


def gate_failures(resume: dict[str, object] | None) -> list[str]:
    """The nodes Resume Nodes' last answer found unhealthy: no node to grow onto."""
    if resume is None:
        return []
    try:
        return [u.node for u in CommandReply[ResumeResult].model_validate(resume).result.unhealthy]
    except ValidationError:
        return []


def check_one(job: GrowBackJob, reading: Reading | str | None, *, grace_seconds: int, now: datetime) -> GrowBackJob:
    """A waiting job, read again: ready to grow (``growing`` with its plan), still waiting, or staying shrunk."""
    assert job.status == "waiting"
    if isinstance(reading, str):
        return job.model_copy(update={"status": "stays", "reason": reading[:300]})
    newest, committed_at = (reading.checkpoint, reading.committed_at) if reading is not None else (None, None)
    if newest is None or newest.step < job.from_step:
        found = "no verified checkpoint" if newest is None else f"step {newest.step} as its newest verified checkpoint"
        reason = f"its checkpoints show {found}, before step {job.from_step} it runs from: never grown back from an older step"
        return job.model_copy(update={"status": "stays", "reason": reason})
    first_at = job.first_at or now
    kept: dict[str, object] = {"first_at": first_at, "baseline_step": job.baseline_step}
    if job.baseline_step is None:
        # The first reading: a checkpoint the copy wrote itself dates its restart's first step.
        kept |= {"baseline_step": newest.step, "baseline_at": committed_at if newest.step > job.from_step else None}
    baseline = kept["baseline_step"]
    assert isinstance(baseline, int)
    newer = newest.step > baseline
    if not newer and (now - first_at).total_seconds() < grace_seconds:
        return job.model_copy(update=kept)
    # Ready to grow from ``newest``, if its own layout gives the full-size copy a degree to run at.
    refused = layout_refusal(job, newest)
    if refused is not None:
        return job.model_copy(update={**kept, "status": "stays", "reason": refused[:300]})
    if newer:
        reason = f"its replacement is back and {job.copy_label} checkpointed step {newest.step} since"
        measured = _restart_of(job.model_copy(update=kept), newest.step, committed_at)
        return job.model_copy(update={**kept, "status": "growing", "checkpoint": newest, "reason": reason, "restart_seconds": measured})
    reason = f"no new checkpoint of {job.copy_label} within {grace_seconds} s of its replacement's return: from its newest"
    return job.model_copy(update={**kept, "status": "growing", "checkpoint": newest, "reason": reason})


def _restart_of(job: GrowBackJob, step: int, committed_at: datetime | None) -> int | None:
    """The shrunk copy's restart, from its baseline checkpoint and this newer one (both its own)."""
    if job.restarted_at is None or job.baseline_at is None or job.baseline_step is None or committed_at is None:
        return None
    return restart_seconds(job.restarted_at, job.from_step, (job.baseline_step, job.baseline_at), (step, committed_at))


def advance(
    previous: GrowBackState | None,
    *,
    replies: list[dict[str, object]],
    plans: list[ResumePlan],
    resume: dict[str, object] | None,
    newest_of: NewestOf,
    grace_seconds: int,
    now: datetime,
) -> GrowBackState:
    """One pass of Check Shrunk Jobs: fold the last grow-back's answer in, read every waiting job's
    checkpoints, and say what to do next: grow one job, wait, or done."""
    if previous is None:
        jobs = shrunk_jobs(replies, plans)
        failed = gate_failures(resume)
        if failed:
            why = f"its replacement failed the health gate ({', '.join(failed[:5])})"
            jobs = [j.model_copy(update={"status": "stays", "reason": why}) for j in jobs]
        state = GrowBackState(at=now, jobs=jobs)
    else:
        state = previous.folded()
    checks = state.checks + 1
    jobs = []
    for job in state.jobs:
        if job.status == "waiting" and checks > MAX_GROW_BACK_CHECKS:
            why = f"no checkpoint to grow back from within {MAX_GROW_BACK_CHECKS} checks"
            job = job.model_copy(update={"status": "stays", "reason": why})
        elif job.status == "waiting":
            job = check_one(job, newest_of(job), grace_seconds=grace_seconds, now=now)
        jobs.append(job)
    ready = next((j for j in jobs if j.status == "growing"), None)
    # One at a time: the others found ready wait for the next pass (reading again then is cheap and
    # gives them a newer checkpoint, if any).
    jobs = [j if j is ready or j.status != "growing" else j.model_copy(update={"status": "waiting"}) for j in jobs]
    if ready is not None:
        assert ready.checkpoint is not None
        return GrowBackState(at=now, jobs=jobs, action="grow", next=grow_back_plan(ready, ready.checkpoint), checks=checks)
    if any(j.status == "waiting" for j in jobs):
        return GrowBackState(at=now, jobs=jobs, action="wait", wait_seconds=grow_back_wait_seconds(grace_seconds), checks=checks)
    return GrowBackState(at=now, jobs=jobs, action="done", checks=checks)
