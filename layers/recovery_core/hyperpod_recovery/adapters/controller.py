"""The channel to the controller agent: commands go on an SQS queue with the Step Functions task
token; the agent answers with SendTaskSuccess/SendTaskFailure. A dry run answers its own token
(no command reaches the cluster), so the workflow's graph is the same in both modes."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient
from hyperpod_recovery.errors import ControllerChannelError
from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply


class ControllerChannel:
    sqs = LazyClient("sqs")
    stepfunctions = LazyClient("stepfunctions")

    def __init__(self, queue_url: str, sqs: Any = None, stepfunctions: Any = None) -> None:
        self.queue_url = queue_url
        self._sqs = sqs
        self._stepfunctions = stepfunctions

    def send(self, envelope: CommandEnvelope) -> None:
        try:
            self.sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=envelope.model_dump_json(),
                MessageAttributes={
                    "command": {"DataType": "String", "StringValue": envelope.command.type},
                    "incident": {"DataType": "String", "StringValue": envelope.incident_id},
                },
            )
        except (ClientError, BotoCoreError) as exc:
            raise ControllerChannelError(f"could not queue {envelope.command.type} for {envelope.incident_id}: {exc}") from exc

    def answer(self, task_token: str, reply: CommandReply[Any]) -> None:
        """Complete a waiting task ourselves (dry runs, and commands already done by an earlier try)."""
        try:
            self.stepfunctions.send_task_success(taskToken=task_token, output=reply.model_dump_json())
        except (ClientError, BotoCoreError) as exc:
            raise ControllerChannelError(f"could not answer task for {reply.command_id}: {exc}") from exc
