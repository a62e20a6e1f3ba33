"""Import HyperPod Hangs: HyperPod's own detectors' verdicts, kept beside ours.

Slurm (this function): HyperPod's hung job detection writes a ``HANG_DETECTED`` event to the
cluster's log group; a CloudWatch Logs subscription filter (template.yaml, optional) hands each batch
to this function. Each event names a job: one verdict of rule ``hyperpod_hang`` is kept per job and
episode (the ledger, as Detect Hung Jobs keeps its own), with what HyperPod did (notify or cancel).

EKS (steps/find_failed_jobs.py, through steps/verdicts.py ``record_operator_faults``): the HyperPod
training operator's log monitoring rules that evaluated to HANGING or SLOW (rules ``hpto_hang``,
``hpto_slow``). The operator restarts the job itself: the job stays the operator's; we record.

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
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from hyperpod_recovery.domain.hangs.imported import (
    CONTROL_MESSAGE,
    EPISODE_WINDOW,
    HangDetection,
    UnreadableHangEvent,
    UnreadablePayload,
    decode_subscription,
    is_hang_stream,
    new_episodes,
    parse_hang_event,
)
from hyperpod_recovery.domain.hangs.imported_verdicts import OPERATOR_ACTION, hyperpod_hang_verdict
from hyperpod_recovery.domain.messages.verdict_notice import TAKEN
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.verdicts import Teller, fresh, keep_verdict

if TYPE_CHECKING:
    from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
    from hyperpod_recovery.ports import Verdicts

__all__ = ["OPERATOR_ACTION", "ImportMode", "Teller", "import_hyperpod_hangs"]

ImportMode = Literal["observe", "off"]


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
    detections = [d for d in detections if fresh(d.job, d.at, limits, now, counts, "")]
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
        keep_verdict(ledger, teller, RecordedVerdict(verdict=verdict, action=action[:512]), counts)
    return dict(counts)
