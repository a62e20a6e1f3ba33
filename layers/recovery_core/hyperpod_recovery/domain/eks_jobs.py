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

import copy
from datetime import datetime
from typing import Any

from hyperpod_recovery.models.commands import (
    CHECKPOINT_URI_PATTERN,
    MAX_CHECKPOINT_URI,
    RESTARTED_BY_TEXT,
    JobSpec,
    RestartedBy,
    resume_choice_in_comment,
)
from hyperpod_recovery.models.common import matches, one_line
from hyperpod_recovery.models.job_events import JobFailedDetail
from hyperpod_recovery.models.kubernetes import (
    AUTO_RESUME_ANNOTATION,
    HPTO_JOB_LABEL,
    JOB_KINDS,
    KUBE_JOB_NAME_MAX,
    KUBE_UID_PATTERN,
    KUBEFLOW_JOB_NAME_LABEL,
    MARK_DOMAIN,
    OPT_IN_ANNOTATION,
    KubeJobRef,
    is_dns1123_label,
    is_dns1123_subdomain,
)
from hyperpod_recovery.models.manifest import JOB_NAME_ENV, RESUME_FROM_ENV, RESUME_STEP_ENV

CHECKPOINT_ANNOTATION = f"{MARK_DOMAIN}/checkpoint"  # s3://bucket/prefix/ of the job's manifest-v1 checkpoints
RESUME_ANNOTATION = f"{MARK_DOMAIN}/resume"  # immediate | after_rejoin (the job's own choice)
# The name a lineage's checkpoints are written under (manifests record it): a re-created job has a
# new object name, so it carries its lineage's first name here.
JOB_NAME_ANNOTATION = f"{MARK_DOMAIN}/job-name"
RESTARTING_POLICIES = frozenset({"OnFailure", "Always", "ExitCode"})
DEFAULT_RESTART_POLICY = "OnFailure"  # Kubeflow's PytorchJobDefaultRestartPolicy
# A pod that ended is no job's on this node any more: a failed job's pods are kept (cleanPodPolicy
# None), and the job is JobRecovery's (its poller), never a node recovery's.
FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})


def owning_job(pod: dict[str, Any]) -> KubeJobRef | None:
    """The training job a running (or pending) pod belongs to, or None (an ended pod, not a training
    job's, or a name we cannot trust)."""
    if (pod.get("status") or {}).get("phase") in FINISHED_POD_PHASES:
        return None
    return owning_job_any(pod)


def owning_job_any(pod: dict[str, Any]) -> KubeJobRef | None:
    """The training job a pod belongs to, whatever its phase (a failed job's pods have ended)."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    if not is_dns1123_label(namespace):
        return None
    controller = next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)
    if controller is not None:
        # The controller owner says what the pod is; an MPIJob's or TFJob's pod carries Kubeflow's
        # job-name label too, and is no PyTorchJob of that name.
        kind = str(controller.get("kind") or "")
        info = JOB_KINDS.get(kind)
        name = str(controller.get("name") or "")
        if info is None or controller.get("apiVersion") != info.api_version or not _job_name(name):
            return None
        return KubeJobRef(kind=kind, namespace=namespace, name=name)  # (the job's uid: pod_owner_uid)
    labels = metadata.get("labels") or {}
    for label, kind in ((KUBEFLOW_JOB_NAME_LABEL, "PyTorchJob"), (HPTO_JOB_LABEL, "HyperPodPyTorchJob")):
        name = str(labels.get(label) or "")
        if name:
            return KubeJobRef(kind=kind, namespace=namespace, name=name) if _job_name(name) else None
    return None


def _job_name(name: str) -> bool:
    return len(name) <= KUBE_JOB_NAME_MAX and is_dns1123_subdomain(name)


def pod_owner_uid(pod: dict[str, Any]) -> str | None:
    """The uid of the job the pod's controller reference names (None: it names none, labels only)."""
    controller = next((o for o in (pod.get("metadata") or {}).get("ownerReferences") or [] if o.get("controller")), None)
    return str(controller.get("uid")) if controller and controller.get("uid") else None


def is_pod_of(pod: dict[str, Any], job: dict[str, Any]) -> bool:
    """The pod belongs to this very job object, not to an earlier one of the same name (deleted and
    applied again while old pods remained): by the owner's uid, or for a label-only pod, by age."""
    metadata = job.get("metadata") or {}
    owner = pod_owner_uid(pod)
    if owner is not None:
        return owner == metadata.get("uid")
    created = str(metadata.get("creationTimestamp") or "")
    pod_created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
    return not created or not pod_created or pod_created >= created


def finished(job: dict[str, Any]) -> bool:
    """Failed or Succeeded: nothing of it runs any more."""
    return _state(job) in ("Failed", "Succeeded")


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
    # (an absent restartPolicy is Kubeflow's default, OnFailure: applied by the operator, never stored)
    if any(r.get("restartPolicy", DEFAULT_RESTART_POLICY) in RESTARTING_POLICIES for r in _replica_specs(job, kind)):
        return "kubeflow"
    return None


def job_spec_of(job: dict[str, Any], ref: KubeJobRef) -> JobSpec | None:
    """What the workflow carries of a job object (None: an object without a uid we can name it by)."""
    metadata = job.get("metadata") or {}
    uid = str(metadata.get("uid") or "")
    if not matches(KUBE_UID_PATTERN, uid):
        return None
    annotations = metadata.get("annotations") or {}
    # A job that reached Failed is restarted by nobody any more: its restarter gave up (HPTO's
    # maxFullJobRestarts, auto-resume's job-max-retry-count, Kubeflow's backoffLimit).
    failed = _state(job) == "Failed"
    gave_up = restarted_by(job, ref.kind) if failed else None
    by = None if failed else restarted_by(job, ref.kind)
    replicas = sum(max(int(r.get("replicas") or 1), 0) for r in _replica_specs(job, ref.kind)) or 1
    checkpoint = str(annotations.get(CHECKPOINT_ANNOTATION) or "").strip() or None
    owners = metadata.get("ownerReferences") or []
    unresumable: str | None = None
    opted_in = str(annotations.get(OPT_IN_ANNOTATION, "")).lower() == "true"
    if failed and opted_in and str(annotations.get(AUTO_RESUME_ANNOTATION, "")).lower() == "true":
        # Two restarters asked for: HyperPod's auto-resume may still act on a job it shows Failed
        # (ASSUMPTION that Failed means it gave up: hyperpod-eks.md does not establish it). Never both.
        unresumable = f"asks for both HyperPod's job auto-resume and our recovery ({OPT_IN_ANNOTATION}): remove one"
    elif ref.kind == "HyperPodPyTorchJob" and failed:
        unresumable = (
            "failed past the HyperPod training operator's restarts; a HyperPodPyTorchJob is never re-created by us: a human decides"
        )
    elif by is None and not opted_in:
        exhausted = f"failed past its restarts ({RESTARTED_BY_TEXT[gave_up]}), " if gave_up else ""
        unresumable = f'{exhausted}not opted in to recovery (annotation {OPT_IN_ANNOTATION}: "true") and nobody else restarts it'
    elif by is None and owners:
        # A job another controller made (a pipeline, a queue): a copy made by us would be unknown to it.
        unresumable = f"created by {owners[0].get('kind')} {owners[0].get('name')}: its owner, not us, would have to make it again"
    elif by is None and ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True:
        unresumable = "suspended by its owner"
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
        kube=ref,
    )


# --- re-creating a job from its checkpoint (Resubmit Job on EKS) --------------------------------------
GENERATION_ANNOTATION = f"{MARK_DOMAIN}/generation"  # 1 for the first re-creation of a lineage
RESUBMITTED_FROM_ANNOTATION = f"{MARK_DOMAIN}/resubmitted-from"  # the uid of the job it replaces
INCIDENT_OF_JOB_ANNOTATION = f"{MARK_DOMAIN}/incident"
# Not carried over: kubectl's record of the old object would make `kubectl apply` diff against it.
DROPPED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


def lineage_name(job: dict[str, Any]) -> str:
    """The name the job's lineage writes its checkpoints under: its first job's name."""
    metadata = job.get("metadata") or {}
    name = str((metadata.get("annotations") or {}).get(JOB_NAME_ANNOTATION) or "")
    return name if _job_name(name) else str(metadata.get("name") or "")


def recreated_name(job: dict[str, Any]) -> str:
    """``<lineage>-r<generation>``: decided by the old job alone, so a retry names the same job
    (and finds it, 409) instead of making a second one. At most 63 characters (a label value)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    text = str(annotations.get(GENERATION_ANNOTATION) or "0")
    generation = (int(text) if text.isdigit() and len(text) < 6 else 0) + 1
    suffix = f"-r{generation}"
    return lineage_name(job)[: KUBE_JOB_NAME_MAX - len(suffix)].rstrip("-.") + suffix


def recreated_job(job: dict[str, Any], kind: str, *, resume_from: str, step: int, incident: str) -> dict[str, Any]:
    """The job as its owner wrote it (spec, labels, annotations), under a new name, with where to
    resume given to every container of every replica the way the Slurm side gives it to a batch
    script (HYPERPOD_RECOVERY_RESUME_FROM/_STEP, and the lineage's name for the manifests)."""
    metadata = job.get("metadata") or {}
    name = recreated_name(job)
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in DROPPED_ANNOTATIONS}
    annotations |= {
        JOB_NAME_ANNOTATION: lineage_name(job),
        GENERATION_ANNOTATION: name.rsplit("-r", 1)[1],
        RESUBMITTED_FROM_ANNOTATION: str(metadata.get("uid") or ""),
        INCIDENT_OF_JOB_ANNOTATION: incident,
    }
    new_metadata: dict[str, Any] = {"name": name, "namespace": metadata.get("namespace"), "annotations": annotations}
    if metadata.get("labels"):
        new_metadata["labels"] = dict(metadata["labels"])
    spec = copy.deepcopy(job.get("spec") or {})
    env = {RESUME_FROM_ENV: resume_from, RESUME_STEP_ENV: str(step), JOB_NAME_ENV: lineage_name(job)}
    for replica in _replica_specs({"spec": spec}, kind):
        for container in ((replica.get("template") or {}).get("spec") or {}).get("containers") or []:
            kept = [e for e in container.get("env") or [] if e.get("name") not in env]
            container["env"] = kept + [{"name": key, "value": value} for key, value in env.items()]
    return {"apiVersion": JOB_KINDS[kind].api_version, "kind": kind, "metadata": new_metadata, "spec": spec}


def is_recreation_of(candidate: dict[str, Any], old_uid: str) -> bool:
    """Whether a job found under the new name is our re-creation of ``old_uid`` (and not someone
    else's job that happens to have the name)."""
    annotations = (candidate.get("metadata") or {}).get("annotations") or {}
    return bool(old_uid) and annotations.get(RESUBMITTED_FROM_ANNOTATION) == old_uid


# --- a job that failed (the EKS job poller: EKS sends no event for it) --------------------------------
def failed_at(job: dict[str, Any]) -> datetime | None:
    """When the job's Failed condition came to hold (None: it has not failed)."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    if not conditions or conditions[-1].get("type") != "Failed":
        return None
    stamp = conditions[-1].get("lastTransitionTime") or conditions[-1].get("lastUpdateTime")
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else None


def recovery_wanted(job: dict[str, Any], kind: str) -> bool:
    """A failed job JobRecovery is for: one that opted in, or whose own restarter gave up (HPTO,
    HyperPod auto-resume): a human hears of those. A job nobody asked us about is left to its owner."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    opted_in = str(annotations.get(OPT_IN_ANNOTATION, "")).lower() == "true"
    gave_up = restarted_by(job, kind) in ("hyperpod_training_operator", "hyperpod_auto_resume")
    return failed_at(job) is not None and (opted_in or gave_up)


def failure_event(job: dict[str, Any], kind: str, cluster_name: str, nodes: list[str]) -> JobFailedDetail | None:
    """The failed job as the JobRecovery workflow takes a failure (the shape the Slurm agent's epilog
    event has): its uid, where it ran, when and why it failed, its checkpoint location."""
    metadata = job.get("metadata") or {}
    ended = failed_at(job)
    uid = str(metadata.get("uid") or "")
    if ended is None or not matches(KUBE_UID_PATTERN, uid):
        return None
    annotations = metadata.get("annotations") or {}
    condition = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"][-1]
    checkpoint = str(annotations.get(CHECKPOINT_ANNOTATION) or "").strip()
    previous = str(annotations.get(RESUBMITTED_FROM_ANNOTATION) or "")
    return JobFailedDetail(
        cluster_name=cluster_name,
        job_id=uid,
        name=f"{metadata.get('namespace')}/{metadata.get('name')}"[:256],
        nodes=list(dict.fromkeys(nodes))[:10_000],
        state="FAILED",
        reason=one_line(f"{kind} {condition.get('reason') or 'Failed'}: {condition.get('message') or 'no message'}", 256),
        exit_code=1,  # (Kubernetes keeps each container's exit code, not the job's: 1 stands for "failed")
        ended_at=ended,
        checkpoint_uri=checkpoint if len(checkpoint) <= MAX_CHECKPOINT_URI and matches(CHECKPOINT_URI_PATTERN, checkpoint) else None,
        resubmission_of=previous if matches(KUBE_UID_PATTERN, previous) else None,
        event_key=f"{uid}:{int(ended.timestamp())}",
    )
