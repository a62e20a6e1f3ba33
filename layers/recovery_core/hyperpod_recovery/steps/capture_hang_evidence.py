"""Capture Hang Evidence (JobRecovery, a hang only): before anything is done to a hung job, what it
was doing: ``scontrol show job`` and a stack dump of its processes on its suspects and on others to
compare them with (at most MAX_EVIDENCE_NODES nodes, bounded in time; read-only). On EKS the function
carries it out itself: the job's conditions and events, and its pods' last log lines. The answer lands
in the state and, with the incident, in the ledger."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.commands import MAX_EVIDENCE_NODES, CaptureHangEvidence, HangEvidenceResult
from hyperpod_recovery.steps.commands import answer_here, dispatch_command

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_recovery import CaptureHangEvidenceInput
    from hyperpod_recovery.ports import Orchestrator

# The whole capture's bound (each node's dump runs at once, killed at this time).
EVIDENCE_SECONDS = 45


def evidence_nodes(suspects: list[str], allocated: list[str]) -> list[str]:
    """The suspects first (only those the job holds), then the others in slurmctld's order: enough
    of them to tell the odd one out."""
    held = [n for n in suspects if n in allocated]
    return list(dict.fromkeys([*held, *allocated]))[:MAX_EVIDENCE_NODES]


def capture_hang_evidence(step: CaptureHangEvidenceInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    job = step.inspection.result.job
    verdict = step.request.hang
    # (a job too large for its names to travel: the verdict's nodes it runs on, as Capture Job Spec answered)
    nodes = evidence_nodes(verdict.suspects if verdict else [], (job.nodes or job.asked_held) if job else [])
    command_id = f"{step.execution_name}:hang-evidence"
    if not nodes:
        # (slurmctld holds the job on no node: it ended, and Classify Failure says so; nothing to dump)
        result = HangEvidenceResult(job_id=step.request.job_id, job_state=job.state if job is not None else None)
        answer_here(orchestrator, step.task_token, command_id, "capture_hang_evidence", result, now)
        return {"command_id": command_id, "sent": False, "dry_run": bool(step.request.dry_run)}
    return dispatch_command(
        orchestrator,
        step,
        CaptureHangEvidence(
            job_id=step.request.job_id, nodes=nodes, timeout_seconds=EVIDENCE_SECONDS, kube=job.kube if job is not None else None
        ),
        command_id=command_id,
        now=now,
    )
