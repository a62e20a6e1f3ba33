"""How a planned swap ended, in its record's words and numbers, and the message that says it. Pure.

The swap's record says what it decided and why (both expected costs and where each figure came from),
which commit the job moved from, and what the nested NodeRecovery did; that incident keeps its own
record (the node's repair, the job's new copy). Every sentence is written from these facts.
"""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.models.planned_swap import SwapOutcome, SwapRecord, SwapState

# The nested NodeRecovery's outcome -> the swap's, for a swap that moved (or would have).
_NESTED: dict[str, SwapOutcome] = {"recovered": "moved", "dry_run": "dry_run", "duplicate": "yielded", "capped": "cap_full"}
_ENDING: dict[str, SwapOutcome] = {
    "leave": "left",
    "no_commit": "no_commit",
    "node_failed": "yielded",
    "job_gone": "job_gone",
    "job_unknown": "job_unknown",
    "cap_full": "cap_full",
}
_HEADLINE: dict[SwapOutcome, str] = {
    "moved": "the job moved off the node at risk after its checkpoint commit",
    "node_repaired": "the node at risk was taken out for its repair (no job ran on it)",
    "left": "the job was left on the node at risk (the expected costs)",
    "no_commit": "no checkpoint commit came within the wait: nothing was moved",
    "yielded": "the node is another recovery's now: the swap made none",
    "job_gone": "the job left the node before its commit: nothing was moved",
    "job_unknown": "which job runs on the node could not be told: nothing was moved",
    "cap_full": "the cap or the breaker left no room within the wait: nothing was moved",
    "dry_run": "dry run: what the swap would have done (nothing was touched)",
    "escalated": "the planned swap failed: a human should look",
    "rejected": "the planned swap request was rejected",
}


def swap_outcome(state: SwapState) -> SwapOutcome:
    swap, watch = state.swap, state.watch
    if swap is None:
        return "rejected" if _error_name(state) == "InvalidRecoveryRequest" else "escalated"
    if watch is None or not watch.done:
        return "escalated"
    if watch.ending == "move":
        nested = str((state.node_recovery or {}).get("outcome", {}).get("outcome", "")) if state.node_recovery else ""
        if state.errors or not nested:
            return "escalated"
        if nested == "recovered" and swap.job_id is None:
            return "node_repaired"
        return _NESTED.get(nested, "escalated")
    if swap.request.dry_run and watch.ending == "leave" and watch.cost is not None:
        return "dry_run"
    return _ENDING.get(watch.ending or "", "escalated")


def swap_record(state: SwapState, swap_id: str, cluster: str, now: datetime) -> SwapRecord:
    outcome = swap_outcome(state)
    swap, watch = state.swap, state.watch
    verdict = swap.request.verdict if swap is not None else None
    nested = state.node_recovery or {}
    nested_outcome = nested.get("outcome", {}).get("outcome") if isinstance(nested.get("outcome"), dict) else None
    parts = [_HEADLINE[outcome]]
    if swap is not None:
        parts.append(swap.said)
    if watch is not None and watch.reason:
        parts.append(watch.reason)
    if watch is not None and watch.committed_at is not None and watch.seen_at is not None:
        parts.append(
            f"commit of step {watch.committed_step} at {watch.committed_at:%H:%M:%S} UTC (manifest), "
            f"seen {max(0.0, (watch.seen_at - watch.committed_at).total_seconds()):.0f} s later"
        )
    if nested_outcome:
        parts.append(f"node recovery {watch.node_execution_name if watch else ''}: {nested_outcome}")
    if state.errors:
        parts.append(f"{_error_name(state)}: {str(state.errors.get('Cause', ''))[:600]}")
    return SwapRecord(
        swap_id=swap_id,
        cluster=cluster,
        verdict_id=verdict.verdict_id if verdict else None,
        signal=verdict.signal if verdict else None,
        node_id=swap.node_id if swap else None,
        node=swap.node if swap else None,
        job_id=swap.job_id if swap else None,
        outcome=outcome,
        dry_run=bool(swap.request.dry_run) if swap else False,
        summary="; ".join(p for p in parts if p)[:4096],
        checkpoint_step=watch.committed_step if watch else None,
        committed_at=watch.committed_at if watch else None,
        seen_at=watch.seen_at if watch else None,
        cost=watch.cost if watch else None,
        nested_incident=watch.node_execution_name if watch and watch.ending == "move" else None,
        nested_outcome=str(nested_outcome)[:32] if nested_outcome else None,
        observed_at=verdict.observed_at if verdict else None,
        recorded_at=now,
    )


def swap_message(record: SwapRecord) -> tuple[str, str]:
    """The notification's subject and body."""
    where = f"{record.node or record.node_id or 'a node'}" + (f", job {record.job_id}" if record.job_id else "")
    subject = f"[hyperpod-recovery] {record.cluster}: planned swap {record.outcome} ({where})"[:100]
    lines = [record.summary]
    if record.cost is not None:
        swap_h, keep_h = record.cost.swap_node_seconds / 3600, record.cost.keep_node_seconds / 3600
        lines.append(f"Expected cost: swap {swap_h:,.2f} node-h, leave {keep_h:,.2f} node-h.")
        lines += [f"  {f.name} = {f.value:g} ({f.source})" for f in record.cost.figures]
    if record.nested_incident:
        lines.append(f"The move's incident: {record.nested_incident} (hyperpod-recovery incidents show {record.nested_incident}).")
    lines.append(f"The verdict: {record.verdict_id} ({record.signal}).")
    lines.append(f"Planned swap: {record.swap_id}")
    return subject, "\n".join(lines)


def _error_name(state: SwapState) -> str:
    return str((state.errors or {}).get("Error", "")) or "unknown"
