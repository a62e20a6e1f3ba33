"""What At Risk and its tick share (steps/at_risk.py, steps/at_risk_tick.py): the ports a run is
given, and keeping one signal report as a verdict, once per episode, its planned swap started when
its signal is enforced."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from hyperpod_recovery.domain.at_risk.judge import judge
from hyperpod_recovery.domain.intake.execution_names import planned_swap_execution_name
from hyperpod_recovery.models.at_risk import AtRiskRecord, PlannedSwapRequest, SignalScore
from hyperpod_recovery.models.kubernetes import node_name_for_instance
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.domain.at_risk.settings import SignalSettings
    from hyperpod_recovery.domain.at_risk.signals import SignalReport
    from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
    from hyperpod_recovery.ports import AtRiskLedger, Cluster, PlannedSwaps


@dataclass
class AtRiskPorts:
    ledger: AtRiskLedger
    cluster: Cluster
    swaps: PlannedSwaps
    settings: SignalSettings
    cluster_name: str
    orchestrator: Literal["slurm", "eks"]
    limits: EventAgeLimits
    now: datetime
    dry_run: bool = False
    history_days: int = 30
    counts: Counter[str] = field(default_factory=Counter)
    _hosts: dict[str, str] | None = None
    _scores: dict[str, SignalScore] = field(default_factory=dict)


def keep(report: SignalReport, ports: AtRiskPorts, *, check_age: bool | None = None) -> AtRiskRecord | None:
    """Judge one report and keep its verdict once per episode; an enforced one starts its swap.
    The kept record (this delivery's or the first's), or None when it was not judged."""
    counts = ports.counts
    if report.cluster is not None and report.cluster != ports.cluster_name:
        counts["foreign"] += 1
        logger.warning("an at-risk signal for another cluster", extra={"cluster": report.cluster[:100], "signal": report.signal})
        return None
    # A standing state (a firing alert, a condition) is news however old its start; a state change
    # (an alarm's) redelivered long after is not. A start dated in the future says a clock is wrong.
    problem = ports.limits.problem(report.episode_at, ports.now)
    if problem and (report.episode_at > ports.now or (check_age if check_age is not None else report.source == "cloudwatch_alarm")):
        counts["future" if report.episode_at > ports.now else "stale"] += 1
        logger.warning("an at-risk signal not kept", extra={"signal": report.signal, "node": report.node_ref, "problem": problem})
        return None
    setting = ports.settings.of(report.signal)
    if setting.mode == "off":
        counts["off"] += 1
        return None
    instance_id, node = _resolve(report, ports)
    if instance_id is None:
        counts["unknown_node"] += 1
        logger.warning("an at-risk signal names a node the cluster does not have", extra={"signal": report.signal, "node": report.node_ref})
        return None
    if report.signal not in ports._scores:
        ports._scores[report.signal] = ports.ledger.at_risk_score(ports.cluster_name, report.signal)
    try:
        verdict = judge(report, cluster=ports.cluster_name, instance_id=instance_id, node=node, setting=setting,
                        score=ports._scores[report.signal], now=ports.now)  # fmt: skip
    except ValidationError as exc:
        counts["unreadable"] += 1
        logger.warning("an at-risk signal cannot be a verdict", extra={"signal": report.signal, "error": str(exc)[:300]})
        return None
    name = planned_swap_execution_name(verdict.verdict_id)
    if setting.mode == "enforce":
        action, execution = f"planned swap {name} started (signal {verdict.signal} is enforced)", name
    else:
        action, execution = (
            f"observed: signal {verdict.signal} is observe-only; nothing touched (enforced, it would start planned swap {name})",
            None,
        )
    record = AtRiskRecord(verdict=verdict, episode_at=report.episode_at, action=action[:512], execution=execution)
    if ports.ledger.record_at_risk(record):
        counts[f"{verdict.signal}_recorded"] += 1
        counts["recorded"] += 1
        logger.info("at-risk verdict", extra={"verdict": verdict.summary, "mode": verdict.mode})
    else:
        counts["same_episode"] += 1
        record = _kept(record, ports) or record
    if record.execution is not None:
        # (every delivery asks: the name makes it one execution, and a start that failed before is retried here)
        started = ports.swaps.start_planned_swap(PlannedSwapRequest(verdict=record.verdict, dry_run=ports.dry_run))
        counts["swaps_started" if started == "started" else "swaps_already_started"] += 1
    return record


def _kept(record: AtRiskRecord, ports: AtRiskPorts) -> AtRiskRecord | None:
    same = ports.ledger.at_risk_records(ports.cluster_name, since=record.episode_at, until=record.episode_at)
    return next((r for r in same if r.verdict.verdict_id == record.verdict.verdict_id), None)


def _resolve(report: SignalReport, ports: AtRiskPorts) -> tuple[str | None, str | None]:
    """(instance id, the orchestrator's node name) of the node the report names."""
    if ports.orchestrator == "eks" and report.instance_id:
        return report.instance_id, node_name_for_instance(report.instance_id)
    if ports._hosts is None and (report.hostname or report.instance_id):
        # (one listing per invocation, only when a name must be resolved or a Slurm name told)
        ports._hosts = {}
        if report.hostname or ports.orchestrator == "slurm":
            for node in ports.cluster.list_nodes():
                name = node.name_in(ports.orchestrator)
                if name:
                    ports._hosts[name] = node.node_id
    hosts = ports._hosts or {}
    if report.instance_id:
        return report.instance_id, next((name for name, node_id in hosts.items() if node_id == report.instance_id), None)
    if report.hostname and report.hostname in hosts:
        return hosts[report.hostname], report.hostname
    return None, None
