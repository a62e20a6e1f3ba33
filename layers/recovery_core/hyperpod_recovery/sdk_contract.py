"""What the code needs from the AWS SDK, and the check that the SDK it runs with has it.

An SDK older than the API it calls fails in two ways. A missing operation fails loudly (the client
has no such method). A missing response *field* fails silently: botocore's parser drops members its
model does not know, so ``SlurmConfig.NodeType`` would read as absent and a controller group would
look like compute. The layer therefore ships its own boto3/botocore (layers/recovery_core/
requirements.txt), and each client is checked against this list when it is created, once per
container: a function running with an SDK that lacks any of it stops with ``SdkTooOld`` before it
calls anything.

tests/contract/test_sdk_contract.py checks that every operation the adapters call and every
response key adapters/hyperpod.py reads is listed here, and that the pinned botocore has all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyperpod_recovery.errors import SdkTooOld

# The oldest botocore whose SageMaker model has everything below (tests/contract/test_sdk_contract.py
# checks the shipped pin against REQUIRED; docs/decisions.md 2026-11-23 has the bisect).
MINIMUM_BOTOCORE = "1.42.49"


@dataclass(frozen=True)
class Call:
    """One operation, with the request members we send and the response members we read.

    Paths are dotted; ``[]`` steps into a list's members and ``{}`` into a map's values:
    ``InstanceGroups[].SlurmConfig.NodeType``."""

    operation: str
    request: tuple[str, ...] = ()
    response: tuple[str, ...] = ()


REQUIRED: dict[str, tuple[Call, ...]] = {
    "sagemaker": (
        Call(
            "DescribeCluster",
            request=("ClusterName",),
            response=(
                "ClusterArn",
                "ClusterName",
                "ClusterStatus",
                "NodeRecovery",
                "NodeProvisioningMode",
                "Orchestrator.Eks.ClusterArn",
                "Orchestrator.Slurm",
                "InstanceGroups[].InstanceGroupName",
                "InstanceGroups[].SlurmConfig.NodeType",
                "InstanceGroups[].CurrentCount",
                "InstanceGroups[].TargetCount",
            ),
        ),
        Call(
            "ListClusterNodes",
            request=("ClusterName", "MaxResults", "NextToken", "IncludeNodeLogicalIds", "CreationTimeAfter", "InstanceGroupNameContains"),
            response=(
                "NextToken",
                "ClusterNodeSummaries[].InstanceId",
                "ClusterNodeSummaries[].InstanceGroupName",
                "ClusterNodeSummaries[].InstanceStatus.Status",
                "ClusterNodeSummaries[].PrivateDnsHostname",
                "ClusterNodeSummaries[].LaunchTime",
                "ClusterNodeSummaries[].LastSoftwareUpdateTime",
                "ClusterNodeSummaries[].NodeLogicalId",
            ),
        ),
        # Check Rejoin: a watched node's own instance; Assess Nodes: an incident's few nodes (adapters/hyperpod.py describe_nodes).
        Call(
            "DescribeClusterNode",
            request=("ClusterName", "NodeId"),
            response=(
                "NodeDetails.InstanceId",
                "NodeDetails.InstanceGroupName",
                "NodeDetails.InstanceStatus.Status",
                "NodeDetails.PrivateDnsHostname",
                "NodeDetails.LaunchTime",
                "NodeDetails.LastSoftwareUpdateTime",
                "NodeDetails.NodeLogicalId",
            ),
        ),
        Call(
            "BatchReplaceClusterNodes",
            request=("ClusterName", "NodeIds"),
            response=("Successful", "Failed[].NodeId", "Failed[].ErrorCode", "Failed[].Message"),
        ),
        Call(
            "BatchRebootClusterNodes",
            request=("ClusterName", "NodeIds"),
            response=("Successful", "Failed[].NodeId", "Failed[].ErrorCode", "Failed[].Message"),
        ),
    ),
    # EKS-orchestrated clusters (adapters/eks.py): where the cluster's Kubernetes API is and which
    # CA signs it; the token is presigned STS GetCallerIdentity (no call, adapters/eks_token.py).
    "eks": (
        Call(
            "DescribeCluster",
            request=("name",),
            response=("cluster.name", "cluster.arn", "cluster.endpoint", "cluster.certificateAuthority.data", "cluster.status"),
        ),
    ),
    "stepfunctions": (
        Call("StartExecution", request=("stateMachineArn", "name", "input"), response=("executionArn", "startDate")),
        Call("SendTaskSuccess", request=("taskToken", "output")),
        # The sweep of ended executions (steps/sweep_ended_executions.py).
        Call(
            "ListExecutions",
            request=("stateMachineArn", "statusFilter", "maxResults", "nextToken"),
            response=(
                "executions[].executionArn",
                "executions[].stateMachineArn",
                "executions[].name",
                "executions[].status",
                "executions[].startDate",
                "executions[].stopDate",
                "nextToken",
            ),
        ),
        Call(
            "DescribeExecution",
            request=("executionArn",),
            response=("executionArn", "stateMachineArn", "name", "status", "startDate", "stopDate", "input", "error", "cause"),
        ),
        Call(
            "GetExecutionHistory",
            request=("executionArn", "reverseOrder", "maxResults", "nextToken", "includeExecutionData"),
            response=(
                "events[].id",
                "events[].type",
                "events[].timestamp",
                "events[].stateEnteredEventDetails.name",
                "events[].stateEnteredEventDetails.input",
                "events[].stateExitedEventDetails.name",
                "events[].stateExitedEventDetails.output",
                "nextToken",
            ),
        ),
    ),
    "sqs": (Call("SendMessage", request=("QueueUrl", "MessageBody", "MessageAttributes")),),
    "sns": (Call("Publish", request=("TopicArn", "Subject", "Message")),),
    # Pages to PagerDuty (adapters/notifier.py), when the stack wires them.
    "events": (
        Call(
            "PutEvents",
            request=("Entries[].Source", "Entries[].DetailType", "Entries[].Detail", "Entries[].EventBusName"),
            response=("FailedEntryCount", "Entries[].ErrorCode", "Entries[].ErrorMessage"),
        ),
    ),
    "dynamodb": (
        Call("GetItem", request=("TableName", "Key", "ConsistentRead")),
        Call("PutItem", request=("TableName", "Item", "ConditionExpression")),
        Call("UpdateItem", request=("TableName", "Key", "UpdateExpression", "ConditionExpression")),
        Call("DeleteItem", request=("TableName", "Key")),
        # What accumulates (recoveries, restarts, waits) is an item per entry, read a partition at a time.
        Call(
            "Query",
            request=("TableName", "KeyConditionExpression", "ExpressionAttributeValues", "ConsistentRead", "ExclusiveStartKey"),
            response=("Items", "LastEvaluatedKey"),
        ),
        # A human's holds on an incident's targets, read at once (Apply Safety Policy).
        Call("BatchGetItem", request=("RequestItems",), response=("Responses", "UnprocessedKeys")),
        # Detect Hung Jobs' memory of what each job's rows were when its reads saw them change.
        Call("BatchWriteItem", request=("RequestItems",), response=("UnprocessedItems",)),
        # The operator's `locks` and `hold` (never a workflow step): the node items of one cluster.
        Call(
            "Scan", request=("TableName", "FilterExpression", "ConsistentRead", "ExclusiveStartKey"), response=("Items", "LastEvaluatedKey")
        ),
    ),
    "s3": (
        Call("ListObjectsV2", request=("Bucket", "Prefix", "Delimiter", "ContinuationToken")),
        Call("GetObject", request=("Bucket", "Key")),
        Call("HeadObject", request=("Bucket", "Key")),
        Call("PutObject", request=("Bucket", "Key", "Body")),
    ),
}


# What the operator's tools (``hyperpod-recovery drill`` and ``preflight``) call with the operator's
# own SDK. The preflight refuses a botocore older than MINIMUM_BOTOCORE, whose models have all of it;
# tests/contract/test_sdk_contract.py checks the list against those tools' code and the pinned models.
OPERATOR_REQUIRED: dict[str, tuple[Call, ...]] = {
    "cloudformation": (
        Call(
            "DescribeStacks",
            request=("StackName",),
            response=(
                "Stacks[].Outputs[].OutputKey",
                "Stacks[].Outputs[].OutputValue",
                "Stacks[].Parameters[].ParameterKey",
                "Stacks[].Parameters[].ParameterValue",
            ),
        ),
    ),
    "sagemaker": tuple(call for call in REQUIRED["sagemaker"] if call.operation in ("DescribeCluster", "ListClusterNodes")),
    "stepfunctions": (
        Call("StartExecution", request=("stateMachineArn", "name", "input"), response=("executionArn",)),
        Call("DescribeExecution", request=("executionArn",), response=("status", "error", "cause", "output", "input", "startDate")),
        Call("ListExecutions", request=("stateMachineArn", "statusFilter"), response=("executions[].name", "executions[].startDate")),
        Call("StopExecution", request=("executionArn", "error", "cause")),
        Call(
            "GetExecutionHistory",
            request=("executionArn",),
            response=(
                "events[].type",
                "events[].timestamp",
                "events[].stateEnteredEventDetails.name",
                "events[].stateExitedEventDetails.output",
            ),
        ),
    ),
    "lambda": (Call("Invoke", request=("FunctionName", "Payload"), response=("Payload", "FunctionError")),),
    # The drill reads the incident record from the ledger (DynamoLedger.get_incident: one GetItem);
    # the on-call commands (oncall.py) list, lock, hold and audit through the same adapter.
    "dynamodb": (
        *REQUIRED["dynamodb"],
        Call(
            "Query",
            request=("TableName", "IndexName", "KeyConditionExpression", "FilterExpression", "ScanIndexForward", "Limit"),
            response=("Items",),
        ),
    ),
    "sts": (Call("GetCallerIdentity", response=("Arn",)),),
    "events": (
        Call("DescribeRule", request=("Name",), response=("EventPattern",)),
        Call("TestEventPattern", request=("EventPattern", "Event"), response=("Result",)),
    ),
    "sns": (Call("GetTopicAttributes", request=("TopicArn",), response=("Attributes",)),),
    "kms": (
        Call("DescribeKey", request=("KeyId",), response=("KeyMetadata.KeyId", "KeyMetadata.KeyManager", "KeyMetadata.KeyState")),
        Call("GetKeyPolicy", request=("KeyId", "PolicyName"), response=("Policy",)),
    ),
}


def _member_missing(shape: Any, path: str) -> str | None:
    """The first step of ``path`` that ``shape`` (a botocore Shape) does not have, or None."""
    for step in path.split("."):
        into_list, into_map = step.endswith("[]"), step.endswith("{}")
        name = step.removesuffix("[]").removesuffix("{}")
        members = getattr(shape, "members", None)
        if members is None or name not in members:
            return name
        shape = members[name]
        if into_list:
            shape = shape.member
        if into_map:
            shape = shape.value
    return None


def missing_from(service: str, service_model: Any, required: dict[str, tuple[Call, ...]] | None = None) -> list[str]:
    """What of REQUIRED[service] (or ``required``'s) the given botocore ServiceModel lacks
    (``Op``, ``Op.response:Path``)."""
    problems: list[str] = []
    known = set(service_model.operation_names)
    for call in (REQUIRED if required is None else required).get(service, ()):
        if call.operation not in known:
            problems.append(call.operation)
            continue
        operation = service_model.operation_model(call.operation)
        for side, shape, paths in (("request", operation.input_shape, call.request), ("response", operation.output_shape, call.response)):
            for path in paths:
                if shape is None or _member_missing(shape, path) is not None:
                    problems.append(f"{call.operation}.{side}:{path}")
    return problems


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isascii() and part.isdigit())


def check_sdk_version(installed: str | None = None) -> None:
    """Raise SdkTooOld if the botocore in use is older than MINIMUM_BOTOCORE (a cheap first check at
    cold start; check_client then checks each service's model itself)."""
    if installed is None:
        import botocore

        installed = botocore.__version__
    if version_tuple(installed) < version_tuple(MINIMUM_BOTOCORE):
        raise SdkTooOld(
            f"botocore {installed} is older than {MINIMUM_BOTOCORE}, the oldest that knows every HyperPod call and field this "
            "code uses: the function is running with the Lambda runtime's SDK instead of the RecoveryCoreLayer's. "
            "Redeploy with `make deploy` so the layer is built from layers/recovery_core/requirements.txt"
        )


def missing_in_installed_sdk() -> list[str]:
    """Everything REQUIRED that the botocore this process runs with lacks, every service at once
    (``sagemaker:BatchReplaceClusterNodes``): what Check Deployment reports to the preflight, which
    must see all of it rather than stop at the first service, as check_client does."""
    import botocore.session

    session = botocore.session.get_session()
    return [f"{service}:{problem}" for service in REQUIRED for problem in missing_from(service, session.get_service_model(service))]


_CHECKED: set[str] = set()


def check_client(service: str, client: Any) -> None:
    """Raise SdkTooOld if ``client``'s model lacks anything the code uses; once per service and
    container (the model is already loaded with the client, so this costs no extra I/O)."""
    if service in _CHECKED or service not in REQUIRED:
        return
    model = getattr(getattr(client, "meta", None), "service_model", None)
    if model is None:  # an injected test double, not a botocore client
        return
    problems = missing_from(service, model)
    if problems:
        import botocore

        raise SdkTooOld(
            f"botocore {botocore.__version__} does not know {', '.join(problems)} ({service}); this code needs botocore "
            f">= {MINIMUM_BOTOCORE}, which the RecoveryCoreLayer ships: redeploy with `make deploy` so the layer is built "
            "from layers/recovery_core/requirements.txt"
        )
    _CHECKED.add(service)
