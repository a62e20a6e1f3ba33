"""Notifications where on-call already is: the template's contract of the optional chat and paging channels.

Which resources each combination of the optional parameters creates, and with what properties; IAM (the
channel role, its guardrail, the pager's invoke role, the publishers); the KMS grants every publisher of the
chat topic needs; no secret in a parameter value or an output. Which outcome reaches which channel:
test_notification_routes.py; the messages' shapes: test_notification_shapes.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
import jsonschema
import pytest

from hyperpod_recovery.config import Settings
from hyperpod_recovery.domain.messages.wire import PAGER_EVENT_SOURCE
from tests.contract.notifications_support import (
    ACCOUNT,
    PAGERDUTY,
    PAGERDUTY_EVENT,
    REGION,
    RESOURCES,
    SLACK,
    TEMPLATE,
    channel_resolver,
    resource_properties,
)

PARAMETERS = TEMPLATE["Parameters"]


TEAMS = {
    "TeamsTenantId": "a1b2c3d4-0000-4000-8000-00000000000a",
    "TeamsTeamId": "b1b2c3d4-0000-4000-8000-00000000000b",
    "TeamsChannelId": "19%3ab6d3a1c2e0f94d8a9b1c2d3e4f5a6b7c%40thread.tacv2",
}
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


def _created(values: dict[str, str]) -> set[str]:
    resolver = channel_resolver(values)
    return {logical for logical, r in RESOURCES.items() if "Condition" not in r or resolver.condition(r["Condition"])}


def _statements(policies: list[Any]) -> list[dict[str, Any]]:
    return [s for p in policies if isinstance(p, dict) for s in p.get("Statement", [])]


def _actions(statement: dict[str, Any]) -> set[str]:
    return set(statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])


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
    name = resource_properties("SlackChannel", SLACK)["ConfigurationName"]
    shape = slack["ConfigurationName"]
    longest = name.replace("llm-train", "c" * 63)  # (HyperPod cluster names: at most 63 characters)
    assert re.fullmatch(shape.metadata["pattern"], longest) and len(longest) <= shape.metadata["max"]


def test_given_no_channel_parameters_then_no_chat_or_pager_resource_is_created() -> None:
    created = _created({})
    assert not created & (CHAT_RESOURCES | PAGER_RESOURCES | {"SlackChannel", "TeamsChannel"})
    # And the notifying functions see both channels off
    for logical in NOTIFYING_FUNCTIONS:
        env = resource_properties(logical, {})["Environment"]["Variables"]
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
        props = resource_properties(channel, values)
        # Then it is posted what the chat topic carries, through the stack's channel role, and a
        # command typed in the channel can do no more than the channel's own policy allows
        assert props["SnsTopicArns"] == ["ref:ChatTopic"]
        assert props["IamRoleArn"] == "ChatChannelRole.Arn"
        assert props["GuardrailPolicies"] == ["ref:ChatChannelPolicy"]
        assert props["UserRoleRequired"] is False and props["LoggingLevel"] in ("ERROR", "INFO", "NONE")
    if slack:
        props = resource_properties("SlackChannel", values)
        assert (props["SlackWorkspaceId"], props["SlackChannelId"]) == (SLACK["SlackWorkspaceId"], SLACK["SlackChannelId"])
    if teams:
        props = resource_properties("TeamsChannel", values)
        assert (props["TeamsTenantId"], props["TeamId"], props["TeamsChannelId"]) == tuple(TEAMS.values())
    # And the notifying functions are told the chat topic, and may publish to it
    for logical in NOTIFYING_FUNCTIONS:
        props = resource_properties(logical, values)
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
    connection = resource_properties("PagerDutyConnection", PAGERDUTY)
    # Then the routing key is read from the operator's secret at deploy time (a dynamic reference),
    # kept by EventBridge in its own secret, and put in the body, where the Events API v2 reads it
    reference = "{{resolve:secretsmanager:hyperpod-recovery/pagerduty:SecretString}}"
    (body,) = connection["AuthParameters"]["InvocationHttpParameters"]["BodyParameters"]
    assert body == {"Key": "routing_key", "Value": reference, "IsValueSecret": True}
    assert connection["AuthParameters"]["ApiKeyAuthParameters"]["ApiKeyValue"] == reference
    destination = resource_properties("PagerDutyDestination", PAGERDUTY)
    assert destination["InvocationEndpoint"] == PAGERDUTY_EVENTS_V2 and destination["HttpMethod"] == "POST"
    # And the notifying functions put pages on the default bus, with this stack's source only
    for logical in NOTIFYING_FUNCTIONS:
        props = resource_properties(logical, PAGERDUTY)
        bus = props["Environment"]["Variables"]["PAGER_EVENT_BUS"]
        assert bus == f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"
        (put,) = [s for s in _statements(props["Policies"]) if "events:PutEvents" in _actions(s)]
        assert put["Resource"] == bus and put["Condition"] == {"StringEquals": {"events:source": PAGER_EVENT_SOURCE}}


def test_given_the_page_rules_then_every_target_is_the_destination_with_a_dead_letter_queue_and_a_bounded_age() -> None:
    for rule in ("PageRule", "AlarmPageRule", "AlarmResolveRule"):
        (target,) = resource_properties(rule, PAGERDUTY)["Targets"]
        assert target["Arn"] == "PagerDutyDestination.Arn" and target["RoleArn"] == "PagerDutyInvokeRole.Arn"
        assert target["DeadLetterConfig"] == {"Arn": "PagerDutyDeadLetterQueue.Arn"}
        assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] <= 3600
    # And the dead-letter queue takes only these rules' undelivered pages, and its alarm tells the
    # channels that do not depend on PagerDuty
    (statement,) = resource_properties("PagerDutyDeadLetterQueuePolicy", PAGERDUTY)["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert set(statement["Condition"]["ArnEquals"]["aws:SourceArn"]) == {
        f"{r}.Arn" for r in ("PageRule", "AlarmPageRule", "AlarmResolveRule")
    }
    assert resource_properties("PagerDutyDeadLetterAlarm", {**PAGERDUTY, **SLACK})["AlarmActions"] == [
        "ref:NotificationTopic",
        "ref:ChatTopic",
    ]


def test_given_the_alarm_page_rules_then_they_cover_every_alarm_but_the_undelivered_pages_one() -> None:
    values = {**PAGERDUTY, "Orchestrator": "Eks", "EksClusterName": "eks-train"}
    alarms = {logical for logical, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"} - {"PagerDutyDeadLetterAlarm"}
    for rule in ("AlarmPageRule", "AlarmResolveRule"):
        pattern = resource_properties(rule, values)["EventPattern"]
        assert set(pattern["resources"]) == {f"{a}.Arn" for a in alarms}, rule
    # (On Slurm the EKS job poller's alarm is not created, nor named)
    assert "FindFailedJobsErrorsAlarm.Arn" not in resource_properties("AlarmPageRule", PAGERDUTY)["EventPattern"]["resources"]


def test_given_the_alarm_page_templates_then_a_cloudwatch_state_change_becomes_a_valid_events_api_v2_body() -> None:
    state = {"value": "ALARM", "reason": 'Threshold Crossed: 1 datapoint [2.0] was >= "1.0"', "timestamp": "2026-11-26T09:00:00.000+0000"}
    for rule, action in (("AlarmPageRule", "trigger"), ("AlarmResolveRule", "resolve")):
        (target,) = resource_properties(rule, PAGERDUTY)["Targets"]
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
    role = resource_properties("ChatChannelRole", SLACK)
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "chatbot.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    assert role["ManagedPolicyArns"] == ["ref:ChatChannelPolicy"] and "Policies" not in role
    statements = resource_properties("ChatChannelPolicy", SLACK)["PolicyDocument"]["Statement"]
    assert {a for s in statements for a in _actions(s)} == {"cloudwatch:DescribeAlarms"}
    assert all(s["Resource"] == f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:hpr-*" for s in statements)


def test_given_pagerduty_then_eventbridge_may_invoke_the_destination_and_nothing_else() -> None:
    role = resource_properties("PagerDutyInvokeRole", PAGERDUTY)
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
        statements = _statements(resource_properties(logical, values).get("Policies", []))
        assert not any(s.get("Resource") == "ref:ChatTopic" for s in statements), logical
        assert not any("events:PutEvents" in _actions(s) for s in statements), logical


def test_given_the_chat_topic_then_it_is_encrypted_and_every_publisher_may_use_its_key() -> None:
    values = {**SLACK, **PAGERDUTY}
    topic = resource_properties("ChatTopic", values)
    # Given the chat topic, encrypted with the stack's own key (never alias/aws/sns: CloudWatch
    # cannot use it, and the alarms publish here too)
    assert topic["KmsMasterKeyId"] == "ref:NotificationKey"
    key_policy = resource_properties("NotificationKey", values)["KeyPolicy"]["Statement"]
    # Then every alarm that publishes to it is let in by the key policy
    alarms = [
        logical
        for logical, r in RESOURCES.items()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "ref:ChatTopic" in resource_properties(logical, values).get("AlarmActions", [])
    ]
    assert alarms and any(
        s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and {"kms:Decrypt", "kms:GenerateDataKey"} <= _actions(s)
        for s in key_policy
    )
    # And every function that publishes to it may use the key through its role
    for logical in NOTIFYING_FUNCTIONS:
        statements = _statements(resource_properties(logical, values)["Policies"])
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
            with_chat = resource_properties(logical, {**SLACK, **PAGERDUTY, "Orchestrator": "Eks", "EksClusterName": "e"}).get(actions)
            without = resource_properties(logical, {**PAGERDUTY, "Orchestrator": "Eks", "EksClusterName": "e"}).get(actions)
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
