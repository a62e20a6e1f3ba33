"""The incident vocabulary, defined once: outcomes, phases and the error names records carry.

The record (domain/record/incident.py and its tables in node_incident.py, job_incident.py), the phases read back from an execution's
history (domain/record/phases.py), the metrics (domain/record/durations.py), the drill CLI
(cli/hyperpod_recovery_cli/drill.py), the sandbox report and its HTML page all use these types, so
a misspelt phase or outcome fails mypy (and pydantic, for a record read back), and
tests/contract/test_vocabulary.py checks that every reader knows every value (a colour for each
phase and outcome in the HTML report, for instance).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from hyperpod_recovery import errors

# How an incident ended. stale: its signals were too old (or from the future) to act on without a
# human; aborted / failed: the execution was stopped, timed out or crashed before Record Outcome,
# and Reconcile Execution recorded it; recovered_by_itself: a hung job made progress again before
# anything was done to it.
Outcome = Literal[
    "recovered", "escalated", "duplicate", "rejected", "capped", "dry_run", "stale", "aborted", "failed", "recovered_by_itself"
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
# The ends Reconcile Execution records (an execution stopped, timed out or crashed: its EventBridge
# rule in template.yaml) and the outcomes only it gives them.
UNRECORDED_ENDS = ("FAILED", "TIMED_OUT", "ABORTED")
UNRECORDED_OUTCOMES: tuple[Outcome, ...] = ("aborted", "failed")

# The phases of an incident, in the order they happen. NodeRecovery: detect, assess, cordon,
# find_jobs, replace, wait_for_rejoin, resume, find_checkpoint, resubmit, grow_back (a shrunk job's
# wait for its next checkpoint and its return to full size), record. JobRecovery:
# detect, inspect, recover_nodes or wait_other_recovery, find_checkpoint, backoff, resubmit,
# record. ``other``: a state no phase names (read back from a history; never recorded by a step).
PhaseName = Literal[
    "detect",
    "assess",
    "inspect",
    "cordon",
    "find_jobs",
    "replace",
    "wait_for_rejoin",
    "recover_nodes",
    "wait_other_recovery",
    "resume",
    "find_checkpoint",
    "backoff",
    "resubmit",
    "grow_back",
    "record",
    "other",
]
PHASES: tuple[PhaseName, ...] = get_args(PhaseName)
# Phases spent waiting on the orchestrator's commands (on Slurm, the controller agent): a job's
# inspect is Capture Job Spec and Check Job Nodes.
ORCHESTRATOR_PHASES: tuple[PhaseName, ...] = ("cordon", "find_jobs", "resume", "resubmit", "inspect")


def error_name(error: type[errors.RecoveryError]) -> str:
    """The name an incident record, a notification and Step Functions give an error: its class's."""
    return error.__name__
