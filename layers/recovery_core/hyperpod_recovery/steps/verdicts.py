"""Keeping and telling an imported hang verdict, shared by the two steps that import them: Import
HyperPod Hangs (Slurm's HANG_DETECTED events) and Find Failed Jobs (the EKS training operator's
HANGING and SLOW faults, recorded as it polls the jobs). Each verdict is kept once per episode and
told once, informationally, only by the run whose write kept it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from hyperpod_recovery.domain.hangs.imported import operator_faults
from hyperpod_recovery.domain.hangs.imported_verdicts import OPERATOR_ACTION, operator_verdict
from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.verdict_notice import notice_attributes, verdict_id, verdict_notice
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable, NotifierUnavailable
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
    from hyperpod_recovery.ports import Notifier, Verdicts


@dataclass(frozen=True)
class Teller:
    """Where a kept verdict is told, and what its message names besides the verdict."""

    notifier: Notifier
    deployment: Deployment = field(default_factory=Deployment)
    dry_run: bool = False


def record_operator_faults(
    *, job: dict[str, Any], cluster: str, ledger: Verdicts, teller: Teller, now: datetime, limits: EventAgeLimits, counts: Counter[str]
) -> None:
    """The HyperPodPyTorchJob's HANGING and SLOW faults, each kept once per episode (its condition's
    time); the job stays the operator's. A fault older than MaxEventAgeSeconds is not written again at
    every poll while its condition stays, and one dated past MaxClockSkewSeconds ahead is not written
    (counted and logged, as every event: domain/intake/freshness.py). A ledger that cannot be reached loses
    this poll's record (the next poll records it: the same episode)."""
    metadata = job.get("metadata") or {}
    key = f"{metadata.get('namespace')}/{metadata.get('name')}"
    faults, unreadable = operator_faults(job)
    if unreadable:
        counts["operator_faults_unreadable"] += unreadable
    for fault in faults:
        if not fresh(key, fault.at, limits, now, counts, "operator_faults_"):
            continue
        try:
            verdict = operator_verdict(cluster, key, fault, now)
        except ValidationError as exc:
            logger.warning("an operator fault cannot be a verdict", extra={"job": key[:300], "error": str(exc)[:300]})
            counts["operator_faults_unreadable"] += 1
            continue
        try:
            keep_verdict(ledger, teller, RecordedVerdict(verdict=verdict, action=OPERATOR_ACTION), counts)
        except (LedgerUnavailable, LedgerError):
            logger.warning("could not record an operator fault; the next poll does", extra={"job": key[:300], "rule": fault.rule})
            counts["operator_faults_not_recorded"] += 1


def fresh(job: str, at: datetime, limits: EventAgeLimits, now: datetime, counts: Counter[str], prefix: str) -> bool:
    """An imported event within the limits every event has; else counted (stale, future) and logged."""
    problem = limits.problem(at, now)
    if problem is None:
        return True
    counts[f"{prefix}{'future' if at > now else 'stale'}"] += 1
    logger.warning("an imported hang event is not recorded", extra={"job": job[:300], "problem": problem})
    return False


def keep_verdict(ledger: Verdicts, teller: Teller, recorded: RecordedVerdict, counts: Counter[str]) -> None:
    verdict = recorded.verdict
    if ledger.record_verdict(recorded):
        counts[f"{verdict.rule}_recorded"] += 1
        logger.info("imported hang verdict", extra={"verdict": verdict.summary, "rule": verdict.rule, "mode": verdict.mode})
        _tell(teller, recorded, counts)
    else:
        counts["already_recorded"] += 1


def _tell(teller: Teller, recorded: RecordedVerdict, counts: Counter[str]) -> None:
    """The kept verdict's one message. Sent by this run only: it kept the verdict, and no other run
    will (a failed publish is not retried: the verdict stays listed by ``verdicts list``)."""
    subject, body = verdict_notice(recorded, deployment=teller.deployment)
    try:
        teller.notifier.publish(subject, body, notice_attributes(recorded, dry_run=teller.dry_run))
    except NotifierUnavailable as exc:
        logger.warning(
            "could not send a verdict's notice; the verdict is kept",
            extra={"verdict": verdict_id(recorded.verdict), "error": str(exc)[:300]},
        )
        counts["verdict_notice_failed"] += 1
        return
    counts["verdict_noticed"] += 1
