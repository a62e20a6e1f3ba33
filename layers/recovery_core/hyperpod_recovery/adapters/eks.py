"""Amazon EKS (control plane): where an EKS-orchestrated HyperPod cluster's Kubernetes API is.

HyperPod's DescribeCluster names the EKS cluster (Orchestrator.Eks.ClusterArn); EKS's
DescribeCluster gives its API endpoint and the certificate authority that signs it, and its ARN,
which must be HyperPod's (guarded_endpoint). Nothing of the data plane goes through EKS's own API:
the Kubernetes calls are adapters/kubernetes.py's.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import (
    ConfigurationError,
    HyperPodThrottled,
    HyperPodUnavailable,
    KubeAccessDenied,
    KubeUnavailable,
    UnsupportedOrchestrator,
)

if TYPE_CHECKING:
    from hyperpod_recovery.ports import Cluster


@dataclass(frozen=True)
class KubeEndpoint:
    """One cluster's Kubernetes API: its name (the token is bound to it), URL and CA (PEM), and the
    cluster's ARN as EKS states it (what HyperPod's Orchestrator.Eks.ClusterArn must be)."""

    cluster_name: str
    url: str
    ca_pem: str
    arn: str = ""


def eks_cluster_name(cluster_arn: str) -> str:
    """``arn:aws:eks:us-west-2:111122223333:cluster/llm-eks`` -> ``llm-eks``."""
    name = cluster_arn.rsplit("/", 1)[-1] if ":cluster/" in cluster_arn else ""
    if not name:
        raise ConfigurationError(f"{cluster_arn!r} is not an EKS cluster ARN (arn:aws:eks:<region>:<account>:cluster/<name>)")
    return name


class EksControlPlane:
    eks = LazyClient("eks")

    def __init__(self, eks: Any = None) -> None:
        self._eks = eks

    def endpoint(self, cluster_name: str) -> KubeEndpoint:
        try:
            cluster = self.eks.describe_cluster(name=cluster_name)["cluster"]
        except (ClientError, BotoCoreError) as exc:
            if is_transient(exc):
                raise KubeUnavailable(f"eks:DescribeCluster {cluster_name!r}: {exc}") from exc
            code = error_code(exc) if isinstance(exc, ClientError) else ""
            if code in ("AccessDeniedException", "ResourceNotFoundException"):
                raise KubeAccessDenied(f"eks:DescribeCluster {cluster_name!r} refused ({code}): check the stack's EksClusterName") from exc
            raise KubeUnavailable(f"eks:DescribeCluster {cluster_name!r}: {exc}") from exc
        url = cluster.get("endpoint") or ""
        ca = (cluster.get("certificateAuthority") or {}).get("data") or ""
        if not url.startswith("https://") or not ca:
            raise KubeUnavailable(f"EKS cluster {cluster_name!r} has no API endpoint or CA yet (status {cluster.get('status')})")
        try:
            ca_pem = base64.b64decode(ca, validate=True).decode("ascii")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise KubeUnavailable(f"EKS cluster {cluster_name!r}: its certificateAuthority.data is not base64 PEM") from exc
        return KubeEndpoint(cluster_name=cluster_name, url=url.rstrip("/"), ca_pem=ca_pem, arn=str(cluster.get("arn") or ""))


def guarded_endpoint(control_plane: EksControlPlane, cluster_name: str, hyperpod: Cluster) -> KubeEndpoint:
    """The Kubernetes API of ``cluster_name`` (the stack's EksClusterName), once it is known to be the
    EKS cluster the guarded HyperPod cluster runs in (its DescribeCluster's Orchestrator.Eks.ClusterArn):
    a stack pointed at another EKS cluster would otherwise find, suspend and re-create that cluster's
    jobs. Asked on the first Kubernetes call of each cold start, by every function that makes one."""
    try:
        info = hyperpod.describe()
    except (HyperPodThrottled, HyperPodUnavailable) as exc:
        raise KubeUnavailable(f"the EKS cluster of {cluster_name!r} could not be checked now: {exc}") from exc
    endpoint = control_plane.endpoint(cluster_name)
    if info.orchestrator != "eks" or not info.eks_cluster_arn or info.eks_cluster_arn != endpoint.arn:
        runs_in = f"runs in EKS cluster {info.eks_cluster_arn}" if info.eks_cluster_arn else f"is orchestrated by {info.orchestrator}"
        raise UnsupportedOrchestrator(
            f"cluster {info.name!r} {runs_in}, but this stack's EksClusterName {cluster_name!r} is {endpoint.arn or 'another cluster'}: "
            f"no Kubernetes call is made; redeploy it with EksClusterName={info.eks_cluster_name or '<its EKS cluster>'}"
        )
    return endpoint
