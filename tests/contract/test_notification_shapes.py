"""Notifications' shapes (adapters/notifier.py): the chat copy against Chatbot's documented custom
notification schema, the page against PagerDuty's Events API v2, each cut to what its channel takes."""

from __future__ import annotations

import jsonschema

from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.domain.messages.wire import CHAT_SECTION_CHARACTERS, chat_notification, pager_event
from tests.contract.notifications_support import CHATBOT_CUSTOM_NOTIFICATION, PAGERDUTY_EVENT, incident_record, message_attributes


def test_given_an_escalation_then_the_chat_copy_follows_chatbots_custom_notification_schema_with_the_same_text() -> None:
    record = incident_record("escalated")
    subject, body = notification(record, "https://console.aws.amazon.com/states/x")
    message = chat_notification(subject, body, message_attributes(record))
    jsonschema.validate(message, CHATBOT_CUSTOM_NOTIFICATION)
    # Then it is the text a human reads in the e-mail, word for word, as a code block (columns kept)
    assert message["content"]["title"] == subject
    assert message["content"]["description"] == f"```\n{body}\n```"
    # And an incident's messages thread together
    assert message["id"] == message["metadata"]["threadId"] == record.incident_id


def test_given_a_text_past_what_chat_shows_then_the_copy_is_cut_and_says_where_the_whole_text_went() -> None:
    body = "x" * (CHAT_SECTION_CHARACTERS + 500) + "```"
    message = chat_notification("s", body, {"outcome": "escalated", "cluster": "c", "severity": "page"})
    jsonschema.validate(message, CHATBOT_CUSTOM_NOTIFICATION)
    description = message["content"]["description"]
    kept = description.removeprefix("```\n").split("\n... ")[0]
    assert f"{len(body) - len(kept):,} more characters cut here" in description and "e-mail on the notification topic" in description
    assert len(description) <= CHAT_SECTION_CHARACTERS
    # (a fence in the text cannot close the code block early)
    assert description.count("```") == 2


def test_given_an_escalation_then_the_page_is_an_events_api_v2_trigger_keyed_by_the_incident() -> None:
    record = incident_record("escalated")
    subject, body = notification(record, "https://console.aws.amazon.com/states/x")
    page = pager_event(subject, body, message_attributes(record))
    jsonschema.validate(page, PAGERDUTY_EVENT)
    assert page["dedup_key"] == record.incident_id and page["payload"]["summary"] == subject
    assert page["payload"]["custom_details"]["message"] == body and page["payload"]["source"] == "llm-train"


def test_given_a_subject_and_incident_past_pagerdutys_limits_then_the_page_keeps_to_them() -> None:
    page = pager_event("s" * 2000, "b", {"incident": "i" * 400, "cluster": "c", "severity": "page"})
    jsonschema.validate(page, PAGERDUTY_EVENT)
