"""SageMaker HyperPod: describe the cluster, list its nodes, replace nodes.

Shapes follow the botocore model (../shared/reference/hyperpod-api-and-events.md §1). Batch calls
take at most 25 node ids; ``Successful`` is omitted (not empty) when nothing succeeded.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import THROTTLING_CODES, LazyClient, error_code, is_transient
from hyperpod_recovery.domain.replace import chunked
from hyperpod_recovery.errors import ClusterNotFound, HyperPodApiError, HyperPodThrottled, HyperPodUnavailable
from hyperpod_recovery.models.cluster import BatchOutcome, ClusterInfo, ClusterNode, InstanceGroupInfo
from hyperpod_recovery.models.workflow import ReplaceFailure


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

    def list_nodes(self) -> list[ClusterNode]:
        nodes: list[ClusterNode] = []
        # IncludeNodeLogicalIds: each node's NodeLogicalId, the identity HyperPod says "persists
        # throughout its lifecycle" (domain/rejoin.py finds a replacement by it first).
        kwargs: dict[str, Any] = {"ClusterName": self.cluster_name, "MaxResults": 100, "IncludeNodeLogicalIds": True}
        while True:
            page = self._call("ListClusterNodes", self.sagemaker.list_cluster_nodes, **kwargs)
            for summary in page.get("ClusterNodeSummaries", []):
                if not summary.get("InstanceId"):
                    # With IncludeNodeLogicalIds, a node still being provisioned may have no instance
                    # yet: nothing can be done to it or seen of it until it has one.
                    continue
                nodes.append(
                    ClusterNode(
                        node_id=summary["InstanceId"],
                        instance_group=summary["InstanceGroupName"],
                        status=(summary.get("InstanceStatus") or {}).get("Status", "Unknown"),
                        private_dns_hostname=summary.get("PrivateDnsHostname"),
                        launch_time=summary.get("LaunchTime"),
                        software_updated_at=summary.get("LastSoftwareUpdateTime"),
                        logical_id=summary.get("NodeLogicalId"),
                    )
                )
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
