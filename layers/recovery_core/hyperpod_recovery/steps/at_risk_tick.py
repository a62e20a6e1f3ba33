"""At Risk's tick (template.yaml AtRiskTickFunction, every 15 minutes): each pending at-risk verdict's
outcome once the ledger knows it (the node failed within the horizon, with its incident; a planned
swap took the node; the horizon passed), at most MAX_SETTLED_PER_TICK a tick, oldest first; then the
ledger's node history since the last tick (a node an incident gave back to service is at risk)."""

from __future__ import annotations

from datetime import timedelta

from hyperpod_recovery.domain.at_risk.history import history_reports
from hyperpod_recovery.domain.at_risk.outcomes import node_failures, settle
from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.at_risk_verdicts import AtRiskPorts, keep

__all__ = ["AtRiskPorts", "tick"]

# The tick's bounds: verdicts settled per run (the rest wait for the next tick, oldest first), and
# incidents read (the node failures a pending verdict may have hit; the incidents a node history
# reads). Past them the tick counts what it left.
MAX_SETTLED_PER_TICK = 100
MAX_INCIDENTS_READ = 500
FIRST_TICK_LOOKBACK = timedelta(hours=1)


def tick(ports: AtRiskPorts) -> None:
    """The schedule's tick: settle the pending verdicts whose outcome is known (bounded), then the
    ledger's node history since the last tick."""
    settle_outcomes(ports)
    read_node_history(ports)


def settle_outcomes(ports: AtRiskPorts) -> None:
    now, counts = ports.now, ports.counts
    window = timedelta(seconds=ports.settings.longest_horizon_seconds) + timedelta(days=1)
    pending = [r for r in ports.ledger.at_risk_records(ports.cluster_name, since=now - window) if r.outcome == "pending"]
    if not pending:
        return
    oldest = min(r.verdict.observed_at for r in pending)
    failures = node_failures(ports.ledger.incidents(ports.cluster_name, since=oldest, limit=MAX_INCIDENTS_READ))
    for record in pending:
        settled = settle(record, failures, now)
        if settled is None:
            continue
        if counts["settled"] >= MAX_SETTLED_PER_TICK:
            counts["settle_left"] += 1
            continue
        if ports.ledger.settle_at_risk(record, settled):
            counts["settled"] += 1
            counts[f"outcome_{settled.outcome}"] += 1
            logger.info("at-risk verdict settled", extra={"verdict": record.verdict.verdict_id, "outcome": settled.outcome})


def read_node_history(ports: AtRiskPorts) -> None:
    if ports.settings.of("node_history").mode == "off":
        return
    since = ports.ledger.at_risk_ticked_until(ports.cluster_name) or ports.now - FIRST_TICK_LOOKBACK
    lookback = ports.ledger.incidents(ports.cluster_name, since=ports.now - timedelta(days=ports.history_days), limit=MAX_INCIDENTS_READ)
    returned = [i for i in lookback if i.recorded_at >= since]
    for report in history_reports(returned, lookback, ports.history_days, since):
        keep(report, ports, check_age=False)
    ports.ledger.save_at_risk_ticked_until(ports.cluster_name, ports.now)
