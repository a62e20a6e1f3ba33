"""The SDK the layer ships knows every operation the code calls and every response field it reads.

The Lambda runtime's bundled boto3 may predate the HyperPod APIs; botocore then drops the response
members it does not know, silently. These tests pin the layer's SDK, check hyperpod_recovery/
sdk_contract.py against the code (nothing called or read is missing from it) and against the
botocore model of the pinned version (everything in it exists), and show that a function given an
SDK without one of those fields refuses to run.
"""

from __future__ import annotations

import copy
import re

import boto3
import botocore
import pytest
from botocore.loaders import Loader
from botocore.model import ServiceModel

from hyperpod_recovery import sdk_contract
from hyperpod_recovery.errors import SdkTooOld
from hyperpod_recovery.sdk_contract import MINIMUM_BOTOCORE, OPERATOR_REQUIRED, REQUIRED, check_client, check_sdk_version, missing_from
from tests.conftest import ROOT

PACKAGE = ROOT / "layers" / "recovery_core" / "hyperpod_recovery"
LAYER_REQUIREMENTS = (ROOT / "layers" / "recovery_core" / "requirements.txt").read_text()


def _pin(package: str, text: str) -> str | None:
    match = re.search(rf"^{package}==([0-9.]+)$", text, re.MULTILINE)
    return match[1] if match else None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def test_given_the_layer_then_it_ships_its_own_sdk_the_version_these_tests_run() -> None:
    # Given the layer's requirements
    boto3_pin, botocore_pin = _pin("boto3", LAYER_REQUIREMENTS), _pin("botocore", LAYER_REQUIREMENTS)
    # Then boto3 and botocore are pinned there (never left to the Lambda runtime)
    assert boto3_pin and botocore_pin
    # And the tests check the very version the layer ships
    assert botocore.__version__ == botocore_pin and boto3.__version__ == boto3_pin
    # And it is at least the minimum the cold-start check demands
    assert _version(botocore_pin) >= _version(MINIMUM_BOTOCORE)
    # And requirements-dev.txt does not pin a different SDK beside it
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert _pin("botocore", dev) in (None, botocore_pin) and _pin("boto3", dev) in (None, boto3_pin)


@pytest.mark.parametrize("service", sorted(REQUIRED))
def test_given_the_shipped_sdk_then_every_operation_and_field_the_code_needs_exists(service: str) -> None:
    model = boto3.client(service, region_name="us-west-2").meta.service_model
    assert missing_from(service, model) == []


def _client_calls() -> dict[str, set[str]]:
    """{service: operations} the layer's adapters call through their LazyClient attributes."""
    calls: dict[str, set[str]] = {}
    for source in (PACKAGE / "adapters").rglob("*.py"):
        text = source.read_text()
        attributes = dict(re.findall(r"^\s+(\w+) = LazyClient\(\"(\w+)\"(?:, \w+)?\)", text, re.MULTILINE))
        for attribute, service in attributes.items():
            client = boto3.client(service, region_name="us-west-2")
            to_operation = client.meta.method_to_api_mapping
            for method in re.findall(rf"self\.{attribute}\.(\w+)\b", text):
                if method == "get_paginator":
                    continue
                calls.setdefault(service, set()).add(to_operation[method])
            for paginated in re.findall(rf"self\.{attribute}\.get_paginator\(\"(\w+)\"\)", text):
                calls.setdefault(service, set()).add(to_operation[paginated])
    return calls


def test_given_the_adapters_then_every_operation_they_call_is_in_the_contract() -> None:
    # Given what the adapters call
    calls = _client_calls()
    assert calls["sagemaker"] >= {"DescribeCluster", "ListClusterNodes", "BatchReplaceClusterNodes", "BatchRebootClusterNodes"}
    # Then each call is listed, so the cold-start check covers it, and nothing is listed that no code calls
    assert {service: {call.operation for call in listed} for service, listed in REQUIRED.items()} == calls


def test_given_the_hyperpod_adapter_then_every_response_key_it_reads_is_in_the_contract() -> None:
    # Given the keys adapters/hyperpod.py reads from SageMaker's responses
    text = (PACKAGE / "adapters" / "hyperpod.py").read_text()
    read = set(re.findall(r"(?:\[|\.get\()\"([A-Z][A-Za-z]+)\"", text))
    assert {"PrivateDnsHostname", "NodeType", "InstanceGroups"} <= read
    # Then each is a member the contract lists for SageMaker (request names excluded)
    listed = {step.removesuffix("[]") for call in REQUIRED["sagemaker"] for path in call.response for step in path.split(".")}
    error_members = {"Error"}
    assert read - error_members <= listed, read - error_members - listed


def _sagemaker_model_without(shape: str, member: str) -> ServiceModel:
    raw = copy.deepcopy(Loader().load_service_model("sagemaker", "service-2"))
    del raw["shapes"][shape]["members"][member]
    return ServiceModel(raw, service_name="sagemaker")


class _ClientWith:
    def __init__(self, model: ServiceModel) -> None:
        self.meta = type("Meta", (), {"service_model": model})()


@pytest.mark.parametrize(
    ("shape", "member", "named"),
    [
        ("ClusterInstanceGroupDetails", "SlurmConfig", "DescribeCluster.response:InstanceGroups[].SlurmConfig.NodeType"),
        ("ClusterNodeSummary", "PrivateDnsHostname", "ListClusterNodes.response:ClusterNodeSummaries[].PrivateDnsHostname"),
        ("DescribeClusterResponse", "NodeRecovery", "DescribeCluster.response:NodeRecovery"),
    ],
)
def test_given_an_sdk_that_predates_a_field_then_the_function_refuses_to_run_naming_it(
    shape: str, member: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a SageMaker model without a field the code reads (as in a runtime SDK from before it)
    monkeypatch.setattr(sdk_contract, "_CHECKED", set())
    model = _sagemaker_model_without(shape, member)
    # When a function creates its SageMaker client
    # Then it stops before calling anything, naming what is missing and what to do
    with pytest.raises(SdkTooOld, match=re.escape(named)) as raised:
        check_client("sagemaker", _ClientWith(model))
    assert "make deploy" in str(raised.value)


def test_given_an_sdk_without_the_batch_operations_then_the_function_refuses_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_contract, "_CHECKED", set())
    raw = copy.deepcopy(Loader().load_service_model("sagemaker", "service-2"))
    del raw["operations"]["BatchReplaceClusterNodes"]
    with pytest.raises(SdkTooOld, match="BatchReplaceClusterNodes"):
        check_client("sagemaker", _ClientWith(ServiceModel(raw, service_name="sagemaker")))


@pytest.mark.parametrize("installed", ["1.34.131", "1.41.0", "1.42.48"])
def test_given_an_old_botocore_at_cold_start_then_the_function_refuses_to_run(installed: str) -> None:
    with pytest.raises(SdkTooOld, match=installed):
        check_sdk_version(installed)


def test_given_the_shipped_botocore_at_cold_start_then_the_function_runs() -> None:
    check_sdk_version()
    check_sdk_version(MINIMUM_BOTOCORE)


def test_the_real_clients_are_checked_when_the_adapters_create_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the shared client factory every adapter uses
    from hyperpod_recovery.adapters import aws

    checked: list[str] = []
    monkeypatch.setattr(aws, "check_client", lambda service, client: checked.append(service))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    # When an adapter creates its client
    aws.client("sagemaker")
    # Then the client is checked against the contract
    assert checked == ["sagemaker"]


# --- the operator's tools: drill and preflight, with the operator's SDK -------------------------------
TOOLS = ROOT / "cli" / "hyperpod_recovery_cli"  # outside the layer: the operator's machine
OPERATOR_TOOLS = (TOOLS / "preflight.py", TOOLS / "drill.py", TOOLS / "stack.py")


@pytest.mark.parametrize("service", sorted(OPERATOR_REQUIRED))
def test_given_the_oldest_sdk_the_preflight_accepts_then_the_tools_calls_and_fields_exist(service: str) -> None:
    # The pinned botocore here; the preflight refuses one older than MINIMUM_BOTOCORE (checked above to be older or equal)
    model = boto3.client(service, region_name="us-west-2").meta.service_model
    assert missing_from(service, model, OPERATOR_REQUIRED) == []


def test_given_the_operator_tools_then_every_client_method_they_call_is_in_their_contract() -> None:
    # Given every `.method(` and `get_paginator("method")` in the tools' code
    text = "\n".join(path.read_text() for path in OPERATOR_TOOLS)
    called = set(re.findall(r"\.(\w+)\(", text)) | set(re.findall(r"get_paginator\(\"(\w+)\"\)", text))
    listed = {(service, call.operation) for service, calls in OPERATOR_REQUIRED.items() for call in calls}
    # When the names are read as the SDK methods of the services the tools use
    found = set()
    for service in OPERATOR_REQUIRED:
        mapping = boto3.client(service, region_name="us-west-2").meta.method_to_api_mapping
        found |= {(service, mapping[method]) for method in called if method in mapping and method != "get_paginator"}
    # Then every operation the tools call is listed (a name shared by two services counts for the one listed)
    unlisted = {(s, op) for s, op in found if not any(op == other for _, other in listed)}
    assert unlisted == set()
    assert {("events", "TestEventPattern"), ("lambda", "Invoke"), ("kms", "GetKeyPolicy"), ("cloudformation", "DescribeStacks")} <= found
    # And what they call through an adapter of the layer: the drill reads the incident record (one GetItem)
    if "DynamoLedger" in text:
        assert ("dynamodb", "GetItem") in listed
