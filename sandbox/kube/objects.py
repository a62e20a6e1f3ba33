"""Kubernetes' objects as the fake keeps them: the constants, the errors a write answers, and small
readings of an object (its conditions, owner, replicas, selector match)."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from hyperpod_recovery.errors import (
    KubeConflict,
    KubeRequestRejected,
)
from hyperpod_recovery.models.kubernetes import (
    HEALTH_STATUS_LABEL,
    KUEUE_GROUP,
    MARK_DOMAIN,
    WORKLOAD_PLURAL,
)

HYPERPOD_TAINT_KEY = HEALTH_STATUS_LABEL  # HyperPod's taint: <label key>=Unschedulable:NoSchedule


class Invalid(KubeRequestRejected):
    """422 Invalid: the object a write would store fails the schema (nothing is stored)."""


class PatchDidNotApply(KubeConflict):
    """422: a ``test`` of the JSON Patch failed: the object is not as the patch's author read it."""


class PatchPathMissing(KubeRequestRejected):
    """422: the JSON Patch names a path the object does not have (an ``add`` below a missing map)."""


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Kubeflow's operator names each pod and its headless Service GenGeneralName(job, replica type, index)
# = "<job>-<replica type lowercased>-<index>" (kubeflow/training-operator pkg/core/utils.go;
# pkg/controller.v1/common/service.go CreateNewService). A Service's name must be a DNS-1035 label.
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# (sandbox/eks.py's annotations, as a re-creation carries them: who a job was made from)
RESUBMITTED_FROM = f"{MARK_DOMAIN}/resubmitted-from"
FINISHED = ("Succeeded", "Failed")
# Kueue's Workload conditions (kueue.x-k8s.io/v1beta1 workload_types.go) and its eviction reason when
# spec.active turns false (v0.19.2 pkg/controller/core/workload_controller.go: WorkloadDeactivated).
ADMITTED, QUOTA_RESERVED, EVICTED, DEACTIVATED = "Admitted", "QuotaReserved", "Evicted", "Deactivated"
CLUSTER_QUEUE = "hyperpod-cluster-queue"
# A HyperPod cluster id as its ARN ends (12 lowercase letters and digits), for a fake not given its cluster's.
SANDBOX_CLUSTER_ID = "k3x9wq2hd8rm"
# A pod's terminationGracePeriodSeconds when its spec gives none (the API server's default).
DEFAULT_GRACE_SECONDS = 30
WORKLOADS_RESOURCE = f"{WORKLOAD_PLURAL}.{KUEUE_GROUP}"
# Kueue v0.19.2 (what HyperPod task governance v1.6 packages) serves its CRDs at both, storing v1beta2.
KUEUE_0_19_VERSIONS = ("v1beta1", "v1beta2")


def _applied(obj: dict[str, Any], operations: list[dict[str, Any]], request: str) -> dict[str, Any]:
    """``operations`` applied whole, or an error as the API server words it: a failed ``test`` is
    "testing value <path> failed" (evanphx/json-patch, which the API server uses)."""
    try:
        return dict(jsonpatch.apply_patch(obj, operations))
    except jsonpatch.JsonPatchTestFailed as exc:
        failed = next((o["path"] for o in operations if o.get("op") == "test" and not _holds(obj, o)), "?")
        raise PatchDidNotApply(f"{request}: 422 Invalid (testing value {failed} failed: test failed)") from exc
    except (jsonpatch.JsonPatchConflict, jsonpatch.JsonPointerException) as exc:
        raise PatchPathMissing(f"{request}: 422 Invalid (the patch does not apply: {exc})") from exc
    except jsonpatch.InvalidJsonPatch as exc:
        raise KubeRequestRejected(f"{request}: 400 BadRequest ({exc})") from exc


def _holds(obj: dict[str, Any], test: dict[str, Any]) -> bool:
    try:
        return bool(jsonpatch.JsonPointer(test["path"]).resolve(obj) == test.get("value"))
    except jsonpatch.JsonPointerException:
        return False


def _owned_by(pod: dict[str, Any], job: dict[str, Any]) -> bool:
    return any(o.get("uid") == job["metadata"].get("uid") for o in pod["metadata"].get("ownerReferences") or [])


def _controller_uid(obj: dict[str, Any]) -> str | None:
    controller = next((o for o in obj["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
    return str(controller["uid"]) if controller else None


def _name_order(name: str) -> tuple[str, int]:
    """A pod's place among its job's: by its replica index (worker-10 after worker-9)."""
    stem, _, tail = name.rpartition("-")
    return (stem, int(tail)) if tail.isdigit() else (name, -1)


def _replicas(replica: dict[str, Any]) -> int:
    """A replica set's size: Kubeflow's default is 1 when it is not given (0 is 0)."""
    count = replica.get("replicas")
    return 1 if count is None else int(count)


def _suspended(job: dict[str, Any]) -> bool:
    return ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True


def _job_state(job: dict[str, Any]) -> str:
    held = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return str(held[-1].get("type")) if held else "Unknown"


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"].get("conditions") or [])


def _condition_true(obj: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def _set_condition(obj: dict[str, Any], kind: str, status: str, reason: str, message: str, at: datetime) -> None:
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    current = next((c for c in conditions if c["type"] == kind), None)
    if current is not None and (current["status"], current["reason"]) == (status, reason):
        return
    condition = {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": _stamp(at)}
    conditions[:] = [c for c in conditions if c["type"] != kind] + [condition]


def _meta_probe(job: dict[str, Any]) -> dict[str, Any]:
    """The job's metadata checked as ObjectMeta, on a ConfigMap that carries nothing else."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": job.get("metadata") or {}}


def _pod_templates(job: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    spec = job.get("spec") or {}
    if kind == "PyTorchJob":
        return [r.get("template") or {} for r in (spec.get("pytorchReplicaSpecs") or {}).values()]
    return [r.get("template") or {} for r in spec.get("replicaSpecs") or []]


def _container_names(job: dict[str, Any], replica_type: str) -> tuple[str, ...]:
    """The containers the operator gives a replica's pods: its template's."""
    template = job["spec"]["pytorchReplicaSpecs"][replica_type].get("template") or {}
    return tuple(str(c["name"]) for c in (template.get("spec") or {}).get("containers") or []) or ("main",)


def _template_terms(job: dict[str, Any], replica_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the operator copies from a replica's template into each pod it makes that the scheduler
    reads: each container's resources (by container name), and the pod's nodeSelector, affinity and tolerations."""
    template = job["spec"]["pytorchReplicaSpecs"][replica_type].get("template") or {}
    spec = template.get("spec") or {}
    resources = {str(c["name"]): copy.deepcopy(c["resources"]) for c in spec.get("containers") or [] if c.get("resources")}
    terms = {k: copy.deepcopy(spec[k]) for k in ("nodeSelector", "affinity", "tolerations") if spec.get(k)}
    return resources, terms


def _grace_seconds(job: dict[str, Any], replica_type: str) -> int | None:
    """The terminationGracePeriodSeconds a replica's pods get: its template's (None: the default)."""
    template = job["spec"]["pytorchReplicaSpecs"][replica_type].get("template") or {}
    grace = (template.get("spec") or {}).get("terminationGracePeriodSeconds")
    return grace if isinstance(grace, int) else None


def _ready_condition(ready: bool, at: datetime) -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": "True" if ready else "Unknown",
        "reason": "KubeletReady" if ready else "NodeStatusUnknown",
        "lastHeartbeatTime": _stamp(at),
        "lastTransitionTime": _stamp(at),
    }


def _node_info(boot_id: str) -> dict[str, str]:
    return {
        "architecture": "amd64",
        "bootID": boot_id,
        "containerRuntimeVersion": "containerd://1.7.27",
        "kernelVersion": "6.1.141-155.222.amzn2023.x86_64",
        "kubeProxyVersion": "",
        "kubeletVersion": "v1.33.1-eks-b9364f6",
        "machineID": "ec2" + boot_id.replace("-", "")[:29],
        "operatingSystem": "linux",
        "osImage": "Amazon Linux 2023",
        "systemUUID": "ec2" + boot_id.replace("-", "")[3:32],
    }


def _selector(text: str | None) -> dict[str, str | None]:
    """Equality selectors only (``a=b,c``): what the adapter sends."""
    wanted: dict[str, str | None] = {}
    for part in (text or "").split(","):
        if part.strip():
            key, _, value = part.partition("=")
            wanted[key.strip()] = value.strip() if _ else None
    return wanted


def _selected(obj: dict[str, Any], wanted: dict[str, str | None]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(k in labels and (v is None or labels[k] == v) for k, v in wanted.items())


def _workloads_path(version: str, namespace: str) -> str:
    return f"/apis/{KUEUE_GROUP}/{version}/namespaces/{namespace}/{WORKLOAD_PLURAL}"
