"""Record Swap Outcome (PlannedSwap): the swap's record in the ledger, and its notification, once
however often the step runs (the notification is an effect of the swap, INCIDENT#<swap>/EFFECT#notification)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.planned_swap.record import swap_message, swap_record
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.planned_swap import RecordSwapOutcomeInput
    from hyperpod_recovery.ports import Notifier, SwapEnd

NOTIFICATION = "notification"


def record_swap_outcome(
    step: RecordSwapOutcomeInput, *, ledger: SwapEnd, notifier: Notifier, cluster: str, now: datetime
) -> dict[str, Any]:
    record = swap_record(step.state, step.execution_name, cluster, now)
    effect = ledger.begin_effect(record.swap_id, NOTIFICATION, now)
    if effect.done_at is not None and effect.result:
        return _answer(effect.result, record.swap_id, step)  # (a rerun after a lost answer: the same, nothing sent)
    ledger.save_swap(record)
    subject, body = swap_message(record)
    notifier.publish(subject, body, {"outcome": record.outcome, "cluster": cluster, "workflow": "swap", "incident": record.swap_id})
    ledger.finish_effect(record.swap_id, NOTIFICATION, now, record.outcome)
    logger.info("planned swap recorded", extra={"swap": record.swap_id, "outcome": record.outcome})
    return _answer(record.outcome, record.swap_id, step)


def _answer(outcome: str, swap_id: str, step: RecordSwapOutcomeInput) -> dict[str, Any]:
    """What the execution ends with; an escalation's Fail state names the original error and cause."""
    answer: dict[str, Any] = {"outcome": outcome, "swap_id": swap_id}
    if outcome in ("escalated", "rejected"):
        errors = step.state.errors or {}
        answer["error"] = str(errors.get("Error") or "PlannedSwapFailed")[:256]
        answer["cause"] = str(errors.get("Cause") or "the planned swap ended without moving the job or deciding not to")[:4096]
    return answer
