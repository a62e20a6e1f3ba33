"""A signal report judged into a verdict: its id (one per signal, node and episode), its mode and
horizon (settings), and the chance the node fails within the horizon: the signal's measured
precision once the ledger holds MIN_OUTCOMES settled outcomes of it, else its configured prior."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.models.at_risk import MAX_EVIDENCE_CHARS, AtRiskVerdict
from hyperpod_recovery.models.at_risk import SignalScore as Score
from hyperpod_recovery.redact import printable, redact_within

if TYPE_CHECKING:
    from hyperpod_recovery.domain.at_risk.settings import SignalSetting
    from hyperpod_recovery.domain.at_risk.signals import SignalReport

# Settled outcomes (failed + not_failed) before a signal's precision replaces its prior: fewer, and
# one outcome moves the chance by more than 5 points.
MIN_OUTCOMES = 20


def failure_chance(setting: SignalSetting, score: Score) -> tuple[float, str]:
    precision = score.precision
    if precision is not None and score.settled >= MIN_OUTCOMES:
        return round(precision, 4), f"measured: {score.failed} of {score.settled} settled verdicts failed within the horizon"
    return setting.prior, f"prior (AtRiskSignals; {score.settled} settled outcomes, {MIN_OUTCOMES} needed to measure)"


def verdict_id(signal: str, instance_id: str, episode_at: datetime) -> str:
    """One per signal, node and episode: a repeat of the same episode arrives at the same id."""
    return f"{signal}-{instance_id}-{int(episode_at.timestamp())}"


def judge(
    report: SignalReport, *, cluster: str, instance_id: str, node: str | None, setting: SignalSetting, score: Score, now: datetime
) -> AtRiskVerdict:
    chance, chance_from = failure_chance(setting, score)
    evidence = redact_within(printable(report.evidence), MAX_EVIDENCE_CHARS, "start")
    days = setting.horizon_seconds / 86400
    summary = (
        f"{instance_id}{f' ({node})' if node else ''} at risk: signal {report.signal} from {report.source.replace('_', ' ')}"
        f" ({report.where}); failure chance {chance:.0%} within {days:g} day(s); mode {setting.mode}"
    )
    return AtRiskVerdict(
        verdict_id=verdict_id(report.signal, instance_id, report.episode_at),
        signal=report.signal,
        source=report.source,
        mode=setting.mode,
        cluster=cluster,
        instance_id=instance_id,
        node=node,
        observed_at=now,
        horizon_seconds=setting.horizon_seconds,
        failure_chance=chance,
        failure_chance_from=chance_from[:256],
        evidence=evidence[:MAX_EVIDENCE_CHARS],
        summary=summary[:1024],
    )
