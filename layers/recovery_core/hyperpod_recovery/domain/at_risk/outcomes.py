"""Whether each verdict's node failed within its horizon, and each signal's precision and recall.

A node failure is a node incident in the ledger (NodeRecovery, dry run or not) that names the
instance; a planned swap's own incident (execution ``hps-...``) is not a failure. A verdict is:
failed (its node failed within [observed_at, observed_at + horizon]; the incident named), swapped (a
planned swap took the node out first: whether it would have failed is unknown, so it counts in
neither precision nor recall), not_failed (the horizon passed without a failure), else pending.

precision = failed / (failed + not_failed); recall = the node failures in the window that a verdict
of the signal preceded within its horizon / every node failure in the window.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_recovery.models.at_risk import AtRiskRecord
    from hyperpod_recovery.models.records import IncidentRecord

PLANNED_SWAP_PREFIX = "hps-"


@dataclass(frozen=True)
class NodeFailure:
    instance_id: str
    at: datetime
    incident: str


def node_failures(incidents: Iterable[IncidentRecord]) -> list[NodeFailure]:
    """Each node of each node incident, oldest first (a planned swap's incident is not a failure)."""
    failures = [
        NodeFailure(node, incident.detected_at or incident.recorded_at, incident.incident_id)
        for incident in incidents
        if incident.workflow == "node" and not incident.incident_id.startswith(PLANNED_SWAP_PREFIX)
        for node in incident.nodes
    ]
    return sorted(failures, key=lambda f: (f.at, f.instance_id))


def _hit(record: AtRiskRecord, failures: Sequence[NodeFailure]) -> NodeFailure | None:
    verdict = record.verdict
    end = verdict.observed_at + timedelta(seconds=verdict.horizon_seconds)
    return next((f for f in failures if f.instance_id == verdict.instance_id and verdict.observed_at <= f.at <= end), None)


def settle(record: AtRiskRecord, failures: Sequence[NodeFailure], now: datetime) -> AtRiskRecord | None:
    """The record with its outcome once it is known; None while it stays pending (or was settled)."""
    if record.outcome != "pending":
        return None
    hit = _hit(record, failures)
    if hit is not None:
        return record.model_copy(update={"outcome": "failed", "incident": hit.incident, "failed_at": hit.at, "settled_at": now})
    if record.execution is not None:
        return record.model_copy(update={"outcome": "swapped", "settled_at": now})
    if now >= record.verdict.observed_at + timedelta(seconds=record.verdict.horizon_seconds):
        return record.model_copy(update={"outcome": "not_failed", "settled_at": now})
    return None


@dataclass(frozen=True)
class SignalStats:
    signal: str
    verdicts: int
    failed: int
    not_failed: int
    pending: int
    swapped: int
    caught: int  # node failures in the window a verdict of this signal preceded within its horizon
    failures: int  # every node failure in the window

    @property
    def precision(self) -> float | None:
        settled = self.failed + self.not_failed
        return self.failed / settled if settled else None

    @property
    def recall(self) -> float | None:
        return self.caught / self.failures if self.failures else None


def signal_stats(records: Sequence[AtRiskRecord], failures: Sequence[NodeFailure], now: datetime) -> list[SignalStats]:
    """Per signal, by name: each record as it would settle now (a pending one read afresh), and the
    failures it caught."""
    seen = [settle(r, failures, now) or r for r in records]
    stats = []
    for signal in sorted({r.verdict.signal for r in seen}):
        mine = [r for r in seen if r.verdict.signal == signal]
        caught = {
            (f.instance_id, f.at)
            for f in failures
            for r in mine
            if r.outcome != "swapped" and r.verdict.instance_id == f.instance_id
            and r.verdict.observed_at <= f.at <= r.verdict.observed_at + timedelta(seconds=r.verdict.horizon_seconds)
        }  # fmt: skip
        stats.append(
            SignalStats(
                signal=signal,
                verdicts=len(mine),
                failed=sum(r.outcome == "failed" for r in mine),
                not_failed=sum(r.outcome == "not_failed" for r in mine),
                pending=sum(r.outcome == "pending" for r in mine),
                swapped=sum(r.outcome == "swapped" for r in mine),
                caught=len(caught),
                failures=len({(f.instance_id, f.at) for f in failures}),
            )
        )
    return stats
