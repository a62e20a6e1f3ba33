"""SQS: putting one message on a queue. The controller agent's command queue (adapters/slurm_agent.py)
and the intake's dead-letter queue both go through here; SDK errors leave as QueueUnavailable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient
from hyperpod_recovery.errors import QueueUnavailable

# SQS message attributes: a String value of at most this many characters is plenty for what we tag.
ATTRIBUTE_CHARACTERS = 1000


class SqsQueue:
    sqs = LazyClient("sqs")

    def __init__(self, queue_url: str, sqs: Any = None) -> None:
        self.queue_url = queue_url
        self._sqs = sqs

    def put(self, body: str, attributes: Mapping[str, str]) -> None:
        """One SendMessage, with every attribute a String (an empty value is not allowed: "unknown")."""
        try:
            self.sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=body,
                MessageAttributes={
                    name: {"DataType": "String", "StringValue": value[:ATTRIBUTE_CHARACTERS] or "unknown"}
                    for name, value in attributes.items()
                },
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueUnavailable(f"SendMessage to {self.queue_url}: {exc}") from exc


class DeadLetterQueue:
    """The intake's DLQ: an event that will never parse, kept whole with the reason it was refused."""

    def __init__(self, queue: SqsQueue) -> None:
        self.queue = queue

    def send(self, body: str, reason: str, message_id: str) -> None:
        self.queue.put(body, {"rejection_reason": reason, "original_message_id": message_id})
