"""What every orchestrator step shares: dispatch one typed command with its task token to the
orchestrator (ports.py; on Slurm the controller agent carries it out), or answer the waiting task
here when there is nothing to ask. In a dry run the orchestrator is behind the gate
(adapters/dry_run.py): mutating commands are answered there and never reach the cluster."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply, ControllerCommand
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest
from hyperpod_recovery.ports import Orchestrator


def answer_here(
    orchestrator: Orchestrator, task_token: str, command_id: str, command_type: str, result: Any, now: datetime, *, dry_run: bool = False
) -> None:
    """Complete the waiting task without the agent (a dry run, a claim that says it is done, nothing to ask)."""
    reply: CommandReply[Any] = CommandReply(
        command_id=command_id, type=command_type, requested_at=now, started_at=now, completed_at=now, dry_run=dry_run, result=result
    )
    orchestrator.answer(task_token, reply)


def dispatch_command(
    *,
    orchestrator: Orchestrator,
    request: RecoveryRequest | JobRecoveryRequest,
    execution_name: str,
    task_token: str,
    command: ControllerCommand,
    command_id: str,
    now: datetime,
) -> dict[str, Any]:
    orchestrator.dispatch(
        CommandEnvelope(
            command_id=command_id,
            incident_id=request.incident_id or execution_name,
            execution_name=execution_name,
            task_token=task_token,
            requested_at=now,
            command=command,
        )
    )
    return {"command_id": command_id, "sent": True, "dry_run": bool(request.dry_run)}
