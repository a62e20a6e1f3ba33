"""When to check again whether repaired nodes are back (Check Rejoin's next wait).

Every wait but the last (cut at the deadline) is at least the first wait, which domain/policy/limits.py
raises where needed: so a window of any length holds a bounded number of checks, and the
execution's history stays within Step Functions' bound.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import RejoinWatch


def next_wait_seconds(
    checks_done: int,
    initial: int,
    maximum: int,
    seconds_to_deadline: float,
    expected_in: float | None = None,
    *,
    announced: bool = False,
) -> int:
    """How long to wait before the next check, never past the deadline (the last check happens at
    the deadline rather than after it), and never below ``initial`` otherwise (domain/policy/limits.py
    counts the checks a window can hold by it).

    ``expected_in``: seconds until the replacements' typical end (negative once past it), for a
    watch of replacements; without it (a reboot, an earlier version's watch) the backoff is
    exponential, x2 per check from ``initial`` up to ``maximum``. With it:

    * before the typical end, on a cluster whose Cluster Events wake the wait (``announced``): wait
      for the end itself; a replacement back early is announced, only a lost event is seen late;
    * before it, on a cluster without them: half the time left, so checks thicken towards the
      expected end and a replacement back early is seen after at most half its earliness;
    * past it: as long as it is overdue, from ``initial`` up to ``maximum`` (a late replacement is
      most likely just late)."""
    if expected_in is None:
        wait: int = min(maximum, initial * 2 ** min(checks_done, 16))
    elif expected_in > 0:
        wait = math.ceil(expected_in) if announced else max(initial, math.ceil(expected_in / 2))
    else:
        wait = max(initial, min(maximum, math.floor(-expected_in)))
    return max(1, min(wait, int(seconds_to_deadline) + 1))


def expected_within(expected_seconds: int, deadline_seconds: int) -> int:
    """The typical duration the checks are paced by, at most half the deadline: an expectation at
    or past the deadline would leave a single check, at the deadline, to see an early return."""
    return max(1, min(expected_seconds, deadline_seconds // 2))


def expected_in(watch: RejoinWatch, now: datetime) -> float | None:
    """Seconds until the watch's replacements are typically back (negative past it), if it expects them."""
    return (watch.expected_at - now).total_seconds() if watch.expected_at is not None else None
