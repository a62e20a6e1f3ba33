"""Classify Failure (JobRecovery): node-caused, application, or left alone (someone else restarts it);
for a hang verdict: hung (with its suspects), recovered by itself, or left alone (domain/hangs/classify.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.hangs.classify import classify_hang
from hyperpod_recovery.domain.intake.execution_names import HANG_MARK
from hyperpod_recovery.domain.jobs.job_failure import classify_failure, job_label, refuse_second_slowdown
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_recovery import ClassifyJobFailureInput, FailureClassification
    from hyperpod_recovery.ports import Cluster, FailureHistory, ProgressReader, RecoveryLog


def classify_job_failure(
    step: ClassifyJobFailureInput,
    *,
    cluster: Cluster,
    now: datetime,
    node_timeout_seconds: int,
    orchestrator: Literal["slurm", "eks"] = "slurm",
    progress: ProgressReader | None,
    ledger: FailureHistory,
    repeat_window_seconds: int = 0,
    restart_window_seconds: int = 0,
) -> FailureClassification:
    request = step.request
    if request.hang is not None and step.evidence is not None:
        # Kept with the incident (the record's size stays what it was): `incidents show` reads it.
        ledger.save_evidence(request.incident_id or step.execution_name, step.evidence.result, now)
    if request.hang is not None and request.hang.rule == "slow":
        # (before any node is checked or the job stopped: a second slowdown of the lineage escalates)
        root = ledger.lineage_root(request.cluster, request.job_id) or request.job_id
        refuse_second_slowdown(
            job_label(request.job_id, step.inspection.result.job, None),
            ledger.restart_history(request.cluster, root),
            now,
            restart_window_seconds,
        )
    if request.hang is not None:
        classification = classify_hang(
            request,
            step.inspection.result.job,
            step.evidence.result if step.evidence is not None else None,
            # (an EKS job reports as namespace/name: the verdict's key, not its uid)
            progress.job(request.hang.job) if progress is not None else [],
            cluster.list_nodes(),
            step.execution_name,
            now,
            repeat_suspects=_suspected_before(ledger, request.cluster, now - timedelta(seconds=repeat_window_seconds)),
            orchestrator=orchestrator,
            claim=ledger.resubmission_claim(request.cluster, request.job_id),
        )
    else:
        classification = classify_failure(
            request,
            step.inspection.result.job,
            step.node_states.result.nodes,
            cluster.list_nodes(),
            step.execution_name,
            now,
            orchestrator,
        )
    if classification.node_request is not None:
        classification = classification.model_copy(update={"node_timeout_seconds": node_timeout_seconds})
    logger.info(
        "job failure classified",
        extra={"job_id": request.job_id, "kind": classification.kind, "reason": classification.reason},
    )
    return classification


def _suspected_before(ledger: RecoveryLog, cluster: str, since: datetime) -> frozenset[str]:
    """Hostnames an earlier hang's node recovery acted on within the repeat-offender window."""
    # (a hang's NodeRecovery is named after it, hpj-<job>-hung-<epoch>-nodes: the log says what earlier hangs suspected)
    # (a stall's only: a slowdown's suspect, named by its waits, never counts toward replacing a node)
    return frozenset(h for e in ledger.recovery_log(cluster, since) if HANG_MARK in e.incident for h in e.hostnames)
