"""The stack's access rules against AWS's documented behaviour, not moto's (docs/decisions.md, 2026-11-23):

- SNS with KMS: every publisher to the encrypted topic may use its key (CloudWatch through the key
  policy, our functions through their roles); the AWS-managed alias/aws/sns cannot serve CloudWatch.
- IAM: an action with no resource type (states:SendTask*) is granted on "*" (anything else matches
  no request and denies it); every other action names its resources.
- EventBridge: the alarm opt-in prefix can never match one of the stack's own alarms, and the health
  rule matches the cluster's ARN in both the id and the name form.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto.events.models import EventPattern

from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from sandbox.template import Resolver
from tests.conftest import load_event
from tests.contract.aws_limits_support import PARAMETERS, RESOURCES, TEMPLATE, resources_of_type, stack_resolver

# Actions the IAM service authorization reference lists with no resource type: "*" is the only
# resource that can grant them.
ACTIONS_WITHOUT_RESOURCE_TYPES = {
    "states:SendTaskSuccess",
    "states:SendTaskFailure",
    "states:SendTaskHeartbeat",
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}


# --- SNS and KMS ----------------------------------------------------------------------------
def _actions(statement: dict[str, Any]) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def _role_statements(logical: str) -> list[dict[str, Any]]:
    return [s for p in RESOURCES[logical]["Properties"].get("Policies", []) if isinstance(p, dict) for s in p.get("Statement", [])]


def test_given_the_encrypted_topic_then_every_publisher_may_use_its_key() -> None:
    # Given the notification topic and the key it is encrypted with (the optional chat topic and its
    # conditional publishers: tests/contract/test_notifications.py)
    topic, props = "NotificationTopic", RESOURCES["NotificationTopic"]["Properties"]
    key_ref = props["KmsMasterKeyId"]
    # Then it is a key of this stack, never an AWS-managed alias/aws/* (CloudWatch cannot use those)
    assert isinstance(key_ref, dict) and key_ref.get("Ref") in RESOURCES, key_ref
    key = RESOURCES[key_ref["Ref"]]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    key_policy = key["Properties"]["KeyPolicy"]["Statement"]

    def key_grants(service: str) -> bool:
        return any(
            s["Effect"] == "Allow"
            and s.get("Principal", {}).get("Service") == service
            and {"kms:Decrypt", "kms:GenerateDataKey"} <= set(_actions(s))
            for s in key_policy
        )

    # And every alarm that notifies it is let in by the key policy
    alarms = [
        logical for logical, r in resources_of_type("AWS::CloudWatch::Alarm") if {"Ref": topic} in r["Properties"].get("AlarmActions", [])
    ]
    assert alarms and key_grants("cloudwatch.amazonaws.com")
    # And every EventBridge rule targeting it (none today) would be too
    rules = [
        logical
        for logical, r in resources_of_type("AWS::Events::Rule")
        if any(t["Arn"] == {"Ref": topic} for t in r["Properties"]["Targets"])
    ]
    assert not rules or key_grants("events.amazonaws.com")
    # And every function that publishes to it may use the key through its role
    publishers = [
        logical
        for logical, r in resources_of_type("AWS::Serverless::Function")
        if any("sns:Publish" in _actions(s) and s["Resource"] == {"Ref": topic} for s in _role_statements(logical))
    ]
    assert publishers
    for logical in publishers:
        kms = [s for s in _role_statements(logical) if s["Resource"] == {"Fn::GetAtt": [key_ref["Ref"], "Arn"]}]
        assert kms and {"kms:Decrypt", "kms:GenerateDataKey"} <= {a for s in kms for a in _actions(s)}, logical


# --- IAM resource types ------------------------------------------------------------------------
def _all_statements() -> list[tuple[str, dict[str, Any]]]:
    found = [
        (logical, s)
        for logical, r in RESOURCES.items()
        if r["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::StateMachine")
        for s in _role_statements(logical)
    ]
    found += [
        (logical, s) for logical, r in resources_of_type("AWS::IAM::ManagedPolicy") for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    return found


def test_given_every_iam_statement_then_actions_without_a_resource_type_are_granted_on_star_and_no_other_is() -> None:
    for logical, statement in _all_statements():
        actions = set(_actions(statement))
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if actions & ACTIONS_WITHOUT_RESOURCE_TYPES:
            # Then an action IAM cannot scope is alone with its kind, on "*" (an ARN would deny it)
            assert actions <= ACTIONS_WITHOUT_RESOURCE_TYPES and resources == ["*"], (logical, actions, resources)
        else:
            assert "*" not in resources, (logical, actions)


# --- EventBridge ---------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    stack=st.from_regex(r"\A[a-zA-Z][-a-zA-Z0-9]{0,127}\Z"),
    cluster=st.from_regex(r"\A[a-zA-Z0-9](-*[a-zA-Z0-9]){0,20}\Z"),
)
def test_given_any_stack_name_then_none_of_the_stacks_own_alarms_opts_in_to_recovery(stack: str, cluster: str) -> None:
    # Given the stack under any name CloudFormation accepts (hyperpod-recovery-<cluster> included)
    resolver = stack_resolver(stack, {"ClusterName": cluster})
    prefix = resolver.resolve(RESOURCES["AlarmRule"]["Properties"]["EventPattern"]["detail"]["alarmName"][0]["prefix"])
    for logical, alarm in resources_of_type("AWS::CloudWatch::Alarm"):
        # Then none of its own alarms starts with the opt-in prefix (each would be dead-lettered)
        assert not resolver.resolve(alarm["Properties"]["AlarmName"]).startswith(prefix), (logical, prefix)
    assert prefix == GuardedCluster(name=cluster, arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6").alarm_prefix


def test_the_stack_named_after_the_old_prefix_no_longer_feeds_its_own_alarms_to_intake() -> None:
    # The case that was found: stack hyperpod-recovery-<cluster>, alarm <stack>-circuit-breaker-open
    resolver = stack_resolver("hyperpod-recovery-llm-train", {"ClusterName": "llm-train"})
    pattern = EventPattern.load(json.dumps(resolver.resolve(RESOURCES["AlarmRule"]["Properties"]["EventPattern"])))
    event = load_event("cloudwatch/alarm_state_change_alarm.json")
    assert pattern.matches_event(event)
    for _, alarm in resources_of_type("AWS::CloudWatch::Alarm"):
        event["detail"]["alarmName"] = resolver.resolve(alarm["Properties"]["AlarmName"])
        assert not pattern.matches_event(event), event["detail"]["alarmName"]


@pytest.mark.parametrize(
    "configured",
    ["arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6", "arn:aws:sagemaker:us-west-2:111122223333:cluster/llm-train"],
)
@pytest.mark.parametrize(
    "in_event",
    ["arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6", "arn:aws:sagemaker:us-west-2:111122223333:cluster/llm-train"],
)
def test_given_either_arn_form_then_the_health_rule_and_intake_match_the_cluster(configured: str, in_event: str) -> None:
    # Given the stack configured with the cluster's ARN in one form, and an event carrying either
    resolver = Resolver(
        TEMPLATE,
        {"ClusterName": "llm-train", "ClusterArn": configured},
        pseudo={"AWS::Region": "us-west-2", "AWS::AccountId": "111122223333", "AWS::Partition": "aws"},
    )
    pattern = EventPattern.load(json.dumps(resolver.resolve(RESOURCES["HealthEventRule"]["Properties"]["EventPattern"])))
    event = load_event("hyperpod/node_health_unhealthy.json")
    event["detail"]["ClusterArn"] = in_event
    # Then the name form always matches, and the id form matches when the stack was given it
    matches = in_event.endswith("/llm-train") or in_event == configured
    assert pattern.matches_event(event) is matches
    # And intake owns it whenever the rule forwards it
    assert GuardedCluster(name="llm-train", arn=configured).owns(in_event) or not matches


def test_given_a_name_form_arn_then_the_parameter_pattern_and_settings_accept_it() -> None:
    pattern = PARAMETERS["ClusterArn"]["AllowedPattern"]
    for arn in (
        "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster",
        "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6",
    ):
        assert re.fullmatch(pattern, arn)
    assert not re.fullmatch(pattern, "arn:aws:sagemaker:us-west-2:111122223333:cluster/")
    assert not re.fullmatch(pattern, "arn:aws:sagemaker:us-west-2:111122223333:cluster/bad_name")
