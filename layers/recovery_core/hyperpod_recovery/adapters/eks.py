"""Amazon EKS (control plane): where an EKS-orchestrated HyperPod cluster's Kubernetes API is.

HyperPod's DescribeCluster names the EKS cluster (Orchestrator.Eks.ClusterArn); EKS's
DescribeCluster gives its API endpoint and the certificate authority that signs it. Nothing of the
data plane goes through EKS's own API: the Kubernetes calls are adapters/kubernetes.py's.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import ConfigurationError, KubeAccessDenied, KubeUnavailable


@dataclass(frozen=True)
class KubeEndpoint:
    """One cluster's Kubernetes API: its name (the token is bound to it), URL and CA (PEM)."""

    cluster_name: str
    url: str
    ca_pem: str


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
        return KubeEndpoint(cluster_name=cluster_name, url=url.rstrip("/"), ca_pem=ca_pem)
