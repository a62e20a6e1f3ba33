"""What the Intake Lambda talks to: Step Functions (start a recovery) and the intake DLQ."""

from __future__ import annotations

from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import StartExecutionFailed


class RecoveryStarter:
    stepfunctions = LazyClient("stepfunctions")

    def __init__(self, state_machine_arn: str, job_state_machine_arn: str, stepfunctions: Any = None) -> None:
        self.state_machine_arns = {"node": state_machine_arn, "job": job_state_machine_arn}
        self._stepfunctions = stepfunctions

    def start(self, name: str, payload: str, workflow: Literal["node", "job"] = "node") -> Literal["started", "already_exists"]:
        """Start one NodeRecovery (or JobRecovery) execution named ``name``. Step Functions refuses
        a reused name, which is how a duplicate event in the same fault episode is turned away."""
        try:
            self.stepfunctions.start_execution(stateMachineArn=self.state_machine_arns[workflow], name=name, input=payload)
        except ClientError as exc:
            if error_code(exc) == "ExecutionAlreadyExists":
                return "already_exists"
            if is_transient(exc):
                raise StartExecutionFailed(f"StartExecution {name}: {error_code(exc)}") from exc
            raise
        except BotoCoreError as exc:
            raise StartExecutionFailed(f"StartExecution {name}: {exc}") from exc
        return "started"


class DeadLetters:
    sqs = LazyClient("sqs")

    def __init__(self, queue_url: str, sqs: Any = None) -> None:
        self.queue_url = queue_url
        self._sqs = sqs

    def send(self, body: str, reason: str, message_id: str) -> None:
        self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=body,
            MessageAttributes={
                "rejection_reason": {"DataType": "String", "StringValue": reason[:1000] or "unknown"},
                "original_message_id": {"DataType": "String", "StringValue": message_id},
            },
        )
