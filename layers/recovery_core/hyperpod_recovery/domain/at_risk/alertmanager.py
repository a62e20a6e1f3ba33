"""An Alertmanager message as Amazon Managed Service for Prometheus's alert manager publishes it to
SNS, rendered by the documented JSON template (``sns.default.message``, AMP user guide "Configure
alert manager to send messages to Amazon SNS as JSON"): ``{"receiver", "status", "alerts": [{"status",
"labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}]}``.

The convention (docs/runbook.md "At-risk signals"): an alert names its signal in the label
``hyperpod_recovery_signal`` and its node in ``instance_id`` (else ``node``, ``Hostname``,
``hostname`` or ``instance``); ``hyperpod_cluster``, when present, must be the stack's cluster.
Only firing alerts are signals; a resolved one is news of nothing to do.

The default plain-text body, a body SNS cut (message attribute ``truncated=true``: AMP user guide
"SNS receiver message validation and truncation rules") and a body that is not the template's JSON
are refused with why (UnreadableSignal), never read in part.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from hyperpod_recovery.domain.at_risk.signals import SignalReport, UnreadableSignal, evidence_lines, node_identity, signal_name

SIGNAL_LABEL = "hyperpod_recovery_signal"
CLUSTER_LABEL = "hyperpod_cluster"
# Where a DCGM alert's node may be named, first found wins: ours, then dcgm-exporter's Hostname
# (NODE_NAME on Kubernetes), then Prometheus's instance (host:port; on HyperPod Slurm the
# observability collector relabels it to the hostname).
NODE_LABELS = ("instance_id", "node", "Hostname", "hostname", "instance")
MAX_ALERTS = 100  # one message's alerts read (a larger group is logged and cut: Alertmanager groups by its route)
# Go's time.Time String(), which the template's {{ $alerts.StartsAt }} renders.
_GO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d+)? ([+-]\d{4})(?: [A-Z]+)?$")


def parse_alertmanager(message: str, attributes: dict[str, str]) -> tuple[list[SignalReport], dict[str, int]]:
    """The firing alerts that follow the convention, and counts of the rest (resolved, not_ours)."""
    if attributes.get("truncated", "").lower() == "true":
        raise UnreadableSignal("the alert manager's message was truncated by SNS (attribute truncated=true): not read in part")
    try:
        body = json.loads(message)
    except ValueError as exc:
        raise UnreadableSignal(
            "not JSON: the alert manager sends plain text unless its template_files define sns.default.message as JSON "
            f"(docs/runbook.md At-risk signals) ({str(exc)[:80]})"
        ) from exc
    if not isinstance(body, dict) or not isinstance(body.get("alerts"), list):
        raise UnreadableSignal("not the alert manager's JSON template: no 'alerts' list")
    counts: dict[str, int] = {}
    reports: list[SignalReport] = []
    for alert in body["alerts"][:MAX_ALERTS]:
        kind = _read(alert, reports)
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    if len(body["alerts"]) > MAX_ALERTS:
        counts["alerts_cut"] = len(body["alerts"]) - MAX_ALERTS
    return reports, counts


def _read(alert: Any, reports: list[SignalReport]) -> str | None:
    if not isinstance(alert, dict):
        return "unreadable"
    labels = {str(k): str(v) for k, v in (alert.get("labels") or {}).items()}
    if SIGNAL_LABEL not in labels:
        return "not_ours"
    if alert.get("status") != "firing":
        return "resolved"
    where = f"alert {labels.get('alertname', '?')[:100]}"
    signal = signal_name(labels[SIGNAL_LABEL], where)
    named = next((labels[key] for key in NODE_LABELS if labels.get(key)), None)
    if named is None:
        raise UnreadableSignal(f"{where}: names no node (labels {', '.join(NODE_LABELS)})")
    instance_id, hostname = node_identity(named)
    annotations = {f"annotation.{k}": str(v) for k, v in (alert.get("annotations") or {}).items()}
    reports.append(
        SignalReport(
            signal=signal,
            source="alertmanager",
            instance_id=instance_id,
            hostname=hostname,
            episode_at=parse_time(str(alert.get("startsAt", "")), where),
            cluster=labels.get(CLUSTER_LABEL),
            evidence=evidence_lines({**labels, **annotations}),
            where=where,
        )
    )
    return None


def parse_time(text: str, where: str) -> datetime:
    """RFC 3339, or Go's time.Time String() (what the documented template renders)."""
    go = _GO_TIME.fullmatch(text.strip())
    if go:
        fraction = (go[3] or "")[:7]
        text = f"{go[1]}T{go[2]}{fraction}{go[4][:3]}:{go[4][3:]}"
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UnreadableSignal(f"{where}: startsAt {text[:40]!r} is not a time") from exc
    if moment.tzinfo is None:
        raise UnreadableSignal(f"{where}: startsAt {text[:40]!r} has no time zone")
    return moment.astimezone(UTC)
