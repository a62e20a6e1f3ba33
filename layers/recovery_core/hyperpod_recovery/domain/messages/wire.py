"""What each notification channel is sent, built to its limit as that channel counts it.

A service counts what it receives, not our text: SNS the UTF-8 bytes of a message and of its
attributes; EventBridge the UTF-8 bytes of an entry's Source, DetailType, Detail and Resources; the
PagerDuty API destination the JSON body EventBridge posts; Slack the characters of a section. So each
payload is measured as it is serialized, escapes included, and a text too long for it is cut before
it is serialized: at a character, so never inside a JSON escape or a UTF-8 sequence (serialization
writes each whole), at a line's end when one is near, with a line saying how much was cut and where
the whole text is. Pure: adapters/notifier.py sends what these build.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hyperpod_recovery.errors import NotificationTooLarge

# SNS Publish: "messages must be UTF-8 encoded strings and at most 256 KB in size (262,144 bytes, not
# 262,144 characters)"; MessageAttributeValue: "All parts of the message attribute, including name,
# type, and value, are included in the message size restriction".
SNS_MESSAGE_BYTES = 262_144
SNS_ATTRIBUTE_TYPE = "String"
# Publish Subject: printable ASCII; the reference says "less than 100 characters", SNS takes 100
# (getmoto/moto#1503: AWS Config publishes 100), as domain/messages/notification.py SUBJECT_LIMIT does.
SNS_SUBJECT_CHARACTERS = 100
FALLBACK_SUBJECT = "[hyperpod-recovery] notification"

# EventBridge, "Calculating Amazon EventBridge PutEvents event entry size": Time is 14 bytes if set;
# Source, DetailType, Detail and each Resources entry count their UTF-8 bytes; "The total entry size
# must be less than 256KB".
PUT_EVENTS_ENTRY_BYTES = 256 * 1024 - 1
PUT_EVENTS_TIME_BYTES = 14
# The body EventBridge posts to the PagerDuty API destination (template.yaml PageRule: InputPath
# $.detail.pagerduty, no input transformer; the connection adds routing_key): at most 64 KB, the
# bound we set for it (PagerDuty's own: "Events API payloads are limited to 512 KB").
API_DESTINATION_BODY_BYTES = 64 * 1024
# The connection's body parameter: ``, "routing_key": "<key>"``, a key of 32 characters (PagerDuty,
# Send an Alert Event), with room for a longer one.
ROUTING_KEY_ROOM = len(', "routing_key": ""') + 64

# Amazon Q Developer in chat applications, custom notifications:
# https://docs.aws.amazon.com/chatbot/latest/adminguide/custom-notifs.html
CHAT_SCHEMA_VERSION = "1.0"
CHAT_SOURCE = "custom"
CHAT_TEXT_TYPE = "client-markdown"
# Slack's Block Kit: a section's text is at most 3,000 characters. ASSUMPTION: Amazon Q Developer
# posts a custom notification's description as one section (its guide is silent): the description is
# kept to that, counted as Slack might (_slack_characters), so Slack never refuses or cuts it.
CHAT_SECTION_CHARACTERS = 3_000
FENCE = "```"

# PagerDuty Events API v2, Send an Alert Event:
# https://developer.pagerduty.com/docs/events-api-v2/trigger-events/
PAGER_EVENT_SOURCE = "hyperpod-recovery.notifications"  # template.yaml PageRule matches it
PAGER_DETAIL_TYPE = "Incident page"
PAGER_SUMMARY_LIMIT = 1024
PAGER_DEDUP_KEY_LIMIT = 255
PAGER_SEVERITY = "critical"  # a page is a human acting now: ACTION NEEDED

# A line is cut at its end when that keeps at least this share of what fits.
LINE_END_SHARE = 0.75


def wire_text(text: str) -> str:
    """``text`` as every channel can carry it: a lone surrogate (which no UTF-8 encoder takes, so the
    SDK would fail the whole call) becomes ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def sns_subject(subject: str) -> str:
    """A subject SNS takes: printable ASCII, not starting with a space, at most 100 characters."""
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in subject).strip()
    text = text if len(text) <= SNS_SUBJECT_CHARACTERS else text[: SNS_SUBJECT_CHARACTERS - 3] + "..."
    return text or FALLBACK_SUBJECT


def cut_note(where: str) -> Callable[[int], str]:
    """The line that ends a cut text: how much is missing, and where all of it is."""
    return lambda cut: f"\n... {cut:,} more characters cut here: {where}"


def fitted(text: str, fits: Callable[[str], bool], note: Callable[[int], str]) -> str:
    """``text`` if ``fits`` it, else its longest head that fits once ``note(characters cut)`` ends it,
    cut at a line's end when one is near. Serialized size grows with the head (every character adds
    its own bytes), so a binary search over the head's length finds it; the note's digits only keep
    that search from being exact, never from fitting (each answer is tried)."""
    if fits(text):
        return text

    def head(n: int) -> str:
        return text[:n] + note(len(text) - n)

    if not fits(head(0)):
        raise NotificationTooLarge(f"even its fixed parts do not fit ({len(text)} characters to cut)")
    low, high = 0, len(text) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if fits(head(middle)):
            low = middle
        else:
            high = middle - 1
    line_end = text.rfind("\n", 0, low)
    if line_end >= low * LINE_END_SHARE and fits(head(line_end)):
        low = line_end
    return head(low)


# --- the notification topic (e-mail and any subscriber) -----------------------------------------
def sns_attributes(attributes: dict[str, str]) -> dict[str, dict[str, str]]:
    return {name: {"DataType": SNS_ATTRIBUTE_TYPE, "StringValue": value} for name, value in attributes.items()}


def sns_size(subject: str, message: str, attributes: dict[str, str]) -> int:
    """What a Publish counts: the message and every attribute's name, type and value, in UTF-8 bytes.
    ASSUMPTION: the subject too (the reference is silent; it costs at most 100 bytes)."""
    names_and_values = sum(utf8_bytes(k) + len(SNS_ATTRIBUTE_TYPE) + utf8_bytes(v) for k, v in attributes.items())
    return utf8_bytes(message) + utf8_bytes(subject) + names_and_values


def topic_message(subject: str, body: str, attributes: dict[str, str], where: str) -> str:
    """The text as it is, cut only past SNS's 256 KB (a storm's text the domain did not cut enough)."""
    return fitted(body, lambda message: sns_size(subject, message, attributes) <= SNS_MESSAGE_BYTES, cut_note(where))


# --- chat (Amazon Q Developer in chat applications: Slack, Microsoft Teams) -----------------------
def _slack_characters(text: str) -> int:
    """The most Slack may count a text as: UTF-16 units (an emoji is 2) once ``&``, ``<`` and ``>``
    are escaped as its mrkdwn needs (``&amp;`` ``&lt;`` ``&gt;``). ASSUMPTION: neither the chat
    service nor Slack documents which count the 3,000 is; this one is never below either."""
    return sum(5 if c == "&" else 4 if c in "<>" else 2 if ord(c) > 0xFFFF else 1 for c in text)


def chat_notification(subject: str, body: str, attributes: dict[str, str], where: str = "") -> dict[str, Any]:
    """The chat copy in Chatbot's custom notification schema: the subject as title, the text as a
    code block (its columns kept; a fence inside cannot close it early), cut to one Slack section."""
    text = body.replace(FENCE, "'''")
    where = where or "the e-mail on the notification topic has the whole text"
    text = fitted(text, lambda t: _slack_characters(f"{FENCE}\n{t}\n{FENCE}") <= CHAT_SECTION_CHARACTERS, cut_note(where))
    keywords = [attributes[k] for k in ("outcome", "cluster", "workflow") if attributes.get(k)]
    notification: dict[str, Any] = {
        "version": CHAT_SCHEMA_VERSION,
        "source": CHAT_SOURCE,
        "content": {
            "textType": CHAT_TEXT_TYPE,
            "title": subject,
            "description": f"{FENCE}\n{text}\n{FENCE}",
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


def chat_message(subject: str, body: str, attributes: dict[str, str], where: str) -> str:
    """The chat topic's message: the copy as JSON, checked against SNS's limit as well."""
    message = json.dumps(chat_notification(subject, body, attributes, where), ensure_ascii=False)
    if sns_size(subject, message, attributes) > SNS_MESSAGE_BYTES:
        raise NotificationTooLarge(f"the chat copy is {sns_size(subject, message, attributes)} bytes with its attributes")
    return message


# --- the pager (PagerDuty Events API v2 through EventBridge) --------------------------------------
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
            "custom_details": {"message": body, **attributes},
        },
    }


def costliest_json_bytes(value: Any) -> int:
    """The most bytes any usual JSON writer makes of ``value``: every non-ASCII character as a
    ``\\uXXXX`` escape (an emoji as two), ``<``, ``>`` and ``&`` escaped too (Go's encoder does), ``/``
    as ``\\/``, and a space after each separator. ASSUMPTION: EventBridge's writer is one of these
    (it documents none), so the body it posts is never larger than this."""
    text = json.dumps(value, ensure_ascii=True)
    return len(text) + 5 * sum(text.count(c) for c in "<>&") + text.count("/")


def put_events_entry_size(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge calculates it (its user guide's getSize)."""
    size = PUT_EVENTS_TIME_BYTES if entry.get("Time") is not None else 0
    size += utf8_bytes(entry["Source"]) + utf8_bytes(entry["DetailType"])
    size += utf8_bytes(entry["Detail"]) if entry.get("Detail") is not None else 0
    return size + sum(utf8_bytes(r) for r in entry.get("Resources") or [] if r is not None)


def pager_entry(subject: str, body: str, attributes: dict[str, str], where: str) -> dict[str, str]:
    """The PutEvents entry (without its bus) whose ``detail.pagerduty`` is the trigger body: the text
    in ``custom_details.message``, cut so the body EventBridge posts (with the routing key the
    connection adds) and the entry both keep to their limits."""
    severity = attributes.get("severity", "page")

    def entry(message: str) -> dict[str, str]:
        detail = {"severity": severity, "pagerduty": pager_event(subject, message, attributes)}
        return {"Source": PAGER_EVENT_SOURCE, "DetailType": PAGER_DETAIL_TYPE, "Detail": json.dumps(detail, ensure_ascii=False)}

    def fits(message: str) -> bool:
        body_bytes = costliest_json_bytes(pager_event(subject, message, attributes)) + ROUTING_KEY_ROOM
        return body_bytes <= API_DESTINATION_BODY_BYTES and put_events_entry_size(entry(message)) <= PUT_EVENTS_ENTRY_BYTES

    return entry(fitted(body, fits, cut_note(where)))
