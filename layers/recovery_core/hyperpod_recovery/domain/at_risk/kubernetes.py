"""EKS: the node conditions and events that carry a GPU fault without a repair, as signals.

Conditions: HyperPod's health agent sets a node condition whose type is the fault type (Status True,
Reason the fault reason) besides its label and taint (../shared/reference/at-risk-signals.md §1.2).
A fault it repairs also makes the node's health-status label Unschedulable*: that is a failure, the
reactive path's. A condition of another type than Kubernetes' own, True while the label still says
Schedulable, is a fault HyperPod does not repair (its warning-only classes: Xid 94, Xid 163, the
thermal warning). ASSUMPTION (their keys are not published): the type or reason names the fault as
the signal table below reads it; an unnamed one is signal ``hma_warning``. Its episode is its
lastTransitionTime: the same standing condition seen at every tick is one verdict.

Events: the EKS node monitoring agent's taxonomy is the template ("Event: temporary issue, no auto
repair": NvidiaPageRetirement, NvidiaPCIeError, NvidiaPowerError, NvidiaThermalError,
DCGMFieldError<code>, DCGMHealthCode<code>, NvidiaXID<code>Warning): a Warning event about a Node with
such a reason is a signal; its episode is its firstTimestamp (or eventTime).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.at_risk.signals import SignalReport, evidence_lines, node_identity
from hyperpod_recovery.domain.nodes.eks_provider_id import instance_of_provider_id
from hyperpod_recovery.models.kubernetes import HEALTH_STATUS_LABEL

if TYPE_CHECKING:
    from hyperpod_recovery.models.at_risk import AtRiskSource

# Kubernetes' own node conditions, and HyperPod's (never a precursor).
OWN_CONDITIONS = frozenset({"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})
# What a fault's name says, first match wins (lower-cased, in the condition's type and reason or the event's reason).
SIGNAL_WORDS: tuple[tuple[str, str], ...] = (
    ("remap", "row_remap_pending"),
    ("drain", "recovery_action"),
    ("pageretire", "ecc_sbe_rate"),
    ("ecc", "ecc_sbe_rate"),
    ("pcie", "pcie_replay_rate"),
    ("nvlink", "nvlink_errors"),
    ("thermal", "thermal"),
    ("power", "thermal"),
    ("xid", "xid_warning"),
    ("dcgm", "xid_warning"),
)
UNNAMED = "hma_warning"
EVENT_REASON = re.compile(
    r"^(NvidiaPageRetirement|NvidiaPCIeError|NvidiaPowerError|NvidiaThermalError|DCGMFieldError\d*|DCGMHealthCode\d*|NvidiaXID\d+Warning)$"
)
MAX_SIGNALS_PER_READ = 200  # reports one read yields (the rest are the next tick's)


def signal_of(*names: str) -> str:
    said = " ".join(names).lower()
    return next((signal for word, signal in SIGNAL_WORDS if word in said), UNNAMED)


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else None


def _node_instance(node: dict[str, Any]) -> tuple[str | None, str]:
    name = str((node.get("metadata") or {}).get("name", ""))
    instance = instance_of_provider_id((node.get("spec") or {}).get("providerID")) or node_identity(name)[0]
    return instance, name


def _report(signal: str, source: AtRiskSource, instance: str, node: str, at: datetime, said: dict[str, str], where: str) -> SignalReport:
    """A signal read from the cluster's own Kubernetes API (so no other cluster's), its evidence what the object said."""
    return SignalReport(
        signal=signal,
        source=source,
        instance_id=instance,
        hostname=node,
        episode_at=at,
        cluster=None,
        evidence=evidence_lines(said),
        where=where,
    )


def condition_reports(nodes: list[dict[str, Any]]) -> list[SignalReport]:
    """Each warning-only fault condition of a node HyperPod has not marked for repair."""
    reports: list[SignalReport] = []
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if str(labels.get(HEALTH_STATUS_LABEL, "Schedulable")) != "Schedulable":
            continue  # (marked for reboot or replacement: a failure, the reactive path's)
        instance, name = _node_instance(node)
        for condition in (node.get("status") or {}).get("conditions") or []:
            kind = str(condition.get("type", ""))
            since = _time(condition.get("lastTransitionTime"))
            if kind in OWN_CONDITIONS or condition.get("status") != "True" or since is None or instance is None:
                continue
            said = {
                "node": name,
                "condition": kind,
                "reason": str(condition.get("reason", ""))[:200],
                "message": str(condition.get("message", ""))[:400],
                "since": str(condition.get("lastTransitionTime")),
            }
            signal = signal_of(kind, str(condition.get("reason", "")))
            reports.append(_report(signal, "eks_node_condition", instance, name, since, said, f"node condition {kind[:80]}"))
    return reports[:MAX_SIGNALS_PER_READ]


def event_reports(events: list[dict[str, Any]], instances: dict[str, str]) -> list[SignalReport]:
    """Each Warning event about a node whose reason is of the no-repair taxonomy; ``instances``: node name -> instance."""
    reports: list[SignalReport] = []
    for event in events:
        involved = event.get("involvedObject") or {}
        reason = str(event.get("reason", ""))
        if involved.get("kind") != "Node" or event.get("type") != "Warning" or not EVENT_REASON.fullmatch(reason):
            continue
        name = str(involved.get("name", ""))
        instance = instances.get(name) or node_identity(name)[0]
        first = _time(event.get("firstTimestamp")) or _time(event.get("eventTime"))
        if instance is None or first is None:
            continue
        said = {
            "node": name,
            "event": reason,
            "message": str(event.get("message", ""))[:400],
            "count": str(event.get("count", 1)),
            "first": str(event.get("firstTimestamp") or event.get("eventTime")),
            "last": str(event.get("lastTimestamp", "")),
        }
        reports.append(_report(signal_of(reason), "eks_node_event", instance, name, first, said, f"node event {reason}"))
    return reports[:MAX_SIGNALS_PER_READ]
