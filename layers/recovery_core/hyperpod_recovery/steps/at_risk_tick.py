"""At Risk's tick (template.yaml AtRiskTickFunction, every 15 minutes): each pending at-risk verdict's
outcome once the ledger knows it (the node failed within the horizon, with its incident; its planned
swap's record says it took the node out; the horizon passed), at most MAX_SETTLED_PER_TICK a tick,
oldest first; then the ledger's node history since the last tick (a node an incident gave back to
service is at risk)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.at_risk.history import history_reports
from hyperpod_recovery.domain.at_risk.kubernetes import condition_reports, event_reports
from hyperpod_recovery.domain.at_risk.outcomes import needs_swap_record, node_failures, settle
from hyperpod_recovery.domain.nodes.eks_provider_id import instance_of_provider_id
from hyperpod_recovery.errors import KubeAccessDenied, KubeRequestRejected, KubeThrottled, KubeUnavailable
from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.at_risk_verdicts import AtRiskPorts, keep

if TYPE_CHECKING:
    from hyperpod_recovery.ports import KubeApi

__all__ = ["AtRiskPorts", "tick"]

# The tick's bounds: verdicts settled per run (the rest wait for the next tick, oldest first), and
# incidents read (the node failures a pending verdict may have hit; the incidents a node history
# reads), planned swap records read (one GetItem each). Past them the tick counts what it left.
MAX_SETTLED_PER_TICK = 100
MAX_INCIDENTS_READ = 500
MAX_SWAP_RECORDS_READ = 100
FIRST_TICK_LOOKBACK = timedelta(hours=1)


def tick(ports: AtRiskPorts) -> None:
    """The schedule's tick: settle the pending verdicts whose outcome is known (bounded), the ledger's
    node history since the last tick, and on EKS the nodes' warning-only fault conditions and events."""
    settle_outcomes(ports)
    read_node_history(ports)
    if ports.kube is not None:
        read_kubernetes(ports, ports.kube)


def read_kubernetes(ports: AtRiskPorts, kube: KubeApi) -> None:
    """One read of the nodes and their events; each report not kept yet (the ledger, read once from
    the oldest episode seen: a standing condition is not written again every tick) is judged and kept.
    A Kubernetes API that cannot be read is counted and logged: the outcomes above are settled."""
    try:
        nodes = kube.list_nodes()
        reports = condition_reports(nodes)
        reports += event_reports(kube.list_node_events(), _instances(nodes))
    except (KubeUnavailable, KubeAccessDenied, KubeThrottled, KubeRequestRejected) as exc:
        ports.counts["kubernetes_unread"] += 1
        logger.warning("could not read the nodes' conditions and events; the next tick does", extra={"error": str(exc)[:300]})
        return
    if not reports:
        return
    kept = {(r.verdict.signal, r.verdict.instance_id, r.episode_at) for r in ports.ledger.at_risk_records(
        ports.cluster_name, since=min(r.episode_at for r in reports))}  # fmt: skip
    for report in reports:
        if (report.signal, report.instance_id, report.episode_at) in kept:
            ports.counts["standing"] += 1
            continue
        keep(report, ports, check_age=False)
        kept.add((report.signal, report.instance_id or "", report.episode_at))


def _instances(nodes: list[dict[str, Any]]) -> dict[str, str]:
    found = {}
    for node in nodes:
        instance = instance_of_provider_id((node.get("spec") or {}).get("providerID"))
        if instance:
            found[str((node.get("metadata") or {}).get("name", ""))] = instance
    return found


def settle_outcomes(ports: AtRiskPorts) -> None:
    now, counts = ports.now, ports.counts
    window = timedelta(seconds=ports.settings.longest_horizon_seconds) + timedelta(days=1)
    pending = [r for r in ports.ledger.at_risk_records(ports.cluster_name, since=now - window) if r.outcome == "pending"]
    if not pending:
        return
    oldest = min(r.verdict.observed_at for r in pending)
    failures = node_failures(ports.ledger.incidents(ports.cluster_name, since=oldest, limit=MAX_INCIDENTS_READ))
    for record in pending:
        if needs_swap_record(record, failures) and record.execution is not None:
            if counts["swap_records_read"] >= MAX_SWAP_RECORDS_READ:
                counts["swap_read_left"] += 1
                continue
            counts["swap_records_read"] += 1
            # (read only: the swap's record is Record Swap Outcome's; None until it is written)
            swap = ports.ledger.swap_record(record.execution)
            if swap is None:
                counts["swap_unrecorded"] += 1
            settled = settle(record, failures, now, swap)
        else:
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
