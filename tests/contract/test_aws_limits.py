"""The stack's names and sizes against AWS's own documented limits, not moto's: moto accepts what AWS refuses.

Each limit is quoted from AWS's documentation (see docs/decisions.md, 2026-11-23) and checked over
the whole space the template's parameters accept, not one example (the workflows' limits:
test_workflow_limits.py; IAM, KMS and EventBridge: test_aws_policies.py):

- CloudWatch: a metric-math alarm has at most 10 metrics; alarm names at most 255 characters,
  descriptions at most 1024.
- Step Functions: state machine names at most 80 characters.
- Lambda: each function's environment at most 4 KB with every parameter at its longest.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.config import Settings
from hyperpod_recovery.domain.policy.limits import (
    STATE_MACHINE_NAME_LENGTH,
)
from sandbox.template import Resolver
from tests.contract.aws_limits_support import PARAMETERS, RESOURCES, TEMPLATE, resources_of_type, stack_resolver

# AWS quotas, as documented.
CLOUDWATCH_ALARM_METRICS = 10  # "You can include up to 10 metrics in a metric math alarm" (CloudWatch quotas)


ALARM_NAME_LENGTH = 255  # PutMetricAlarm AlarmName: Length Constraints 1-255


ALARM_DESCRIPTION_LENGTH = 1024  # PutMetricAlarm AlarmDescription: 0-1024


STACK_NAME_LENGTH = 128  # CreateStack StackName: at most 128 characters, [a-zA-Z][-a-zA-Z0-9]*


# --- CloudWatch ---------------------------------------------------------------------------------
def test_given_every_alarm_then_none_has_more_metrics_than_cloudwatch_allows() -> None:
    # Given every alarm of the stack
    alarms = resources_of_type("AWS::CloudWatch::Alarm")
    assert alarms
    for logical, alarm in alarms:
        # Then a metric-math alarm has at most 10 metrics (the deploy is rolled back otherwise)
        metrics = alarm["Properties"].get("Metrics", [])
        assert len([m for m in metrics if "MetricStat" in m]) <= CLOUDWATCH_ALARM_METRICS, logical
        assert len(metrics) <= CLOUDWATCH_ALARM_METRICS + 1, logical


def test_given_the_longest_stack_and_parameters_then_alarm_names_and_descriptions_fit() -> None:
    # Given the longest stack name and parameter values CloudFormation accepts
    resolver = stack_resolver("s" * STACK_NAME_LENGTH)
    for logical, alarm in resources_of_type("AWS::CloudWatch::Alarm"):
        props = resolver.resolve(alarm["Properties"])
        # Then every alarm's name and description stay within PutMetricAlarm's limits
        assert 1 <= len(props["AlarmName"]) <= ALARM_NAME_LENGTH, logical
        assert len(props.get("AlarmDescription", "")) <= ALARM_DESCRIPTION_LENGTH, (logical, len(props["AlarmDescription"]))


# --- Step Functions: names ---------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    cluster=st.from_regex(r"\A[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z").filter(lambda n: len(n) <= 63),
    stack=st.from_regex(r"\A[a-zA-Z][-a-zA-Z0-9]{0,127}\Z"),
)
def test_given_any_accepted_cluster_and_stack_name_then_the_state_machine_names_fit(cluster: str, stack: str) -> None:
    # Given any cluster name the parameter accepts and any stack name CloudFormation accepts
    resolver = stack_resolver(stack, {"ClusterName": cluster})
    for logical, machine in resources_of_type("AWS::Serverless::StateMachine"):
        name = resolver.resolve(machine["Properties"]["Name"])
        # Then the state machine name is within Step Functions' 80 characters
        assert len(name) <= STATE_MACHINE_NAME_LENGTH, (logical, name)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", name), name


def test_given_the_cluster_name_parameter_then_its_length_is_bounded_by_hyperpods_own_limit() -> None:
    assert PARAMETERS["ClusterName"]["MaxLength"] == 63


def test_given_every_arn_the_stack_builds_for_its_workflows_then_it_names_the_machines_it_creates() -> None:
    # Given the names the state machines are created with
    resolver = stack_resolver("my-stack", {"ClusterName": "llm-train"})
    names = {resolver.resolve(m["Properties"]["Name"]) for _, m in resources_of_type("AWS::Serverless::StateMachine")}
    # When every state machine or execution ARN written elsewhere in the template is resolved
    text = json.dumps(resolver.resolve({k: v for k, v in TEMPLATE.items() if k in ("Globals", "Resources")}))
    referenced = set(re.findall(r":(?:stateMachine|execution):([A-Za-z0-9_-]+)", text))
    # Then each one names one of them (an ARN built from another name would match nothing)
    assert referenced <= names == {"llm-train-node-recovery", "llm-train-job-recovery", "llm-train-agent-check", "llm-train-planned-swap"}
    # And both recovery workflows are referenced (intake starts them, Reconcile watches them), and the
    # planned swap (the at-risk functions start it)
    assert referenced == {"llm-train-node-recovery", "llm-train-job-recovery", "llm-train-planned-swap"}


# --- Lambda: the environment -------------------------------------------------------------------
# "Function environment variables: 4 KB, for all environment variables associated with the function,
# in aggregate" (Lambda quotas; not adjustable). Lambda measures the variables as one JSON object:
# its refusal reads "...exceeded the 4KB limit. String measured: {"KEY":"value",...}", quotes and
# backslashes escaped. ASSUMPTION: the bytes of that compact JSON, escaped as Python's json.dumps
# escapes it (non-ASCII as \\uXXXX, the most it can cost), is what is compared with 4,096.
LAMBDA_ENVIRONMENT_BYTES = 4096


# The longest values AWS gives what the template refers to (service quotas): a region name, a
# partition's DNS suffix, and the names CloudFormation generates (never longer than the service allows).
LONGEST_REGION = "ap-southeast-7"


LONGEST_PARTITION = "aws-iso-b"


LONGEST_DNS_SUFFIX = "amazonaws.com.cn"


DYNAMODB_TABLE_NAME = 255  # CreateTable TableName: 3-255


SQS_QUEUE_NAME = 80  # CreateQueue QueueName: up to 80 characters


SNS_TOPIC_NAME = 256  # CreateTopic Name: up to 256 characters


# Characters whose JSON escape costs the most, one of each kind a pattern may let through.
_COSTLY_CHARACTERS = ('"', "\\", "\x01", "\u00e9", "\U0001f600", "a")


def _escaped_bytes(value: str) -> int:
    return len(json.dumps(value)) - 2


def _costliest_value(parameter: str) -> str:
    """The value of ``parameter`` whose JSON escape is longest: its MaxLength (or its largest number,
    its longest allowed value) of the costliest character its AllowedPattern lets through."""
    spec = PARAMETERS[parameter]
    if "AllowedValues" in spec:
        return max(spec["AllowedValues"], key=_escaped_bytes)
    if spec["Type"] == "Number":
        assert "MaxValue" in spec and "MinValue" in spec, f"{parameter}: a number the functions read needs MinValue and MaxValue"
        return max((str(spec["MinValue"]), str(spec["MaxValue"])), key=len)
    assert "MaxLength" in spec, f"{parameter}: a string the functions read needs a MaxLength"
    length, pattern = int(spec["MaxLength"]), spec.get("AllowedPattern", ".*")
    if parameter == "ClusterArn":  # a structure, not one character repeated: the region as long as MaxLength leaves
        region = "r" * (length - len("arn:aws:sagemaker::111122223333:cluster/") - 63)
        return f"arn:aws:sagemaker:{region}:111122223333:cluster/" + "a" * 63
    candidates = [c * length for c in _COSTLY_CHARACTERS] + [c * (length - length % 2) for c in _COSTLY_CHARACTERS]
    accepted = [v for v in candidates if re.fullmatch(pattern, v, re.DOTALL)]
    assert accepted, f"{parameter}: no value of {length} characters fits its pattern"
    return max(accepted, key=_escaped_bytes)


def _environment_at_its_longest(logical: str) -> dict[str, str]:
    variables = {**TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]}
    variables |= RESOURCES[logical]["Properties"].get("Environment", {}).get("Variables", {})
    read = set(re.findall(r"[A-Za-z0-9]+", json.dumps(variables))) & set(PARAMETERS)
    resolver = Resolver(
        TEMPLATE,
        {name: _costliest_value(name) for name in read},
        pseudo={
            "AWS::Region": LONGEST_REGION,
            "AWS::AccountId": "111122223333",
            "AWS::StackName": "s" * STACK_NAME_LENGTH,
            "AWS::Partition": LONGEST_PARTITION,
        },
    )
    queue_url = f"https://sqs.{LONGEST_REGION}.{LONGEST_DNS_SUFFIX}/111122223333/" + "q" * SQS_QUEUE_NAME
    resolver.refs = {
        **{name: queue_url for name, r in RESOURCES.items() if r["Type"] == "AWS::SQS::Queue"},
        **{name: "t" * DYNAMODB_TABLE_NAME for name, r in RESOURCES.items() if r["Type"] == "AWS::DynamoDB::Table"},
        **{
            name: f"arn:{LONGEST_PARTITION}:sns:{LONGEST_REGION}:111122223333:" + "n" * SNS_TOPIC_NAME
            for name, r in RESOURCES.items()
            if r["Type"] == "AWS::SNS::Topic"
        },
        # (a state machine's ARN: its name is the cluster's, at its longest, and a suffix)
        **{
            name: f"arn:{LONGEST_PARTITION}:states:{LONGEST_REGION}:111122223333:stateMachine:" + "m" * 80
            for name, r in RESOURCES.items()
            if r["Type"] == "AWS::Serverless::StateMachine"
        },
    }
    return {name: str(value) for name, value in resolver.resolve(variables).items()}


@pytest.mark.parametrize("logical", sorted(name for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function"))
def test_given_every_parameter_at_its_longest_then_each_functions_environment_fits_lambdas_4_kb(logical: str) -> None:
    # Given every parameter at its longest, costliest value, and every name AWS generates at its longest
    environment = _environment_at_its_longest(logical)
    # When Lambda measures the function's variables as it does, as one compact JSON object
    measured = len(json.dumps(environment, separators=(",", ":")).encode())
    # Then they fit its 4 KB: the deploy of any accepted configuration is never refused
    assert measured <= LAMBDA_ENVIRONMENT_BYTES, f"{logical}: {measured} bytes"


def test_given_the_health_check_parameter_then_the_functions_accept_exactly_its_length() -> None:
    # A check the template accepts and the settings refuse would stop Resume Nodes' every cold start
    (limit,) = [m.max_length for m in Settings.model_fields["replacement_health_check"].metadata if hasattr(m, "max_length")]
    assert limit == PARAMETERS["ReplacementHealthCheck"]["MaxLength"]
    # And only Resume Nodes carries it (in Globals it would weigh on every function's 4 KB)
    carriers = [
        logical
        for logical, r in resources_of_type("AWS::Serverless::Function")
        if "REPLACEMENT_HEALTH_CHECK" in r["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert "REPLACEMENT_HEALTH_CHECK" not in TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert carriers == ["ResumeNodesFunction"]
