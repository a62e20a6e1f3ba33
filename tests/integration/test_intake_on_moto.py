"""The intake Lambda with its real adapters on moto: a bad event ends in the DLQ with its reason,
the good ones start an execution, and a redelivered batch starts nothing new."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any
from unittest import mock

import boto3
import pytest
from moto import mock_aws

from sandbox.aws import load_handler
from tests.conftest import load_event
from tests.fakes import CLUSTER_ARN, settings_env

REGION = "us-west-2"
handler = load_handler("functions/intake/")


@pytest.fixture
def stack() -> Iterator[dict[str, Any]]:
    with mock_aws():
        sqs, sfn = boto3.client("sqs", region_name=REGION), boto3.client("stepfunctions", region_name=REGION)
        dlq = sqs.create_queue(QueueName="intake-dlq")["QueueUrl"]
        role = boto3.client("iam", region_name=REGION).create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        machine = sfn.create_state_machine(
            name="hpr-node-recovery", definition=json.dumps({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}}), roleArn=role
        )["stateMachineArn"]
        with mock.patch.dict(os.environ, settings_env(INTAKE_DLQ_URL=dlq, STATE_MACHINE_ARN=machine)):
            yield {"sqs": sqs, "sfn": sfn, "dlq": dlq, "machine": machine}


def _record(message_id: str, body: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": f"rh-{message_id}",
        "body": body,
        "attributes": {},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:intake",
        "awsRegion": REGION,
    }


def _health_event() -> str:
    event = load_event("hyperpod/node_health_unhealthy.json")
    event["detail"]["ClusterArn"] = CLUSTER_ARN
    return json.dumps(event)


def test_bad_event_goes_to_the_dlq_with_its_reason_and_the_good_one_starts_a_recovery(stack: dict[str, Any], lambda_context) -> None:  # type: ignore[no-untyped-def]
    broken = json.loads(_health_event())
    del broken["detail"]["InstanceId"]
    event = {"Records": [_record("bad", json.dumps(broken)), _record("good", _health_event())]}

    response = handler(event, lambda_context)

    assert response == {"batchItemFailures": []}
    message = stack["sqs"].receive_message(QueueUrl=stack["dlq"], MessageAttributeNames=["All"])["Messages"][0]
    assert json.loads(message["Body"]) == broken
    assert message["MessageAttributes"]["rejection_reason"]["StringValue"].startswith("detail.InstanceId: Field required")
    executions = stack["sfn"].list_executions(stateMachineArn=stack["machine"])["executions"]
    assert [e["name"] for e in executions] == ["hpr-i-0391f86fa0fe0d465-20260314T0920"]
    started = json.loads(stack["sfn"].describe_execution(executionArn=executions[0]["executionArn"])["input"])
    assert started["node_ids"] == ["i-0391f86fa0fe0d465"] and started["cluster"] == "llm-train"


def test_redelivered_batch_starts_nothing_new(stack: dict[str, Any], lambda_context) -> None:  # type: ignore[no-untyped-def]
    event = {"Records": [_record("m1", _health_event())]}
    handler(event, lambda_context)
    assert handler(event, lambda_context) == {"batchItemFailures": []}
    assert len(stack["sfn"].list_executions(stateMachineArn=stack["machine"])["executions"]) == 1
