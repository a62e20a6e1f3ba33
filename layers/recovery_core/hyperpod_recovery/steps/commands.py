"""What every orchestrator step shares: dispatch one typed command with its task token to the
orchestrator (ports.py; on Slurm the controller agent carries it out), or answer the waiting task
here when there is nothing to ask. In a dry run the orchestrator is behind the gate
(adapters/dry_run.py): mutating commands are answered there and never reach the cluster."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply, ControllerCommand

if TYPE_CHECKING:
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


class CommandStep(Protocol):
    """A step whose state waits for a task token: which incident, which token, which request."""

    @property
    def execution_name(self) -> str: ...
    @property
    def task_token(self) -> str: ...
    @property
    def request(self) -> RecoveryRequest | JobRecoveryRequest: ...


def dispatch_command(
    orchestrator: Orchestrator, step: CommandStep, command: ControllerCommand, *, command_id: str, now: datetime
) -> dict[str, Any]:
    """Hand ``command`` to the orchestrator with the step's task token: the state completes when it is answered."""
    request, execution_name, task_token = step.request, step.execution_name, step.task_token
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
