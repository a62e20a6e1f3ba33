"""Report Safety State (scheduled): the breaker and the cap's use, as gauges."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.models.node_recovery import SafetyState

if TYPE_CHECKING:
    from hyperpod_recovery.ports import SafetyRecords


def report_safety_state(*, ledger: SafetyRecords, cluster: str, now: datetime) -> SafetyState:
    """Report Safety State (every 5 minutes): the breaker and the cap's use, as gauges for the
    dashboard and the BreakerOpen alarm, which then stays red until a human resets the breaker."""
    breaker = ledger.breaker(cluster)
    return SafetyState(
        cluster=cluster,
        breaker_open=breaker.state == "open",
        breaker_reason=breaker.reason if breaker.state == "open" else None,
        breaker_changed_at=breaker.changed_at,
        nodes_in_recovery=len(ledger.nodes_in_recovery(cluster, now)),
    )
