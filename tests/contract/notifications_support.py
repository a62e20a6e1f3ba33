"""What the notification contract tests share (tests/contract/test_notifications.py, test_notification_routes.py,
test_notification_shapes.py): the template resolved for a combination of the optional channel parameters, the
channels' parameters and resources, the documented schemas of Chatbot's custom notification and PagerDuty's
Events API v2, and an incident record of any outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_recovery.domain.messages.severity import severity_of
from hyperpod_recovery.models.records import IncidentRecord, JobFate, TimelineEntry
from sandbox.template import Resolver, load_template
from tests.conftest import ROOT

TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
REGION = "us-west-2"
ACCOUNT = "123456789012"
T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
SLACK = {"SlackWorkspaceId": "T0123ABCD", "SlackChannelId": "C0123ABCD"}
PAGERDUTY = {"PagerDutyRoutingKeySecret": "hyperpod-recovery/pagerduty"}


# The contract: Amazon Q Developer in chat applications (AWS Chatbot) custom notifications,
# https://docs.aws.amazon.com/chatbot/latest/adminguide/custom-notifs.html ("Event schema" and
# "Parameter details"): version must be "1.0", source must be "custom", content.description is
# required, only textType "client-markdown" is supported; metadata.additionalContext maps keys to
# strings. A message that does not follow it (plain text) is not posted to the channel.
CHATBOT_CUSTOM_NOTIFICATION = {
    "type": "object",
    "required": ["version", "source", "content"],
    "properties": {
        "version": {"const": "1.0"},
        "source": {"const": "custom"},
        "id": {"type": "string"},
        "content": {
            "type": "object",
            "required": ["description"],
            "additionalProperties": False,
            "properties": {
                "textType": {"const": "client-markdown"},
                "title": {"type": "string"},
                "description": {"type": "string"},
                "nextSteps": {"type": "array", "items": {"type": "string"}},
                "keywords": {"type": "array", "items": {"type": "string"}},
            },
        },
        "metadata": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "threadId": {"type": "string"},
                "summary": {"type": "string"},
                "eventType": {"type": "string"},
                "relatedResources": {"type": "array", "items": {"type": "string"}},
                "additionalContext": {"type": "object", "additionalProperties": {"type": "string"}},
                "enableCustomActions": {"type": "boolean"},
            },
        },
    },
    "additionalProperties": False,
}


# The contract: PagerDuty Events API v2, Send an Alert Event,
# https://developer.pagerduty.com/docs/events-api-v2/trigger-events/ (routing_key is added by the
# stack's EventBridge connection, so the body we build never holds it). summary: at most 1024
# characters; dedup_key: at most 255; severity: critical, error, warning or info.
PAGERDUTY_EVENT = {
    "type": "object",
    "required": ["event_action"],
    "properties": {
        "event_action": {"enum": ["trigger", "acknowledge", "resolve"]},
        "dedup_key": {"type": "string", "minLength": 1, "maxLength": 255},
        "payload": {
            "type": "object",
            "required": ["summary", "source", "severity"],
            "properties": {
                "summary": {"type": "string", "minLength": 1, "maxLength": 1024},
                "source": {"type": "string", "minLength": 1},
                "severity": {"enum": ["critical", "error", "warning", "info"]},
                "component": {"type": "string"},
                "group": {"type": "string"},
                "class": {"type": "string"},
                "custom_details": {"type": "object"},
            },
            "additionalProperties": False,
        },
    },
    "not": {"required": ["routing_key"]},
    "additionalProperties": False,
    "if": {"properties": {"event_action": {"const": "trigger"}}},
    "then": {"required": ["payload", "dedup_key"]},
}


# --- helpers -----------------------------------------------------------------------------------
def channel_resolver(values: dict[str, str] | None = None) -> Resolver:
    parameters = {"ClusterName": "llm-train", "ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abcdef123456"}
    parameters.update({"CheckpointBucketPattern": "ml-checkpoints", **(values or {})})
    resolver = Resolver(
        TEMPLATE, parameters, pseudo={"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::StackName": "hpr", "AWS::Partition": "aws"}
    )
    resolver.refs = {logical: f"ref:{logical}" for logical in RESOURCES}
    resolver.attrs = Attributes()  # type: ignore[assignment]
    return resolver


class Attributes(dict):  # type: ignore[type-arg]
    def __missing__(self, key: tuple[str, str]) -> str:
        return f"{key[0]}.{key[1]}"


def resource_properties(logical: str, values: dict[str, str]) -> dict[str, Any]:
    resolved: dict[str, Any] = channel_resolver(values).resolve(RESOURCES[logical]["Properties"])
    return resolved


def incident_record(outcome: str, *, dry_run: bool = False, fates: list[JobFate] | None = None) -> IncidentRecord:
    return IncidentRecord(
        incident_id="hpr-i-0a1b2c-20261126T0900",
        cluster="llm-train",
        outcome=outcome,  # type: ignore[arg-type]
        dry_run=dry_run,
        trigger=["hyperpod_node_health"],
        nodes=["i-0a1b2c3d4e5f60718"],
        hostnames=["ip-10-1-0-7"],
        error="RejoinDeadlineExceeded" if outcome == "escalated" else None,
        summary=f"{outcome}: 1 node",
        detected_at=T0,
        recorded_at=T0 + timedelta(minutes=20),
        timeline=[TimelineEntry(at=T0, event="fault detected", detail="NvidiaErrorTerminate on ip-10-1-0-7")],
        job_fates=fates or [],
    )


# --- message shapes ------------------------------------------------------------------------------
def message_attributes(record: IncidentRecord) -> dict[str, str]:
    return {
        "outcome": record.outcome,
        "cluster": record.cluster,
        "severity": severity_of(record, stack_dry_run=False),
        "incident": record.incident_id,
    }
