"""Notifications: one message text (domain/notification.py), delivered where on-call reads it.

Every notification is published to the notification topic as plain text (e-mail, and any
subscriber of the operator's), with message attributes a subscription can filter on: ``outcome``,
``cluster``, ``severity`` (domain/severity.py) and, for JobRecovery, ``workflow``. The severity
adds channels, each only when the stack wires it (template.yaml, docs/runbook.md Notifications):

- chat (Slack, Microsoft Teams through Amazon Q Developer in chat applications): a copy of the
  same text in Chatbot's custom notification schema, on the chat topic. Chatbot renders only AWS
  service events and that schema; plain text published to a topic it watches is not posted.
- pager (PagerDuty Events API v2): an EventBridge event whose ``detail.pagerduty`` is the Events
  API v2 trigger body (without the routing key: the stack's EventBridge connection adds it from
  Secrets Manager), sent on by a rule to an API destination.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient
from hyperpod_recovery.domain.severity import channels_of
from hyperpod_recovery.errors import NotifierUnavailable

# Amazon Q Developer in chat applications, custom notifications:
# https://docs.aws.amazon.com/chatbot/latest/adminguide/custom-notifs.html
CHAT_SCHEMA_VERSION = "1.0"
CHAT_SOURCE = "custom"
CHAT_TEXT_TYPE = "client-markdown"
# Slack cuts a message at 40,000 characters and Teams at about 28 KB: the chat copy keeps to this
# and says where the whole text went.
CHAT_DESCRIPTION_LIMIT = 12_000
WHOLE_TEXT_IS_ON_THE_TOPIC = "the whole text went to the e-mail subscribers of the notification topic"

# PagerDuty Events API v2, Send an Alert Event:
# https://developer.pagerduty.com/docs/events-api-v2/trigger-events/
PAGER_EVENT_SOURCE = "hyperpod-recovery.notifications"  # template.yaml PageRule matches it
PAGER_DETAIL_TYPE = "Incident page"
PAGER_SUMMARY_LIMIT = 1024
PAGER_DEDUP_KEY_LIMIT = 255
PAGER_SEVERITY = "critical"  # a page is a human acting now: ACTION NEEDED
# EventBridge PutEvents: an entry is at most 256 KB; the message text stays well inside it.
PAGER_TEXT_LIMIT = 200_000


def chat_notification(subject: str, body: str, attributes: dict[str, str]) -> dict[str, Any]:
    """The chat copy: the subject as title, the text as it is (a code block keeps its columns)."""
    text = body.replace("```", "'''")
    if len(text) > CHAT_DESCRIPTION_LIMIT:
        cut = len(text) - CHAT_DESCRIPTION_LIMIT
        text = text[:CHAT_DESCRIPTION_LIMIT] + f"\n... ({cut} more characters: {WHOLE_TEXT_IS_ON_THE_TOPIC})"
    keywords = [attributes[k] for k in ("outcome", "cluster", "workflow") if attributes.get(k)]
    notification: dict[str, Any] = {
        "version": CHAT_SCHEMA_VERSION,
        "source": CHAT_SOURCE,
        "content": {
            "textType": CHAT_TEXT_TYPE,
            "title": subject,
            "description": f"```\n{text}\n```",
            "keywords": keywords,
        },
        "metadata": {
            "summary": subject,
            "eventType": attributes.get("outcome", "notification"),
            "additionalContext": dict(attributes),
        },
    }
    if attributes.get("incident"):
        notification["id"] = attributes["incident"]
        notification["metadata"]["threadId"] = attributes["incident"]
    return notification


def pager_event(subject: str, body: str, attributes: dict[str, str]) -> dict[str, Any]:
    """The Events API v2 trigger for this notification, routing key left out. Its dedup key is the
    incident, so a page sent again for the same incident (a rerun of the recording step) is the
    same PagerDuty alert, not a second one."""
    dedup = attributes.get("incident") or subject
    return {
        "event_action": "trigger",
        "dedup_key": dedup[:PAGER_DEDUP_KEY_LIMIT],
        "payload": {
            "summary": subject[:PAGER_SUMMARY_LIMIT],
            "source": attributes.get("cluster", "hyperpod-recovery"),
            "severity": PAGER_SEVERITY,
            "component": attributes.get("workflow", "node") + " recovery",
            "group": "hyperpod-recovery",
            "class": attributes.get("outcome", "notification"),
            "custom_details": {"message": body[:PAGER_TEXT_LIMIT], **attributes},
        },
    }


class SnsNotifier:
    """Publishes to the notification topic, and, as the stack wires them, to the chat topic and
    the pager's event bus. Empty ``chat_topic_arn`` / ``pager_event_bus``: that channel is off."""

    sns = LazyClient("sns")
    events = LazyClient("events")

    def __init__(self, topic_arn: str, sns: Any = None, *, chat_topic_arn: str = "", pager_event_bus: str = "", events: Any = None) -> None:
        self.topic_arn = topic_arn
        self.chat_topic_arn = chat_topic_arn
        self.pager_event_bus = pager_event_bus
        self._sns = sns
        self._events = events

    def publish(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        channels = channels_of(attributes.get("severity", ""))
        # The page first: of the three, it is the one a human must not miss.
        if "pager" in channels and self.pager_event_bus:
            self._page(subject, body, attributes)
        self._publish(self.topic_arn, subject, body, attributes)
        if "chat" in channels and self.chat_topic_arn:
            self._publish(self.chat_topic_arn, subject, json.dumps(chat_notification(subject, body, attributes)), attributes)

    def _publish(self, topic_arn: str, subject: str, message: str, attributes: dict[str, str]) -> None:
        try:
            self.sns.publish(
                TopicArn=topic_arn,
                Subject=subject,
                Message=message,
                MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
            )
        except (ClientError, BotoCoreError) as exc:
            raise NotifierUnavailable(f"SNS publish to {topic_arn}: {exc}") from exc

    def _page(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        entry = {
            "Source": PAGER_EVENT_SOURCE,
            "DetailType": PAGER_DETAIL_TYPE,
            "Detail": json.dumps({"severity": attributes.get("severity", "page"), "pagerduty": pager_event(subject, body, attributes)}),
            "EventBusName": self.pager_event_bus,
        }
        try:
            answer = self.events.put_events(Entries=[entry])
        except (ClientError, BotoCoreError) as exc:
            raise NotifierUnavailable(f"EventBridge PutEvents to {self.pager_event_bus}: {exc}") from exc
        # PutEvents answers 200 with the entry refused inside: FailedEntryCount, ErrorCode, ErrorMessage.
        if answer.get("FailedEntryCount"):
            failed = answer["Entries"][0]
            reason = f"{failed.get('ErrorCode')}: {failed.get('ErrorMessage')}"
            raise NotifierUnavailable(f"EventBridge PutEvents to {self.pager_event_bus}: {reason}")
