"""Whether each verdict's node failed within its horizon, and each signal's precision and recall.

A node failure is a node incident in the ledger (NodeRecovery, dry run or not) that names the
instance; a planned swap's own incident (execution ``hps-...``) is not a failure. A verdict is:
failed (its node failed within [observed_at, observed_at + horizon]; the incident named), swapped (its
planned swap's record says it took the node out of service, ``moved`` or ``node_repaired`` and not a
dry run: whether it would have failed is unknown, so it counts in neither precision nor recall),
not_failed (the horizon passed without a failure), else pending. A swap that left the node in service
(left, no_commit, yielded, job_gone, ...; any dry run) settles like an observed verdict; one whose
record is not written yet keeps its verdict pending, until SWAP_RECORD_GRACE past the horizon.

precision = failed / (failed + not_failed); recall = the node failures in the window that a verdict
of the signal preceded within its horizon / every node failure in the window.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hyperpod_recovery.models.at_risk import AtRiskRecord
    from hyperpod_recovery.models.planned_swap import SwapRecord
    from hyperpod_recovery.models.records import IncidentRecord

PLANNED_SWAP_PREFIX = "hps-"
# The swap outcomes that took the node out of service (the others left it where it was).
TOOK_NODE_OUT = frozenset({"moved", "node_repaired"})
# How long past a verdict's horizon its swap's record may still come (a swap waits at most an hour for
# a commit, then its nested recovery runs for hours); within the tick's read window (horizon + 1 day).
SWAP_RECORD_GRACE = timedelta(hours=12)
# settle()'s swap argument when the swap's record was not read (the CLI, the stats): the verdict of an
# enforced signal with no failure stays as it is.
UNREAD: Literal["unread"] = "unread"


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


def needs_swap_record(record: AtRiskRecord, failures: Sequence[NodeFailure]) -> bool:
    """Whether settling the record needs its planned swap's record (a pending one with a swap and no failure)."""
    return record.outcome == "pending" and record.execution is not None and _hit(record, failures) is None


def took_node_out(swap: SwapRecord) -> bool:
    return swap.outcome in TOOK_NODE_OUT and not swap.dry_run


def settle(
    record: AtRiskRecord, failures: Sequence[NodeFailure], now: datetime, swap: SwapRecord | Literal["unread"] | None = UNREAD
) -> AtRiskRecord | None:
    """The record with its outcome once it is known; None while it stays pending (or was settled).
    ``swap``: its planned swap's record as read (None: not written), or UNREAD."""
    if record.outcome != "pending":
        return None
    hit = _hit(record, failures)
    if hit is not None:
        return record.model_copy(update={"outcome": "failed", "incident": hit.incident, "failed_at": hit.at, "settled_at": now})
    horizon_end = record.verdict.observed_at + timedelta(seconds=record.verdict.horizon_seconds)
    if record.execution is not None:
        if isinstance(swap, str):  # (UNREAD)
            return None
        if swap is None:
            # Never written (the swap never started, or ended before recording): whether it took the
            # node is unknown, so the verdict counts in neither measure, as one that did.
            return record.model_copy(update={"outcome": "swapped", "settled_at": now}) if now >= horizon_end + SWAP_RECORD_GRACE else None
        if took_node_out(swap):
            return record.model_copy(update={"outcome": "swapped", "settled_at": now})
    if now >= horizon_end:
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


def signal_stats(
    records: Sequence[AtRiskRecord], failures: Sequence[NodeFailure], now: datetime, since: datetime | None = None
) -> list[SignalStats]:
    """Per signal, by name: each record observed since ``since`` as it would settle now (a pending one
    read afresh), and the failures since ``since`` that a verdict (one observed earlier too) caught."""
    seen = [settle(r, failures, now) or r for r in records]
    failures = [f for f in failures if since is None or f.at >= since]
    stats = []
    for signal in sorted({r.verdict.signal for r in seen}):
        every = [r for r in seen if r.verdict.signal == signal]
        mine = [r for r in every if since is None or r.verdict.observed_at >= since]
        caught = {
            (f.instance_id, f.at)
            for f in failures
            for r in every
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
