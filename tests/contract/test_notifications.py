"""Notifications where on-call already is: the contract of the optional chat and paging channels.

- template.yaml: which resources each combination of the optional parameters creates, and with what
  properties; IAM (the channel role, its guardrail, the pager's invoke role, the publishers); the
  KMS grants every publisher of the chat topic needs; no secret in a parameter value or an output.
- domain/messages/severity.py: which outcome reaches which channel, for every outcome the code has.
- adapters/notifier.py: the chat copy against Chatbot's documented custom notification schema, the
  page against PagerDuty's Events API v2, and what the adapter really sends (moto's SNS and
  EventBridge, the template's own rule pattern).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_recovery.adapters.notifier import SnsNotifier
from hyperpod_recovery.config import Settings
from hyperpod_recovery.domain.messages.notification import HEADLINES, notification
from hyperpod_recovery.domain.messages.severity import CHANNELS, INFORMING_OUTCOMES, PAGING_OUTCOMES, SEVERITIES, channels_of, severity_of
from hyperpod_recovery.domain.messages.wire import CHAT_SECTION_CHARACTERS, PAGER_EVENT_SOURCE, chat_notification, pager_event
from hyperpod_recovery.errors import NotifierUnavailable
from hyperpod_recovery.models.records import IncidentRecord, JobFate, TimelineEntry
from hyperpod_recovery.vocabulary import OUTCOMES
from sandbox.aws import SandboxAWS
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from sandbox.template import Resolver, load_template
from tests.conftest import EVENTS, ROOT

TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
PARAMETERS = TEMPLATE["Parameters"]
REGION = "us-west-2"
ACCOUNT = "123456789012"
T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)

SLACK = {"SlackWorkspaceId": "T0123ABCD", "SlackChannelId": "C0123ABCD"}
TEAMS = {
    "TeamsTenantId": "a1b2c3d4-0000-4000-8000-00000000000a",
    "TeamsTeamId": "b1b2c3d4-0000-4000-8000-00000000000b",
    "TeamsChannelId": "19%3ab6d3a1c2e0f94d8a9b1c2d3e4f5a6b7c%40thread.tacv2",
}
PAGERDUTY = {"PagerDutyRoutingKeySecret": "hyperpod-recovery/pagerduty"}
CHANNEL_PARAMETERS = sorted({*SLACK, *TEAMS, *PAGERDUTY})
NOTIFYING_FUNCTIONS = {"RecordOutcomeFunction", "RecordJobOutcomeFunction", "ReconcileExecutionFunction", "SweepEndedExecutionsFunction"}
CHAT_RESOURCES = {"ChatTopic", "ChatChannelPolicy", "ChatChannelRole"}
PAGER_RESOURCES = {
    "PagerDutyConnection",
    "PagerDutyDestination",
    "PagerDutyInvokeRole",
    "PagerDutyDeadLetterQueue",
    "PagerDutyDeadLetterQueuePolicy",
    "PageRule",
    "AlarmPageRule",
    "AlarmResolveRule",
    "PagerDutyDeadLetterAlarm",
}
PAGERDUTY_EVENTS_V2 = "https://events.pagerduty.com/v2/enqueue"

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
def _resolver(values: dict[str, str] | None = None) -> Resolver:
    parameters = {"ClusterName": "llm-train", "ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abcdef123456"}
    parameters.update({"CheckpointBucketPattern": "ml-checkpoints", **(values or {})})
    resolver = Resolver(
        TEMPLATE, parameters, pseudo={"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::StackName": "hpr", "AWS::Partition": "aws"}
    )
    resolver.refs = {logical: f"ref:{logical}" for logical in RESOURCES}
    resolver.attrs = _Attributes()  # type: ignore[assignment]
    return resolver


class _Attributes(dict):  # type: ignore[type-arg]
    def __missing__(self, key: tuple[str, str]) -> str:
        return f"{key[0]}.{key[1]}"


def _created(values: dict[str, str]) -> set[str]:
    resolver = _resolver(values)
    return {logical for logical, r in RESOURCES.items() if "Condition" not in r or resolver.condition(r["Condition"])}


def _properties(logical: str, values: dict[str, str]) -> dict[str, Any]:
    resolved: dict[str, Any] = _resolver(values).resolve(RESOURCES[logical]["Properties"])
    return resolved


def _statements(policies: list[Any]) -> list[dict[str, Any]]:
    return [s for p in policies if isinstance(p, dict) for s in p.get("Statement", [])]


def _actions(statement: dict[str, Any]) -> set[str]:
    return set(statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])


def _record(outcome: str, *, dry_run: bool = False, fates: list[JobFate] | None = None) -> IncidentRecord:
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


# --- template: which resources each combination of parameters creates -------------------------
def test_given_every_channel_parameter_then_it_is_optional_constrained_and_empty_by_default() -> None:
    for name in CHANNEL_PARAMETERS:
        spec = PARAMETERS[name]
        # Then empty is the default and allowed (off), and anything else must match its pattern
        assert "AllowedPattern" in spec, name
        assert spec["Type"] == "String" and spec["Default"] == "" and re.fullmatch(spec["AllowedPattern"], ""), name


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("SlackWorkspaceId", SLACK["SlackWorkspaceId"], "t0123abcd"),
        ("SlackChannelId", SLACK["SlackChannelId"], "#on-call"),
        ("TeamsTenantId", TEAMS["TeamsTenantId"], "contoso.onmicrosoft.com"),
        ("TeamsTeamId", TEAMS["TeamsTeamId"], "not-a-uuid"),
        ("TeamsChannelId", TEAMS["TeamsChannelId"], "19:abc@thread.tacv2"),
        ("PagerDutyRoutingKeySecret", PAGERDUTY["PagerDutyRoutingKeySecret"], "R0UTING KEY"),
    ],
)
def test_given_a_channel_parameter_then_its_pattern_takes_what_the_chatbot_api_takes(name: str, good: str, bad: str) -> None:
    pattern = PARAMETERS[name]["AllowedPattern"]
    assert re.fullmatch(pattern, good) and not re.fullmatch(pattern, bad)


def test_given_the_chatbot_api_model_then_the_parameters_patterns_match_its_shapes() -> None:
    # Given botocore's model of the Chatbot API the channel configurations are created through
    shapes = boto3.client("chatbot", region_name=REGION).meta.service_model
    slack = shapes.operation_model("CreateSlackChannelConfiguration").input_shape.members
    teams = shapes.operation_model("CreateMicrosoftTeamsChannelConfiguration").input_shape.members
    # Then every value a parameter accepts is one the API accepts
    for parameter, shape in [
        ("SlackWorkspaceId", slack["SlackTeamId"]),
        ("SlackChannelId", slack["SlackChannelId"]),
        ("TeamsTenantId", teams["TenantId"]),
        ("TeamsTeamId", teams["TeamId"]),
        ("TeamsChannelId", teams["ChannelId"]),
    ]:
        value = {**SLACK, **TEAMS}[parameter]
        assert re.fullmatch(shape.metadata["pattern"], value), parameter
        assert shape.metadata["min"] <= len(value) <= shape.metadata["max"], parameter
    # And the configuration name the template builds fits the API's
    name = _properties("SlackChannel", SLACK)["ConfigurationName"]
    shape = slack["ConfigurationName"]
    longest = name.replace("llm-train", "c" * 63)  # (HyperPod cluster names: at most 63 characters)
    assert re.fullmatch(shape.metadata["pattern"], longest) and len(longest) <= shape.metadata["max"]


def test_given_no_channel_parameters_then_no_chat_or_pager_resource_is_created() -> None:
    created = _created({})
    assert not created & (CHAT_RESOURCES | PAGER_RESOURCES | {"SlackChannel", "TeamsChannel"})
    # And the notifying functions see both channels off
    for logical in NOTIFYING_FUNCTIONS:
        env = _properties(logical, {})["Environment"]["Variables"]
        assert env["CHAT_TOPIC_ARN"] == "" and env["PAGER_EVENT_BUS"] == "", logical


@pytest.mark.parametrize(
    ("values", "slack", "teams"),
    [(SLACK, True, False), (TEAMS, False, True), ({**SLACK, **TEAMS}, True, True)],
    ids=["slack", "teams", "both"],
)
def test_given_chat_ids_then_each_channel_watches_the_chat_topic_with_the_channel_role(
    values: dict[str, str], slack: bool, teams: bool
) -> None:
    created = _created(values)
    assert created >= CHAT_RESOURCES and not created & PAGER_RESOURCES
    assert ("SlackChannel" in created) is slack and ("TeamsChannel" in created) is teams
    for channel in (
        {"SlackChannel"} if slack and not teams else {"TeamsChannel"} if teams and not slack else {"SlackChannel", "TeamsChannel"}
    ):
        props = _properties(channel, values)
        # Then it is posted what the chat topic carries, through the stack's channel role, and a
        # command typed in the channel can do no more than the channel's own policy allows
        assert props["SnsTopicArns"] == ["ref:ChatTopic"]
        assert props["IamRoleArn"] == "ChatChannelRole.Arn"
        assert props["GuardrailPolicies"] == ["ref:ChatChannelPolicy"]
        assert props["UserRoleRequired"] is False and props["LoggingLevel"] in ("ERROR", "INFO", "NONE")
    if slack:
        props = _properties("SlackChannel", values)
        assert (props["SlackWorkspaceId"], props["SlackChannelId"]) == (SLACK["SlackWorkspaceId"], SLACK["SlackChannelId"])
    if teams:
        props = _properties("TeamsChannel", values)
        assert (props["TeamsTenantId"], props["TeamId"], props["TeamsChannelId"]) == tuple(TEAMS.values())
    # And the notifying functions are told the chat topic, and may publish to it
    for logical in NOTIFYING_FUNCTIONS:
        props = _properties(logical, values)
        assert props["Environment"]["Variables"]["CHAT_TOPIC_ARN"] == "ref:ChatTopic"
        assert any(s["Action"] == "sns:Publish" and s["Resource"] == "ref:ChatTopic" for s in _statements(props["Policies"])), logical


def test_given_half_a_chat_channel_then_the_rules_refuse_it_and_no_channel_is_created() -> None:
    rules = TEMPLATE["Rules"]
    assert {"SlackWorkspaceAndChannelTogether", "TeamsIdsTogether"} <= set(rules)
    # (CloudFormation applies Rules before anything is created; the conditions also ask for all of it)
    assert "SlackChannel" not in _created({"SlackWorkspaceId": SLACK["SlackWorkspaceId"]})
    assert "TeamsChannel" not in _created({"TeamsTenantId": TEAMS["TeamsTenantId"], "TeamsTeamId": TEAMS["TeamsTeamId"]})


def test_given_a_pagerduty_secret_then_pages_go_to_the_events_api_v2_with_the_key_from_secrets_manager() -> None:
    created = _created(PAGERDUTY)
    assert created >= PAGER_RESOURCES and not created & (CHAT_RESOURCES | {"SlackChannel", "TeamsChannel"})
    connection = _properties("PagerDutyConnection", PAGERDUTY)
    # Then the routing key is read from the operator's secret at deploy time (a dynamic reference),
    # kept by EventBridge in its own secret, and put in the body, where the Events API v2 reads it
    reference = "{{resolve:secretsmanager:hyperpod-recovery/pagerduty:SecretString}}"
    (body,) = connection["AuthParameters"]["InvocationHttpParameters"]["BodyParameters"]
    assert body == {"Key": "routing_key", "Value": reference, "IsValueSecret": True}
    assert connection["AuthParameters"]["ApiKeyAuthParameters"]["ApiKeyValue"] == reference
    destination = _properties("PagerDutyDestination", PAGERDUTY)
    assert destination["InvocationEndpoint"] == PAGERDUTY_EVENTS_V2 and destination["HttpMethod"] == "POST"
    # And the notifying functions put pages on the default bus, with this stack's source only
    for logical in NOTIFYING_FUNCTIONS:
        props = _properties(logical, PAGERDUTY)
        bus = props["Environment"]["Variables"]["PAGER_EVENT_BUS"]
        assert bus == f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"
        (put,) = [s for s in _statements(props["Policies"]) if "events:PutEvents" in _actions(s)]
        assert put["Resource"] == bus and put["Condition"] == {"StringEquals": {"events:source": PAGER_EVENT_SOURCE}}


def test_given_the_page_rules_then_every_target_is_the_destination_with_a_dead_letter_queue_and_a_bounded_age() -> None:
    for rule in ("PageRule", "AlarmPageRule", "AlarmResolveRule"):
        (target,) = _properties(rule, PAGERDUTY)["Targets"]
        assert target["Arn"] == "PagerDutyDestination.Arn" and target["RoleArn"] == "PagerDutyInvokeRole.Arn"
        assert target["DeadLetterConfig"] == {"Arn": "PagerDutyDeadLetterQueue.Arn"}
        assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] <= 3600
    # And the dead-letter queue takes only these rules' undelivered pages, and its alarm tells the
    # channels that do not depend on PagerDuty
    (statement,) = _properties("PagerDutyDeadLetterQueuePolicy", PAGERDUTY)["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert set(statement["Condition"]["ArnEquals"]["aws:SourceArn"]) == {
        f"{r}.Arn" for r in ("PageRule", "AlarmPageRule", "AlarmResolveRule")
    }
    assert _properties("PagerDutyDeadLetterAlarm", {**PAGERDUTY, **SLACK})["AlarmActions"] == ["ref:NotificationTopic", "ref:ChatTopic"]


def test_given_the_alarm_page_rules_then_they_cover_every_alarm_but_the_undelivered_pages_one() -> None:
    values = {**PAGERDUTY, "Orchestrator": "Eks", "EksClusterName": "eks-train"}
    alarms = {logical for logical, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"} - {"PagerDutyDeadLetterAlarm"}
    for rule in ("AlarmPageRule", "AlarmResolveRule"):
        pattern = _properties(rule, values)["EventPattern"]
        assert set(pattern["resources"]) == {f"{a}.Arn" for a in alarms}, rule
    # (On Slurm the EKS job poller's alarm is not created, nor named)
    assert "FindFailedJobsErrorsAlarm.Arn" not in _properties("AlarmPageRule", PAGERDUTY)["EventPattern"]["resources"]


def test_given_the_alarm_page_templates_then_a_cloudwatch_state_change_becomes_a_valid_events_api_v2_body() -> None:
    state = {"value": "ALARM", "reason": 'Threshold Crossed: 1 datapoint [2.0] was >= "1.0"', "timestamp": "2026-11-26T09:00:00.000+0000"}
    for rule, action in (("AlarmPageRule", "trigger"), ("AlarmResolveRule", "resolve")):
        (target,) = _properties(rule, PAGERDUTY)["Targets"]
        transformer = target["InputTransformer"]
        values: dict[str, Any] = {"alarm": "hpr-intake-dead-letters", "state": state}
        assert set(transformer["InputPathsMap"]) == set(re.findall(r"<(\w+)>", transformer["InputTemplate"]))
        # EventBridge puts a path's string inside the template's quotes, and an object as JSON
        text = transformer["InputTemplate"]
        for name, value in values.items():
            text = text.replace(f"<{name}>", value if isinstance(value, str) else json.dumps(value))
        body = json.loads(text)
        jsonschema.validate(body, PAGERDUTY_EVENT)
        assert body["event_action"] == action and body["dedup_key"] == "hpr-intake-dead-letters"


# --- IAM and KMS -------------------------------------------------------------------------------
def test_given_chat_then_the_channel_role_is_chatbots_alone_and_may_only_read_this_stacks_alarms() -> None:
    role = _properties("ChatChannelRole", SLACK)
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "chatbot.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    assert role["ManagedPolicyArns"] == ["ref:ChatChannelPolicy"] and "Policies" not in role
    statements = _properties("ChatChannelPolicy", SLACK)["PolicyDocument"]["Statement"]
    assert {a for s in statements for a in _actions(s)} == {"cloudwatch:DescribeAlarms"}
    assert all(s["Resource"] == f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:hpr-*" for s in statements)


def test_given_pagerduty_then_eventbridge_may_invoke_the_destination_and_nothing_else() -> None:
    role = _properties("PagerDutyInvokeRole", PAGERDUTY)
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "events.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    statements = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]
    assert statements == [{"Effect": "Allow", "Action": "events:InvokeApiDestination", "Resource": "PagerDutyDestination.Arn"}]


def test_given_the_functions_that_do_not_notify_then_none_may_publish_to_chat_or_page() -> None:
    values = {**SLACK, **PAGERDUTY}
    for logical, r in RESOURCES.items():
        if r["Type"] != "AWS::Serverless::Function" or logical in NOTIFYING_FUNCTIONS or "Condition" in r:
            continue
        statements = _statements(_properties(logical, values).get("Policies", []))
        assert not any(s.get("Resource") == "ref:ChatTopic" for s in statements), logical
        assert not any("events:PutEvents" in _actions(s) for s in statements), logical


def test_given_the_chat_topic_then_it_is_encrypted_and_every_publisher_may_use_its_key() -> None:
    values = {**SLACK, **PAGERDUTY}
    topic = _properties("ChatTopic", values)
    # Given the chat topic, encrypted with the stack's own key (never alias/aws/sns: CloudWatch
    # cannot use it, and the alarms publish here too)
    assert topic["KmsMasterKeyId"] == "ref:NotificationKey"
    key_policy = _properties("NotificationKey", values)["KeyPolicy"]["Statement"]
    # Then every alarm that publishes to it is let in by the key policy
    alarms = [
        logical
        for logical, r in RESOURCES.items()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "ref:ChatTopic" in _properties(logical, values).get("AlarmActions", [])
    ]
    assert alarms and any(
        s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and {"kms:Decrypt", "kms:GenerateDataKey"} <= _actions(s)
        for s in key_policy
    )
    # And every function that publishes to it may use the key through its role
    for logical in NOTIFYING_FUNCTIONS:
        statements = _statements(_properties(logical, values)["Policies"])
        assert any(s["Resource"] == "ref:ChatTopic" for s in statements)
        kms = {a for s in statements if s["Resource"] == "NotificationKey.Arn" for a in _actions(s)}
        assert {"kms:Decrypt", "kms:GenerateDataKey"} <= kms, logical
    # And nothing else publishes to it: no EventBridge rule targets it (the key policy has no events.amazonaws.com)
    assert not any(
        t["Arn"] == {"Ref": "ChatTopic"} for r in RESOURCES.values() if r["Type"] == "AWS::Events::Rule" for t in r["Properties"]["Targets"]
    )


def test_given_chat_then_every_alarm_that_notifies_the_topic_is_posted_to_chat_too() -> None:
    for logical, r in RESOURCES.items():
        if r["Type"] != "AWS::CloudWatch::Alarm":
            continue
        for actions in ("AlarmActions", "OKActions"):
            with_chat = _properties(logical, {**SLACK, **PAGERDUTY, "Orchestrator": "Eks", "EksClusterName": "e"}).get(actions)
            without = _properties(logical, {**PAGERDUTY, "Orchestrator": "Eks", "EksClusterName": "e"}).get(actions)
            if without is None:
                continue
            assert without == ["ref:NotificationTopic"] and with_chat == ["ref:NotificationTopic", "ref:ChatTopic"], (logical, actions)


def test_given_any_parameters_then_no_output_or_plain_parameter_carries_a_secret() -> None:
    # Then the PagerDuty key is never asked for as a value: the parameter names a secret
    assert "secret" in PARAMETERS["PagerDutyRoutingKeySecret"]["Description"].lower()
    assert not any(re.search(r"(routing|integration)key$|password|token$", name, re.IGNORECASE) for name in PARAMETERS)
    # And no output names the secret, the connection or what it holds
    text = json.dumps(TEMPLATE["Outputs"])
    assert "PagerDutyRoutingKeySecret" not in text and "PagerDutyConnection" not in text and "resolve:secretsmanager" not in text
    # And the secret's name is used only inside a dynamic reference, resolved by CloudFormation
    uses = re.findall(r".{0,40}\$\{PagerDutyRoutingKeySecret\}.{0,20}", json.dumps(RESOURCES))
    assert uses and all("{{resolve:secretsmanager:${PagerDutyRoutingKeySecret}:SecretString}}" in u for u in uses)


def test_given_the_functions_settings_then_the_channels_are_optional() -> None:
    assert Settings.model_fields["chat_topic_arn"].default == "" and Settings.model_fields["pager_event_bus"].default == ""


# --- severity routing ----------------------------------------------------------------------------
ROUTES = {  # outcome -> channels, for a record that is not a dry run and leaves no job without a copy
    "recovered": {"topic", "chat"},
    "duplicate": {"topic", "chat"},
    "rejected": {"topic", "chat"},
    "escalated": {"topic", "chat", "pager"},
    "capped": {"topic", "chat", "pager"},
    "stale": {"topic", "chat", "pager"},
    "aborted": {"topic", "chat", "pager"},
    "failed": {"topic", "chat", "pager"},
    "dry_run": {"topic"},
    "recovered_by_itself": {"topic", "chat"},
}


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_given_every_outcome_then_it_reaches_exactly_its_channels(outcome: str) -> None:
    assert set(channels_of(severity_of(_record(outcome), stack_dry_run=False))) == ROUTES[outcome]


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_given_a_dry_run_of_any_outcome_then_it_is_quiet_and_never_pages(outcome: str) -> None:
    assert severity_of(_record(outcome, dry_run=True), stack_dry_run=False) == "quiet"
    assert "pager" not in channels_of("quiet") and "chat" not in channels_of("quiet")


def test_given_the_routes_then_every_outcome_is_routed_and_pages_exactly_when_the_headline_asks_for_a_human() -> None:
    assert set(ROUTES) == set(OUTCOMES) == PAGING_OUTCOMES | INFORMING_OUTCOMES | {"dry_run"}
    for outcome in OUTCOMES:
        assert ("pager" in ROUTES[outcome]) is HEADLINES[outcome].startswith("ACTION NEEDED"), outcome


def test_given_a_recovery_that_left_a_job_without_a_copy_then_it_pages() -> None:
    orphan = JobFate(job="1001", name="pretrain", fate="not_resubmitted", reason="no verified checkpoint")
    assert severity_of(_record("recovered", fates=[orphan]), stack_dry_run=False) == "page"
    # (a recovery informs: its job runs again)
    running = JobFate(job="1001", name="pretrain", fate="resubmitted", copy_id="1002")
    assert severity_of(_record("recovered", fates=[running]), stack_dry_run=False) == "inform"


def test_given_a_severity_it_does_not_know_then_the_notifier_pages_rather_than_drop_it() -> None:
    assert set(SEVERITIES) == set(CHANNELS)
    assert channels_of("") == channels_of("page") and channels_of("urgent") == channels_of("page")


# --- message shapes ------------------------------------------------------------------------------
def _attributes(record: IncidentRecord) -> dict[str, str]:
    return {
        "outcome": record.outcome,
        "cluster": record.cluster,
        "severity": severity_of(record, stack_dry_run=False),
        "incident": record.incident_id,
    }


def test_given_an_escalation_then_the_chat_copy_follows_chatbots_custom_notification_schema_with_the_same_text() -> None:
    record = _record("escalated")
    subject, body = notification(record, "https://console.aws.amazon.com/states/x")
    message = chat_notification(subject, body, _attributes(record))
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
    record = _record("escalated")
    subject, body = notification(record, "https://console.aws.amazon.com/states/x")
    page = pager_event(subject, body, _attributes(record))
    jsonschema.validate(page, PAGERDUTY_EVENT)
    assert page["dedup_key"] == record.incident_id and page["payload"]["summary"] == subject
    assert page["payload"]["custom_details"]["message"] == body and page["payload"]["source"] == "llm-train"


def test_given_a_subject_and_incident_past_pagerdutys_limits_then_the_page_keeps_to_them() -> None:
    page = pager_event("s" * 2000, "b", {"incident": "i" * 400, "cluster": "c", "severity": "page"})
    jsonschema.validate(page, PAGERDUTY_EVENT)


# --- the adapter, against moto's SNS and EventBridge and the template's own rule ------------------
@pytest.fixture
def channels() -> Iterator[dict[str, Any]]:
    with mock_aws():
        sns, sqs, events = (boto3.client(s, region_name=REGION) for s in ("sns", "sqs", "events"))

        def inbox(name: str) -> tuple[str, str]:
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

        queues = {}
        for name in ("topic", "chat"):
            arn = sns.create_topic(Name=name)["TopicArn"]
            url, queue_arn = inbox(f"{name}-inbox")
            sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
            queues[name] = (arn, url)
        # The template's PageRule, its pattern resolved, delivering to a queue in place of PagerDuty
        url, queue_arn = inbox("pager-inbox")
        pattern = _properties("PageRule", PAGERDUTY)["EventPattern"] | {"account": [ACCOUNT]}
        events.put_rule(Name="page", EventPattern=json.dumps(pattern))
        events.put_targets(Rule="page", Targets=[{"Id": "pager", "Arn": queue_arn}])
        queues["pager"] = ("", url)
        notifier = SnsNotifier(
            queues["topic"][0],
            sns=sns,
            chat_topic_arn=queues["chat"][0],
            pager_event_bus=f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default",
            events=events,
        )
        yield {"notifier": notifier, "queues": queues, "sqs": sqs}


def _received(channels: dict[str, Any]) -> dict[str, list[str]]:
    sqs = channels["sqs"]
    return {
        name: [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
        for name, (_, url) in channels["queues"].items()
    }


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_given_every_outcome_when_the_notifier_publishes_then_each_channel_receives_it_or_not_by_its_route(
    channels: dict[str, Any], outcome: str
) -> None:
    record = _record(outcome, dry_run=outcome == "dry_run")
    subject, body = notification(record, "https://console.aws.amazon.com/states/x")
    channels["notifier"].publish(subject, body, _attributes(record))
    received = _received(channels)
    assert {name for name, messages in received.items() if messages} == ROUTES[outcome]
    assert received["topic"] == [body]  # the e-mail text, unchanged
    for message in received["chat"]:
        jsonschema.validate(json.loads(message), CHATBOT_CUSTOM_NOTIFICATION)
    # And what the rule sends PagerDuty (its target's InputPath, which moto does not apply) is a valid body
    (target,) = _properties("PageRule", PAGERDUTY)["Targets"]
    assert target["InputPath"] == "$.detail.pagerduty"
    for message in received["pager"]:
        jsonschema.validate(json.loads(message)["detail"]["pagerduty"], PAGERDUTY_EVENT)


def test_given_no_channels_wired_when_an_escalation_is_published_then_only_the_topic_receives_it(channels: dict[str, Any]) -> None:
    topic_arn = channels["queues"]["topic"][0]
    notifier = SnsNotifier(topic_arn, sns=channels["notifier"].sns, events=channels["notifier"].events)
    record = _record("escalated")
    notifier.publish(*notification(record, "https://x"), _attributes(record))
    received = _received(channels)
    assert len(received["topic"]) == 1 and not received["chat"] and not received["pager"]


TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:t"
REFUSED_INSIDE_A_200 = {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "try again"}]}


def test_given_eventbridge_refuses_the_page_inside_a_200_then_it_is_counted_and_the_topic_still_gets_the_text() -> None:
    events, sns = boto3.client("events", region_name=REGION), boto3.client("sns", region_name=REGION)
    failed: list[str] = []
    notifier = SnsNotifier(TOPIC, sns=sns, pager_event_bus="default", events=events, on_failure=failed.append)
    with Stubber(events) as pager, Stubber(sns) as topic:
        # (Stubber checks each request against botocore's model)
        pager.add_response("put_events", REFUSED_INSIDE_A_200)
        topic.add_response("publish", {"MessageId": "m-1"})
        pager.add_response("put_events", REFUSED_INSIDE_A_200)  # tried once more: refused again
        notifier.publish("s", "b", {"outcome": "escalated", "cluster": "c", "severity": "page", "incident": "i"})
        topic.assert_no_pending_responses()
        pager.assert_no_pending_responses()
    assert failed == ["pager"]


def test_given_every_channel_refuses_then_the_notifier_raises_so_the_step_retries() -> None:
    events, sns = boto3.client("events", region_name=REGION), boto3.client("sns", region_name=REGION)
    notifier = SnsNotifier(TOPIC, sns=sns, pager_event_bus="default", events=events, on_failure=lambda channel: None)
    with Stubber(events) as pager, Stubber(sns) as topic:
        for _ in range(2):  # each tried once more
            pager.add_response("put_events", REFUSED_INSIDE_A_200)
            topic.add_client_error("publish", "Throttled", "Rate exceeded", http_status_code=400)
        with pytest.raises(NotifierUnavailable, match=r"pager: .*InternalFailure: try again; topic: .*Throttled"):
            notifier.publish("s", "b", {"outcome": "escalated", "cluster": "c", "severity": "page", "incident": "i"})


# --- through the sandbox's deployed stack (the real template, handlers and state machines) -----
@pytest.mark.parametrize(
    ("drill", "outcome", "in_chat", "paged"),
    [
        ("rejoin-deadline.json", "escalated", True, True),
        ("default.json", "recovered", True, False),
        ("dry-run.json", "dry_run", False, False),
    ],
)
def test_given_a_sandbox_stack_with_slack_and_pagerduty_when_a_drill_ends_then_each_channel_gets_it_by_severity(
    tmp_path: Path, drill: str, outcome: str, in_chat: bool, paged: bool
) -> None:
    # Given the stack deployed with a Slack channel and PagerDuty: queues watch the chat topic (in
    # Chatbot's place) and the page rule (beside its API destination)
    runner = DrillRunner(load_scenario(EVENTS / "drills" / drill), log_path=tmp_path / "lambda.log")
    chat: list[dict[str, Any]] = []
    pages: list[dict[str, Any]] = []

    @contextmanager
    def deployed_with_channels() -> Iterator[SandboxAWS]:
        with DrillRunner.deployed(runner, {**SLACK, **PAGERDUTY}) as aws:
            sns, sqs, events = aws.client("sns"), aws.client("sqs"), aws.client("events")

            def inbox(name: str) -> tuple[str, str]:
                url = sqs.create_queue(QueueName=name)["QueueUrl"]
                return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

            chat_url, chat_arn = inbox("chat-inbox")
            sns.subscribe(
                TopicArn=aws.resolver.refs["ChatTopic"], Protocol="sqs", Endpoint=chat_arn, Attributes={"RawMessageDelivery": "true"}
            )
            page_url, page_arn = inbox("page-inbox")
            events.put_targets(Rule="sandbox-PageRule", Targets=[{"Id": "observer", "Arn": page_arn}])
            yield aws
            for url, found in ((chat_url, chat), (page_url, pages)):
                found.extend(json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))

    runner.deployed = deployed_with_channels  # type: ignore[method-assign]
    # When the drill runs
    report = runner.run()
    # Then the incident ends as the drill says; chat has its text in Chatbot's schema, or nothing;
    # PagerDuty is sent one Events API v2 trigger for the incident, or nothing
    (incident,) = report["incidents"]
    assert incident["outcome"] == outcome
    assert bool(chat) is in_chat and bool(pages) is paged
    for message in chat:
        jsonschema.validate(message, CHATBOT_CUSTOM_NOTIFICATION)
        assert message["content"]["title"] == report["notifications"][0]["subject"]
    for page in pages:
        jsonschema.validate(page["detail"]["pagerduty"], PAGERDUTY_EVENT)
        assert page["detail"]["pagerduty"]["dedup_key"] == incident["id"]
