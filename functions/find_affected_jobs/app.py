"""Find Affected Jobs: ask the controller agent which jobs run on the nodes, with their specs."""

from hyperpod_recovery.models.workflow import FindAffectedJobsInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.find_affected_jobs import find_affected_jobs


@workflow_step(FindAffectedJobsInput)
def lambda_handler(step: FindAffectedJobsInput, deps: Dependencies):
    return find_affected_jobs(step, orchestrator=deps.orchestrator, now=deps.now())
