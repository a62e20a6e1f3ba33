"""Capture Job Spec: ask the controller agent for the failed job's state and spec (task token)."""

from hyperpod_recovery.models.job_recovery import CaptureJobSpecInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.capture_job_spec import capture_job_spec


@workflow_step(CaptureJobSpecInput)
def lambda_handler(step: CaptureJobSpecInput, deps: Dependencies):
    return capture_job_spec(step, orchestrator=deps.orchestrator, now=deps.now())
