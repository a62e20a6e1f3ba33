"""The wait for the job's next verified checkpoint commit after an at-risk verdict. Pure.

The commit is the manifest's, read through checkpoint discovery (verified: a torn checkpoint never
counts, domain/checkpoints/discovery.py), never a guess from the clock: the swap stops the job only
once a newer verified step than the one seen at the first reading exists (steps, not stamps: the
manifest is dated by the writer's clock). A commit whose manifest is dated at or after the verdict
is taken at the first reading too (a save that ended between the verdict and our first look).

The work lost beyond the checkpoint is the time from the commit until the job stops: the polling
interval is the largest part of it, so the wait polls every POLL_SECONDS (goal: ≤ 10 s lost). The
wait is bounded (the verdict's horizon, at most MAX_WAIT_SECONDS): a job that commits nothing in
that time is left to the reactive path, and the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

POLL_SECONDS = 4
# An hour of looks every POLL_SECONDS (each look's retries fewer than other tasks') stays within an
# execution's 25,000 history events (tests/contract/test_workflow_limits.py); a job that commits less often
# is left to the reactive path, and the record says so.
MAX_WAIT_SECONDS = 60 * 60
MAX_CHECKS = MAX_WAIT_SECONDS // POLL_SECONDS + 10


def wait_bound(observed_at: datetime, horizon_seconds: int) -> datetime:
    """Until when the swap waits for a commit (or for room under the cap)."""
    return observed_at + timedelta(seconds=min(horizon_seconds, MAX_WAIT_SECONDS))


@dataclass(frozen=True)
class Reading:
    """One look at the job's checkpoints: its newest verified step and that manifest's commit time."""

    step: int | None
    committed_at: datetime | None


def is_next_commit(baseline: int | None, reading: Reading, verdict_at: datetime, first: bool) -> bool:
    """The reading is the commit waited for: newer than the first reading's, or, at the first
    reading, a manifest dated at or after the verdict (its save ended after the signal came)."""
    if reading.step is None:
        return False
    if first:
        return reading.committed_at is not None and reading.committed_at >= verdict_at
    return baseline is None or reading.step > baseline


def measured_interval(baseline_at: datetime | None, committed_at: datetime | None) -> float | None:
    """The job's checkpoint period as two of its consecutive commits measure it (None: not two seen)."""
    if baseline_at is None or committed_at is None or committed_at <= baseline_at:
        return None
    return (committed_at - baseline_at).total_seconds()


def next_wait_seconds(now: datetime, bound: datetime) -> int:
    """The next look: POLL_SECONDS on, never past the bound (at least 1 s)."""
    left = (bound - now).total_seconds()
    return max(1, min(POLL_SECONDS, int(left)))
