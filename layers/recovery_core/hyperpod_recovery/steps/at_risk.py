"""At Risk (template.yaml AtRiskFunction): each at-risk signal judged into a verdict, recorded once
per episode with its evidence, and, for an enforced signal, its planned swap started.

Inputs: SNS (the stack's AtRiskTopic: an Alertmanager alert by the documented JSON template, or a
CloudWatch alarm's action) and EventBridge's "CloudWatch Alarm State Change". Its tick (template.yaml
AtRiskTickFunction, every 15 minutes): each pending verdict's outcome, bounded; the node history. A message the convention
cannot read is counted and logged with why, never the batch's failure; a ledger that cannot be
reached, or a start that failed, fails the invocation, which Lambda retries (a kept verdict is not
kept twice; a started swap's name turns a second start away).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.at_risk.alertmanager import parse_alertmanager
from hyperpod_recovery.domain.at_risk.cloudwatch import parse_alarm_notification, parse_alarm_state_change
from hyperpod_recovery.domain.at_risk.signals import SignalReport, UnreadableSignal
from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.at_risk_verdicts import AtRiskPorts, keep

__all__ = ["AtRiskPorts", "at_risk"]

if TYPE_CHECKING:
    pass


def at_risk(event: Any, ports: AtRiskPorts) -> dict[str, int]:
    """One invocation: SNS records, or an EventBridge alarm state change."""
    if isinstance(event, dict) and isinstance(event.get("Records"), list):
        for record in event["Records"]:
            take_sns_record(record, ports)
    elif isinstance(event, dict) and event.get("detail-type") == "CloudWatch Alarm State Change":
        _take(lambda: _one(parse_alarm_state_change(event)), "eventbridge", ports)
    else:
        ports.counts["unknown_input"] += 1
        logger.warning(
            "an input the at-risk function does not know",
            extra={"keys": sorted(event)[:10] if isinstance(event, dict) else type(event).__name__},
        )
    return dict(ports.counts)


def take_sns_record(record: dict[str, Any], ports: AtRiskPorts) -> None:
    sns = record.get("Sns") or {}
    message = str(sns.get("Message", ""))
    attributes = {str(k): str((v or {}).get("Value", "")) for k, v in (sns.get("MessageAttributes") or {}).items()}
    ports.counts["messages"] += 1
    _take(lambda: _read_message(message, attributes, ports.counts), str(sns.get("MessageId", ""))[:64], ports)


def _read_message(message: str, attributes: dict[str, str], counts: Counter[str]) -> list[SignalReport]:
    if message.lstrip().startswith("{") and '"AlarmName"' in message:
        return _one(parse_alarm_notification(message))
    reports, skipped = parse_alertmanager(message, attributes)
    counts.update(skipped)
    return reports


def _one(report: SignalReport | None) -> list[SignalReport]:
    return [report] if report is not None else []


def _take(read: Any, where: str, ports: AtRiskPorts) -> None:
    try:
        reports = read()
    except UnreadableSignal as exc:
        logger.warning("an at-risk message refused", extra={"message_id": where, "why": str(exc)[:400]})
        ports.counts["refused"] += 1
        return
    if not reports:
        ports.counts["not_a_signal"] += 1
    for report in reports:
        keep(report, ports)
