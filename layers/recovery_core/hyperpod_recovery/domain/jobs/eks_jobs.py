"""The training jobs on a Kubernetes node, and who restarts each (never us on top of someone else).

Pure: reads pods and job objects as the API returns them. A pod belongs to the job its controller
owner reference names (``PyTorchJob`` of kubeflow.org, ``HyperPodPyTorchJob`` of
sagemaker.amazonaws.com), and to that very object only by the reference's uid. A label is never
proof: anyone may put ``training.kubeflow.org/job-name`` on a pod they made by hand (``kubectl debug
--copy-to --keep-labels``), and such a bare pod on a failed node must not make a healthy job elsewhere
"affected". Other pods (DaemonSets such as HyperPod's health agent, plain Deployments) are no
training job of ours to think about.

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
import hashlib
import re
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from hyperpod_recovery.domain.jobs.eks_grace import longest_grace
from hyperpod_recovery.models.commands import (
    CHECKPOINT_URI_PATTERN,
    MAX_CHECKPOINT_URI,
    RESTARTED_BY_TEXT,
    JobSpec,
    RestartedBy,
    resume_choice_in_comment,
)
from hyperpod_recovery.models.common import matches, one_line
from hyperpod_recovery.models.elastic import ElasticOptInUnreadable, ElasticPolicy, parse_elastic_options
from hyperpod_recovery.models.job_events import DO_NOT_REQUEUE_EXIT_CODE, JobFailedDetail, fitted
from hyperpod_recovery.models.kubernetes import (
    AUTO_RESUME_ANNOTATION,
    DNS1123_LABEL_MAX,
    JOB_KINDS,
    KUBE_JOB_NAME_MAX,
    KUBE_UID_PATTERN,
    KUEUE_QUEUE_LABEL,
    MARK_DOMAIN,
    OPT_IN_ANNOTATION,
    KubeJobRef,
    is_dns1123_label,
    is_dns1123_subdomain,
)
from hyperpod_recovery.models.manifest import JOB_NAME_ENV, RESUME_DATA_PARALLEL_ENV, RESUME_FROM_ENV, RESUME_NODES_ENV, RESUME_STEP_ENV
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV
from hyperpod_recovery.redact import redact

CHECKPOINT_ANNOTATION = f"{MARK_DOMAIN}/checkpoint"  # s3://bucket/prefix/ of the job's manifest-v1 checkpoints
RESUME_ANNOTATION = f"{MARK_DOMAIN}/resume"  # immediate | after_rejoin (the job's own choice)
# The name a lineage's checkpoints are written under (manifests record it): a re-created job has a
# new object name, so it carries its lineage's first name here.
JOB_NAME_ANNOTATION = f"{MARK_DOMAIN}/job-name"
# Shrink-and-continue's opt-in for a PyTorchJob without an elasticPolicy: "min=12,multiple=4" (models/elastic.py).
ELASTIC_ANNOTATION = f"{MARK_DOMAIN}/elastic"
# Kubeflow's replica type whose count an elasticPolicy's minReplicas/maxReplicas bound (training-operator
# v1: the torchrun rendezvous's --nnodes=min:max); any other type (a Master) is one fixed set of pods.
ELASTIC_REPLICA_TYPE = "Worker"
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
    """The training job a pod belongs to, whatever its phase (a failed job's pods have ended): the one
    its controller owner reference names. A pod without one (made by hand, whatever its labels) is
    no job's; an MPIJob's or TFJob's pod carries Kubeflow's job-name label too, and is no PyTorchJob."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    if not is_dns1123_label(namespace):
        return None
    controller = next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)
    if controller is None or not controller.get("uid"):
        return None
    kind = str(controller.get("kind") or "")
    info = JOB_KINDS.get(kind)
    name = str(controller.get("name") or "")
    if info is None or controller.get("apiVersion") != info.api_version or not _job_name(name):
        return None
    return KubeJobRef(kind=kind, namespace=namespace, name=name)  # (which object of that name: pod_owner_uid)


def _job_name(name: str) -> bool:
    return len(name) <= KUBE_JOB_NAME_MAX and is_dns1123_subdomain(name)


def pod_owner_uid(pod: dict[str, Any]) -> str | None:
    """The uid of the job the pod's controller reference names (None: it names none, labels only)."""
    controller = next((o for o in (pod.get("metadata") or {}).get("ownerReferences") or [] if o.get("controller")), None)
    return str(controller.get("uid")) if controller and controller.get("uid") else None


def is_pod_of(pod: dict[str, Any], job: dict[str, Any]) -> bool:
    """The pod belongs to this very job object (not to an earlier one of the same name, deleted and
    applied again while old pods remained): its controller reference carries the job's uid."""
    uid = (job.get("metadata") or {}).get("uid")
    return bool(uid) and pod_owner_uid(pod) == uid


# A pod still holding its GPUs: scheduled or running, or waiting to. A pod whose deletion was asked
# (Terminating: metadata.deletionTimestamp) still runs through its grace period, its processes
# writing to the job's checkpoint prefix, until its kubelet confirms it stopped and the API server
# removes it; on a node that is not Ready nothing confirms it: it is live until it is gone.
LIVE_POD_PHASES = frozenset({"Pending", "Running", "Unknown"})


def live_pods_of(pods: list[dict[str, Any]], job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of this very job that still run or wait to, Terminating ones among them: a copy of
    it that is not stopped until they are gone."""
    return [p for p in pods if is_pod_of(p, job) and (p.get("status") or {}).get("phase", "Unknown") in LIVE_POD_PHASES]


def suspended(job: dict[str, Any]) -> bool:
    """runPolicy.suspend holds on the object as stored (a CRD without the field has dropped it)."""
    return ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True


def kueue_managed(job: dict[str, Any]) -> bool:
    """The job asks Kueue to admit it (HyperPod task governance): Kueue, not us, decides its suspend."""
    return bool(((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL))


def workloads_of(workloads: list[dict[str, Any]], job: dict[str, Any]) -> list[dict[str, Any]]:
    """The Kueue Workloads of this very job: Kueue makes each with the job as its controller
    (ConstructWorkload: SetControllerReference); the job-uid label only narrows the list."""
    return [w for w in workloads if pod_owner_uid(w) == (job.get("metadata") or {}).get("uid")]


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


def job_condition(job: dict[str, Any]) -> str:
    """A job object's state as a human is told it: its newest condition that holds, or Created for
    one its operator has not reconciled yet (just made: no condition, no pod)."""
    state = _state(job)
    return "Created" if state == "Unknown" else state


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


def reports_progress(job: dict[str, Any], kind: str) -> bool:
    """The job's own pod templates name the progress table (its owner opted in to hang detection):
    what a pod reports under the job's name is trusted only then (docs/progress.md)."""
    for replica in _replica_specs(job, kind):
        pod_spec = (replica.get("template") or {}).get("spec") or {}
        for container in pod_spec.get("containers") or []:
            if isinstance(container, dict) and any(
                isinstance(e, dict) and e.get("name") == PROGRESS_TABLE_ENV for e in container.get("env") or []
            ):
                return True
    return False


def job_spec_of(job: dict[str, Any], ref: KubeJobRef, *, grace: bool = False) -> JobSpec | None:
    """What the workflow carries of a job object (None: an object without a uid we can name it by).
    ``grace``: with how long its pods may run on once stopped (what a node recovery plans by)."""
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
    elastic, elastic_problem = elastic_opt_in(job, ref.kind)
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
        reports_progress=reports_progress(job, ref.kind),
        kube=ref,
        stop_grace_seconds=longest_grace(_replica_specs(job, ref.kind)) if grace else None,
        elastic=elastic,
        elastic_problem=elastic_problem,
    )


# --- shrink-and-continue: how far a PyTorchJob may shrink, and re-creating it at a size ---------------
# ASSUMPTION (the HyperPod norm): one pod per node, so a job's node count is its pods' count, every
# replica type's (``num_nodes``). An elasticPolicy's minReplicas/maxReplicas count its Worker pods
# (Kubeflow's elastic jobs run Workers only, the torchrun rendezvous deciding the size); a Master, where
# one is given beside them, is one node more at every size.


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def elastic_opt_in(job: dict[str, Any], kind: str) -> tuple[ElasticPolicy | None, str | None]:
    """The job's shrink-and-continue opt-in: its ``spec.elasticPolicy`` (source elastic_policy), else our
    annotation (source annotation); (None, why) for an opt-in we cannot read (the job is rigid, and the
    record says why); (None, None) for a job that makes none. A HyperPodPyTorchJob's own elasticPolicy
    is the HyperPod training operator's (it restarts and rescales the job itself): never ours to act on."""
    if kind != "PyTorchJob":
        return None, None
    spec = job.get("spec") or {}
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if "elasticPolicy" in spec and spec.get("elasticPolicy") is not None:
        return _from_elastic_policy(spec)
    if ELASTIC_ANNOTATION not in annotations:
        return None, None
    try:
        return parse_elastic_options(str(annotations[ELASTIC_ANNOTATION]).strip(), "annotation"), None
    except ElasticOptInUnreadable as exc:
        return None, f"its {ELASTIC_ANNOTATION} annotation cannot be read: {exc}"


def _from_elastic_policy(spec: dict[str, Any]) -> tuple[ElasticPolicy | None, str | None]:
    policy = spec.get("elasticPolicy")
    if not isinstance(policy, dict):
        return None, "its elasticPolicy is not an object"
    replicas = {str(t): r for t, r in (spec.get("pytorchReplicaSpecs") or {}).items() if isinstance(r, dict)}
    if ELASTIC_REPLICA_TYPE not in replicas:
        return None, f"its elasticPolicy bounds {ELASTIC_REPLICA_TYPE} replicas and it has none"
    fixed = sum(_replicas(r) for t, r in replicas.items() if t != ELASTIC_REPLICA_TYPE)
    values: dict[str, int | None] = {}
    for key in ("minReplicas", "maxReplicas"):
        raw = policy.get(key)
        values[key] = _count(raw)
        if raw is not None and values[key] is None:
            return None, f"its elasticPolicy.{key} {str(raw)[:20]!r} is not a whole number of replicas"
        if values[key] is not None and not 1 <= (values[key] or 0) <= 10_000:
            return None, f"its elasticPolicy.{key} {values[key]} is not between 1 and 10000"
    # (Kubeflow defaults an absent minReplicas to the Worker replicas: a job that may not shrink)
    low = values["minReplicas"] if values["minReplicas"] is not None else _replicas(replicas[ELASTIC_REPLICA_TYPE])
    high = values["maxReplicas"]
    try:
        return (
            ElasticPolicy(min_nodes=low + fixed, max_nodes=high + fixed if high is not None else None, source="elastic_policy"),
            None,
        )
    except ValidationError as exc:  # (min above max, or past the bounds)
        why = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        return None, f"its elasticPolicy cannot be read: {why}"[:300]


class UnsizableJob(ValueError):
    """The job cannot be made at the node count asked (no Worker replicas to add or take away)."""


def sized_spec(spec: dict[str, Any], kind: str, nodes: int) -> None:
    """``spec`` (a copy) made to run ``nodes`` pods, one a node: its Worker replicas are what the other
    replica types (a Master: 1) leave of ``nodes``."""
    replicas = spec.get("pytorchReplicaSpecs") if kind == "PyTorchJob" else None
    if not isinstance(replicas, dict) or not isinstance(replicas.get(ELASTIC_REPLICA_TYPE), dict):
        raise UnsizableJob(f"a {kind} without {ELASTIC_REPLICA_TYPE} replicas cannot be made at {nodes} node(s)")
    fixed = sum(_replicas(r) for t, r in replicas.items() if t != ELASTIC_REPLICA_TYPE and isinstance(r, dict))
    if nodes - fixed < 1:
        raise UnsizableJob(f"{nodes} node(s) leave no {ELASTIC_REPLICA_TYPE} beside its {fixed} other pod(s)")
    replicas[ELASTIC_REPLICA_TYPE]["replicas"] = nodes - fixed


# --- re-creating a job from its checkpoint (Resubmit Job on EKS) --------------------------------------
GENERATION_ANNOTATION = f"{MARK_DOMAIN}/generation"  # 1 for the first re-creation of a lineage
RESUBMITTED_FROM_ANNOTATION = f"{MARK_DOMAIN}/resubmitted-from"  # the uid of the job it replaces (for people)
INCIDENT_OF_JOB_ANNOTATION = f"{MARK_DOMAIN}/incident"
# Our re-creation is the object carrying the token our ledger recorded before the create (a label, so
# it is found by a selector whatever its name): nobody else can know it before we create the object.
# resubmitted-from is for people: anyone may pre-create <job>-r1 carrying it.
RECREATION_TOKEN_LABEL = f"{MARK_DOMAIN}/recreation-token"
# Not carried over: kubectl's record of the old object would make `kubectl apply` diff against it,
# and another re-creation's token is not this one's.
DROPPED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
DROPPED_LABELS = frozenset({RECREATION_TOKEN_LABEL})
# A grow-back: the incident that stopped our shrunk copy to make its full-size successor, patched onto
# the copy before it is stopped. What a retry trusts: a copy that no longer runs is followed by its
# successor only when it carries this incident's mark (one that ended on its own, or was stopped by a
# human, never is). The stopped copy is kept (suspended), as every job we re-create is.
STOPPED_FOR_ANNOTATION = f"{MARK_DOMAIN}/stopped-for"
# What a name must leave for the lineage part when it is shortened: a letter, then "-" and a hash of
# the whole lineage name (so two long lineages sharing a prefix never share a re-creation name).
_HASH_CHARS = 6
_MIN_STEM = 1 + 1 + _HASH_CHARS


def lineage_name(job: dict[str, Any]) -> str:
    """The name the job's lineage writes its checkpoints under: its first job's name."""
    metadata = job.get("metadata") or {}
    name = str((metadata.get("annotations") or {}).get(JOB_NAME_ANNOTATION) or "")
    return name if _job_name(name) else str(metadata.get("name") or "")


def derived_suffix_room(job: dict[str, Any], kind: str, nodes: int | None = None) -> int:
    """The longest ``-<replica type>-<index>`` the training operator appends to the job's name for a
    pod and its headless Service (GenGeneralName, kubeflow/training-operator pkg/core/utils.go), for
    the job as it is made: at ``nodes`` pods when given (sized_spec), else at its own size."""
    spec = job.get("spec") or {}
    if nodes is not None:
        spec = copy.deepcopy(spec)
        sized_spec(spec, kind, nodes)
    if kind == "PyTorchJob":
        replicas = [(str(t), r) for t, r in (spec.get("pytorchReplicaSpecs") or {}).items() if isinstance(r, dict)]
    else:
        replicas = [(str(r.get("name") or ""), r) for r in spec.get("replicaSpecs") or [] if isinstance(r, dict)]
    return max((len(f"-{t.lower()}-{max(_replicas(r) - 1, 0)}") for t, r in replicas), default=0)


def _replicas(replica: dict[str, Any]) -> int:
    try:
        return max(int(replica.get("replicas") or 1), 1)
    except (TypeError, ValueError):
        return 1


def recreated_name(job: dict[str, Any], kind: str, nodes: int | None = None) -> str | None:
    """``<lineage>-r<generation>``, bounded so that every name the operator derives from it (each
    pod's and Service's ``<name>-<replica type>-<index>``, a DNS-1035 label of at most 63) fits at the
    size the copy is made at (``nodes``: a shrink or a grow-back; else the old job's own): a lineage
    name too long for that keeps its start and a hash of the whole; a dot (a DNS-1123 subdomain may
    have one) becomes "-", and a name must begin with a letter. Decided by the old object and the size
    alone, so a retry names the same job. None: no name leaves room (a replica type that long).
    UnsizableJob: the job cannot be made at ``nodes`` at all."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    text = str(annotations.get(GENERATION_ANNOTATION) or "0")
    generation = (int(text) if text.isascii() and text.isdigit() and len(text) < 6 else 0) + 1
    suffix = f"-r{generation}"
    lineage = lineage_name(job)
    stem = re.sub(r"[^a-z0-9-]", "-", lineage.lower()).strip("-")
    if not stem[:1].isalpha():
        stem = "j" + ("-" + stem if stem else "")
    budget = DNS1123_LABEL_MAX - derived_suffix_room(job, kind, nodes) - len(suffix)
    if budget < _MIN_STEM:
        return None
    if len(stem) > budget:
        digest = hashlib.sha256(lineage.encode()).hexdigest()[:_HASH_CHARS]
        stem = stem[: budget - 1 - _HASH_CHARS].rstrip("-") + "-" + digest
    return stem + suffix


def recreated_job(
    job: dict[str, Any],
    kind: str,
    *,
    name: str,
    resume_from: str,
    step: int,
    incident: str,
    token: str,
    nodes: int | None = None,
    data_parallel: int | None = None,
) -> dict[str, Any]:
    """The job as its owner wrote it (spec, labels, annotations), under ``name`` (recreated_name),
    with where to resume given to every container of every replica the way the Slurm side gives it
    to a batch script (HYPERPOD_RECOVERY_RESUME_FROM/_STEP, and the lineage's name for the manifests),
    and ``token``: what our ledger recorded before the create, by which a retry finds it. ``nodes``
    (a shrink or a grow-back): made at that many pods (sized_spec), the size and ``data_parallel`` given
    to it as HYPERPOD_RECOVERY_RESUME_NODES/_DATA_PARALLEL; a copy's own resume variables never carry over."""
    metadata = job.get("metadata") or {}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in DROPPED_ANNOTATIONS}
    annotations.pop(STOPPED_FOR_ANNOTATION, None)  # (the copy it is made from was stopped for it: not this one)
    annotations |= {
        JOB_NAME_ANNOTATION: lineage_name(job),
        GENERATION_ANNOTATION: name.rsplit("-r", 1)[1],
        RESUBMITTED_FROM_ANNOTATION: str(metadata.get("uid") or ""),
        INCIDENT_OF_JOB_ANNOTATION: incident,
    }
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in DROPPED_LABELS} | {RECREATION_TOKEN_LABEL: token}
    new_metadata: dict[str, Any] = {"name": name, "namespace": metadata.get("namespace"), "annotations": annotations, "labels": labels}
    spec = copy.deepcopy(job.get("spec") or {})
    run_policy = spec.get("runPolicy")
    if isinstance(run_policy, dict):
        run_policy.pop("suspend", None)  # (we suspended the old one to stop it: the copy is to run)
    env = {RESUME_FROM_ENV: resume_from, RESUME_STEP_ENV: str(step), JOB_NAME_ENV: lineage_name(job)}
    if nodes is not None:
        sized_spec(spec, kind, nodes)
        env[RESUME_NODES_ENV] = str(nodes)
        if data_parallel is not None:
            env[RESUME_DATA_PARALLEL_ENV] = str(data_parallel)
    dropped = set(env) | {RESUME_NODES_ENV, RESUME_DATA_PARALLEL_ENV}
    for replica in _replica_specs({"spec": spec}, kind):
        for container in ((replica.get("template") or {}).get("spec") or {}).get("containers") or []:
            kept = [e for e in container.get("env") or [] if e.get("name") not in dropped]
            container["env"] = kept + [{"name": key, "value": value} for key, value in env.items()]
    return {"apiVersion": JOB_KINDS[kind].api_version, "kind": kind, "metadata": new_metadata, "spec": spec}


def carries_token(candidate: dict[str, Any], token: str) -> bool:
    """The object is the re-creation whose token our ledger recorded (and not someone else's job)."""
    return bool(token) and ((candidate.get("metadata") or {}).get("labels") or {}).get(RECREATION_TOKEN_LABEL) == token


# --- a job that failed (the EKS job poller: EKS sends no event for it) --------------------------------
class UnreadableFailureTime(ValueError):
    """A Failed condition without a time we can read: no time, garbage, or one without a zone (the
    API server writes RFC 3339 with one; a time without it would be compared with ours as if UTC)."""


def failed_at(job: dict[str, Any]) -> datetime | None:
    """When the job's Failed condition came to hold (None: it has not failed). A failed job whose
    time cannot be read raises UnreadableFailureTime: that job's problem, never the poll's."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or [] if isinstance(c, dict) and c.get("status") == "True"]
    if not conditions or conditions[-1].get("type") != "Failed":
        return None
    stamp = conditions[-1].get("lastTransitionTime") or conditions[-1].get("lastUpdateTime")
    try:
        when = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if isinstance(stamp, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None or when.utcoffset() is None:
        raise UnreadableFailureTime(f"its Failed condition's time {str(stamp)[:40]!r} is no RFC 3339 time with a zone")
    return when


def recovery_wanted(job: dict[str, Any], kind: str) -> bool:
    """A failed job JobRecovery is for: one that opted in, or whose own restarter gave up (HPTO,
    HyperPod auto-resume): a human hears of those. A job nobody asked us about is left to its owner."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    opted_in = str(annotations.get(OPT_IN_ANNOTATION, "")).lower() == "true"
    gave_up = restarted_by(job, kind) in ("hyperpod_training_operator", "hyperpod_auto_resume")
    # (a job nobody asked us about is never read further: its Failed condition's time is its owner's)
    return (opted_in or gave_up) and failed_at(job) is not None


# A failed job none of whose containers kept an exit code (its pods deleted): 1 stands for "failed".
UNKNOWN_FAILURE_EXIT_CODE = 1


def _ended_state(status: dict[str, Any]) -> dict[str, Any] | None:
    """How a container last ended: its state if terminated, else (waiting to be started again, as
    in CrashLoopBackOff) its last state's; a container running again has not ended."""
    state = status.get("state") or {}
    if state.get("running") is not None:
        return None
    ended = state.get("terminated") or (status.get("lastState") or {}).get("terminated")
    return ended if isinstance(ended, dict) else None


def failed_exit_code(pods: list[dict[str, Any]]) -> int:
    """The failed job's exit code, from its pods' containers (Kubernetes keeps each container's, not
    the job's): the launcher's "do not requeue" code if any container ended with it (one launcher's
    verdict stands for the whole job, as one rank's exit ends a Slurm job with it), else the first
    non-zero code (pods by name), else UNKNOWN_FAILURE_EXIT_CODE."""
    codes = []
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name") or "")):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = _ended_state(status) if isinstance(status, dict) else None
            code = ended.get("exitCode") if ended is not None else None
            # (a negative or larger code, from a runtime's own failure, is no process's exit status)
            if isinstance(code, int) and not isinstance(code, bool) and 0 < code <= 255:
                codes.append(code)
    if DO_NOT_REQUEUE_EXIT_CODE in codes:
        return DO_NOT_REQUEUE_EXIT_CODE
    return codes[0] if codes else UNKNOWN_FAILURE_EXIT_CODE


def failure_event(
    job: dict[str, Any], kind: str, cluster_name: str, nodes: list[str], *, exit_code: int = UNKNOWN_FAILURE_EXIT_CODE
) -> JobFailedDetail | None:
    """The failed job as the JobRecovery workflow takes a failure (the shape the Slurm agent's epilog
    event has): its uid, where it ran, when and why it failed (``exit_code``: failed_exit_code of its
    pods), its checkpoint location."""
    metadata = job.get("metadata") or {}
    ended = failed_at(job)
    uid = str(metadata.get("uid") or "")
    if ended is None or not matches(KUBE_UID_PATTERN, uid):
        return None
    annotations = metadata.get("annotations") or {}
    condition = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"][-1]
    checkpoint = str(annotations.get(CHECKPOINT_ANNOTATION) or "").strip()
    previous = str(annotations.get(RESUBMITTED_FROM_ANNOTATION) or "")
    # (a job on so many pods that their nodes' names would not fit the JobRecovery's state: none, said in its recovery)
    return fitted(
        JobFailedDetail(
            cluster_name=cluster_name,
            job_id=uid,
            name=f"{metadata.get('namespace')}/{metadata.get('name')}"[:256],
            nodes=list(dict.fromkeys(nodes))[:10_000],
            state="FAILED",
            # (the condition's message carries the pod's termination message: the job's own text)
            reason=one_line(redact(f"{kind} {condition.get('reason') or 'Failed'}: {condition.get('message') or 'no message'}"), 256),
            exit_code=exit_code,
            ended_at=ended,
            checkpoint_uri=checkpoint if len(checkpoint) <= MAX_CHECKPOINT_URI and matches(CHECKPOINT_URI_PATTERN, checkpoint) else None,
            resubmission_of=previous if matches(KUBE_UID_PATTERN, previous) else None,
            event_key=f"{uid}:{int(ended.timestamp())}",
        )
    )
