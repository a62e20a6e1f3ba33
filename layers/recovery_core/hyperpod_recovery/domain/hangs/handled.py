"""Whether a stall is already another incident's to end (pure).

A node's fault stops a job's steps at once, and the ranks on its other nodes wait in the collective,
heartbeating, until the node's incident stops the job; an ended copy's rows still read as alive for
a heartbeat or two. A stall verdict in between names a stop that incident is already ending: a hang
recovery started for it could only find the job's resubmission claim and end ``duplicate``, told to
the chat for nothing (the fleet drill met it on nearly every node fault of a 2,048-node job).

The detector leaves such a verdict to the incident only when all of these hold, so that it never
holds back a hang its own recovery would have acted on:

* the claim is in force (completed, or open and not expired: ResubmissionClaim.in_force), which is
  exactly when Classify Failure leaves the hang alone anyway (domain/hangs/classify.py);
* it was taken at or after the job's last progress: an incident that came for this very stop, not
  one that resubmitted the job before it ran again (a requeued job keeps its id);
* it was taken within HANDLED_WINDOW of now: the claim's incident cancels the old copy before it
  submits anything, so a copy still heartbeating in a stall long after that is no longer the
  incident's to end, and the recovery starts (and says what it finds).

A job that failed is its own end's JobRecovery's (``hpj-<job>-<end>``: the end's moment is in its
name), which claims the job only once it resubmits it, a minute or more later; until then the
ended copy's rows still read as alive and stalled. A stall is left to such a recovery while it runs,
when the job's end it is named by came at or after the job's last progress (a requeued job that ran
again since is not that end's) and within HANDLED_WINDOW of now. A hang recovery started instead
would find the job ended or claimed, and leave it alone.

Anything else, or a claim or listing that could not be read, starts the recovery as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.intake.execution_names import node_execution_name

if TYPE_CHECKING:
    from hyperpod_recovery.models.hangs import HangVerdict
    from hyperpod_recovery.models.records import ResubmissionClaim

# The claim's incident cancels the old copy right after it takes the claim, and the copy's rows read
# as alive a heartbeat or two after that (models/progress.py): minutes. Past this, a stall is ours.
HANDLED_WINDOW = timedelta(minutes=15)
# A job end's recovery is named by its epoch seconds (domain/intake/execution_names.py job_execution_name).
EPOCH_DIGITS = 11
# A job's end is dated by the node that saw it, the tick by Lambda's clock: an end this far ahead of
# the tick still counts; one further ahead (a name nobody's clock gave) never holds a stall back.
END_CLOCK_SLACK_SECONDS = 60


def handled_by(verdict: HangVerdict, claim: ResubmissionClaim | None, now: datetime, *, on_eks: bool = False, own: str = "") -> str | None:
    """Why the verdict is left to another incident (the recorded action's words), or None: act on it.
    ``own``: the episode's own recovery, whose claim (or its nested node recovery's) is not another's."""
    if verdict.rule != "stall" or claim is None or claim.claimed_at is None or not claim.in_force(now):
        return None
    if own and claim.incident_id in (own, node_execution_name(own)):
        return None
    if claim.claimed_at < verdict.last_progress_at or now - claim.claimed_at > HANDLED_WINDOW:
        return None
    made = "re-created" if on_eks else "resubmitted"
    claimed = f"claimed its {'re-creation' if on_eks else 'resubmission'} at {claim.claimed_at:%Y-%m-%d %H:%M:%S} UTC"
    if claim.completed:
        copy = f"the job of uid {claim.new_job_id}" if on_eks else f"job {claim.new_job_id}"
        done = f"and {made} it as {copy}"
    else:
        holds = f" (its claim holds until {claim.open_until:%Y-%m-%d %H:%M:%S} UTC)" if claim.open_until else ""
        done = f"and has not {made} it yet{holds}"
    return f"left to incident {claim.incident_id}, which {claimed}, after the job's last progress, {done}"


def ended_by(verdict: HangVerdict, job_id: str, running: Iterable[str], now: datetime) -> str | None:
    """Why the verdict is left to a running JobRecovery of the job's end (``running``: the workflow's
    running executions' names), or None."""
    if verdict.rule != "stall":
        return None
    prefix = f"hpj-{job_id}-"
    since, until = int(verdict.last_progress_at.timestamp()), int(now.timestamp())
    for name in running:
        end = name.removeprefix(prefix)
        # (another job's, a hang's hpj-<job>-hung-<epoch>, a nested -nodes; anyone who may start an
        # execution names it: only plain epoch seconds are read, and compared before any date is made)
        if not name.startswith(prefix) or not (end.isascii() and end.isdigit() and len(end) <= EPOCH_DIGITS):
            continue
        if since <= int(end) and -END_CLOCK_SLACK_SECONDS <= until - int(end) <= HANDLED_WINDOW.total_seconds():
            ended_at = datetime.fromtimestamp(int(end), tz=UTC)
            return f"left to job recovery {name}, running for the job's end at {ended_at:%Y-%m-%d %H:%M:%S} UTC, after its last progress"
    return None
