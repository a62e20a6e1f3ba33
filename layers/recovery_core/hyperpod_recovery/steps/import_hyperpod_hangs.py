"""Import HyperPod Hangs: HyperPod's own detectors' verdicts, kept beside ours (issue 32, "Signals").

Slurm (this function): HyperPod's hung job detection writes a ``HANG_DETECTED`` event to the
cluster's log group; a CloudWatch Logs subscription filter (template.yaml, optional) hands each batch
to this function. Each event names a job: one verdict of rule ``hyperpod_hang`` is kept per job and
episode (the ledger, as Detect Hung Jobs keeps its own), with what HyperPod did (notify or cancel).

EKS (steps/find_failed_jobs.py calls ``record_operator_faults``): the HyperPod training operator's
log monitoring rules that evaluated to HANGING or SLOW (rules ``hpto_hang``, ``hpto_slow``). The
operator restarts the job itself: the job stays the operator's; we record.

Every imported rule is observe-only: the event's and the status's fields are not documented
(domain/hangs/imported.py, ASSUMPTION), so nothing is touched on their word; an operator confirms or
rejects each verdict (hyperpod-recovery verdicts), which measures each rule's precision.

One event this cannot read is counted (``unparsable``) and logged, never the batch's failure; a
ledger that cannot be reached fails the invocation, which Lambda retries (a verdict already kept is
not kept twice).

Each verdict kept here is told once, informationally (domain/messages/verdict_notice.py: the topic and chat,
never the pager): only by the run whose write kept it (``record_verdict`` answered True), so a
redelivered batch or a later poll of the same fault sends nothing. A publish that fails is logged
and counted (``verdict_notice_failed``), never the batch's or the poll's failure: the verdict is kept
already, and a retry would find it kept and send nothing either.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from hyperpod_recovery.domain.hangs.imported import (
    CONTROL_MESSAGE,
    EPISODE_WINDOW,
    HangDetection,
    OperatorFault,
    UnreadableHangEvent,
    UnreadablePayload,
    decode_subscription,
    is_hang_stream,
    new_episodes,
    operator_faults,
    parse_hang_event,
)
from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.verdict_notice import TAKEN, notice_attributes, verdict_id, verdict_notice
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable, NotifierUnavailable
from hyperpod_recovery.models.hangs import HangRule, HangVerdict, ImportedDetection, RecordedVerdict
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Notifier, Verdicts

ImportMode = Literal["observe", "off"]
OPERATOR_ACTION = "left to the HyperPod training operator, which restarts it itself"


@dataclass(frozen=True)
class Teller:
    """Where a kept verdict is told, and what its message names besides the verdict."""

    notifier: Notifier
    deployment: Deployment = field(default_factory=Deployment)
    dry_run: bool = False


def imported_verdict(
    rule: HangRule, cluster: str, job: str, at: datetime, now: datetime, summary: str, imported: ImportedDetection
) -> HangVerdict:
    """A verdict HyperPod's own detector reached at ``at``: observe-only, and nothing in it measured by
    us (step, threshold, seconds are placeholders the CLI never shows: ``imported`` says what was)."""
    return HangVerdict(
        rule=rule,
        mode="observe",
        cluster=cluster,
        job=job,
        decided_at=now,
        episode_at=at,
        step=0,
        last_progress_at=at,
        threshold_seconds=0,
        observed_seconds=0,
        summary=summary[:1024],
        imported=imported,
    )


def hyperpod_hang_verdict(cluster: str, detection: HangDetection, now: datetime) -> HangVerdict:
    said = f"job {detection.job}: HyperPod's hung job detection reported a hang at {detection.at:%Y-%m-%d %H:%M:%S} UTC"
    where = f" on {detection.instance_id}" if detection.instance_id else ""
    detected = ImportedDetection(
        source="hyperpod_hang_detection",
        detector_rule=detection.rule,
        taken=detection.action,
        evidence=detection.evidence,
        where=detection.stream,
    )
    return imported_verdict("hyperpod_hang", cluster, detection.job, detection.at, now, f"{said}{where}", detected)


def import_hyperpod_hangs(
    *, event: Any, ledger: Verdicts, teller: Teller, cluster: str, mode: ImportMode, limits: EventAgeLimits, now: datetime
) -> dict[str, int]:
    """One subscription batch: the count of what was kept, folded, skipped and unreadable. An event
    older than MaxEventAgeSeconds or dated past MaxClockSkewSeconds ahead is counted (``stale``,
    ``future``) and logged, never kept: an old one is no news, and a future one would fold the real
    detection into its episode."""
    counts: Counter[str] = Counter()
    if mode == "off":
        counts["off"] += 1
        return dict(counts)
    try:
        batch = decode_subscription(event)
    except UnreadablePayload as exc:
        logger.warning("a subscription payload could not be read", extra={"error": str(exc)[:300]})
        counts["unreadable_batch"] += 1
        return dict(counts)
    if batch.message_type == CONTROL_MESSAGE:
        counts["control"] += 1  # (CloudWatch Logs checking that the function can be reached)
        return dict(counts)
    if not is_hang_stream(batch.log_stream):
        counts["other_stream"] += len(batch.events)
        return dict(counts)
    detections: list[HangDetection] = []
    for log_event in batch.events:
        try:
            detections.append(parse_hang_event(log_event.message, batch.log_stream, log_event.at))
        except UnreadableHangEvent as exc:
            logger.warning(
                "a hang event could not be read", extra={"error": str(exc), "event_id": log_event.id, "stream": batch.log_stream[:300]}
            )
            counts["unparsable"] += 1
    detections = [d for d in detections if _fresh(d.job, d.at, limits, now, counts, "")]
    if not detections:
        return dict(counts)
    kept = ledger.verdicts(cluster, since=min(d.at for d in detections) - EPISODE_WINDOW)
    new, folded = new_episodes(detections, [v.verdict for v in kept], "hyperpod_hang")
    if folded:
        counts["same_episode"] += folded
    for detection in new:
        try:
            verdict = hyperpod_hang_verdict(cluster, detection, now)
        except ValidationError as exc:  # (one event we cannot hold: counted, never the batch's failure)
            logger.warning("a hang event cannot be a verdict", extra={"job": detection.job, "error": str(exc)[:300]})
            counts["unparsable"] += 1
            continue
        action = f"observed: {TAKEN[detection.action]}; nothing touched (rule hyperpod_hang is observe-only)"
        _keep(ledger, teller, RecordedVerdict(verdict=verdict, action=action[:512]), counts)
    return dict(counts)


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
        if not _fresh(key, fault.at, limits, now, counts, "operator_faults_"):
            continue
        try:
            verdict = _operator_verdict(cluster, key, fault, now)
        except ValidationError as exc:
            logger.warning("an operator fault cannot be a verdict", extra={"job": key[:300], "error": str(exc)[:300]})
            counts["operator_faults_unreadable"] += 1
            continue
        try:
            _keep(ledger, teller, RecordedVerdict(verdict=verdict, action=OPERATOR_ACTION), counts)
        except (LedgerUnavailable, LedgerError):
            logger.warning("could not record an operator fault; the next poll does", extra={"job": key[:300], "rule": fault.rule})
            counts["operator_faults_not_recorded"] += 1


def _fresh(job: str, at: datetime, limits: EventAgeLimits, now: datetime, counts: Counter[str], prefix: str) -> bool:
    """An imported event within the limits every event has; else counted (stale, future) and logged."""
    problem = limits.problem(at, now)
    if problem is None:
        return True
    counts[f"{prefix}{'future' if at > now else 'stale'}"] += 1
    logger.warning("an imported hang event is not recorded", extra={"job": job[:300], "problem": problem})
    return False


def _operator_verdict(cluster: str, job: str, fault: OperatorFault, now: datetime) -> HangVerdict:
    state = "HANGING" if fault.rule == "hpto_hang" else "SLOW"
    summary = (
        f"job {job}: the HyperPod training operator's log monitoring rule {fault.detector_rule} evaluated to {state} "
        f"(condition {fault.condition or '?'} at {fault.at:%Y-%m-%d %H:%M:%S} UTC)"
    )
    detected = ImportedDetection(
        source="hyperpod_training_operator",
        detector_rule=fault.detector_rule,
        taken="restarted",
        evidence=fault.evidence,
        where=f"status.conditions[type={fault.condition}]"[:512],
    )
    return imported_verdict(fault.rule, cluster, job, fault.at, now, summary, detected)


def _keep(ledger: Verdicts, teller: Teller, recorded: RecordedVerdict, counts: Counter[str]) -> None:
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
