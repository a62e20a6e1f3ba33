"""Check Job Nodes: ask the controller agent for Slurm's state of the job's nodes (task token)."""

from hyperpod_recovery.models.job_recovery import CheckJobNodesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.check_job_nodes import check_job_nodes


@workflow_step(CheckJobNodesInput)
def lambda_handler(step: CheckJobNodesInput, deps: Dependencies):
    return check_job_nodes(step, orchestrator=deps.orchestrator, now=deps.now())
