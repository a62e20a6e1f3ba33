"""Phases of an incident, from the states its execution entered.

Record Outcome builds an incident's phases from the timestamps the steps carry in state; an
execution that ended before it recorded (stopped, timed out, crashed) has only its history to
tell: Reconcile Execution reads the states it entered and turns them into the same phases here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.models.records import Phase

if TYPE_CHECKING:
    from hyperpod_recovery.vocabulary import PhaseName

# Which phase of an incident each state belongs to: the drill report's phases (docs/runbook.md,
# Running a drill) and the phases Reconcile Execution reads back from an execution's history.
# tests/contract/test_observability.py checks every state of both workflows is named here.
PHASE_OF_STATE: dict[str, PhaseName] = {
    # NodeRecovery
    "Receive Request": "assess",
    "Validate Request": "assess",
    "Lock Nodes": "assess",
    "Check Lock": "assess",
    "Assess Nodes": "assess",
    "Check Targets": "assess",
    "Apply Safety Policy": "assess",
    "Check Safety": "assess",
    "Cordon Nodes": "cordon",
    "Find Affected Jobs": "find_jobs",
    "Replace Nodes": "replace",
    "Check Replacement": "replace",
    "Wait For Rejoin": "wait_for_rejoin",
    "Check Rejoin": "wait_for_rejoin",
    "Check Rejoined": "wait_for_rejoin",
    "Read Boot Times": "wait_for_rejoin",
    "Resume Nodes": "resume",
    "Check Health Gate": "resume",
    "Replace Unhealthy Nodes": "replace",
    "Check Unhealthy Replaced": "replace",
    "Find Newest Checkpoint": "find_checkpoint",
    "Forget Job Details": "find_checkpoint",
    "Resubmit Jobs Now": "resubmit",
    "Resubmit Job Now": "resubmit",
    "Note Resubmit Now Failure": "resubmit",
    "Resubmit Jobs": "resubmit",
    "Resubmit Job": "resubmit",
    "Note Resubmit Failure": "resubmit",
    "Check Any Shrunk": "grow_back",
    "Start Growing Back": "grow_back",
    "Check Shrunk Jobs": "grow_back",
    "Grow Back Or Wait": "grow_back",
    "Wait For Next Checkpoint": "grow_back",
    "Grow Back Job": "grow_back",
    "Record Outcome": "record",
    "Recall Outcome": "record",
    "Check Recalled Outcome": "record",
    "Parse Recalled Outcome": "record",
    "Use Recalled Outcome": "record",
    "Record Outcome Lost": "record",
    "Check Outcome": "record",
    "Record Duplicate": "record",
    "Escalate Incident": "record",
    "Record Rejection": "record",
    "Record Stale Event": "record",
    "Event Too Old": "record",
    "Recovery Complete": "record",
    "Nothing To Recover": "record",
    "Duplicate Incident": "record",
    "Recovery Escalated": "record",
    "Request Rejected": "record",
    "Recovery Capped": "record",
    # JobRecovery
    "Receive Job Request": "inspect",
    "Validate Job Request": "inspect",
    "Capture Job Spec": "inspect",
    "Check Job Nodes": "inspect",
    "Check Hang": "inspect",
    "No Hang Evidence": "inspect",
    "Capture Hang Evidence": "inspect",
    "Classify Failure": "inspect",
    "Check Failure Kind": "inspect",
    "Recover Nodes": "recover_nodes",
    "Check Node Recovery": "recover_nodes",
    "Start Recovery Watch": "wait_other_recovery",
    "Check Other Recovery": "wait_other_recovery",
    "Check Other Finished": "wait_other_recovery",
    "Wait For Other Recovery": "wait_other_recovery",
    "Plan Job Restart": "find_checkpoint",
    "Check Restart Plan": "find_checkpoint",
    "Wait Restart Backoff": "backoff",
    "Record Job Outcome": "record",
    "Recall Job Outcome": "record",
    "Check Recalled Job Outcome": "record",
    "Parse Recalled Job Outcome": "record",
    "Use Recalled Job Outcome": "record",
    "Record Job Outcome Lost": "record",
    "Check Job Outcome": "record",
    "Escalate Job Incident": "record",
    "Record Job Rejection": "record",
    "Record Stale Job Event": "record",
    "Job Event Too Old": "record",
    "Job Recovered": "record",
    "Job Left Alone": "record",
    "Job Recovery Escalated": "record",
    "Job Recovery Capped": "record",
}


def phases_from_states(entered: Sequence[tuple[str, datetime]], ended_at: datetime) -> list[Phase]:
    """Consecutive states of one phase make one phase, from its first state entered to the moment
    the next phase starts (the last one: to the execution's end). States no phase names are
    ``other``."""
    phases: list[Phase] = []
    for name, at in sorted(entered, key=lambda e: e[1]):
        phase = PHASE_OF_STATE.get(name, "other")
        if phases and phases[-1].name == phase:
            continue
        if phases:
            phases[-1].end = max(phases[-1].start, at)
        phases.append(Phase(name=phase, start=at, end=at))
    if phases:
        phases[-1].end = max(phases[-1].start, ended_at)
    return phases
