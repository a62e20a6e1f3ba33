"""Resume Nodes: ask the agent to resume the replaced nodes we drained (our drain tag only)."""

from hyperpod_recovery.models.node_recovery import ResumeNodesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.resume_nodes import resume_nodes


@workflow_step(ResumeNodesInput)
def lambda_handler(step: ResumeNodesInput, deps: Dependencies):
    return resume_nodes(step, orchestrator=deps.orchestrator, health_check=deps.settings.health_check, now=deps.now())
