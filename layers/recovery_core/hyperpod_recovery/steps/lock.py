"""Lock Nodes: one live recovery per node. A node locked by another incident is left to it."""

from __future__ import annotations

from datetime import datetime, timedelta

from hyperpod_recovery.models.workflow import LockNodesInput, LockResult
from hyperpod_recovery.ports import Ledger


def lock_nodes(step: LockNodesInput, *, ledger: Ledger, lock_ttl: timedelta, now: datetime) -> LockResult:
    request = step.request
    incident = step.execution_name
    if request.dry_run:
        # A drill must not block a real recovery: look at the locks, take none.
        holders = ledger.lock_holders(request.cluster, request.node_ids, now)
        held = {n: i for n, i in holders.items() if i != incident}
        locked = [n for n in request.node_ids if n not in held]
        return LockResult(at=now, locked=locked, held_elsewhere=held, dry_run=True, proceed=bool(locked))
    outcome = ledger.acquire_locks(incident, request.cluster, request.node_ids, now, lock_ttl)
    return LockResult(at=now, locked=outcome.acquired, held_elsewhere=outcome.held_elsewhere, proceed=bool(outcome.acquired))
