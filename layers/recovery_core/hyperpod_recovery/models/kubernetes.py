"""Kubernetes names, and the marks the pipeline writes on a node, for the EKS orchestrator.

A name that reaches the Kubernetes API from outside (an event, a request, an answer) is validated
here first: a path segment built from an unchecked name could address another object, and an
object we could not name correctly is never acted on in its stead.

* a namespace is a DNS-1123 label: at most 63 lowercase letters, digits and '-', beginning and
  ending with a letter or digit (k8s.io/apimachinery validation.IsDNS1123Label);
* a node, and most objects (a PyTorchJob, a HyperPodPyTorchJob), have DNS-1123 subdomain names:
  such labels joined by '.', at most 253 characters (IsDNS1123Subdomain).

HyperPod's own labels are from ../shared/reference/hyperpod-eks.md §1 (AWS docs and AWS's Helm chart).
"""

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import ConfigDict, StringConstraints

from hyperpod_recovery.models.common import Model

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_PATTERN = rf"^{_LABEL}$"
DNS1123_SUBDOMAIN_PATTERN = rf"^{_LABEL}(?:\.{_LABEL})*$"
# metadata.uid: an RFC 4122 UUID as the API server writes it.
KUBE_UID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

KubeNamespace = Annotated[str, StringConstraints(max_length=DNS1123_LABEL_MAX, pattern=DNS1123_LABEL_PATTERN)]
KubeNodeName = Annotated[str, StringConstraints(max_length=DNS1123_SUBDOMAIN_MAX, pattern=DNS1123_SUBDOMAIN_PATTERN)]
KubeObjectName = Annotated[str, StringConstraints(max_length=DNS1123_SUBDOMAIN_MAX, pattern=DNS1123_SUBDOMAIN_PATTERN)]
KubeUid = Annotated[str, StringConstraints(pattern=KUBE_UID_PATTERN)]

# HyperPod on EKS names its nodes after their instance: hyperpod-i-<instance id> (older clusters
# show ip-... names: a node is found by listing when its name is not this one).
HYPERPOD_NODE_PREFIX = "hyperpod-"


def is_dns1123_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and re.fullmatch(DNS1123_LABEL_PATTERN, value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= DNS1123_SUBDOMAIN_MAX and re.fullmatch(DNS1123_SUBDOMAIN_PATTERN, value) is not None


def node_name_for_instance(instance_id: str) -> str:
    """The name HyperPod gives the Kubernetes node of ``instance_id`` on current clusters."""
    return f"{HYPERPOD_NODE_PREFIX}{instance_id}"


def instance_of_node_name(name: str) -> str | None:
    """The instance id a HyperPod node name carries (None for any other name)."""
    rest = name.removeprefix(HYPERPOD_NODE_PREFIX)
    return rest if rest != name and re.fullmatch(r"i-[a-f0-9]{8}(?:[a-f0-9]{9})?", rest) else None


# --- HyperPod's labels and taint (written by HyperPod's health-monitoring agent; only read here) ---
HEALTH_STATUS_LABEL = "sagemaker.amazonaws.com/node-health-status"
DEEP_HEALTH_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
INSTANCE_GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
COMPUTE_TYPE_LABEL = "sagemaker.amazonaws.com/compute-type"
HEALTHY_STATUS = "Schedulable"
# Values that say HyperPod itself will reboot or replace the node (with NodeRecovery=Automatic).
PENDING_REPAIR_STATUSES = frozenset({"UnschedulablePendingReplacement", "UnschedulablePendingReboot"})
DEEP_HEALTH_PASSED = "Passed"
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"

# --- our marks on a node: what we did to it, so that we undo only that -----------------------------
# The annotations are the source of truth (HyperPod's declarative KubernetesConfig reconciles labels
# and taints, never annotations: hyperpod-eks.md §1.6); the taint keeps jobs off the node even if
# someone uncordons it while we hold it.
MARK_DOMAIN = "hyperpod-recovery.io"
INCIDENT_ANNOTATION = f"{MARK_DOMAIN}/incident"
CORDON_PRE_EXISTING_ANNOTATION = f"{MARK_DOMAIN}/cordon-pre-existing"
CORDONED_AT_ANNOTATION = f"{MARK_DOMAIN}/cordoned-at"
BOOT_ID_ANNOTATION = f"{MARK_DOMAIN}/boot-id"
OUR_ANNOTATIONS = (INCIDENT_ANNOTATION, CORDON_PRE_EXISTING_ANNOTATION, CORDONED_AT_ANNOTATION, BOOT_ID_ANNOTATION)
QUARANTINE_TAINT_KEY = f"{MARK_DOMAIN}/quarantine"
QUARANTINE_TAINT_EFFECT = "NoSchedule"

# --- jobs -------------------------------------------------------------------------------------------
JobKind = Literal["PyTorchJob", "HyperPodPyTorchJob"]


@dataclass(frozen=True)
class JobKindInfo:
    """Where the API keeps a kind of training job (its group, version and plural): a constant
    table, not input, so a plain dataclass (no validator to build at import)."""

    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


JOB_KINDS: dict[str, JobKindInfo] = {
    "PyTorchJob": JobKindInfo(group="kubeflow.org", version="v1", plural="pytorchjobs"),
    "HyperPodPyTorchJob": JobKindInfo(group="sagemaker.amazonaws.com", version="v1", plural="hyperpodpytorchjobs"),
}
AUTO_RESUME_ANNOTATION = "sagemaker.amazonaws.com/enable-job-auto-resume"
# Kubeflow's operator labels every pod of a job with it; the HyperPod training operator with HPJob.
KUBEFLOW_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
HPTO_JOB_LABEL = "HPJob"
# A job opts in to our recovery with this annotation ("true"); nobody else restarts it then.
OPT_IN_ANNOTATION = f"{MARK_DOMAIN}/recover"

# --- Kueue (HyperPod task governance): who admits, suspends and un-suspends a job it manages -------
# Kueue v0.19.2 (what task governance v1.6 packages): a job carrying the queue-name label is managed;
# Kueue makes a Workload for it (controller ownerReference = the job; label job-uid = the job's uid:
# pkg/controller/jobframework/reconciler.go ConstructWorkload) and un-suspends the job whenever that
# Workload is admitted ("Job admitted, unsuspending"). Only the Workload's spec.active: false stops it
# for good: Kueue evicts the Workload (reason Deactivated) and suspends the job itself.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# The Workload API's version is the one the cluster serves (v1beta2, else v1beta1: domain/jobs/eks_kueue.py).
KUEUE_GROUP = "kueue.x-k8s.io"
WORKLOAD_PLURAL = "workloads"
WORKLOAD_VERSIONS = ("v1beta2", "v1beta1")  # the versions we read and write Workloads at, preferred first


# A pod's terminationGracePeriodSeconds is an int64; past a year a larger one says nothing more to us.
MAX_GRACE_SECONDS_CARRIED = 366 * 86_400

# A training job's name is also a label value on each of its pods (training.kubeflow.org/job-name,
# HPJob), which Kubernetes bounds to 63 characters: no longer name can have running pods.
KUBE_JOB_NAME_MAX = 63
KubeJobName = Annotated[str, StringConstraints(max_length=KUBE_JOB_NAME_MAX, pattern=DNS1123_SUBDOMAIN_PATTERN)]


# The token our ledger records for a job's re-creation before the create (uuid4 hex): the re-created
# object carries it, and nobody can know it before we create that object.
RECREATION_TOKEN_PATTERN = r"^[0-9a-f]{32}$"  # noqa: S105 (a pattern, not a secret)
RecreationToken = Annotated[str, StringConstraints(pattern=RECREATION_TOKEN_PATTERN)]


class KubeJobRef(Model):
    """A training job as the Kubernetes API names it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: JobKind
    namespace: KubeNamespace
    name: KubeJobName
