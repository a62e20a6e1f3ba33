"""Check Controller Agent (the preflight's agent check): ask the agent to check in."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.commands import CheckAgent, CommandEnvelope

if TYPE_CHECKING:
    from hyperpod_recovery.models.preflight import CheckControllerAgentInput
    from hyperpod_recovery.ports import Orchestrator


def check_controller_agent(step: CheckControllerAgentInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """Ask the agent to check in (hyperpod-recovery preflight). Read-only, so it goes to the agent
    whatever the stack's DryRun: the point is to see the agent answer."""
    command_id = f"{step.execution_name}:check"
    orchestrator.dispatch(
        CommandEnvelope(
            command_id=command_id,
            incident_id=step.execution_name,
            execution_name=step.execution_name,
            task_token=step.task_token,
            requested_at=now,
            command=CheckAgent(),
        )
    )
    return {"command_id": command_id, "sent": True, "dry_run": False}
