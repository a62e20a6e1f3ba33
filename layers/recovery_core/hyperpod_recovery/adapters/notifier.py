"""Notifications: one message text (domain/messages/notification.py), delivered where on-call reads it.

Every notification is published to the notification topic as plain text (e-mail, and any
subscriber of the operator's), with message attributes a subscription can filter on: ``outcome``,
``cluster``, ``severity`` (domain/messages/severity.py) and, for JobRecovery, ``workflow``. The severity
adds channels, each only when the stack wires it (template.yaml, docs/runbook.md Notifications):

- chat (Slack, Microsoft Teams through Amazon Q Developer in chat applications): a copy of the
  same text in Chatbot's custom notification schema, on the chat topic. Chatbot renders only AWS
  service events and that schema; plain text published to a topic it watches is not posted.
- pager (PagerDuty Events API v2): an EventBridge event whose ``detail.pagerduty`` is the Events
  API v2 trigger body (without the routing key: the stack's EventBridge connection adds it from
  Secrets Manager), sent on by a rule to an API destination.

Each channel's payload keeps to its own limit as that channel counts it (domain/messages/wire.py), and each
channel is sent on its own: one that fails is logged and counted (metric_names.py
NOTIFICATION_FAILURES) and costs the others nothing. Only when every channel failed, so nobody was
told and nothing went out, does ``publish`` raise NotifierUnavailable, which the steps retry.

Time: each channel gets one attempt on short timeouts (adapters/aws.py NOTIFY_CONFIG), then a
channel that failed for a transient reason is tried once more while SEND_BUDGET_SECONDS allow. Three
slow channels in a row thus end within the budget, and the function returns (its metrics flushed, the
alarm able to fire) instead of being stopped by Lambda with the later channels never tried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import NOTIFY_CONFIG, LazyClient, is_transient
from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.severity import Channel, channels_of
from hyperpod_recovery.domain.messages.wire import chat_message, pager_entry, sns_attributes, sns_subject, topic_message, wire_text
from hyperpod_recovery.errors import NotifierUnavailable
from hyperpod_recovery.metric_names import NOTIFICATION_FAILURES
from hyperpod_recovery.observability import logger, metrics

ERROR_TEXT_LIMIT = 500  # of a channel's error, in its log line and in NotifierUnavailable
# One attempt's worst: connecting and reading to their timeouts (NOTIFY_CONFIG makes one attempt).
ATTEMPT_WORST_SECONDS = float(NOTIFY_CONFIG.connect_timeout) + float(NOTIFY_CONFIG.read_timeout)
# What one publish may take, all channels and retries together; a retry starts only if its worst
# still ends within it. Under the 45 s of the shortest function that publishes, with room for its
# other calls (tests/contract/test_time_budgets.py).
SEND_BUDGET_SECONDS = 30.0


def count_failure(channel: Channel) -> None:
    metrics.add_metric(name=NOTIFICATION_FAILURES[channel], unit=MetricUnit.Count, value=1)


def whole_text_at(attributes: dict[str, str], deployment: Deployment, *, on_topic: bool) -> str:
    """Where a cut text is whole: the incident's record (the CLI shows it) or the verdict's list,
    and, for chat and the pager, the e-mail on the notification topic."""
    stack = f" --stack {deployment.stack}" if deployment.stack else ""
    if attributes.get("incident"):
        kept = f"the incident's record: {deployment.record(attributes['incident'])}"
    elif attributes.get("verdict"):
        kept = f"verdict {attributes['verdict']}: `hyperpod-recovery verdicts list{stack}`"
    else:
        kept = "the stack's ledger"
    return kept if on_topic else f"the e-mail on the notification topic has all of it; {kept}"


class SnsNotifier:
    """Publishes to the notification topic, and, as the stack wires them, to the chat topic and
    the pager's event bus. Empty ``chat_topic_arn`` / ``pager_event_bus``: that channel is off."""

    sns = LazyClient("sns", NOTIFY_CONFIG)
    events = LazyClient("events", NOTIFY_CONFIG)

    def __init__(
        self,
        topic_arn: str,
        sns: Any = None,
        *,
        chat_topic_arn: str = "",
        pager_event_bus: str = "",
        events: Any = None,
        deployment: Deployment | None = None,
        on_failure: Callable[[Channel], None] = count_failure,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topic_arn = topic_arn
        self.chat_topic_arn = chat_topic_arn
        self.pager_event_bus = pager_event_bus
        self.deployment = deployment or Deployment()
        self._sns = sns
        self._events = events
        self._on_failure = on_failure
        self._monotonic = monotonic

    def publish(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        subject, body = sns_subject(subject), wire_text(body)
        attributes = {wire_text(name): wire_text(value) for name, value in attributes.items()}
        routed = channels_of(attributes.get("severity", ""))
        # The page first: of the three, it is the one a human must not miss.
        sends: list[tuple[Channel, Callable[[str, str, dict[str, str]], None]]] = []
        if "pager" in routed and self.pager_event_bus:
            sends.append(("pager", self._page))
        sends.append(("topic", self._topic))
        if "chat" in routed and self.chat_topic_arn:
            sends.append(("chat", self._chat))
        started = self._monotonic()
        errors: dict[Channel, Exception] = {}
        for channel, send in sends:
            try:
                send(subject, body, attributes)
            # One channel's failure, whatever it is (an SDK error, a payload that cannot fit, a bug in
            # building it), must not cost the others: they are sent, and it is counted below.
            except Exception as exc:
                errors[channel] = exc
        for channel, send in sends:
            if channel not in errors or not _worth_another_try(errors[channel]):
                continue
            if self._monotonic() - started + ATTEMPT_WORST_SECONDS > SEND_BUDGET_SECONDS:
                break
            try:
                send(subject, body, attributes)
                del errors[channel]
            except Exception as exc:
                errors[channel] = exc
        failed = {channel: f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT] for channel, exc in errors.items()}
        for channel, error in failed.items():
            logger.warning(
                "a notification channel failed; the others are sent",
                extra={"channel": channel, "error": error, "incident": attributes.get("incident", "")},
            )
            self._on_failure(channel)
        if len(failed) == len(sends):
            raise NotifierUnavailable("no channel took the notification: " + "; ".join(f"{c}: {e}" for c, e in failed.items()))

    def _topic(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        where = whole_text_at(attributes, self.deployment, on_topic=True)
        self._publish(self.topic_arn, subject, topic_message(subject, body, attributes, where), attributes)

    def _chat(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        where = whole_text_at(attributes, self.deployment, on_topic=False)
        self._publish(self.chat_topic_arn, subject, chat_message(subject, body, attributes, where), attributes)

    def _publish(self, topic_arn: str, subject: str, message: str, attributes: dict[str, str]) -> None:
        try:
            self.sns.publish(TopicArn=topic_arn, Subject=subject, Message=message, MessageAttributes=sns_attributes(attributes))
        except (ClientError, BotoCoreError) as exc:
            raise NotifierUnavailable(f"SNS publish to {topic_arn}: {exc}") from exc

    def _page(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        entry = pager_entry(subject, body, attributes, whole_text_at(attributes, self.deployment, on_topic=False))
        try:
            answer = self.events.put_events(Entries=[{**entry, "EventBusName": self.pager_event_bus}])
        except (ClientError, BotoCoreError) as exc:
            raise NotifierUnavailable(f"EventBridge PutEvents to {self.pager_event_bus}: {exc}") from exc
        # PutEvents answers 200 with the entry refused inside: FailedEntryCount, ErrorCode, ErrorMessage.
        if answer.get("FailedEntryCount"):
            failed = answer["Entries"][0]
            reason = f"{failed.get('ErrorCode')}: {failed.get('ErrorMessage')}"
            raise NotifierUnavailable(f"EventBridge PutEvents to {self.pager_event_bus}: {reason}")


def _worth_another_try(exc: Exception) -> bool:
    """An SDK failure that may pass (no answer, throttling, a 5xx), or PutEvents refusing the entry
    inside its 200 (its documented answer to an internal failure); never a payload or a bug of ours."""
    cause = exc.__cause__
    if isinstance(exc, NotifierUnavailable) and isinstance(cause, ClientError | BotoCoreError):
        return is_transient(cause)
    return isinstance(exc, NotifierUnavailable) and cause is None
