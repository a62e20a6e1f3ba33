"""Find Newest Checkpoint: for every affected job, the newest verified checkpoint, or why not."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified
from hyperpod_recovery.domain.elastic.estimates import MEASURED_WINDOW_DAYS, expected_wait, grow_back_cost
from hyperpod_recovery.domain.jobs.resume_plan import (
    ElasticInputs,
    Planner,
    SpareNodes,
    not_to_read,
    resume_now,
    starts_now,
    stop_only,
    timing,
    unverified,
)
from hyperpod_recovery.errors import CheckpointUnreadable
from hyperpod_recovery.models.node_recovery import MAX_ELASTIC_DECISIONS, CheckpointPlan, FindNewestCheckpointInput
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.domain.elastic.decide import Estimate
    from hyperpod_recovery.models.commands import JobSpec, ResumePolicy
    from hyperpod_recovery.models.records import RecoveryLogEntry
    from hyperpod_recovery.ports import CheckpointReader, ClaimedJobs, JobHistory, RecoveryLog

__all__ = ["ElasticSettings", "SpareNodes", "find_newest_checkpoint", "lineage_nodes", "resume_now", "stop_only"]


@dataclass(frozen=True)
class ElasticSettings:
    """The stack's figures for shrink-or-wait until the ledger has measured ones."""

    cluster: str
    expected_replacement_seconds: int
    grow_back_seconds: int


def find_newest_checkpoint(
    step: FindNewestCheckpointInput,
    *,
    reader: CheckpointReader,
    ledger: JobHistory,
    policy: ResumePolicy = "after_rejoin",
    elastic: ElasticSettings | None = None,
    now: datetime,
) -> CheckpointPlan:
    """Every job ends in exactly one list of the plan (domain/jobs/resume_plan.py); a job the agent
    could not capture faithfully is unresumable here, before any resubmission is sent. The jobs'
    descriptions go to the ledger, where Record Outcome finds them; the workflow then forgets them
    (Forget Job Details)."""
    ledger.save_jobs(step.execution_name, step.jobs, now)
    estimates = _estimates(step, ledger, elastic, now)
    planner = Planner(step, policy, CheckpointPlan(at=now, jobs_found=len(step.jobs) + step.omitted, jobs_omitted=step.omitted))
    for job in step.jobs:
        settled = not_to_read(job)
        if settled is not None:
            (planner.plan.unresumable if settled[0] == "unresumable" else planner.plan.left_alone).append(settled[1])
            continue
        assert job.checkpoint_uri is not None
        try:
            discovery = find_newest_verified(reader, job.checkpoint_uri, job=job.name or None)
        except CheckpointUnreadable as exc:
            planner.unresumable(job, f"cannot read {job.checkpoint_uri}: {exc}")
            continue
        except ValueError as exc:  # a location with '..' or empty segments: never guessed at
            planner.unresumable(job, f"unusable checkpoint location: {exc}")
            continue
        if discovery.checkpoint is None:
            planner.plan.unresumable.append(unverified(job, discovery))
            continue
        when = timing(job, step, policy)
        decision = None
        if estimates is not None and not when.rigid and planner.elastic_spent(job):
            logger.warning(
                "elastic job treated as rigid", extra={"job_id": job.job_id, "decided": planner.decided, "limit": MAX_ELASTIC_DECISIONS}
            )
        elif estimates is not None and not when.rigid:
            assert elastic is not None
            wait, log = estimates
            lineage = lineage_nodes(ledger, elastic.cluster, job)
            inputs = ElasticInputs(
                lost=job.lost_nodes if job.lost_nodes is not None else step.lost_nodes,
                wait=wait,
                grow_back=grow_back_cost(log, job.checkpoint_uri, parameter_seconds=elastic.grow_back_seconds),
                lineage_nodes=lineage,
            )
            decision = planner.decide_elastic(job, discovery.checkpoint, inputs)
        logger.info(
            "checkpoint chosen",
            extra={
                "job_id": job.job_id,
                "checkpoint": discovery.checkpoint.uri,
                "found_by": discovery.found_by,
                "rejected": discovery.rejected,
                "resume": "immediate" if starts_now(when, decision) else "after_rejoin",
                "resume_chosen_by": "job" if job.resume else "stack",
                "stop_grace_seconds": job.stop_grace_seconds if when.slow else None,
                "elastic": decision.model_dump(mode="json") if decision is not None else None,
            },
        )
        planner.place(job, discovery, when, decision)
    return planner.plan


# A copy of a copy of ...: how far back its lineage's size is looked for (two ledger reads a step).
MAX_LINEAGE_STEPS = 4


def lineage_nodes(ledger: ClaimedJobs, cluster: str, job: JobSpec) -> int | None:
    """The largest size the job's lineage ran at, when the job is a copy we made (its comment's mark,
    each step proven by the ledger: that incident's claim on that job, and that incident's record of
    it); None when it is no copy of ours, or nothing proves it. A mark the ledger does not confirm is
    only the owner's word, never a reason to grow a job bigger than it ran."""
    mark, child, size, proven = job.copy_of, job.job_id, job.num_nodes, False
    for _ in range(MAX_LINEAGE_STEPS):
        if mark is None:
            break
        claim = ledger.resubmission_claim(cluster, mark.job_id)
        # The claim must be that incident's, and name this very job as its copy once it is completed
        # (while the incident runs it names none yet: then the incident's claim alone is the proof).
        if claim is None or claim.incident_id != mark.incident or claim.new_job_id not in (None, child):
            break
        parent = next((j for j in ledger.jobs_of(mark.incident) or [] if j.job_id == mark.job_id), None)
        if parent is None:
            break
        size, mark, child, proven = max(size, parent.num_nodes), parent.copy_of, parent.job_id, True
    return size if proven else None


def _estimates(
    step: FindNewestCheckpointInput, ledger: RecoveryLog, elastic: ElasticSettings | None, now: datetime
) -> tuple[Estimate, list[RecoveryLogEntry]] | None:
    """The expected wait, and the recovery log each job's grow-back cost is read from (its measured
    restarts), read only when an elastic job needs them (one Query of the recovery log); None where
    no job can shrink (no opt-in, or a workflow that cannot resubmit early)."""
    if elastic is None or not step.resume_now_allowed or not any(j.elastic or j.elastic_problem for j in step.jobs):
        return None
    log = ledger.recovery_log(elastic.cluster, since=now - timedelta(days=MEASURED_WINDOW_DAYS))
    wait = expected_wait(log, step.instance_groups, parameter_seconds=elastic.expected_replacement_seconds)
    return wait, log
