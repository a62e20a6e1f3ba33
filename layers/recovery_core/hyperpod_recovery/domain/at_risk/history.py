"""The ledger's own node history as a signal (node_history): a node whose incident gave it back to
service (the same instance, not a replacement) has failed within the last N days, so it is at risk
for the signal's horizon. One verdict per such incident (its episode: the incident's record)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.at_risk.outcomes import NodeFailure, node_failures
from hyperpod_recovery.domain.at_risk.signals import SignalReport, evidence_lines

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import IncidentRecord

SIGNAL = "node_history"


def back_in_service(incident: IncidentRecord) -> list[tuple[str, str]]:
    """(instance, node name) of each node the incident left in service as the same instance."""
    return [
        (fate.instance, fate.node)
        for fate in incident.node_fates
        if fate.fate == "in_service" and fate.instance and fate.replacement is None
    ]


def history_reports(
    returned: Sequence[IncidentRecord], lookback: Sequence[IncidentRecord], days: int, since: datetime
) -> list[SignalReport]:
    """A report per node given back to service by an incident of ``returned``, naming every failure
    of the node within ``lookback`` (the last ``days`` days)."""
    failures: list[NodeFailure] = node_failures(lookback)
    reports = []
    for incident in returned:
        if incident.workflow != "node" or incident.recorded_at < since:
            continue
        for instance, node in back_in_service(incident):
            mine = [f for f in failures if f.instance_id == instance]
            said = {
                "returned_by": incident.incident_id,
                "failures_in_window": f"{max(len(mine), 1)} in the last {days} day(s): "
                + ", ".join(f"{f.incident} at {f.at:%Y-%m-%d %H:%M} UTC" for f in mine[-5:]),
                "summary": incident.summary[:300],
            }
            reports.append(
                SignalReport(
                    signal=SIGNAL,
                    source="ledger_history",
                    instance_id=instance,
                    hostname=node,
                    episode_at=incident.recorded_at,
                    cluster=incident.cluster,
                    evidence=evidence_lines(said),
                    where=f"incident {incident.incident_id}",
                )
            )
    return reports
