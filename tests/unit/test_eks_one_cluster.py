"""One cluster (adapters/eks.py guarded_endpoint): no Kubernetes call is made until the stack's
EksClusterName is known to be the EKS cluster the guarded HyperPod cluster runs in, so Find Failed
Jobs, Capture Job Spec, Check Job Nodes and Resubmit Job can never act on another cluster's jobs."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_recovery.adapters.eks import EksControlPlane, guarded_endpoint
from hyperpod_recovery.adapters.kubernetes import KubernetesApi
from hyperpod_recovery.errors import HyperPodThrottled, KubeUnavailable, UnsupportedOrchestrator
from tests.fakes import FakeCluster

OURS = "arn:aws:eks:us-west-2:123456789012:cluster/llm-eks"
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n").decode()


class Eks:
    """eks:DescribeCluster for every cluster of the account: its own ARN, endpoint and CA."""

    def __init__(self) -> None:
        self.described: list[str] = []

    def describe_cluster(self, name: str) -> dict[str, Any]:
        self.described.append(name)
        if name == "gone":
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, "DescribeCluster")
        arn = f"arn:aws:eks:us-west-2:123456789012:cluster/{name}"
        return {"cluster": {"arn": arn, "endpoint": f"https://{name}.example", "certificateAuthority": {"data": CA}, "status": "ACTIVE"}}


def _hyperpod(arn: str | None = OURS, orchestrator: str = "eks") -> FakeCluster:
    cluster = FakeCluster([], orchestrator=orchestrator)
    cluster.info = cluster.info.model_copy(update={"eks_cluster_arn": arn})
    return cluster


def test_the_stacks_eks_cluster_is_used_once_it_is_the_hyperpod_clusters_own() -> None:
    endpoint = guarded_endpoint(EksControlPlane(Eks()), "llm-eks", _hyperpod())
    assert (endpoint.url, endpoint.arn) == ("https://llm-eks.example", OURS)


@pytest.mark.parametrize(
    ("stack_names", "hyperpod"),
    [
        ("other-eks", _hyperpod()),  # EksClusterName names another EKS cluster of the account
        ("llm-eks", _hyperpod("arn:aws:eks:us-east-1:123456789012:cluster/llm-eks")),  # same name, another region
        ("llm-eks", _hyperpod(None, orchestrator="slurm")),  # the guarded cluster is not EKS-orchestrated
    ],
)
def test_a_stack_pointed_at_another_cluster_makes_no_kubernetes_call(stack_names: str, hyperpod: FakeCluster) -> None:
    # Given a stack whose EksClusterName is not the EKS cluster HyperPod names
    requests: list[str] = []
    api = KubernetesApi(endpoint=lambda: guarded_endpoint(EksControlPlane(Eks()), stack_names, hyperpod), token=requests.append)  # type: ignore[arg-type,return-value]
    # When any function makes its first Kubernetes call, then it refuses by name, before any request or token
    with pytest.raises(UnsupportedOrchestrator, match="redeploy it with EksClusterName"):
        api.list_jobs("PyTorchJob")
    assert requests == []


def test_a_hyperpod_answer_throttled_is_a_kubernetes_call_that_cannot_be_made_now() -> None:
    class Throttled(FakeCluster):
        def describe(self) -> Any:
            raise HyperPodThrottled("DescribeCluster: ThrottlingException")

    with pytest.raises(KubeUnavailable, match="could not be checked now"):
        guarded_endpoint(EksControlPlane(Eks()), "llm-eks", Throttled([]))
