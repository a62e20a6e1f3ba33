"""What the controller agent's role may do to the ledger: put its job nodes snapshot, and nothing else.

The agent runs on the controller node; a compromised controller must not be able to forge incidents,
claims or breaker state. ControllerAgentPolicy is evaluated here as IAM evaluates an identity
policy's Allow statements (action, resource, condition operators; anything not allowed is denied),
for the requests DynamoDB makes of each call: a PutItem's ``dynamodb:LeadingKeys`` is the item's
partition key (IAM User Guide, DynamoDB condition keys; DynamoDB developer guide, "Using IAM
policy conditions for fine-grained access control").
"""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_recovery.models.job_nodes_item import partition_key
from sandbox.template import load_template
from tests.conftest import ROOT

CLUSTER = "llm-train"
ARNS = {
    "LedgerTable": "arn:aws:dynamodb:us-west-2:123456789012:table/stack-LedgerTable-1",
    "ProgressTable": "arn:aws:dynamodb:us-west-2:123456789012:table/stack-ProgressTable-1",
    "CommandQueue": "arn:aws:sqs:us-west-2:123456789012:stack-CommandQueue-1",
}
SUBSTITUTIONS = {"ClusterName": CLUSTER, "AWS::Partition": "aws", "AWS::Region": "us-west-2", "AWS::AccountId": "123456789012"}


def _resolve(value: Any) -> Any:
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        assert attribute == "Arn"
        return ARNS[logical]
    if isinstance(value, dict) and "Fn::Sub" in value:
        text = value["Fn::Sub"]
        for name, replacement in SUBSTITUTIONS.items():
            text = text.replace("${" + name + "}", replacement)
        assert "${" not in text, text
        return text
    if isinstance(value, dict):
        return {k: _resolve(v) for k, v in value.items()}
    return value


STATEMENTS = [
    _resolve(s)
    for s in load_template(ROOT / "template.yaml")["Resources"]["ControllerAgentPolicy"]["Properties"]["PolicyDocument"]["Statement"]
]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_holds(operator: str, key: str, wanted: list[str], context: dict[str, list[str]]) -> bool:
    values = context.get(key)
    if operator == "StringEquals":
        return values is not None and len(values) == 1 and values[0] in wanted
    if operator == "ForAllValues:StringEquals":
        # Every value the request carries is among those allowed (a request that carries none matches:
        # which is why the key must be one every PutItem carries).
        return all(v in wanted for v in values or [])
    raise AssertionError(f"an operator this evaluator does not know: {operator}")


def allowed(action: str, resource: str, context: dict[str, list[str]]) -> bool:
    for statement in STATEMENTS:
        if statement["Effect"] != "Allow" or action not in _listed(statement["Action"]):
            continue
        if resource not in _listed(statement["Resource"]) and "*" not in _listed(statement["Resource"]):
            continue
        conditions = statement.get("Condition", {})
        if all(_condition_holds(op, key, _listed(wanted), context) for op, keys in conditions.items() for key, wanted in keys.items()):
            return True
    return False


def _put(pk: str, table: str = "LedgerTable", action: str = "dynamodb:PutItem") -> bool:
    return allowed(action, ARNS[table], {"dynamodb:LeadingKeys": [pk]})


def test_the_agent_may_put_its_clusters_job_nodes_snapshot() -> None:
    assert _put(partition_key(CLUSTER))


@pytest.mark.parametrize(
    "pk",
    [
        "INCIDENT#inc-1",  # an incident's record, holdings, evidence (adapters/ledger/incidents.py)
        f"CLUSTER#{CLUSTER}",  # the breaker, the cap
        f"JOB#{CLUSTER}",  # job claims
        f"LINEAGE#{CLUSTER}",
        f"NODE#{CLUSTER}",
        f"REJOIN#{CLUSTER}",
        "JOBNODES#other-cluster",  # another cluster's snapshot
        f"JOBNODES#{CLUSTER}x",  # a key that merely starts like its own
    ],
)
def test_the_agent_may_write_no_other_ledger_item(pk: str) -> None:
    assert not _put(pk)


@pytest.mark.parametrize(
    "action",
    ["dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan"],
)
def test_the_agent_may_do_nothing_else_even_to_its_own_item(action: str) -> None:
    assert not _put(partition_key(CLUSTER), action=action)


def test_the_agent_may_not_write_the_progress_table() -> None:
    assert not _put(partition_key(CLUSTER), table="ProgressTable")
