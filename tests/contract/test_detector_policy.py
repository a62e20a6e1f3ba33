"""Detect Hung Jobs calls only what its IAM policy grants (template.yaml DetectHungJobsFunction), on
the table or state machine each statement names: every AWS call its step makes on moto is recorded
(as the IAM reference names the action: service prefix and operation) over the paths that read a
job's claim, list the running recoveries, keep a verdict and update it, and start a recovery. Moto
enforces no policy, so a call the policy lacks (GetItem once did) would pass every other test and be
refused in AWS (AccessDeniedException: the detector would then start the recoveries it should leave)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.progress import ProgressTable
from hyperpod_recovery.adapters.stepfunctions import StepFunctions
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.models.progress import progress_item
from sandbox.template import load_template
from tests.conftest import ROOT
from tests.fakes import CLUSTER, T0
from tests.unit.test_detect_hung_jobs import KEYS, tick
from tests.unit.test_hang_detection import report

REGION = "us-west-2"
# What each resource the statements name is, here.
RESOURCE_OF = {"ProgressTable": "progress", "LedgerTable": "ledger", "JobRecoveryStateMachine": "job"}


def _granted() -> set[tuple[str, str]]:
    """(action, resource) pairs the function's own statements grant (the EKS ones are conditional and
    name no table or state machine)."""
    policies = load_template(ROOT / "template.yaml")["Resources"]["DetectHungJobsFunction"]["Properties"]["Policies"]
    pairs = set()
    for statement in (s for p in policies if isinstance(p, dict) and "Statement" in p for s in p["Statement"]):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resource = statement["Resource"]
        logical = resource["Fn::GetAtt"][0] if "Fn::GetAtt" in resource else resource["Ref"]
        pairs |= {(action, RESOURCE_OF[logical]) for action in actions}
    return pairs


@pytest.fixture
def recorded() -> Iterator[tuple[list[tuple[str, str]], Any, Any, Any]]:
    calls: list[tuple[str, str]] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        # (a batch names its tables as RequestItems' keys)
        batch = next(iter(params.get("RequestItems", {})), "")
        target = params.get("TableName") or batch or params.get("stateMachineArn", "").rsplit(":", 1)[-1]
        calls.append((f"{model.service_model.endpoint_prefix}:{model.name}", target))

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        for table in ("progress", "ledger"):
            dynamodb.create_table(TableName=table, **KEYS)
        role = boto3.client("iam", region_name=REGION).create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        definition = json.dumps({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}})
        job = sfn.create_state_machine(name="job", definition=definition, roleArn=role)["stateMachineArn"]
        for client in (dynamodb, sfn):
            client.meta.events.register("before-parameter-build", record)
        yield calls, dynamodb, sfn, job


def test_every_call_of_detect_hung_jobs_is_granted_on_the_resource_it_names(recorded) -> None:
    calls, dynamodb, sfn, job = recorded
    progress, ledger = ProgressTable("progress", dynamodb=dynamodb), DynamoLedger("ledger", dynamodb=dynamodb)
    workflows = StepFunctions({"job": job}, stepfunctions=sfn)
    # Given two stalled jobs: 1001 claimed by an incident after its last progress, 2002 claimed by none
    for r in [report(f"ip-10-1-0-{i}", idle=300) for i in (1, 2)] + [report(f"ip-10-2-0-{i}", idle=300, job="2002") for i in (1, 2)]:
        dynamodb.put_item(TableName="progress", Item=progress_item(r))
    ledger.claim_resubmission(CLUSTER, "1001", "hpr-x", T0 - timedelta(seconds=60), timedelta(hours=1))
    calls.clear()

    # When a tick leaves 1001 to its incident and starts 2002's recovery (listing the running ones first),
    # then the incident gives 1001 back and the next tick starts its recovery, updating the kept verdict
    first = tick(progress, ledger, workflows, HangRules())  # type: ignore[arg-type]
    made = set(calls)
    ledger.release_resubmission(CLUSTER, "1001", "hpr-x")
    calls.clear()
    second = tick(progress, ledger, workflows, HangRules(), timedelta(minutes=1))  # type: ignore[arg-type]
    made |= set(calls)
    assert first["left_to_another_incident"] == 1 and first["recoveries_started"] == 1 and second["recoveries_started"] == 1
    assert {v.verdict.job: v.execution is not None for v in ledger.verdicts(CLUSTER)} == {"1001": True, "2002": True}
    # Then every call it made is granted on the table or state machine it named
    paths = {"dynamodb:Scan", "dynamodb:GetItem", "dynamodb:PutItem", "states:ListExecutions", "states:StartExecution"}
    assert {a for a, _ in made} >= paths
    assert made <= _granted(), made - _granted()
