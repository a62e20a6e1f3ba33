"""At Risk as deployed: who may publish to its topic (AMP's alert manager and this account's
CloudWatch alarms, each held to the account), the key that encrypts the topic letting AMP use it,
the function subscribed to it, its tick's schedule, and the Lambda SNS event the sandbox and the
tests deliver, held to Powertools' model of the documented SNS event."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.parser.models import SnsModel

from sandbox.at_risk import alertmanager_message, sns_event
from sandbox.template import load_template
from tests.conftest import ROOT

RESOURCES: dict[str, Any] = load_template(ROOT / "template.yaml")["Resources"]


def test_only_the_prometheus_alert_manager_and_cloudwatch_alarms_of_this_account_may_publish_to_the_topic() -> None:
    statements = RESOURCES["AtRiskTopicPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert {s["Principal"]["Service"] for s in statements} == {"aps.amazonaws.com", "cloudwatch.amazonaws.com"}
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert set(actions) <= {"sns:Publish", "sns:GetTopicAttributes"} and statement["Effect"] == "Allow"
        assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        assert "aws:SourceArn" in statement["Condition"]["ArnLike"]


def test_the_topic_is_encrypted_with_a_key_the_alert_manager_may_use() -> None:
    assert RESOURCES["AtRiskTopic"]["Properties"]["KmsMasterKeyId"] == {"Ref": "NotificationKey"}
    key = RESOURCES["NotificationKey"]["Properties"]["KeyPolicy"]["Statement"]
    (aps,) = [s for s in key if s.get("Principal", {}).get("Service") == "aps.amazonaws.com"]
    assert set(aps["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}


def test_at_risk_is_subscribed_to_its_topic_and_retried_and_its_tick_is_scheduled_and_not() -> None:
    function = RESOURCES["AtRiskFunction"]["Properties"]
    assert function["Events"]["Signals"] == {"Type": "SNS", "Properties": {"Topic": {"Ref": "AtRiskTopic"}}}
    assert function["EventInvokeConfig"]["MaximumRetryAttempts"] == 2
    tick = RESOURCES["AtRiskTickFunction"]["Properties"]
    assert tick["Events"]["EveryQuarterHour"]["Properties"]["Schedule"] == "rate(15 minutes)"
    assert tick["EventInvokeConfig"]["MaximumRetryAttempts"] == 0


def test_the_sns_event_the_sandbox_delivers_is_the_documented_one() -> None:
    at = datetime(2026, 11, 29, 9, tzinfo=UTC)
    message = alertmanager_message(signal="thermal", instance_id="i-0123456789abcdef0", hostname=None, starts_at=at, cluster="c")
    event = sns_event(message, topic_arn="arn:aws:sns:us-west-2:123456789012:t", message_id="95df01b4-ee98-5cb9-9903-4c221d41eb5e", at=at)
    parsed = SnsModel.model_validate(event)
    assert parsed.Records[0].Sns.Message == message and json.loads(parsed.Records[0].Sns.Message)["alerts"]
