"""What the adapter contract tests share (tests/contract/test_adapter_contracts.py, test_ledger_contract.py,
test_cluster_contract.py, test_step_functions_contract.py): moto, and the ledger table made from
template.yaml's own key schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from sandbox.template import load_template
from tests.conftest import ROOT
from tests.fakes import FakeLedger

REGION = "us-west-2"


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def modeled_errors(operation: str) -> list[str]:
    """The error codes botocore's Step Functions model lists for an operation (what AWS documents)."""
    model = botocore.session.get_session().get_service_model("stepfunctions")
    return sorted(shape.name for shape in model.operation_model(operation).error_shapes)


def ledger_table_from_template() -> str:
    """The moto table is created from template.yaml's own key schema, so the two cannot drift."""
    props = load_template(ROOT / "template.yaml")["Resources"]["LedgerTable"]["Properties"]
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName="ledger",
        KeySchema=props["KeySchema"],
        AttributeDefinitions=props["AttributeDefinitions"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        BillingMode="PAY_PER_REQUEST",
    )
    return "ledger"


@pytest.fixture(params=["fake", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The ledger port twice: the fake and the DynamoDB adapter against moto (its table from template.yaml)."""
    if request.param == "fake":
        yield FakeLedger()
        return
    with mock_aws():
        yield DynamoLedger(ledger_table_from_template(), dynamodb=boto3.client("dynamodb", region_name=REGION))
