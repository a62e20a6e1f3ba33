"""What both workflows' incident records share: which resubmissions an incident made, and how long
it waited on the orchestrator. Record Outcome (domain/outcome.py) and Record Job Outcome
(domain/job_outcome.py) build their records with these, so the two cannot count differently.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hyperpod_recovery.models.commands import CommandReply, ResubmitResult
from hyperpod_recovery.models.records import Resubmission
from hyperpod_recovery.models.workflow import ResumePlan


def submitted_here(reply: CommandReply[ResubmitResult]) -> bool:
    """This incident submitted the job: not a dry run, not a job another incident resubmitted, not
    one Slurm requeued itself (its "new" id is the old one), and a new job id came back."""
    result = reply.result
    return not reply.dry_run and bool(result.new_job_id) and not result.already_submitted and not result.restarted_by_slurm


def resubmission(plan: ResumePlan, reply: CommandReply[ResubmitResult]) -> Resubmission | None:
    """The record's entry for a job this incident resubmitted, None when it submitted nothing."""
    if not submitted_here(reply):
        return None
    return Resubmission(
        job=plan.job.job_id,
        job_name=plan.job.name,
        new_job_id=reply.result.new_job_id,
        checkpoint_step=plan.checkpoint.step,
        checkpoint_uri=plan.checkpoint.uri,
    )


def orchestrator_seconds(replies: Iterable[CommandReply[Any] | None]) -> float:
    """How long the incident waited on the orchestrator's commands (dry-run answers took none)."""
    return round(sum((r.completed_at - r.requested_at).total_seconds() for r in replies if r is not None and not r.dry_run), 3)
