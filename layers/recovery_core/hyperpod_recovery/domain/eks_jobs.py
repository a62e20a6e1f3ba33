"""The training jobs on a Kubernetes node, and who restarts each (never us on top of someone else).

Pure: reads pods and job objects as the API returns them. A pod belongs to the job its controller
owner reference names (``PyTorchJob`` of kubeflow.org, ``HyperPodPyTorchJob`` of
sagemaker.amazonaws.com), or failing that the job its operator's label names
(``training.kubeflow.org/job-name``, ``HPJob``). Other pods (DaemonSets such as HyperPod's health
agent, plain Deployments) are no training job of ours to think about.

Who restarts a job (../shared/reference/hyperpod-eks.md §3.3), first match wins:

| the job                                                   | restarted by                   |
|-----------------------------------------------------------|--------------------------------|
| a HyperPodPyTorchJob                                      | the HyperPod training operator |
| a PyTorchJob annotated enable-job-auto-resume: "true"     | HyperPod's job auto-resume     |
| a PyTorchJob whose replicas restart (OnFailure, Always, ExitCode) | Kubeflow's operator     |
| a PyTorchJob annotated hyperpod-recovery.io/recover: "true" | us: re-created from its newest verified checkpoint |
| any other                                                 | nobody: unresumable, a human decides |
"""

from __future__ import annotations

from typing import Any

from hyperpod_recovery.models.commands import CHECKPOINT_URI_PATTERN, MAX_CHECKPOINT_URI, JobSpec, RestartedBy, resume_choice_in_comment
from hyperpod_recovery.models.common import matches
from hyperpod_recovery.models.kubernetes import (
    AUTO_RESUME_ANNOTATION,
    HPTO_JOB_LABEL,
    JOB_KINDS,
    KUBE_UID_PATTERN,
    KUBEFLOW_JOB_NAME_LABEL,
    MARK_DOMAIN,
    OPT_IN_ANNOTATION,
    KubeJobRef,
    is_dns1123_label,
    is_dns1123_subdomain,
)

CHECKPOINT_ANNOTATION = f"{MARK_DOMAIN}/checkpoint"  # s3://bucket/prefix/ of the job's manifest-v1 checkpoints
RESUME_ANNOTATION = f"{MARK_DOMAIN}/resume"  # immediate | after_rejoin (the job's own choice)
# The name a lineage's checkpoints are written under (manifests record it): a re-created job has a
# new object name, so it carries its lineage's first name here.
JOB_NAME_ANNOTATION = f"{MARK_DOMAIN}/job-name"
RESTARTING_POLICIES = frozenset({"OnFailure", "Always", "ExitCode"})
FINISHED_POD_PHASES = frozenset({"Succeeded"})


def owning_job(pod: dict[str, Any]) -> KubeJobRef | None:
    """The training job a pod belongs to, or None (not a training job's, or a name we cannot trust)."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    if (pod.get("status") or {}).get("phase") in FINISHED_POD_PHASES or not is_dns1123_label(namespace):
        return None
    for owner in metadata.get("ownerReferences") or []:
        kind = owner.get("kind")
        info = JOB_KINDS.get(str(kind))
        if owner.get("controller") and info is not None and owner.get("apiVersion") == info.api_version:
            name = str(owner.get("name") or "")
            return KubeJobRef(kind=kind, namespace=namespace, name=name) if is_dns1123_subdomain(name) else None
    labels = metadata.get("labels") or {}
    for label, kind in ((KUBEFLOW_JOB_NAME_LABEL, "PyTorchJob"), (HPTO_JOB_LABEL, "HyperPodPyTorchJob")):
        name = str(labels.get(label) or "")
        if name:
            return KubeJobRef(kind=kind, namespace=namespace, name=name) if is_dns1123_subdomain(name) else None
    return None


def jobs_of_pods(pods: list[dict[str, Any]]) -> list[KubeJobRef]:
    """Each job with a pod among ``pods``, once, in the order first seen."""
    seen: dict[KubeJobRef, None] = {}
    for pod in pods:
        ref = owning_job(pod)
        if ref is not None:
            seen.setdefault(ref, None)
    return list(seen)


def _replica_specs(job: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    spec = job.get("spec") or {}
    if kind == "PyTorchJob":
        return [r for r in (spec.get("pytorchReplicaSpecs") or {}).values() if isinstance(r, dict)]
    return [r for r in spec.get("replicaSpecs") or [] if isinstance(r, dict)]


def _state(job: dict[str, Any]) -> str:
    """The job's newest condition that holds (Created, Running, Restarting, Succeeded, Failed)."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return str(conditions[-1].get("type") or "Unknown")[:32] if conditions else "Unknown"


def restarted_by(job: dict[str, Any], kind: str) -> RestartedBy | None:
    """Who restarts the job when its pods fail or its node goes (None: nobody but us, if it opted in)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if kind == "HyperPodPyTorchJob":
        return "hyperpod_training_operator"
    if str(annotations.get(AUTO_RESUME_ANNOTATION, "")).lower() == "true":
        return "hyperpod_auto_resume"
    if any(r.get("restartPolicy") in RESTARTING_POLICIES for r in _replica_specs(job, kind)):
        return "kubeflow"
    return None


def job_spec_of(job: dict[str, Any], ref: KubeJobRef) -> JobSpec | None:
    """What the workflow carries of a job object (None: an object without a uid we can name it by)."""
    metadata = job.get("metadata") or {}
    uid = str(metadata.get("uid") or "")
    if not matches(KUBE_UID_PATTERN, uid):
        return None
    annotations = metadata.get("annotations") or {}
    by = restarted_by(job, ref.kind)
    replicas = sum(max(int(r.get("replicas") or 1), 0) for r in _replica_specs(job, ref.kind)) or 1
    checkpoint = str(annotations.get(CHECKPOINT_ANNOTATION) or "").strip() or None
    unresumable = None
    if by is None and str(annotations.get(OPT_IN_ANNOTATION, "")).lower() != "true":
        unresumable = f'not opted in to recovery (annotation {OPT_IN_ANNOTATION}: "true") and nobody else restarts it'
    elif checkpoint is not None and (len(checkpoint) > MAX_CHECKPOINT_URI or not matches(CHECKPOINT_URI_PATTERN, checkpoint)):
        unresumable = f"its {CHECKPOINT_ANNOTATION} annotation is not an s3:// location of at most {MAX_CHECKPOINT_URI} characters"
        checkpoint = None
    name = str(annotations.get(JOB_NAME_ANNOTATION) or ref.name)
    return JobSpec(
        job_id=uid,
        name=name if is_dns1123_subdomain(name) else ref.name,
        num_nodes=min(replicas, 10_000),
        state=_state(job),
        checkpoint_uri=checkpoint,
        auto_resume=by is not None,
        restarted_by=by,
        resume=resume_choice_in_comment(f"resume={annotations.get(RESUME_ANNOTATION, '')}"),
        unresumable=unresumable,
        kind=ref.kind,
        namespace=ref.namespace,
    )
