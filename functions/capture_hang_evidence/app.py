"""Capture Hang Evidence: ask the controller agent what the hung job was doing (task token)."""

from hyperpod_recovery.models.job_recovery import CaptureHangEvidenceInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.capture_hang_evidence import capture_hang_evidence


@workflow_step(CaptureHangEvidenceInput)
def lambda_handler(step: CaptureHangEvidenceInput, deps: Dependencies):
    return capture_hang_evidence(step, orchestrator=deps.orchestrator, now=deps.now())
