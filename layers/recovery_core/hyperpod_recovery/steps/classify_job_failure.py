"""Classify Failure (JobRecovery): node-caused, application, or left alone (someone else restarts it)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from hyperpod_recovery.domain.job_failure import classify_failure
from hyperpod_recovery.models.job_recovery import ClassifyJobFailureInput, FailureClassification
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Cluster


def classify_job_failure(
    step: ClassifyJobFailureInput,
    *,
    cluster: Cluster,
    now: datetime,
    node_timeout_seconds: int,
    orchestrator: Literal["slurm", "eks"] = "slurm",
) -> FailureClassification:
    classification = classify_failure(
        step.request,
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
        extra={"job_id": step.request.job_id, "kind": classification.kind, "reason": classification.reason},
    )
    return classification
