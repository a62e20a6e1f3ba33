"""The Slurm orchestrator: the controller agent on the cluster's controller node carries commands out.

AWS offers no call that runs a command on a HyperPod Slurm controller, so the agent polls a queue:
``dispatch`` puts the typed command, with the waiting task's token, on the command queue (SQS), and
the agent answers that token with SendTaskSuccess/SendTaskFailure when the command is done.
``answer`` completes a task here instead (dry runs, a command an earlier try already did), so the
workflow's graph is the same in both modes. Failures of either leave as ControllerChannelError,
the name the state machines retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_recovery.errors import ControllerChannelError, QueueUnavailable, TaskAnswerFailed

if TYPE_CHECKING:
    from hyperpod_recovery.adapters.sqs import SqsQueue
    from hyperpod_recovery.adapters.stepfunctions import StepFunctions
    from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply


class SlurmAgentOrchestrator:
    def __init__(self, commands: SqsQueue, tasks: StepFunctions) -> None:
        self.commands = commands
        self.tasks = tasks

    def dispatch(self, envelope: CommandEnvelope) -> None:
        try:
            self.commands.put(envelope.model_dump_json(), {"command": envelope.command.type, "incident": envelope.incident_id})
        except QueueUnavailable as exc:
            raise ControllerChannelError(f"could not queue {envelope.command.type} for {envelope.incident_id}: {exc}") from exc

    def answer(self, task_token: str, reply: CommandReply[Any]) -> None:
        try:
            self.tasks.send_task_success(task_token, reply.model_dump_json())
        except TaskAnswerFailed as exc:
            raise ControllerChannelError(f"could not answer task for {reply.command_id}: {exc}") from exc
