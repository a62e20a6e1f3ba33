"""Check Job Nodes (JobRecovery): the scheduler's state of the nodes the job ran on."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.jobs.job_failure import job_nodes
from hyperpod_recovery.models.commands import NodeStates, NodeStatesResult
from hyperpod_recovery.models.common import MAX_JOB_NODES_CARRIED
from hyperpod_recovery.steps.commands import answer_here, dispatch_command

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_recovery import CheckJobNodesInput
    from hyperpod_recovery.ports import Orchestrator


def check_job_nodes(step: CheckJobNodesInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """Slurm's state of the nodes the job ran on (the event's list: squeue forgets an ended job's)."""
    nodes = job_nodes(step.request, step.inspection.result.job)
    command_id = f"{step.execution_name}:job-nodes"
    if not nodes:
        # Nothing to ask (the job never got nodes, or slurmctld forgot it): answer at once.
        answer_here(orchestrator, step.task_token, command_id, "node_states", NodeStatesResult(), now)
        return {"command_id": command_id, "sent": False, "dry_run": False}
    # (a job on more nodes than a command carries the names of: every node not plainly healthy, of
    # which the classifier keeps the job's; its own list is in the request already)
    ask = NodeStates(nodes=nodes) if len(nodes) <= MAX_JOB_NODES_CARRIED else NodeStates(not_plainly_healthy=True)
    return dispatch_command(
        orchestrator,
        step,
        ask,
        command_id=command_id,
        now=now,
    )
