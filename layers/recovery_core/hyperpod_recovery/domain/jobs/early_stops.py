"""EKS jobs stopped at once and re-created after the rejoin, as an incident's record tells them.

A job whose pods may take longer to stop than a re-creation waits (domain/jobs/eks_grace.py) gets a stop
only in Resubmit Jobs Now and its re-creation after the rejoin (CheckpointPlan.early_stops). The
stop's answer is no resubmission: it is told here, on the timeline and in the job's fate when the
incident ended before the re-creation (the job then stays stopped, and no copy was made).

Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hyperpod_recovery.models.records import TimelineEntry

if TYPE_CHECKING:
    from hyperpod_recovery.models.commands import CommandReply, ResubmitResult
    from hyperpod_recovery.models.node_recovery import ResumePlan


def early_stop_entry(reply: CommandReply[ResubmitResult], named: Callable[[str], str]) -> TimelineEntry:
    """The stop's line: stopped (suspended), not stopped now and why, or what a dry run would do."""
    result = reply.result
    job = named(result.old_job_id)
    if reply.dry_run:
        return TimelineEntry(at=reply.completed_at, event="would stop job", detail=f"{job} at once (its copy made after the rejoin)")
    if result.cancelled_old:
        detail = f"{job} stopped (suspended) at once, to be re-created after the rejoin: its pods have until then to go"
        return TimelineEntry(at=reply.completed_at, event="job stopped", detail=detail)
    if result.already_submitted:
        by = result.submitted_by or "another incident"
        return TimelineEntry(at=reply.completed_at, event="already resubmitted", detail=f"{job}: claimed by {by}, not stopped here")
    why = result.declined or "it was not running"
    return TimelineEntry(
        at=reply.completed_at, event="job not stopped", detail=f"{job}: {why}; its re-creation after the rejoin stops it first"
    )


def ended_before_re_creation(plan: ResumePlan, stop: CommandReply[ResubmitResult], ended: str) -> str | None:
    """A stopped job's fate when the incident ended before its re-creation was asked (``ended``: how
    it ended); None when the stop did not stop it (the usual words then hold)."""
    if stop.dry_run or not stop.result.cancelled_old:
        return None
    grace = f"; its pods may take up to {plan.stop_grace_seconds} s to stop" if plan.stop_grace_seconds else ""
    # (what matters first: a record cuts a long reason, and ``ended`` may carry a long cause)
    return (
        f"it was stopped (suspended) at once and stays stopped, no copy of it made: {ended} before its re-creation once its "
        f"nodes were back (from step {plan.checkpoint.step}{grace})"
    )
