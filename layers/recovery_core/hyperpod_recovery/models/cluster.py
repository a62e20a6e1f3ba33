"""HyperPod cluster facts as the domain sees them, translated from the SageMaker API by
adapters/hyperpod.py (so the domain never handles raw boto3 dictionaries)."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from hyperpod_recovery.models.common import Model, slurm_node_name
from hyperpod_recovery.models.kubernetes import node_name_for_instance
from hyperpod_recovery.models.node_recovery import ReplaceFailure


class InstanceGroupInfo(Model):
    name: str
    # SlurmConfig.NodeType when the cluster reports it; None on older clusters.
    node_type: Literal["Controller", "Login", "Compute"] | None = None
    current_count: int | None = None
    target_count: int | None = None


class ClusterInfo(Model):
    name: str
    arn: str
    status: str
    orchestrator: Literal["slurm", "eks"]
    node_recovery: str  # "Automatic" | "None"
    groups: dict[str, InstanceGroupInfo] = Field(default_factory=dict)
    # NodeProvisioningMode: "Continuous" clusters publish "SageMaker HyperPod Cluster Event"s (None: default mode).
    provisioning_mode: str | None = None
    # Orchestrator.Eks.ClusterArn: the EKS cluster an EKS-orchestrated HyperPod cluster runs in.
    eks_cluster_arn: str | None = None

    @property
    def eks_cluster_name(self) -> str | None:
        return self.eks_cluster_arn.rsplit("/", 1)[-1] if self.eks_cluster_arn and ":cluster/" in self.eks_cluster_arn else None

    @property
    def publishes_cluster_events(self) -> bool:
        """AWS: "Cluster events are available for HyperPod clusters with NodeProvisioningMode set to Continuous"."""
        return self.provisioning_mode == "Continuous"


class ClusterNode(Model):
    node_id: str
    instance_group: str
    status: str  # ClusterInstanceStatus; unknown values are kept as they come
    private_dns_hostname: str | None = None
    launch_time: datetime | None = None
    # LastSoftwareUpdateTime: the node's last UpdateClusterSoftware (None: as launched).
    software_updated_at: datetime | None = None
    # NodeLogicalId (ListClusterNodes with IncludeNodeLogicalIds): "persists throughout its lifecycle".
    logical_id: str | None = None

    def name_in(self, orchestrator: Literal["slurm", "eks"]) -> str | None:
        """What the orchestrator calls the node: Slurm its short hostname (None until HyperPod shows
        one), EKS ``hyperpod-<instance id>`` (the EKS orchestrator also finds a node named otherwise
        by the instance in its providerID: adapters/eks_orchestrator/)."""
        if orchestrator == "eks":
            return node_name_for_instance(self.node_id)
        return slurm_node_name(self.private_dns_hostname) if self.private_dns_hostname else None


class BatchOutcome(Model):
    """A Batch*ClusterNodes response, all chunks merged. ``Successful`` means *initiated*."""

    successful: list[str] = Field(default_factory=list)
    failed: list[ReplaceFailure] = Field(default_factory=list)
    calls: int = 0
