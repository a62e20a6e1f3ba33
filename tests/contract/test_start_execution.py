"""StartExecution as Step Functions documents it, not as a count of calls.

"If StartExecution is called with the same name and input as a running execution, the call succeeds
and return the same response as the original request. If the execution is closed or if the input is
different, it returns a 400 ExecutionAlreadyExists error" (StartExecution, API reference). So a
start that succeeds may not have started anything: intake's redelivered batch and the job poller's
every tick call it again for an execution already running. Only a real start is counted: the
adapter tells it by the answer's startDate (the original request's, for a repeat)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_recovery.adapters.stepfunctions import START_CLOCK_SKEW, StepFunctions
from hyperpod_recovery.clock import install_clock

REGION = "us-west-2"
NODE = "arn:aws:states:us-west-2:111122223333:stateMachine:llm-train-node-recovery"


@pytest.fixture
def machines() -> Iterator[tuple[StepFunctions, str]]:
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name=REGION)
        role = boto3.client("iam", region_name=REGION).create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        definition = json.dumps({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}})
        node, job = (sfn.create_state_machine(name=n, definition=definition, roleArn=role)["stateMachineArn"] for n in ("node", "job"))
        yield StepFunctions({"node": node, "job": job}, stepfunctions=sfn), node
        install_clock(None)


def test_given_the_same_name_and_input_while_it_runs_then_the_second_start_is_running_not_started(
    machines: tuple[StepFunctions, str],
) -> None:
    workflows, _ = machines
    # Given an execution started by an earlier poll
    assert workflows.start("hpj-uid-1773480000", '{"job": 1}', "job") == "started"
    # When the next poll, a minute later, starts it again with the same input (Step Functions answers success)
    later = datetime.now(UTC) + timedelta(minutes=1)
    install_clock(lambda: later)
    # Then it is told apart: found running, not started a second time
    assert workflows.start("hpj-uid-1773480000", '{"job": 1}', "job") == "running"
    # And other input, or a name whose execution ended, is refused as it was
    assert workflows.start("hpj-uid-1773480000", '{"job": 2}', "job") == "already_exists"


@pytest.mark.parametrize(
    ("started_before_the_call", "outcome"),
    [
        (timedelta(0), "started"),  # this call's own start
        (-timedelta(seconds=3), "started"),  # answered after a lost first answer was retried within the call
        (START_CLOCK_SKEW - timedelta(milliseconds=1), "started"),  # Step Functions' clock a little behind ours
        (START_CLOCK_SKEW + timedelta(milliseconds=1), "running"),
        (timedelta(minutes=6), "running"),  # an SQS redelivery after the visibility timeout
    ],
)
def test_a_start_counts_only_when_its_answer_is_dated_from_this_call(started_before_the_call: timedelta, outcome: str) -> None:
    # Given the answer Step Functions gives, dated when the execution started
    asked_at = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
    install_clock(lambda: asked_at)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    try:
        with Stubber(sfn) as stub:
            stub.add_response(
                "start_execution",
                {"executionArn": NODE.replace(":stateMachine:", ":execution:") + ":hpr-1", "startDate": asked_at - started_before_the_call},
            )
            # Then the start is the call's own only when its execution began during the call
            assert StepFunctions({"node": NODE}, stepfunctions=sfn).start("hpr-1", "{}") == outcome
    finally:
        install_clock(None)
