"""Finding what a command names: a node by its name, a training job by its uid, the pods of a job
(and their nodes); the state every part of the orchestrator shares, fresh for each command."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.adapters.eks_node_lookup import HyperPodNodes
from hyperpod_recovery.adapters.eks_stop import JobStopper
from hyperpod_recovery.adapters.eks_workloads import KueueWorkloads
from hyperpod_recovery.domain.jobs.eks_jobs import is_pod_of, owning_job_any
from hyperpod_recovery.errors import KubeObjectGone
from hyperpod_recovery.models.kubernetes import HPTO_JOB_LABEL, JOB_KINDS, KUBEFLOW_JOB_NAME_LABEL, KubeJobRef

if TYPE_CHECKING:
    from hyperpod_recovery.adapters.stepfunctions import StepFunctions
    from hyperpod_recovery.ports import KubeApi


def installed_jobs(kube: KubeApi, kind: str) -> list[dict[str, Any]]:
    """A kind's jobs; none when its CRD is not installed (the training operator, Kubeflow: add-ons; 404)."""
    try:
        return kube.list_jobs(kind)
    except KubeObjectGone:
        return []


def job_pods(kube: KubeApi, ref: KubeJobRef, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of this very job (its operator's label narrows the list; its controller's kind,
    name and uid decide: pods of a TFJob of the same name, or of an earlier object, are not its)."""
    label = KUBEFLOW_JOB_NAME_LABEL if ref.kind == "PyTorchJob" else HPTO_JOB_LABEL
    return [p for p in kube.list_pods(ref.namespace, f"{label}={ref.name}") if owning_job_any(p) == ref and is_pod_of(p, job)]


def job_pod_nodes(
    kube: KubeApi, ref: KubeJobRef, job: dict[str, Any], names: HyperPodNodes | None = None, pods: list[dict[str, Any]] | None = None
) -> list[str]:
    """The nodes of the pods of this very job (``pods``: job_pods, when already listed), by the
    names the workflow knows them by (``hyperpod-<instance>``: HyperPodNodes; ``names``: one shared
    by the calls of one poll)."""
    pods = job_pods(kube, ref, job) if pods is None else pods
    placed = list(dict.fromkeys(str(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName")))
    return list(dict.fromkeys((names or HyperPodNodes(kube)).known_as(node) for node in placed))


class Orchestration:
    """The Kubernetes API, the task answers and the clock, and the lookups each command repeats."""

    def __init__(self, kube: KubeApi, tasks: StepFunctions, now: Callable[[], datetime]) -> None:
        self.kube = kube
        self.tasks = tasks
        self.now = now
        self._nodes = HyperPodNodes(kube)
        self._stopper = JobStopper(kube, KueueWorkloads(kube), now)
        self._spare_view: tuple[list[dict[str, Any]], set[str]] | None = None

    def find_node(self, name: str) -> dict[str, Any] | None:
        """The node by its name, or by the instance in its providerID (adapters/eks_node_lookup.py);
        None: Kubernetes has no such node (replaced, gone), or none that can be told to be it."""
        return self._nodes.find(name)

    def find_job(self, uid: str, ref: KubeJobRef | None = None) -> tuple[KubeJobRef, dict[str, Any]] | None:
        """The training job whose uid is ``uid``: read by its name when known (the poller's failure
        names it), else found in the lists of each kind (a manual request names a uid only)."""
        if ref is not None:
            try:
                job = self.kube.get_job(ref)
            except KubeObjectGone:
                return None
            return (ref, job) if (job.get("metadata") or {}).get("uid") == uid else None
        for kind in JOB_KINDS:
            for job in installed_jobs(self.kube, kind):
                metadata = job.get("metadata") or {}
                if metadata.get("uid") == uid:
                    ref = KubeJobRef.model_validate({"kind": kind, "namespace": metadata.get("namespace"), "name": metadata.get("name")})
                    return ref, job
        return None
