"""Lock Nodes: one live recovery per node. A node locked by another incident is left to it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.models.node_recovery import LockNodesInput, LockResult

if TYPE_CHECKING:
    from hyperpod_recovery.ports import NodeLocks


def lock_nodes(step: LockNodesInput, *, ledger: NodeLocks, lock_ttl: timedelta, now: datetime) -> LockResult:
    """In a dry run the ledger is behind the gate (adapters/dry_run.py): it answers with the locks
    as they are and takes none, so a drill never blocks a real recovery."""
    request = step.request
    outcome = ledger.acquire_locks(step.execution_name, request.cluster, request.node_ids, now, lock_ttl)
    return LockResult(
        at=now,
        locked=outcome.acquired,
        held_elsewhere=outcome.held_elsewhere,
        dry_run=bool(request.dry_run),
        proceed=bool(outcome.acquired),
    )
