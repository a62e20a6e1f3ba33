"""The figures shrink-or-wait decides on: the expected wait for a replacement (measured on this
cluster, per instance group, from the ledger's recovery log) and the cost of growing back."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from statistics import median
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.elastic.decide import Estimate

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import RecoveryLogEntry

# Fewer measured replacements than this and the stack's parameter decides: one slow replacement
# must not make every job shrink, nor one quick one make every job wait.
MIN_MEASURED_REPLACEMENTS = 3
MEASURED_WINDOW_DAYS = 30


def expected_wait(log: Sequence[RecoveryLogEntry], groups: Collection[str], *, parameter_seconds: int) -> Estimate:
    """The median measured replacement of ``groups``' nodes (the nodes this incident replaces), once
    there are MIN_MEASURED_REPLACEMENTS of them; else ``parameter_seconds`` (ExpectedReplacementSeconds)."""
    wanted = set(groups)
    measured = [e.replaced_seconds for e in log if e.replaced_seconds is not None and (not wanted or wanted & set(e.instance_groups))]
    if len(measured) < MIN_MEASURED_REPLACEMENTS:
        return Estimate(parameter_seconds, "parameter")
    return Estimate(int(median(measured)), "measured")


# The restarts of a job its grow-back cost is the median of: the newest ones, so a job whose start-up
# got faster (a smaller checkpoint, a warm cache) is judged by what it does now.
MEASURED_RESTARTS_USED = 5


def same_location(one: str, other: str) -> bool:
    """Two spellings of one checkpoint location (with or without the trailing slash)."""
    return one.rstrip("/") == other.rstrip("/")


def grow_back_cost(log: Sequence[RecoveryLogEntry], checkpoint_uri: str, *, parameter_seconds: int) -> Estimate:
    """One restart of the job that checkpoints under ``checkpoint_uri``: the median of its newest
    measured restarts (a shrunk copy's submission to training again, recorded by the incidents that
    shrank it; one is enough, the job's own figure beats the stack's guess), else ``parameter_seconds``
    (ElasticGrowBackSeconds).

    ASSUMPTION: a restart at full size costs what the restart at the smaller size did (start-up and
    the checkpoint's load, not the step rate, dominate it). The job is matched by its checkpoint
    location, which its owner writes: a lead for an estimate, never the ground of a destructive
    decision (either answer only shrinks or waits)."""
    measured = [r.seconds for e in log for r in e.restarts if same_location(r.checkpoint_uri, checkpoint_uri)]
    if not measured:
        return Estimate(parameter_seconds, "parameter")
    return Estimate(int(median(measured[-MEASURED_RESTARTS_USED:])), "measured")


def restart_seconds(restarted_at: datetime, from_step: int, first: tuple[int, datetime], second: tuple[int, datetime]) -> int | None:
    """What a restart cost, from two checkpoints the restarted copy wrote itself: the time from its
    submission to the first, less what the steps between ``from_step`` and the first took at the rate
    the copy ran between the two. None when the figures cannot say (out of order, or clocks that
    disagree by more than the restart itself)."""
    (step_one, at_one), (step_two, at_two) = first, second
    if not (from_step < step_one < step_two) or at_two <= at_one or at_one <= restarted_at:
        return None
    per_step = (at_two - at_one).total_seconds() / (step_two - step_one)
    cost = (at_one - restarted_at).total_seconds() - (step_one - from_step) * per_step
    return max(0, round(cost)) if cost > -1 else None  # (within a second of none: rounding, not a clock)
