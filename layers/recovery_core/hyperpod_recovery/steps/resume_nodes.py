"""Resume Nodes: return the nodes that came back to service (only the ones we drained)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.commands import HealthCheck, ResumeNodes, ResumeResult, owner_tag
from hyperpod_recovery.steps.commands import answer_here, dispatch_command

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import ResumeNodesInput
    from hyperpod_recovery.ports import Orchestrator


def resume_nodes(
    step: ResumeNodesInput, *, orchestrator: Orchestrator, health_check: HealthCheck | None = None, now: datetime
) -> dict[str, Any]:
    """``health_check``: run on each node before it takes jobs (the agent keeps a node that fails it
    drained). A replacement found under another hostname was never drained by us and is not checked."""
    # A node whose replacement came back under another name left its own name drained: that name is
    # the old instance's, and the new one was never drained by us. Only names that came back are
    # resumed; after a second replacement (domain/nodes/health_gate.py), only the nodes it replaced.
    # (On EKS a replacement is given back under the name it was born with: WatchedNode.service_name.)
    nodes = [n.service_name for n in step.rejoin.nodes if n.to_resume or step.rejoin.dry_run]
    # One command per pass: the agent answers a command id it has seen with its first answer, and
    # the second replacement's nodes must be checked afresh (domain/nodes/health_gate.py).
    command_id = f"{step.execution_name}:resume" + (":again" if step.rejoin.first_gate is not None else "")
    if not nodes:
        answer_here(orchestrator, step.task_token, command_id, "resume_nodes", ResumeResult(), now, dry_run=bool(step.request.dry_run))
        return {"command_id": command_id, "sent": False, "dry_run": bool(step.request.dry_run)}
    return dispatch_command(
        orchestrator,
        step,
        ResumeNodes(nodes=nodes, owner_tag=owner_tag(step.execution_name), health_check=health_check),
        command_id=command_id,
        now=now,
    )
