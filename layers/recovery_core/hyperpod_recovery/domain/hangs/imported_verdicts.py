"""The verdicts of HyperPod's own detectors, as we keep them beside ours: observe-only, and nothing
in them measured by us (domain/hangs/imported.py reads the detections they are built from)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.models.hangs import HangRule, HangVerdict, ImportedDetection

if TYPE_CHECKING:
    from hyperpod_recovery.domain.hangs.imported import HangDetection, OperatorFault

OPERATOR_ACTION = "left to the HyperPod training operator, which restarts it itself"


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


def operator_verdict(cluster: str, job: str, fault: OperatorFault, now: datetime) -> HangVerdict:
    """A HyperPodPyTorchJob's HANGING or SLOW fault, which its operator restarts itself."""
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
