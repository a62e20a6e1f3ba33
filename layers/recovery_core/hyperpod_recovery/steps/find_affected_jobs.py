"""Find Affected Jobs: the jobs running on the target nodes (read-only: a drill shows real jobs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_recovery.models.commands import JobsOnNodes
from hyperpod_recovery.models.workflow import FindAffectedJobsInput
from hyperpod_recovery.ports import Orchestrator
from hyperpod_recovery.steps.commands import dispatch_command


def find_affected_jobs(step: FindAffectedJobsInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    nodes = [t.slurm_node for t in step.assessment.targets]
    return dispatch_command(
        orchestrator,
        step,
        JobsOnNodes(nodes=nodes),
        command_id=f"{step.execution_name}:jobs",
        now=now,
    )
