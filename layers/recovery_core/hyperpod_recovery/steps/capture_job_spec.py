"""Capture Job Spec (JobRecovery): the failed job as slurmctld knows it now."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_recovery.models.commands import CaptureJobSpec
from hyperpod_recovery.models.job_recovery import CaptureJobSpecInput
from hyperpod_recovery.ports import Orchestrator
from hyperpod_recovery.steps.commands import dispatch_command


def capture_job_spec(step: CaptureJobSpecInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """The failed job as slurmctld knows it now: state (requeued already?), nodes, batch script."""
    return dispatch_command(
        orchestrator,
        step,
        CaptureJobSpec(job_id=step.request.job_id, kube=step.request.failure.kube if step.request.failure else None),
        command_id=f"{step.execution_name}:job-spec",
        now=now,
    )
