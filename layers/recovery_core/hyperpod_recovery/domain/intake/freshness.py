"""Is a signal fresh enough to act on without a human?

An event replayed from a backlog, a redrive of the dead-letter queue or an archive replay can be
days old: the node it names may have been healthy for days, and replacing it now would be the
automation causing an outage. An event stamped far in the future says a clock is wrong. Neither
is acted on automatically: the incident ends ``stale``, recorded and notified.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.errors import StaleEvent

if TYPE_CHECKING:
    from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest


@dataclass(frozen=True)
class EventAgeLimits:
    """template.yaml's MaxEventAgeSeconds and MaxClockSkewSeconds."""

    max_age_seconds: int
    max_skew_seconds: int

    def problem(self, stamped: datetime, now: datetime) -> str | None:
        """Why a signal stamped ``stamped`` must not be acted on at ``now``, or None."""
        age = (now - stamped).total_seconds()
        if age > self.max_age_seconds:
            return f"{_span(age)} old (stamped {stamped:%Y-%m-%d %H:%M:%S} UTC), older than MaxEventAgeSeconds {self.max_age_seconds}"
        if -age > self.max_skew_seconds:
            return (
                f"stamped {_span(-age)} in the future ({stamped:%Y-%m-%d %H:%M:%S} UTC), "
                f"more than MaxClockSkewSeconds {self.max_skew_seconds}: a clock is wrong"
            )
        return None


def drop_stale_nodes(request: RecoveryRequest, limits: EventAgeLimits, now: datetime) -> RecoveryRequest:
    """The request without the nodes whose every signal is stale (kept in ``request.stale``), or
    StaleEvent when no node has a fresh signal. A manual request is stamped when it arrives."""
    stale: dict[str, str] = {}
    for node_id in request.node_ids:
        problems = [limits.problem(t.detected_at, now) for t in request.triggers_of(node_id)]
        if problems and all(problems):
            stale[node_id] = str(problems[0])[:300]
    if not stale:
        return request
    if len(stale) == len(request.node_ids):
        details = "; ".join(f"{node}: signal {why}" for node, why in sorted(stale.items()))
        raise StaleEvent(f"not acted on automatically, every signal is stale: {details}"[:4000])
    fresh = [n for n in request.node_ids if n not in stale]
    triggers = [
        t.model_copy(update={"node_ids": [n for n in t.node_ids if n not in stale]})
        for t in request.triggers
        if set(t.node_ids) - set(stale) and not limits.problem(t.detected_at, now)
    ]
    return request.model_copy(
        update={"node_ids": fresh, "triggers": triggers, "detected_at": min(t.detected_at for t in triggers), "stale": stale}
    )


def check_job_event_fresh(request: JobRecoveryRequest, limits: EventAgeLimits, now: datetime) -> None:
    """A job failure reported long ago (a replayed event) is not acted on automatically either."""
    if request.source == "manual":
        return
    problem = limits.problem(request.detected_at, now)
    if problem:
        raise StaleEvent(f"not acted on automatically: the failure of job {request.job_id} was reported {problem}")


def _span(seconds: float) -> str:
    if seconds >= 2 * 86_400:
        return f"{seconds / 86_400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} hours"
    if seconds >= 120:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds:.0f} s"
