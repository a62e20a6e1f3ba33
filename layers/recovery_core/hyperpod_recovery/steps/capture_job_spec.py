"""Capture Job Spec (JobRecovery): the failed job as slurmctld knows it now."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.commands import MAX_NODES_ASKED, CaptureJobSpec
from hyperpod_recovery.models.common import MAX_JOB_NODES_CARRIED
from hyperpod_recovery.steps.commands import dispatch_command

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_recovery import CaptureJobSpecInput
    from hyperpod_recovery.ports import Orchestrator


def capture_job_spec(step: CaptureJobSpecInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """The failed job as slurmctld knows it now: state (requeued already?), nodes, batch script. A
    hang's asks about the nodes its verdict names: a job too large for its names to be carried is
    answered with those of them it runs on (what its hang is judged on, domain/hangs/classify.py)."""
    verdict = step.request.hang
    # (asked only of a job whose reporters outnumber the names an answer carries: an agent older than
    # ``asked`` refuses a command with it, and a smaller job's answer names every node anyway)
    large = verdict is not None and verdict.nodes_reporting > MAX_JOB_NODES_CARRIED
    asked = [*verdict.suspects, *(n.node for n in verdict.nodes)] if verdict is not None and large else []
    return dispatch_command(
        orchestrator,
        step,
        CaptureJobSpec(
            job_id=step.request.job_id,
            kube=step.request.failure.kube if step.request.failure else None,
            asked=list(dict.fromkeys(asked))[:MAX_NODES_ASKED],
        ),
        command_id=f"{step.execution_name}:job-spec",
        now=now,
    )
