"""SNS notifications. The ``outcome`` message attribute lets a subscription filter, e.g. page
only on escalated incidents and send everything else to a chat channel."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient
from hyperpod_recovery.errors import NotifierUnavailable


class SnsNotifier:
    sns = LazyClient("sns")

    def __init__(self, topic_arn: str, sns: Any = None) -> None:
        self.topic_arn = topic_arn
        self._sns = sns

    def publish(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        try:
            self.sns.publish(
                TopicArn=self.topic_arn,
                Subject=subject,
                Message=body,
                MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
            )
        except (ClientError, BotoCoreError) as exc:
            raise NotifierUnavailable(f"SNS publish to {self.topic_arn}: {exc}") from exc
