"""SageMaker HyperPod: describe the cluster, list its nodes (or only the new ones and a few by id), replace nodes.

Shapes follow the botocore model (../shared/reference/hyperpod-api-and-events.md §1). Batch calls
take at most 25 node ids; ``Successful`` is omitted (not empty) when nothing succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import THROTTLING_CODES, LazyClient, error_code, is_transient
from hyperpod_recovery.domain.nodes.replace import chunked
from hyperpod_recovery.errors import ClusterNotFound, HyperPodApiError, HyperPodThrottled, HyperPodUnavailable
from hyperpod_recovery.models.cluster import BatchOutcome, ClusterInfo, ClusterNode, InstanceGroupInfo
from hyperpod_recovery.models.node_recovery import ReplaceFailure


class HyperPodCluster:
    """The guarded cluster, through the SageMaker API."""

    sagemaker = LazyClient("sagemaker")

    def __init__(self, cluster_name: str, sagemaker: Any = None) -> None:
        self.cluster_name = cluster_name
        self._sagemaker = sagemaker

    def describe(self) -> ClusterInfo:
        raw = self._call("DescribeCluster", self.sagemaker.describe_cluster, ClusterName=self.cluster_name)
        orchestrator = "eks" if "Eks" in (raw.get("Orchestrator") or {}) else "slurm"
        groups = {}
        for group in raw.get("InstanceGroups", []):
            slurm = group.get("SlurmConfig") or {}
            groups[group["InstanceGroupName"]] = InstanceGroupInfo(
                name=group["InstanceGroupName"],
                node_type=slurm.get("NodeType"),
                current_count=group.get("CurrentCount"),
                target_count=group.get("TargetCount"),
            )
        return ClusterInfo(
            name=raw.get("ClusterName", self.cluster_name),
            arn=raw["ClusterArn"],
            status=raw["ClusterStatus"],
            orchestrator=orchestrator,
            node_recovery=raw.get("NodeRecovery", "Automatic"),
            groups=groups,
            provisioning_mode=raw.get("NodeProvisioningMode"),
            eks_cluster_arn=((raw.get("Orchestrator") or {}).get("Eks") or {}).get("ClusterArn"),
        )

    def list_nodes(self, instance_group: str | None = None) -> list[ClusterNode]:
        """Every node of the cluster (or of one instance group: ``InstanceGroupNameContains`` matches
        a substring, so the name is checked here too)."""
        kwargs: dict[str, Any] = {"InstanceGroupNameContains": instance_group} if instance_group else {}
        nodes = self._list(**kwargs)
        return [n for n in nodes if n.instance_group == instance_group] if instance_group else nodes

    def nodes_since(self, since: datetime, node_ids: Sequence[str]) -> list[ClusterNode]:
        """The instances created after ``since`` (``CreationTimeAfter``), and each of ``node_ids`` not
        among them (DescribeClusterNode; an id that answers ResourceNotFound is gone: left out). Its
        cost follows the repairs, not the fleet: one page per 100 new instances, one call per node."""
        nodes = self._list(CreationTimeAfter=since)
        listed = {n.node_id for n in nodes}
        return nodes + self.describe_nodes([node_id for node_id in node_ids if node_id not in listed])

    def describe_nodes(self, node_ids: Sequence[str]) -> list[ClusterNode]:
        """DescribeClusterNode for each id; an id that answers ResourceNotFound is gone: left out
        (every caller has just read the cluster itself, so it is the node that is missing)."""
        nodes: list[ClusterNode] = []
        for node_id in dict.fromkeys(node_ids):
            try:
                raw = self._call("DescribeClusterNode", self.sagemaker.describe_cluster_node, ClusterName=self.cluster_name, NodeId=node_id)
            except ClusterNotFound:
                continue
            node = _node(raw.get("NodeDetails") or {})
            if node is not None:
                nodes.append(node)
        return nodes

    def _list(self, **filters: Any) -> list[ClusterNode]:
        nodes: list[ClusterNode] = []
        # IncludeNodeLogicalIds: each node's NodeLogicalId, the identity HyperPod says "persists
        # throughout its lifecycle" (domain/nodes/rejoin.py finds a replacement by it first).
        kwargs: dict[str, Any] = {"ClusterName": self.cluster_name, "MaxResults": 100, "IncludeNodeLogicalIds": True, **filters}
        while True:
            page = self._call("ListClusterNodes", self.sagemaker.list_cluster_nodes, **kwargs)
            nodes += [node for node in map(_node, page.get("ClusterNodeSummaries", [])) if node is not None]
            token = page.get("NextToken")
            if not token:
                return nodes
            kwargs["NextToken"] = token

    def replace_nodes(self, node_ids: list[str]) -> BatchOutcome:
        return self._batch("BatchReplaceClusterNodes", self.sagemaker.batch_replace_cluster_nodes, node_ids)

    def reboot_nodes(self, node_ids: list[str]) -> BatchOutcome:
        return self._batch("BatchRebootClusterNodes", self.sagemaker.batch_reboot_cluster_nodes, node_ids)

    def _batch(self, operation: str, method: Any, node_ids: list[str]) -> BatchOutcome:
        """Batch*ClusterNodes, 25 ids per call; ``Successful`` is omitted when nothing succeeded."""
        outcome = BatchOutcome()
        for chunk in chunked(node_ids):
            raw = self._call(operation, method, ClusterName=self.cluster_name, NodeIds=chunk)
            outcome.calls += 1
            outcome.successful += raw.get("Successful", [])
            outcome.failed += [
                ReplaceFailure(node_id=f["NodeId"], error_code=f["ErrorCode"], message=f.get("Message", "")) for f in raw.get("Failed", [])
            ]
        return outcome

    def _call(self, operation: str, method: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return method(**kwargs)  # type: ignore[no-any-return]
        except ClientError as exc:
            code = error_code(exc)
            message = f"{operation} on {self.cluster_name!r}: {code}: {exc.response.get('Error', {}).get('Message', '')}"
            if code in THROTTLING_CODES:
                raise HyperPodThrottled(message) from exc
            if code == "ResourceNotFound":
                raise ClusterNotFound(message) from exc
            if is_transient(exc):
                raise HyperPodUnavailable(message) from exc
            raise HyperPodApiError(message) from exc
        except BotoCoreError as exc:
            raise HyperPodUnavailable(f"{operation} on {self.cluster_name!r}: {exc}") from exc


def _node(summary: dict[str, Any]) -> ClusterNode | None:
    """A ListClusterNodes summary or DescribeClusterNode's NodeDetails (the same fields)."""
    if not summary.get("InstanceId"):
        # With IncludeNodeLogicalIds, a node still being provisioned may have no instance yet:
        # nothing can be done to it or seen of it until it has one.
        return None
    return ClusterNode(
        node_id=summary["InstanceId"],
        instance_group=summary["InstanceGroupName"],
        status=(summary.get("InstanceStatus") or {}).get("Status", "Unknown"),
        private_dns_hostname=summary.get("PrivateDnsHostname"),
        launch_time=summary.get("LaunchTime"),
        software_updated_at=summary.get("LastSoftwareUpdateTime"),
        logical_id=summary.get("NodeLogicalId"),
    )
