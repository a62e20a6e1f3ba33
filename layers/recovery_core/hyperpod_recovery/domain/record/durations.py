"""Phase durations of an incident, as the figures the dashboard and the recovery-time alarm read.

Computed from the incident record (the same phases the drill report draws), so the metric, the
ledger and the report cannot disagree. Dry runs report nothing: their "waits" are not waits.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery import metric_names as m

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import IncidentRecord


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None or end < start:
        return None
    return round((end - start).total_seconds(), 3)


def phase_durations(record: IncidentRecord) -> dict[str, float]:
    """{metric name: seconds} for the phases this incident went through."""
    if record.dry_run:
        return {}
    # The step the workflow ended in (a cordon never answered, a replacement that never rejoined) is
    # a phase too, ending with the outcome: no figure for it. A cordon or a wait for rejoin that did
    # finish had another step after it, so it ended before; resubmit is the last step either way.
    ends = {p.name: p.end for p in record.phases if p.end < record.recorded_at or p.name == "resubmit"}
    starts = {p.name: p.start for p in record.phases}
    # Jobs resubmitted at once and jobs resubmitted after the rejoin are two resubmit phases.
    resubmitted = sorted(p.end for p in record.phases if p.name == "resubmit")
    rejoined = ends.get("wait_for_rejoin")
    figures: dict[str, float | None] = {}
    if record.workflow == "node":
        figures[m.DETECT_TO_CORDON] = _seconds(record.detected_at, ends.get("cordon"))
        figures[m.REPLACE_TO_REJOIN] = _seconds(starts.get("wait_for_rejoin"), rejoined)
        figures[m.DETECT_TO_RESUBMIT] = _seconds(record.detected_at, resubmitted[0] if resubmitted else None)
        after_rejoin = [end for end in resubmitted if rejoined is not None and end >= rejoined]
        figures[m.REJOIN_TO_RESUBMIT] = _seconds(rejoined, after_rejoin[-1] if after_rejoin else None)
    total = _seconds(record.detected_at, record.recorded_at)
    if record.outcome == "recovered":
        figures[m.TIME_TO_RECOVER if record.workflow == "node" else m.JOB_TIME_TO_RECOVER] = total
    elif record.outcome == "escalated":
        figures[m.TIME_TO_ESCALATE if record.workflow == "node" else m.JOB_TIME_TO_ESCALATE] = total
    return {name: value for name, value in figures.items() if value is not None}


# --- how durations are written for people (drill report, drill CLI, notifications) -----------
def format_duration(seconds: float | None) -> str:
    """``10m 30.2s``, ``2.2s``; ``-`` for unknown."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)}m {secs:04.1f}s" if minutes else f"{secs:.1f}s"


def offset_text(seconds: float) -> str:
    """A point on a timeline, as a clock offset: ``10:35``, ``1:02:03``."""
    minutes, secs = divmod(max(0, int(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
