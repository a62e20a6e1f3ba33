"""A CloudWatch alarm as an at-risk signal: its SNS notification (the alarm action's JSON message:
AlarmName, NewStateValue, StateChangeTime, Trigger.Dimensions) or EventBridge's "CloudWatch Alarm
State Change" (detail.alarmName, detail.state, detail.configuration.metrics[].metricStat.metric.dimensions).

The convention (docs/runbook.md "At-risk signals"): the alarm's name begins
``hyperpod-at-risk:<signal>:`` and its metric has the dimension ``InstanceId`` (else the name's
third part names the node: ``hyperpod-at-risk:thermal:i-0123456789abcdef0``); a ``ClusterName``
dimension, when present, must be the stack's cluster. Only the move into ALARM is a signal.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hyperpod_recovery.domain.at_risk.signals import SignalReport, UnreadableSignal, evidence_lines, node_identity, signal_name

ALARM_PREFIX = "hyperpod-at-risk:"


def is_at_risk_alarm(name: str) -> bool:
    return name.startswith(ALARM_PREFIX)


def parse_alarm_notification(message: str) -> SignalReport | None:
    """An alarm action's SNS message; None when it is not a move into ALARM of an at-risk alarm."""
    try:
        body = json.loads(message)
    except ValueError as exc:
        raise UnreadableSignal(f"a CloudWatch alarm notification that is not JSON ({str(exc)[:80]})") from exc
    if not isinstance(body, dict) or "AlarmName" not in body:
        raise UnreadableSignal("not a CloudWatch alarm notification: no AlarmName")
    name = str(body["AlarmName"])
    if not is_at_risk_alarm(name) or body.get("NewStateValue") != "ALARM":
        return None
    trigger = body.get("Trigger") or {}
    dimensions = {str(d.get("name")): str(d.get("value")) for d in trigger.get("Dimensions") or [] if isinstance(d, dict)}
    said = {
        "alarm": name,
        "reason": str(body.get("NewStateReason", ""))[:400],
        "metric": f"{trigger.get('Namespace', '')}/{trigger.get('MetricName', '')}",
        "threshold": f"{trigger.get('ComparisonOperator', '')} {trigger.get('Threshold', '')}",
    }
    return _report(name, dimensions, str(body.get("StateChangeTime", "")), said)


def parse_alarm_state_change(event: dict[str, Any]) -> SignalReport | None:
    """EventBridge's "CloudWatch Alarm State Change"; None when it is not a move into ALARM of an at-risk alarm."""
    detail = event.get("detail") or {}
    name = str(detail.get("alarmName", ""))
    state = detail.get("state") or {}
    if not is_at_risk_alarm(name) or state.get("value") != "ALARM":
        return None
    dimensions: dict[str, str] = {}
    for metric in (detail.get("configuration") or {}).get("metrics") or []:
        stat = (metric or {}).get("metricStat") or {}
        dimensions |= {str(k): str(v) for k, v in ((stat.get("metric") or {}).get("dimensions") or {}).items()}
    said = {"alarm": name, "reason": str(state.get("reason", ""))[:400]}
    return _report(name, dimensions, str(state.get("timestamp", "")), said)


def _report(name: str, dimensions: dict[str, str], changed: str, said: dict[str, str]) -> SignalReport:
    parts = name.split(":")
    where = f"alarm {name[:100]}"
    signal = signal_name(parts[1] if len(parts) > 1 else "", where)
    named = dimensions.get("InstanceId") or dimensions.get("NodeName") or (parts[2] if len(parts) > 2 else "")
    if not named:
        raise UnreadableSignal(f"{where}: names no node (dimension InstanceId, or the name's third part)")
    instance_id, hostname = node_identity(named)
    return SignalReport(
        signal=signal,
        source="cloudwatch_alarm",
        instance_id=instance_id,
        hostname=hostname,
        episode_at=_alarm_time(changed, where),
        cluster=dimensions.get("ClusterName"),
        evidence=evidence_lines({**said, **{f"dimension.{k}": v for k, v in dimensions.items()}}),
        where=where,
    )


def _alarm_time(text: str, where: str) -> datetime:
    """CloudWatch writes 2026-11-29T09:10:00.000+0000 (SNS) or ...Z (EventBridge)."""
    text = text.strip().replace("Z", "+00:00")
    if len(text) > 5 and text[-5] in "+-" and text[-3] != ":":
        text = f"{text[:-2]}:{text[-2:]}"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise UnreadableSignal(f"{where}: state change time {text[:40]!r} is not a time") from exc
    if moment.tzinfo is None:
        raise UnreadableSignal(f"{where}: state change time {text[:40]!r} has no time zone")
    return moment.astimezone(UTC)
