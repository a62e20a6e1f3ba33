"""An EKS cluster's training jobs as one poll of Find Failed Jobs reads them (ports.TrainingJobs):
each kind's jobs, a job's own pods, and the nodes they ran on by the names the workflow knows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_recovery.adapters.eks_node_lookup import HyperPodNodes
from hyperpod_recovery.adapters.eks_orchestrator import installed_jobs, job_pod_nodes, job_pods

if TYPE_CHECKING:
    from hyperpod_recovery.models.kubernetes import KubeJobRef
    from hyperpod_recovery.ports import KubeApi


class EksTrainingJobs:
    """One per poll: the cluster's HyperPod nodes are listed at most once, shared by its jobs."""

    def __init__(self, kube: KubeApi) -> None:
        self._kube = kube
        self._names = HyperPodNodes(kube)

    def installed(self, kind: str) -> list[dict[str, Any]]:
        return installed_jobs(self._kube, kind)

    def pods(self, ref: KubeJobRef, job: dict[str, Any]) -> list[dict[str, Any]]:
        return job_pods(self._kube, ref, job)

    def pod_nodes(self, ref: KubeJobRef, job: dict[str, Any], pods: list[dict[str, Any]]) -> list[str]:
        return job_pod_nodes(self._kube, ref, job, self._names, pods)
