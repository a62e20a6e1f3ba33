"""The reasons of one recovery request share a budget: a storm's request stays far below Step Functions'
256 KiB state limit whatever its events say. Used by intake and by every request built later (a
job's node recovery), so it stands apart from intake's event translation."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_recovery.models.requests import Trigger

REQUEST_REASON_BUDGET = 16 * 1024  # characters, shared by the reasons of one request


def within_reason_budget(triggers: list[Trigger]) -> list[Trigger]:
    """Reasons shortened so that together they fit REQUEST_REASON_BUDGET (each keeps at least 80
    characters; what a reason recommends was read before, so nothing is decided on the cut text)."""
    if sum(len(t.reason) for t in triggers) <= REQUEST_REASON_BUDGET:
        return triggers
    each = max(80, REQUEST_REASON_BUDGET // len(triggers))
    return [t if len(t.reason) <= each else t.model_copy(update={"reason": t.reason[: each - 1] + "…"}) for t in triggers]
