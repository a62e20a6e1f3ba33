"""Whether an ended execution has anything left to do, and how long an end that recorded itself keeps
its locks: what Reconcile Execution and the sweep ask of every end first. Kept apart from
left_behind.py, which only an end that never recorded itself needs (its record and its page), so the
common end (recorded, nothing held) loads none of the record's wording."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.vocabulary import UNRECORDED_OUTCOMES

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import Effect, Holdings, IncidentRecord


def nothing_left(record: IncidentRecord, held: Holdings | None, page: Effect | None) -> bool:
    """Nothing is left to do for a recorded end: it holds nothing, and (when it never recorded
    itself) its notification went out. A page begun and not sent is still to send."""
    if held is not None and not held.empty:
        return False
    if page is not None and not page.done:
        return False
    if record.outcome not in UNRECORDED_OUTCOMES or record.notified_at is not None:
        return True
    return page is not None and page.done


def recorded_end_hold(record: IncidentRecord, escalation_hold: timedelta, now: datetime) -> datetime | None:
    """Until when an end that recorded itself keeps its locks: an escalation's hold, else none."""
    return now + escalation_hold if record.outcome == "escalated" else None
