"""An in-memory Kubernetes API server: the calls the EKS orchestrator makes, with the semantics
the pipeline relies on, every stored object checked against Kubernetes' own schema.

There is no way to run a kube-apiserver here (no Docker, no envtest binaries): this is the faithful
double. It implements the KubeApi port (hyperpod_recovery/ports.py) and raises the same named
errors as the real adapter (adapters/kubernetes.py); tests/contract/test_kube_api.py holds both to
the same expectations, the real adapter through a local TLS server that serves this object
(``serve`` below), so the requests are checked on the wire too.

What it models:
* resourceVersion: bumped on every write; JSON Patch (RFC 6902, the ``jsonpatch`` library the API
  server's own behaviour was checked against) applied whole or not at all; a failed ``test`` or a
  missing path is a 422 whose cause is the patch library's error, as the API server answers
  (apiserver handlers/patch.go applyJSPatch), which the adapter reads as a conflict;
* strict schemas: every Node, Pod and PodTemplate validated with kubernetes-validate (the OpenAPI
  of the pinned Kubernetes minor, unknown fields refused) after each write, a PyTorchJob with its
  CRD's schema (tests/kube_schemas, from AWS's Helm chart) and its pod templates as PodTemplates;
  an object that fails is refused (422 Invalid) and nothing is stored;
* pods by ``spec.nodeName``, nodes by equality label selectors, create -> 409 AlreadyExists;
* two 404s, as the API server writes them: an object of a resource it serves that is not there is
  apimachinery's NewNotFound (``details: {name, group, kind}``); a group, version or resource it does
  not serve falls through to apiserver's util/notfoundhandler, a bare NotFound naming nothing;
* a container's log (``set_pod_log``) read as the API server reads it: the last ``tailLines`` lines,
  of which the first ``limitBytes`` bytes, as text; 404 for a pod that is not there, 400 for a
  container the pod does not have or one not started yet; events (``record_event``, each checked
  against the Event schema) listed by their involved object's kind and name;
* HyperPod's side (``hyperpod_*`` methods): health labels and taint, a reboot (new boot id, Ready
  again), a replacement (the Node object deleted with its pods, a new one under a new name);
* the controllers that act on a training job after every write (``_settle``), as they would a moment
  later: Kubeflow's training operator makes a running PyTorchJob's pods and Services
  (``<job>-<replica type>-<index>``: a name that is no DNS-1035 label of at most 63 characters cannot
  be made, so the job never starts) and deletes a suspended job's pods; a deleted pod is Terminating
  (deletionTimestamp: now + its terminationGracePeriodSeconds) and still runs and holds its node
  through its grace period of virtual time, then is gone (on a node that is not Ready it stays: no
  kubelet confirms it, until the node is Ready again or deleted); Kueue (``kueue=True``, HyperPod task governance)
  suspends a job it manages as it is created, makes its Workload, admits it, and un-suspends a
  suspended job whose Workload is admitted, and evicts and suspends one whose Workload is inactive;
  its API at the versions ``kueue_versions`` names (v1beta1, v1beta2 or both), with the discovery
  answer the API server gives (``GET /apis/<group>``: an APIGroup, 404 for a group not served) and
  404 at a version not served; each Workload checked against the schema of every version it is served at;
* a PyTorchJob CRD without ``runPolicy.suspend`` (training operator < 1.7, ``suspend_field=False``):
  the API server prunes the field and answers 200;
* ``second_copies``: every moment two objects of one job's lineage were live at once (a pod of each
  running, waiting to, or Terminating);
* HyperPod's providerID on each node it makes (``aws:///<zone id>/sagemaker/cluster/hyperpod-<cluster id>-<instance id>``).

ASSUMPTION (not in AWS's docs, hyperpod-eks.md §8): that HyperPod neither strips our taint nor our
annotations while the node lives, and that a rebooted node keeps its name and annotations.
ASSUMPTION: the controllers act at once (a real one a moment later), and the Kueue ClusterQueue has
quota for every Workload: admission is never the fake's bottleneck, so a copy Kueue would admit is live.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
from referencing import Registry, Resource

from hyperpod_recovery.adapters.kubernetes import LIVE_PODS_SELECTOR
from hyperpod_recovery.errors import (
    KubeAccessDenied,
    KubeAlreadyExists,
    KubeConflict,
    KubeObjectGone,
    KubeRequestRejected,
    KubeThrottled,
    KubeUnavailable,
)
from hyperpod_recovery.models.kubernetes import (
    DEEP_HEALTH_LABEL,
    DNS1123_LABEL_MAX,
    HEALTH_STATUS_LABEL,
    INSTANCE_GROUP_LABEL,
    JOB_KINDS,
    KUEUE_GROUP,
    KUEUE_JOB_UID_LABEL,
    KUEUE_QUEUE_LABEL,
    MARK_DOMAIN,
    WORKLOAD_PLURAL,
    KubeJobRef,
    node_name_for_instance,
)

KUBERNETES_VERSION = "1.33"  # the newest minor the HyperPod EKS prerequisites list
SCHEMAS = Path(__file__).resolve().parents[2] / "tests" / "kube_schemas"
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


class FakeKube:
    def __init__(
        self,
        *,
        now: Callable[[], datetime] | None = None,
        version: str = KUBERNETES_VERSION,
        kinds: tuple[str, ...] = tuple(JOB_KINDS),
        kueue: bool = False,
        kueue_versions: tuple[str, ...] = KUEUE_0_19_VERSIONS,
        suspend_field: bool = True,
        epoch: datetime | None = None,
        scheduler: bool = False,
        cluster_id: str = SANDBOX_CLUSTER_ID,
    ) -> None:
        """``kueue``: Kueue runs (HyperPod task governance: the Workload CRD and its controllers);
        ``suspend_field``: the PyTorchJob CRD has runPolicy.suspend (training operator 1.7 and later);
        ``epoch``: what second_copies counts its virtual seconds from (default: now at construction);
        ``scheduler``: the scheduler places a pending pod on a free node (_schedule); off, the pods the
        operator makes stay Pending (what the older drills' reports were written with); ``cluster_id``:
        the HyperPod cluster's id, in its nodes' providerIDs."""
        self.scheduler = scheduler
        self.cluster_id = cluster_id
        self.zone_id = "usw2-az1"
        self.version = version
        self.kueue = kueue
        # The versions Kueue's CRDs are served at (v0.19.2: both, v1beta2 stored; an older Kueue
        # v1beta1 only; one that stopped serving v1beta1, v1beta2 only), newest first as discovery lists them.
        self.kueue_versions = kueue_versions
        self.suspend_field = suspend_field
        # The job kinds whose CRD is installed (the training operator and Kubeflow are add-ons):
        # listing or reading another kind is 404, as on a cluster without it.
        self.kinds = kinds
        self._created = 0  # uids are drawn from a seeded sequence: a job made again under its name gets a new one
        self.now = now or (lambda: datetime(2026, 3, 14, 9, 0, tzinfo=UTC))
        self.epoch = epoch or self.now()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.jobs: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.workloads: dict[tuple[str, str], dict[str, Any]] = {}
        self.logs: dict[tuple[str, str, str], str] = {}  # (namespace, pod, container) -> what it printed
        self.events: list[dict[str, Any]] = []
        # What the training operator could not make (a derived name Kubernetes refuses): the job never starts.
        self.operator_errors: list[str] = []
        self._copies: list[dict[str, Any]] = []
        self._live_by_lineage: dict[tuple[str, str], list[str]] = {}
        self._runs: dict[str, list[list[float | None]]] = {}  # uid -> [start, end] (runs())
        # Each PyTorchJob's nodes as its first run began (its pods', in name order): where it trained.
        self.run_nodes: dict[str, list[str]] = {}
        self._version = 1000
        self.calls: list[tuple[str, str]] = []
        # Injected faults: (verb, resource) -> errors raised by the next calls, in order.
        self.faults: dict[tuple[str, str], list[Exception]] = {}
        # Called after a node is read and before a patch is applied (a concurrent writer in a test).
        self.before_patch: Callable[[str], None] | None = None
        self._job_schemas: dict[str, dict[str, Any]] = {}

    @property
    def kueue_versions(self) -> tuple[str, ...]:
        """The versions Kueue serves, newest first (as discovery lists them)."""
        return self._kueue_versions

    @kueue_versions.setter
    def kueue_versions(self, versions: tuple[str, ...]) -> None:
        ordered = tuple(v for v in ("v1beta2", "v1beta1") if v in versions)
        if not ordered or len(ordered) != len(set(versions)):
            raise ValueError(f"kueue_versions {versions!r}: Kueue serves v1beta1, v1beta2 or both")
        self._kueue_versions = ordered

    # --- the KubeApi port --------------------------------------------------------------------------
    def get_node(self, name: str) -> dict[str, Any]:
        self._call("get", "nodes")
        if name not in self.nodes:
            raise KubeObjectGone(f"GET /api/v1/nodes/{name}: 404 NotFound", named=name, resource="nodes")
        return copy.deepcopy(self.nodes[name])

    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        self._call("list", "nodes")
        wanted = _selector(label_selector)
        return [copy.deepcopy(n) for n in self.nodes.values() if _selected(n, wanted)]

    def patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        self._call("patch", "nodes")
        if self.before_patch is not None:
            hook, self.before_patch = self.before_patch, None
            hook(name)
        if name not in self.nodes:
            raise KubeObjectGone(f"PATCH /api/v1/nodes/{name}: 404 NotFound", named=name, resource="nodes")
        patched = _applied(self.nodes[name], operations, f"PATCH /api/v1/nodes/{name}")
        if patched.get("metadata", {}).get("name") != name:
            raise Invalid(f"PATCH /api/v1/nodes/{name}: 422 Invalid (metadata.name may not change)")
        self._store_node(patched)
        return copy.deepcopy(self.nodes[name])

    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        self._call("list", "pods")
        return [copy.deepcopy(p) for p in self.pods.values() if (p.get("spec") or {}).get("nodeName") == node_name]

    def list_live_pods(self) -> list[dict[str, Any]]:
        self._call("list", "pods")
        return [copy.deepcopy(p) for p in self.pods.values() if (p.get("status") or {}).get("phase") not in FINISHED]

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        self._call("list", "pods")
        wanted = _selector(label_selector)
        return [copy.deepcopy(p) for (ns, _), p in self.pods.items() if ns == namespace and _selected(p, wanted)]

    def get_pod_log(self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int) -> str:
        self._call("get", "pods/log")
        found = self.pods.get((namespace, pod))
        where = f"GET /api/v1/namespaces/{namespace}/pods/{pod}/log"
        if found is None:
            raise KubeObjectGone(f'{where}: 404 NotFound pods "{pod}" not found', named=pod, resource="pods")
        if container not in [c["name"] for c in found["spec"]["containers"]]:
            raise KubeRequestRejected(f"{where}: 400 BadRequest container {container} is not valid for pod {pod}")
        if found["status"].get("phase") == "Pending":
            raise KubeRequestRejected(
                f'{where}: 400 BadRequest container "{container}" in pod "{pod}" is waiting to start: ContainerCreating'
            )
        lines = self.logs.get((namespace, pod, container), "").splitlines(keepends=True)
        tail = "".join(lines[-tail_lines:]) if tail_lines > 0 else ""
        return tail.encode()[:limit_bytes].decode("utf-8", errors="replace")

    def list_events(self, namespace: str, involved_kind: str, involved_name: str) -> list[dict[str, Any]]:
        self._call("list", "events")
        return [
            copy.deepcopy(e)
            for e in self.events
            if e["metadata"]["namespace"] == namespace
            and (e["involvedObject"]["kind"], e["involvedObject"]["name"]) == (involved_kind, involved_name)
        ]

    def get_job(self, ref: KubeJobRef) -> dict[str, Any]:
        info = JOB_KINDS[ref.kind]
        self._call("get", info.plural)
        key = (ref.kind, ref.namespace, ref.name)
        if ref.kind not in self.kinds:
            raise KubeObjectGone(f"GET /apis/{info.group}/{info.version}/namespaces/{ref.namespace}/{info.plural}/{ref.name}: 404 NotFound")
        if key not in self.jobs:
            raise KubeObjectGone(
                f"GET {info.plural} {ref.namespace}/{ref.name}: 404 NotFound", named=ref.name, resource=f"{info.plural}.{info.group}"
            )
        return copy.deepcopy(self.jobs[key])

    def create_job(self, kind: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        info = JOB_KINDS[kind]
        self._call("create", info.plural)
        obj = copy.deepcopy(body)
        metadata = obj.setdefault("metadata", {})
        if obj.get("kind") != kind or obj.get("apiVersion") != info.api_version:
            raise KubeRequestRejected(f"POST {info.plural}: 400 BadRequest (kind/apiVersion {obj.get('kind')}/{obj.get('apiVersion')})")
        if metadata.get("namespace", namespace) != namespace:
            raise KubeRequestRejected(f"POST {info.plural}: 400 BadRequest (the namespace of the body does not match the request)")
        for system in ("uid", "resourceVersion", "creationTimestamp"):
            if system in metadata:
                raise KubeRequestRejected(f"POST {info.plural}: 400 BadRequest (metadata.{system} may not be set on create)")
        if "status" in obj:
            raise KubeRequestRejected(f"POST {info.plural}: 400 BadRequest (status may not be set on create)")
        key = (kind, namespace, str(metadata.get("name") or ""))
        if key in self.jobs:
            raise KubeAlreadyExists(f"POST {info.plural}: 409 AlreadyExists ({namespace}/{key[2]})")
        # (a uid as the API server writes one: new for every object, the same on every run of a drill)
        self._created += 1
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"hyperpod-recovery-sandbox/{self._created}"))
        metadata.update(namespace=namespace, uid=uid, creationTimestamp=_stamp(self.now()))
        if self.kueue and kind == "PyTorchJob" and (metadata.get("labels") or {}).get(KUEUE_QUEUE_LABEL):
            # Kueue's webhook suspends a job it manages as it is created (jobframework ApplyDefaultForSuspend).
            obj.setdefault("spec", {}).setdefault("runPolicy", {})["suspend"] = True
        self._prune(obj)
        self._validate_job(obj)
        metadata["resourceVersion"] = self._next_version()
        self.jobs[key] = obj
        created = copy.deepcopy(obj)
        self._settle([key])
        return created

    def patch_job(self, ref: KubeJobRef, operations: list[dict[str, Any]]) -> dict[str, Any]:
        info = JOB_KINDS[ref.kind]
        self._call("patch", info.plural)
        key = (ref.kind, ref.namespace, ref.name)
        if key not in self.jobs:
            raise KubeObjectGone(
                f"PATCH {info.plural} {ref.namespace}/{ref.name}: 404 NotFound", named=ref.name, resource=f"{info.plural}.{info.group}"
            )
        patched = _applied(self.jobs[key], operations, f"PATCH {info.plural} {ref.namespace}/{ref.name}")
        self._prune(patched)  # (what the CRD does not know is dropped, and the write still answers 200)
        self._validate_job(patched)
        patched["metadata"]["resourceVersion"] = self._next_version()
        self.jobs[key] = patched
        answer = copy.deepcopy(patched)
        self._settle([key])
        return answer

    def list_jobs(self, kind: str) -> list[dict[str, Any]]:
        info = JOB_KINDS[kind]
        self._call("list", info.plural)
        if kind not in self.kinds:
            raise KubeObjectGone(f"GET /apis/{info.group}/{info.version}/{info.plural}: 404 NotFound (no such resource)")
        return [copy.deepcopy(j) for (k, _, _), j in self.jobs.items() if k == kind]

    def list_jobs_in(self, kind: str, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        info = JOB_KINDS[kind]
        self._call("list", info.plural)
        if kind not in self.kinds:
            raise KubeObjectGone(f"GET /apis/{info.group}/{info.version}/namespaces/{namespace}/{info.plural}: 404 NotFound")
        wanted = _selector(label_selector)
        return [copy.deepcopy(j) for (k, ns, _), j in self.jobs.items() if (k, ns) == (kind, namespace) and _selected(j, wanted)]

    # --- discovery, and Kueue's Workloads (kueue.x-k8s.io, at the versions it serves) ---------------
    def api_group(self, group: str) -> dict[str, Any]:
        """GET /apis/{group}: the APIGroup the API server answers (its versions newest first, the
        preferred one the first: the order of kube-aware version priority), 404 for a group no CRD serves."""
        self._call("get", f"/apis/{group}")
        versions = self._served_groups().get(group)
        if not versions:
            raise KubeObjectGone(f"GET /apis/{group}: 404 NotFound (the server could not find the requested resource)")
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": listed, "preferredVersion": listed[0]}

    def _served_groups(self) -> dict[str, tuple[str, ...]]:
        served = {JOB_KINDS[k].group: (JOB_KINDS[k].version,) for k in self.kinds}
        if self.kueue:
            served[KUEUE_GROUP] = self.kueue_versions
        return served

    def list_workloads(self, version: str, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        self._call("list", WORKLOAD_PLURAL)
        self._workloads_served(version, f"GET {_workloads_path(version, namespace)}")
        wanted = _selector(label_selector)
        return [self._served_as(w, version) for (ns, _), w in self.workloads.items() if ns == namespace and _selected(w, wanted)]

    def get_workload(self, version: str, namespace: str, name: str) -> dict[str, Any]:
        self._call("get", WORKLOAD_PLURAL)
        self._workloads_served(version, f"GET {_workloads_path(version, namespace)}/{name}")
        if (namespace, name) not in self.workloads:
            raise KubeObjectGone(f"GET workloads {namespace}/{name}: 404 NotFound", named=name, resource=WORKLOADS_RESOURCE)
        return self._served_as(self.workloads[(namespace, name)], version)

    def patch_workload(self, version: str, namespace: str, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON Patch applied to the Workload as served at ``version``, stored at the storage version."""
        self._call("patch", WORKLOAD_PLURAL)
        self._workloads_served(version, f"PATCH {_workloads_path(version, namespace)}/{name}")
        if (namespace, name) not in self.workloads:
            raise KubeObjectGone(f"PATCH workloads {namespace}/{name}: 404 NotFound", named=name, resource=WORKLOADS_RESOURCE)
        served = self._served_as(self.workloads[(namespace, name)], version)
        patched = self._served_as(_applied(served, operations, f"PATCH workloads {namespace}/{name}"), self._workload_storage())
        self._validate_workload(patched)
        patched["metadata"]["resourceVersion"] = self._next_version()
        self.workloads[(namespace, name)] = patched
        answer = self._served_as(patched, version)
        owner = _controller_uid(patched)
        self._settle([k for k, j in self.jobs.items() if j["metadata"]["uid"] == owner])
        return answer

    def _workloads_served(self, version: str, request: str) -> None:
        if not self.kueue:
            raise KubeObjectGone(f"{request}: 404 NotFound (no such resource: Kueue is not installed)")
        if version not in self.kueue_versions:
            raise KubeObjectGone(f"{request}: 404 NotFound (the server could not find the requested resource)")

    def _workload_storage(self) -> str:
        """The version Workloads are stored at: v1beta2 where it is served (Kueue v0.16 and later), else v1beta1."""
        return self.kueue_versions[0]

    @staticmethod
    def _served_as(workload: dict[str, Any], version: str) -> dict[str, Any]:
        """A Workload converted to ``version``. ASSUMPTION (tests/kube_schemas/README.md): the fields the
        fake writes are the same at v1beta1 and v1beta2, so the conversion is its apiVersion (each
        version's schema checks the result: _validate_workload)."""
        served = copy.deepcopy(workload)
        served["apiVersion"] = f"{KUEUE_GROUP}/{version}"
        return served

    # --- seeding a cluster ---------------------------------------------------------------------------
    def add_node(
        self,
        name: str,
        *,
        group: str = "workers",
        ready: bool = True,
        health: str | None = "Schedulable",
        deep_health: str | None = None,
        unschedulable: bool = False,
        instance_id: str | None = None,
        boot_id: str | None = None,
        provider_id: str | None = None,
    ) -> dict[str, Any]:
        """A node; ``instance_id``: its instance, named in its providerID in HyperPod's form (in
        ``provider_id`` when given: EC2's form, or none: a node whose providerID names no instance)."""
        labels = {"sagemaker.amazonaws.com/compute-type": "hyperpod", INSTANCE_GROUP_LABEL: group}
        if health is not None:
            labels[HEALTH_STATUS_LABEL] = health
        if deep_health is not None:
            labels[DEEP_HEALTH_LABEL] = deep_health
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name + str(len(self.nodes))))},
            "spec": {},
            "status": {
                "conditions": [_ready_condition(ready, self.now())],
                "nodeInfo": _node_info(boot_id or str(uuid.uuid4())),
            },
        }
        provider_id = provider_id if provider_id is not None else self.provider_id(instance_id) if instance_id else None
        if provider_id:
            node["spec"]["providerID"] = provider_id
        if unschedulable:
            node["spec"]["unschedulable"] = True
        if health is not None and health != "Schedulable":
            node["spec"]["taints"] = [{"key": HYPERPOD_TAINT_KEY, "value": "Unschedulable", "effect": "NoSchedule"}]
        self._store_node(node)
        return self.nodes[name]

    def add_hyperpod_node(self, instance_id: str, **kwargs: Any) -> dict[str, Any]:
        return self.add_node(node_name_for_instance(instance_id), instance_id=instance_id, **kwargs)

    def provider_id(self, instance_id: str) -> str:
        """HyperPod's providerID for its node of ``instance_id`` (domain/nodes/eks_provider_id.py): the zone
        id and the cluster id, then the instance, as a live cluster shows them."""
        return f"aws:///{self.zone_id}/sagemaker/cluster/hyperpod-{self.cluster_id}-{instance_id}"

    def add_job(
        self,
        kind: str,
        namespace: str,
        name: str,
        *,
        nodes: list[str],
        annotations: dict[str, str] | None = None,
        restart_policy: str = "Never",
        replicas: int | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        condition: str = "Running",
        labels: dict[str, str] | None = None,
        elastic_policy: dict[str, int] | None = None,
        grace_seconds: int | None = None,
    ) -> dict[str, Any]:
        """A training job whose pods run one on each of ``nodes`` (created through the API, as a user
        would; a PyTorchJob's pods are its operator's, bound to the nodes as the scheduler would);
        ``grace_seconds``: its pod template's terminationGracePeriodSeconds."""
        count = replicas if replicas is not None else len(nodes)
        container = {"name": "pytorch", "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1", "command": ["torchrun"]}
        if args:
            container["args"] = list(args)
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in env.items()]
        template: dict[str, Any] = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container], "restartPolicy": "Never"}}
        if grace_seconds is not None:
            template["spec"]["terminationGracePeriodSeconds"] = grace_seconds
        if kind == "PyTorchJob":
            spec: dict[str, Any] = {
                "runPolicy": {"cleanPodPolicy": "None"},
                "pytorchReplicaSpecs": {"Worker": {"replicas": count, "restartPolicy": restart_policy, "template": template}},
            }
        else:
            spec = {"replicaSpecs": [{"name": "pods", "replicas": count, "template": template}], "runPolicy": {"jobMaxRetryCount": 3}}
        metadata: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
        if labels:
            metadata["labels"] = dict(labels)
        if elastic_policy:
            spec["elasticPolicy"] = dict(elastic_policy)
        body = {"apiVersion": JOB_KINDS[kind].api_version, "kind": kind, "metadata": metadata, "spec": spec}
        scheduling, self.scheduler = self.scheduler, False  # (seeded pods are bound below, where the scenario put them)
        try:
            job = self.create_job(kind, namespace, body)
        finally:
            self.scheduler = scheduling
        self.calls.pop()  # seeding is not a call the pipeline made
        stored = self.jobs[(kind, namespace, name)]
        stored["status"] = {"conditions": [{"type": "Created", "status": "True"}, {"type": condition, "status": "True"}]}
        self._validate_job(stored)
        for index, node in enumerate(nodes):
            pod = self.pods.get((namespace, f"{name}-worker-{index}"))
            if pod is not None and _owned_by(pod, stored):  # (the operator made it: scheduled there, running)
                pod["spec"]["nodeName"] = node
                pod["status"]["phase"] = "Running"
            else:
                self.add_pod(
                    namespace,
                    f"{name}-worker-{index}",
                    node,
                    owner=(kind, name, job["metadata"]["uid"]),
                    containers=(container["name"],),
                    grace_seconds=grace_seconds,
                )
        self._settle([(kind, namespace, name)])
        return stored

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str | None,
        *,
        owner: tuple[str, str, str] | None = None,
        labels: dict[str, str] | None = None,
        phase: str = "Running",
        containers: tuple[str, ...] = ("main",),
        grace_seconds: int | None = None,
    ) -> None:
        """A pod (``node`` None: not scheduled yet); ``owner``: (kind, name, uid) of its controller;
        ``containers``: their names (a job's pods: its template's); ``grace_seconds``: its
        terminationGracePeriodSeconds (the API server's default, 30, when not given)."""
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, namespace + "/" + name)),
        }
        metadata["labels"] = dict(labels or {})
        if owner is not None:
            kind, job_name, uid = owner
            metadata["ownerReferences"] = [
                {
                    "apiVersion": JOB_KINDS[kind].api_version,
                    "kind": kind,
                    "name": job_name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            metadata["labels"]["training.kubeflow.org/job-name" if kind == "PyTorchJob" else "HPJob"] = job_name
        spec: dict[str, Any] = {
            "containers": [{"name": c, "image": "train:1"} for c in containers],
            "terminationGracePeriodSeconds": DEFAULT_GRACE_SECONDS if grace_seconds is None else grace_seconds,
        }
        if node is not None:
            spec["nodeName"] = node
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}
        metadata["resourceVersion"] = self._next_version()
        self._validate(pod)
        self.pods[(namespace, name)] = pod

    def set_pod_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """What the pod's container (its first, unless named) has printed so far."""
        found = self.pods[(namespace, pod)]
        self.logs[(namespace, pod, container or found["spec"]["containers"][0]["name"])] = text

    def record_event(
        self,
        involved: dict[str, Any],
        reason: str,
        message: str,
        *,
        type_: str = "Normal",
        count: int = 1,
        component: str = "kubelet",
    ) -> dict[str, Any]:
        """An event about ``involved`` (a pod or job as stored), as its controller or kubelet records it."""
        metadata = involved["metadata"]
        stamp = _stamp(self.now())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{metadata['name']}.{len(self.events) + 1:016x}",
                "namespace": metadata["namespace"],
                "resourceVersion": self._next_version(),
            },
            "involvedObject": {
                "apiVersion": involved["apiVersion"],
                "kind": involved["kind"],
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata["uid"],
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "count": count,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": component},
        }
        self._validate(event)
        self.events.append(event)
        return copy.deepcopy(event)

    def job_fails(
        self, kind: str, namespace: str, name: str, *, reason: str = "BackoffLimitExceeded", message: str = "", exit_code: int = 1
    ) -> None:
        """The job's operator gives up on it: condition Failed, its pods Failed (kept, cleanPodPolicy
        None), each container terminated with ``exit_code``."""
        job = copy.deepcopy(self.jobs[(kind, namespace, name)])
        stamp = _stamp(self.now())
        job["status"]["conditions"] = [c | {"status": "False"} if c["type"] == "Running" else c for c in job["status"]["conditions"]]
        job["status"]["conditions"].append(
            {
                "type": "Failed",
                "status": "True",
                "reason": reason,
                "message": message or f"{kind} {name} has failed",
                "lastTransitionTime": stamp,
            }
        )
        self._validate_job(job)
        job["metadata"]["resourceVersion"] = self._next_version()
        self.jobs[(kind, namespace, name)] = job
        for pod in self.pods.values():
            if _owned_by(pod, job):
                pod["status"]["phase"] = "Failed"
                pod["status"]["containerStatuses"] = [
                    {
                        "name": container["name"],
                        "image": container["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}},
                    }
                    for container in pod["spec"]["containers"]
                ]
                self._validate(pod)
        self._settle([(kind, namespace, name)])

    def operator_reports_fault(
        self, kind: str, namespace: str, name: str, *, reason: str, message: str, condition: str = "Running"
    ) -> None:
        """The training operator's word on a fault it restarted the job for (a HyperPodPyTorchJob's
        log monitoring rule, LogHang_<rule>): a condition of ``condition`` carrying ``reason`` and
        ``message``, stamped now. ASSUMPTION: the shape (domain/hangs/imported.py operator_faults)."""
        job = copy.deepcopy(self.jobs[(kind, namespace, name)])
        kept = [c for c in job["status"]["conditions"] if c["type"] != condition]
        stamped = {"type": condition, "status": "True", "reason": reason, "message": message, "lastTransitionTime": _stamp(self.now())}
        job["status"]["conditions"] = [*kept, stamped]
        job["metadata"]["resourceVersion"] = self._next_version()
        self.jobs[(kind, namespace, name)] = job

    # --- HyperPod's side -----------------------------------------------------------------------------
    def hyperpod_marks_unhealthy(self, name: str, status: str = "UnschedulablePendingReplacement") -> None:
        """HyperPod's health agent: label, taint (value Unschedulable whatever the label), NotReady if asked."""
        node = copy.deepcopy(self.nodes[name])
        node["metadata"]["labels"][HEALTH_STATUS_LABEL] = status
        taints = node["spec"].setdefault("taints", [])
        if not any(t.get("key") == HYPERPOD_TAINT_KEY for t in taints):
            taints.append({"key": HYPERPOD_TAINT_KEY, "value": "Unschedulable", "effect": "NoSchedule"})
        self._store_node(node)

    def hyperpod_reboots(self, name: str, *, healthy: bool = True, boot_id: str | None = None) -> None:
        """The same node back from a reboot: a new boot id, Ready since now, HyperPod's label and taint cleared if healthy."""
        node = copy.deepcopy(self.nodes[name])
        node["status"]["nodeInfo"]["bootID"] = boot_id or str(uuid.uuid4())
        node["status"]["conditions"] = [_ready_condition(True, self.now())]
        if healthy:
            node["metadata"]["labels"][HEALTH_STATUS_LABEL] = "Schedulable"
            node["spec"]["taints"] = [t for t in node["spec"].get("taints", []) if t.get("key") != HYPERPOD_TAINT_KEY]
            if not node["spec"]["taints"]:
                del node["spec"]["taints"]
        self._store_node(node)

    def hyperpod_goes_ready(self, name: str) -> None:
        """Its kubelet answers again (the same boot): Ready since now."""
        node = copy.deepcopy(self.nodes[name])
        node["status"]["conditions"] = [_ready_condition(True, self.now())]
        self._store_node(node)

    def hyperpod_goes_not_ready(self, name: str) -> None:
        node = copy.deepcopy(self.nodes[name])
        node["status"]["conditions"] = [_ready_condition(False, self.now())]
        self._store_node(node)

    def hyperpod_removes(self, name: str) -> None:
        """A replaced instance: its Node object is deleted, and its pods with it (pod GC)."""
        self.nodes.pop(name, None)
        for key in [k for k, p in self.pods.items() if p["spec"].get("nodeName") == name]:
            del self.pods[key]
        self._settle()

    # --- the cluster's controllers, acting on what was just written --------------------------------
    def second_copies(self) -> list[dict[str, Any]]:
        """Each moment two job objects of one lineage (a job and its re-creations, by who each was
        re-created from) were live at once: a pod of each running or pending, Terminating ones among
        them (a stopped job's pods run through their grace period). ``at``: virtual seconds since ``epoch``."""
        return copy.deepcopy(self._copies)

    def _settle(self, keys: list[tuple[str, str, str]] | None = None) -> None:
        """What the training operator and Kueue do after a write (to the jobs ``keys``, else every
        job), in the order they would."""
        for key in sorted(self.jobs if keys is None else keys):
            if key[0] != "PyTorchJob" or key not in self.jobs:
                continue  # (the HyperPod training operator is not modelled: its pods are seeded)
            if self.kueue and self._managed(self.jobs[key]):
                self._kueue_reconciles(key)
            self._operator_reconciles(key)
        self._schedule()
        self._note_copies()

    def _schedule(self) -> bool:
        """kube-scheduler, as far as a drill needs it (``scheduler``): each pending pod without a node,
        in name order, bound to a Ready node that takes pods (not cordoned, no NoSchedule or NoExecute
        taint) and holds no live pod (ASSUMPTION: a training pod asks for all of a node's GPUs: one pod
        a node), and running at once. A pod no node can take stays Pending until one can. Whether it
        placed one."""
        if not self.scheduler:
            return False
        waiting = sorted(k for k, p in self.pods.items() if p["status"].get("phase") == "Pending" and not p["spec"].get("nodeName"))
        if not waiting:
            return False  # (nothing to place: the nodes need not be looked at, 2,048 of them in a fleet run)
        busy = {p["spec"].get("nodeName") for p in self.pods.values() if p["status"].get("phase") in ("Pending", "Running")}
        free = [
            name
            for name, node in sorted(self.nodes.items())
            if name not in busy
            and _ready(node)
            and not node["spec"].get("unschedulable")
            and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in node["spec"].get("taints") or [])
        ]
        placed = False
        for key in waiting:
            if not free:
                break
            pod = self.pods[key]
            pod["spec"]["nodeName"] = free.pop(0)
            pod["status"]["phase"] = "Running"
            pod["metadata"]["resourceVersion"] = self._next_version()
            placed = True
        return placed

    def _managed(self, job: dict[str, Any]) -> bool:
        return bool((job["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)) or self._workload_of(job) is not None

    def _workload_of(self, job: dict[str, Any]) -> tuple[str, str] | None:
        """The Workload Kueue made for this very job: its controller reference carries the job's uid."""
        uid = job["metadata"]["uid"]
        return next((key for key, w in self.workloads.items() if _controller_uid(w) == uid), None)

    def _kueue_reconciles(self, key: tuple[str, str, str]) -> None:
        """Kueue's job reconciler (v0.19.2 pkg/controller/jobframework/reconciler.go ReconcileGenericJob),
        the steps that matter here: a Workload for the job; a finished job finishes it; an inactive one
        is evicted and its job stopped (suspended); an active one is admitted (quota is never short
        here); a suspended job whose Workload is admitted is un-suspended ("Job admitted, unsuspending")."""
        job = self.jobs[key]
        wl_key = self._workload_of(job) or self._new_workload(job)
        workload = copy.deepcopy(self.workloads[wl_key])
        if _job_state(job) in FINISHED:
            _set_condition(workload, "Finished", "True", "JobFinished", "the job finished", self.now())
        elif (workload["spec"].get("active", True)) is False:
            if not _condition_true(workload, EVICTED):
                _set_condition(workload, EVICTED, "True", DEACTIVATED, "The workload is deactivated", self.now())
            _set_condition(workload, QUOTA_RESERVED, "False", DEACTIVATED, "The workload is deactivated", self.now())
            _set_condition(workload, ADMITTED, "False", "NoReservation", "The workload has no reservation", self.now())
            workload.get("status", {}).pop("admission", None)
            self._set_suspended(key, True)
        else:
            if not _condition_true(workload, ADMITTED):
                workload.setdefault("status", {})["admission"] = {
                    "clusterQueue": CLUSTER_QUEUE,
                    "podSetAssignments": [{"name": p["name"], "count": p["count"], "flavors": {}} for p in workload["spec"]["podSets"]],
                }
                _set_condition(
                    workload, QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}", self.now()
                )
                _set_condition(workload, ADMITTED, "True", "Admitted", f"Admitted by ClusterQueue {CLUSTER_QUEUE}", self.now())
            if _suspended(job):
                self._set_suspended(key, False)
        if workload != self.workloads[wl_key]:
            self._validate_workload(workload)
            workload["metadata"]["resourceVersion"] = self._next_version()
            self.workloads[wl_key] = workload

    def _new_workload(self, job: dict[str, Any]) -> tuple[str, str]:
        """The Workload Kueue constructs for a job: named <kind>-<job>-<hash>, labelled with the job's
        uid, controlled by the job (jobframework ConstructWorkload, workload_names.go)."""
        metadata, kind = job["metadata"], job["kind"]
        hashed = "\n".join([kind, JOB_KINDS[kind].group, metadata["name"], metadata["uid"]])
        prefix = f"{kind.lower()}-{metadata['name']}"[: DNS1123_LABEL_MAX - 6]
        name = f"{prefix}-{hashlib.sha1(hashed.encode(), usedforsecurity=False).hexdigest()[:5]}"
        pod_sets = [
            {
                "name": replica_type.lower(),
                "count": _replicas(replica),
                "template": copy.deepcopy(replica.get("template") or {}),
            }
            for replica_type, replica in sorted((job["spec"].get("pytorchReplicaSpecs") or {}).items())
        ]
        workload = {
            "apiVersion": f"{KUEUE_GROUP}/{self._workload_storage()}",
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": metadata["namespace"],
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"hyperpod-recovery-sandbox/workload/{metadata['uid']}")),
                "creationTimestamp": _stamp(self.now()),
                "labels": {KUEUE_JOB_UID_LABEL: metadata["uid"]},
                "ownerReferences": [
                    {
                        "apiVersion": job["apiVersion"],
                        "kind": job["kind"],
                        "name": metadata["name"],
                        "uid": metadata["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "resourceVersion": self._next_version(),
            },
            "spec": {"active": True, "queueName": (metadata.get("labels") or {}).get(KUEUE_QUEUE_LABEL, ""), "podSets": pod_sets},
        }
        self._validate_workload(workload)
        self.workloads[(metadata["namespace"], name)] = workload
        return metadata["namespace"], name

    def _set_suspended(self, key: tuple[str, str, str], suspended: bool) -> None:
        job = copy.deepcopy(self.jobs[key])
        if _suspended(job) == suspended:
            return
        job["spec"].setdefault("runPolicy", {})["suspend"] = suspended
        self._prune(job)
        self._validate_job(job)
        job["metadata"]["resourceVersion"] = self._next_version()
        self.jobs[key] = job

    def _operator_reconciles(self, key: tuple[str, str, str]) -> None:
        """Kubeflow's training operator (v1.7+): a suspended job's pods are deleted (ASSUMPTION: at
        once, except on a node that is not Ready, where they stay Terminating); a running job with no
        pod gets one per replica, named as its Service is, when every such name can be made."""
        job = self.jobs[key]
        namespace = key[1]
        pods = [k for k, p in self.pods.items() if k[0] == namespace and _controller_uid(p) == job["metadata"]["uid"]]
        if _job_state(job) in FINISHED:
            return
        if _suspended(job):
            for pod_key in pods:
                self._terminate(pod_key)
            self._finish_terminations()  # (a grace period of 0: gone at once)
            return
        if pods:
            return
        names = [
            (replica_type, f"{key[2]}-{replica_type.lower()}-{index}")
            for replica_type, replica in sorted((job["spec"].get("pytorchReplicaSpecs") or {}).items())
            for index in range(_replicas(replica))
        ]
        refused = [n for _, n in names if len(n) > DNS1123_LABEL_MAX or not DNS1035_LABEL.match(n)]
        if refused:
            self.operator_errors.append(f"{namespace}/{key[2]}: Service {refused[0]!r} is no DNS-1035 label of at most 63 characters")
            return
        for replica_type, name in names:
            self.add_pod(
                namespace,
                name,
                None,
                owner=("PyTorchJob", key[2], job["metadata"]["uid"]),
                labels={"training.kubeflow.org/replica-type": replica_type.lower()},
                phase="Pending",
                containers=_container_names(job, replica_type),
                grace_seconds=_grace_seconds(job, replica_type),
            )

    def _terminate(self, pod_key: tuple[str, str]) -> None:
        """A graceful delete, as the API server takes it: the pod is Terminating, its deletionTimestamp
        now + its grace period (rest.BeforeDelete), and it still runs and holds its node until its
        kubelet confirms it stopped (_finish_terminations). A pod on no node has no kubelet to wait for:
        gone at once. A pod Terminating already keeps its deadline."""
        pod = self.pods[pod_key]
        if not pod["spec"].get("nodeName"):
            del self.pods[pod_key]
            return
        if "deletionTimestamp" in pod["metadata"]:
            return
        grace = int(pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
        pod["metadata"]["deletionTimestamp"] = _stamp(self.now() + timedelta(seconds=grace))
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
        pod["metadata"]["resourceVersion"] = self._next_version()

    def _finish_terminations(self) -> bool:
        """Each Terminating pod whose grace period is over, on a Ready node, is gone: its kubelet
        killed what was left and confirmed it (ASSUMPTION: the training process takes its whole grace
        period; one that exits on SIGTERM goes sooner). On a node that is not Ready nothing confirms
        it: it stays until the node is Ready again or deleted. Whether one went."""
        now = self.now()
        done = [
            key
            for key, pod in self.pods.items()
            if "deletionTimestamp" in pod["metadata"]
            and datetime.fromisoformat(pod["metadata"]["deletionTimestamp"].replace("Z", "+00:00")) <= now
            and (node := self.nodes.get(str(pod["spec"].get("nodeName") or ""))) is not None
            and _ready(node)
        ]
        for key in done:
            del self.pods[key]
        return bool(done)

    def tick(self) -> None:
        """Time passed: what the kubelets confirm now is gone, and the controllers act on it."""
        if self._finish_terminations():
            self._settle()

    def runs(self) -> dict[str, list[list[float | None]]]:
        """Each PyTorchJob's spans (virtual seconds since ``epoch``; an open one ends None) during which
        every pod it had was Running: when it trained."""
        return copy.deepcopy(self._runs)

    def _note_runs(self) -> None:
        at = round((self.now() - self.epoch).total_seconds(), 3)
        pods_of: dict[str | None, list[dict[str, Any]]] = {}
        for pod in self.pods.values():
            pods_of.setdefault(_controller_uid(pod), []).append(pod)
        for (kind, _, _), job in self.jobs.items():
            uid = job["metadata"]["uid"]
            owned = pods_of.get(uid, [])
            running = (
                kind == "PyTorchJob"
                and not _suspended(job)
                and _job_state(job) not in FINISHED
                and bool(owned)
                and all(p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"] for p in owned)
            )
            spans = self._runs.get(uid)
            open_span = bool(spans) and spans[-1][1] is None
            if running and not open_span:
                self._runs.setdefault(uid, []).append([at, None])
                ordered = sorted(owned, key=lambda p: _name_order(p["metadata"]["name"]))
                self.run_nodes.setdefault(uid, [str(p["spec"].get("nodeName")) for p in ordered])
            elif not running and open_span:
                spans[-1][1] = at

    def _operator_marks_running(self) -> None:
        """A PyTorchJob created through the API (one the pipeline re-created) gets Created and Running
        once every pod of it runs (reasons PyTorchJobCreated, PyTorchJobRunning), so it reads Running
        as a seeded job does. ASSUMPTION, simpler than Kubeflow's training operator, which sets Created
        when it first reconciles the job and Running once a pod of it runs: here a re-created job still
        waiting for nodes has no condition (real: Created), and one partly placed is not Running yet.
        A job with conditions already (a seeded one, whatever its scenario said) is left as it is."""
        pods_of: dict[str | None, list[dict[str, Any]]] = {}
        for pod in self.pods.values():
            pods_of.setdefault(_controller_uid(pod), []).append(pod)
        for key, job in list(self.jobs.items()):
            owned = pods_of.get(job["metadata"]["uid"], [])
            if (
                key[0] != "PyTorchJob"
                or _suspended(job)
                or _job_state(job) in FINISHED
                or (job.get("status") or {}).get("conditions")
                or not owned
                or not all(p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"] for p in owned)
            ):
                continue
            job = copy.deepcopy(job)
            name = job["metadata"]["name"]
            _set_condition(job, "Created", "True", "PyTorchJobCreated", f"PyTorchJob {name} is created.", self.now())
            _set_condition(job, "Running", "True", "PyTorchJobRunning", f"PyTorchJob {name} is running.", self.now())
            self._validate_job(job)
            job["metadata"]["resourceVersion"] = self._next_version()
            self.jobs[key] = job

    def _note_copies(self) -> None:
        self._operator_marks_running()
        self._note_runs()
        lineages: dict[tuple[str, str], list[str]] = {}
        running = self._running_uids()
        by_uid = {j["metadata"]["uid"]: j for j in self.jobs.values()}
        for (kind, namespace, name), job in sorted(self.jobs.items()):
            if kind == "PyTorchJob" and self._live(job, running):
                lineages.setdefault((namespace, self._lineage(job, by_uid)), []).append(name)
        for key in sorted(set(lineages) | set(self._live_by_lineage)):
            live = lineages.get(key, [])
            if len(live) >= 2 and live != self._live_by_lineage.get(key):
                at = round((self.now() - self.epoch).total_seconds(), 3)
                self._copies.append({"lineage": key[1], "copies": live, "at": at})
            self._live_by_lineage[key] = live

    def _running_uids(self) -> set[str | None]:
        """The controllers of the pods running or waiting to, Terminating ones among them."""
        return {_controller_uid(p) for p in self.pods.values() if p["status"].get("phase") in ("Pending", "Running")}

    def _live(self, job: dict[str, Any], running: set[str | None] | None = None) -> bool:
        """A pod of it runs or waits to: one Terminating still runs (a suspended job's, through its grace period)."""
        return job["metadata"]["uid"] in (running if running is not None else self._running_uids())

    def _lineage(self, job: dict[str, Any], by_uid: dict[str, dict[str, Any]]) -> str:
        """The first job of a job's lineage: followed through who each was re-created from."""
        seen: set[str] = set()
        while True:
            previous = (job["metadata"].get("annotations") or {}).get(RESUBMITTED_FROM)
            if not previous or previous not in by_uid or previous in seen:
                return str(job["metadata"]["name"])
            seen.add(previous)
            job = by_uid[previous]

    def _prune(self, job: dict[str, Any]) -> None:
        """A CRD without runPolicy.suspend (training operator < 1.7): the API server drops the field it
        does not know (structural schemas prune unknown fields) and answers 200."""
        if not self.suspend_field and job.get("kind") == "PyTorchJob":
            ((job.get("spec") or {}).get("runPolicy") or {}).pop("suspend", None)

    # --- internals ---------------------------------------------------------------------------------
    def _call(self, verb: str, resource: str) -> None:
        self.tick()  # (each request is served at the time it is made)
        self.calls.append((verb, resource))
        queued = self.faults.get((verb, resource))
        if queued:
            raise queued.pop(0)

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _store_node(self, node: dict[str, Any]) -> None:
        node = copy.deepcopy(node)
        node["metadata"]["resourceVersion"] = self._next_version()
        self._validate(node)
        self.nodes[node["metadata"]["name"]] = node
        if self.scheduler and self._schedule():  # (a node that takes pods again: what waited for one is placed)
            self._note_copies()

    def _validate(self, obj: dict[str, Any]) -> None:
        try:
            _strict_validator(str(obj["kind"]), str(obj["apiVersion"]), self.version).validate(obj)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise Invalid(f"{obj.get('kind')} {obj['metadata'].get('name')}: 422 Invalid at {where or '/'}: {exc.message}") from exc

    def _validate_job(self, job: dict[str, Any]) -> None:
        kind = job["kind"]
        schema = self._job_schema(kind)
        if schema is not None:
            errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(job), key=lambda e: list(e.path))
            if errors:
                where = "/".join(str(p) for p in errors[0].path)
                raise Invalid(f"{kind} {job['metadata'].get('name')}: 422 Invalid at {where or '/'}: {errors[0].message}")
        self._validate(_meta_probe(job))
        for index, template in enumerate(_pod_templates(job, kind)):
            self._validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"template-{index}"}, "template": template})

    def _validate_workload(self, workload: dict[str, Any]) -> None:
        """A Workload against Kueue's CRD schema at each version it is served at (tests/kube_schemas),
        its pod templates as PodTemplates."""
        for version in self.kueue_versions:
            schema = self._schema(f"Workload/{version}", WORKLOAD_PLURAL, KUEUE_GROUP, version)
            assert schema is not None
            served = self._served_as(workload, version)
            errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(served), key=lambda e: list(e.path))
            if errors:
                where = "/".join(str(p) for p in errors[0].path)
                name = workload["metadata"].get("name")
                raise Invalid(f"Workload {name} ({version}): 422 Invalid at {where or '/'}: {errors[0].message}")
        self._validate(_meta_probe(workload))
        for index, pod_set in enumerate(workload["spec"]["podSets"]):
            template = pod_set["template"]
            self._validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"template-{index}"}, "template": template})

    def _job_schema(self, kind: str) -> dict[str, Any] | None:
        # No CRD schema of HyperPodPyTorchJob is published (tests/kube_schemas/README.md): its pod
        # templates and metadata are still checked.
        info = JOB_KINDS[kind]
        return self._schema(kind, info.plural, info.group, info.version)

    def _schema(self, kind: str, plural: str, group: str, version: str) -> dict[str, Any] | None:
        if kind not in self._job_schemas:
            path = SCHEMAS / f"{plural[:-1]}-{group}-{version}.json"
            self._job_schemas[kind] = json.loads(path.read_text()) if path.exists() else {}
        return self._job_schemas[kind] or None


@functools.cache
def _strict_validator(kind: str, api_version: str, version: str) -> jsonschema.protocols.Validator:
    """kubernetes-validate's strict check of one kind (its utils.validate, step by step), with its
    schema files read once per kind rather than at every write (a storm writes thousands)."""
    utils = kubernetes_validate.utils
    newest = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(version)][-1]
    directory = f"v{newest}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = utils.schema_contents(f"kubernetes-json-schema/{directory}/{kind.lower()}-{group_version}.json", version)
    definitions = utils.schema_contents(f"kubernetes-json-schema/{directory}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


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


# --- the same object on the wire, for the real adapter (tests/contract/test_kube_api.py) ------------
_PATHS = [
    (re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)$"), "node"),
    (re.compile(r"^/api/v1/nodes$"), "nodes"),
    (re.compile(r"^/api/v1/pods$"), "pods"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods$"), "ns-pods"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/log$"), "pod-log"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events$"), "events"),
    (re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)/(?P<name>[^/]+)$"), "job"),
    (re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)$"), "jobs-ns"),
    (re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?P<plural>[^/]+)$"), "jobs"),
    (re.compile(r"^/apis/(?P<group>[^/]+)$"), "group"),
]
_STATUS_OF: list[tuple[type[Exception], int, str]] = [
    (KubeObjectGone, 404, "NotFound"),
    (KubeAlreadyExists, 409, "AlreadyExists"),
    (PatchDidNotApply, 422, "Invalid"),
    (PatchPathMissing, 422, "Invalid"),
    (Invalid, 422, "Invalid"),
    (KubeConflict, 409, "Conflict"),
    (KubeThrottled, 429, "TooManyRequests"),
    (KubeAccessDenied, 403, "Forbidden"),
    (KubeRequestRejected, 400, "BadRequest"),
    (KubeUnavailable, 503, "ServiceUnavailable"),
]


# What the API server answers a path it serves nothing at (a group, version or resource not served: the
# CRD handler hands it to its delegate, and the chain ends in apiserver's util/notfoundhandler).
NOT_SERVED_MESSAGE = "the server could not find the requested resource"


def not_served() -> dict[str, Any]:
    """notfoundhandler's answer: a bare NotFound, no details (it names no object)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": NOT_SERVED_MESSAGE,
        "reason": "NotFound",
        "code": 404,
    }


def status_body(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The Status object the API server answers an error with (the cause of a patch that did not
    apply is the patch library's message, as apiserver's applyJSPatch reports it). A 404 for an object
    of a resource it serves names it, as apimachinery's errors.NewNotFound does (details: name, group,
    kind = the resource's plural; message '<plural>.<group> "<name>" not found'); one for a path it
    does not serve names nothing (not_served)."""
    code, reason = next(((c, r) for t, c, r in _STATUS_OF if isinstance(exc, t)), (500, "InternalError"))
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": str(exc), "reason": reason, "code": code}
    if isinstance(exc, KubeObjectGone) and exc.named is None:
        return 404, not_served()
    if isinstance(exc, KubeObjectGone):
        plural, _, group = exc.resource.partition(".")
        body["message"] = f'{exc.resource} "{exc.named}" not found'
        body["details"] = {"name": exc.named, "group": group, "kind": plural}
    elif isinstance(exc, PatchDidNotApply | PatchPathMissing):
        body["message"] = "the server rejected our request due to an error in our request"
        said = str(exc).split("(", 1)[-1].rstrip(")")
        body["details"] = {"causes": [{"reason": "UnexpectedServerResponse", "type": "UnexpectedServerResponse", "message": said}]}
    elif isinstance(exc, Invalid):
        body["details"] = {"causes": [{"type": "FieldValueInvalid", "message": str(exc)}]}
    return code, body


def kind_of_plural(group: str, version: str, plural: str) -> str | None:
    return next((k for k, i in JOB_KINDS.items() if (i.group, i.version, i.plural) == (group, version, plural)), None)


def serve(fake: FakeKube, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
    """One HTTP request against ``fake``: (status, JSON body; a log's text as a str, served text/plain).
    Lists are paged by ``limit`` (with a ``continue`` token), as the API server pages them."""
    try:
        for pattern, what in _PATHS:
            m = pattern.match(path)
            if m is None:
                continue
            g = m.groupdict()
            if what == "node" and method == "GET":
                return 200, fake.get_node(g["name"])
            if what == "node" and method == "PATCH":
                return 200, fake.patch_node(g["name"], body)
            if what == "nodes" and method == "GET":
                return 200, _page(fake.list_nodes(query.get("labelSelector")), query, "NodeList")
            if what == "pods" and method == "GET":
                selector = query.get("fieldSelector", "")
                if selector == LIVE_PODS_SELECTOR:
                    return 200, _page(fake.list_live_pods(), query, "PodList")
                if not selector.startswith("spec.nodeName="):
                    return 400, {
                        "kind": "Status",
                        "reason": "BadRequest",
                        "message": f"unsupported fieldSelector {selector!r}",
                        "code": 400,
                    }
                return 200, _page(fake.list_pods_on_node(selector.removeprefix("spec.nodeName=")), query, "PodList")
            if what == "ns-pods" and method == "GET":
                return 200, _page(fake.list_pods(g["ns"], query.get("labelSelector", "")), query, "PodList")
            if what == "pod-log" and method == "GET":
                # (text/plain, as the API server answers a log; no container named: the pod's only one)
                pod = fake.pods.get((g["ns"], g["name"]))
                container = query.get("container") or (pod["spec"]["containers"][0]["name"] if pod else "")
                tail = int(query["tailLines"]) if "tailLines" in query else 1 << 30
                limit = int(query["limitBytes"]) if "limitBytes" in query else 1 << 30
                return 200, fake.get_pod_log(g["ns"], g["name"], container, tail, limit)
            if what == "events" and method == "GET":
                wanted = dict(part.partition("=")[::2] for part in query.get("fieldSelector", "").split(",") if part)
                if set(wanted) != {"involvedObject.kind", "involvedObject.name"}:
                    return 400, {"kind": "Status", "reason": "BadRequest", "message": f"unsupported fieldSelector {wanted!r}", "code": 400}
                events = fake.list_events(g["ns"], wanted["involvedObject.kind"], wanted["involvedObject.name"])
                return 200, _page(events, query, "EventList")
            if what == "group" and method == "GET":
                return 200, fake.api_group(g["group"])
            if (g.get("group"), g.get("plural")) == (KUEUE_GROUP, WORKLOAD_PLURAL):
                version = g["version"]
                if what == "jobs-ns" and method == "GET":
                    listed = fake.list_workloads(version, g["ns"], query.get("labelSelector"))
                    return 200, _page(listed, query, "WorkloadList", f"{KUEUE_GROUP}/{version}")
                if what == "job" and method == "GET":
                    return 200, fake.get_workload(version, g["ns"], g["name"])
                if what == "job" and method == "PATCH":
                    return 200, fake.patch_workload(version, g["ns"], g["name"], body)
                break
            kind = kind_of_plural(g.get("group", ""), g.get("version", ""), g.get("plural", ""))
            if kind is None:
                break
            if what == "job" and method == "GET":
                return 200, fake.get_job(KubeJobRef(kind=kind, namespace=g["ns"], name=g["name"]))  # type: ignore[arg-type]
            if what == "job" and method == "PATCH":
                return 200, fake.patch_job(KubeJobRef(kind=kind, namespace=g["ns"], name=g["name"]), body)  # type: ignore[arg-type]
            if what == "jobs-ns" and method == "POST":
                return 201, fake.create_job(kind, g["ns"], body)
            if what == "jobs-ns" and method == "GET":
                return 200, _page(fake.list_jobs_in(kind, g["ns"], query.get("labelSelector", "")), query, f"{kind}List")
            if what == "jobs" and method == "GET":
                return 200, _page(fake.list_jobs(kind), query, f"{kind}List")
        return 404, not_served()
    except Exception as exc:
        return status_body(exc)


def _page(items: list[dict[str, Any]], query: dict[str, str], kind: str, api_version: str = "v1") -> dict[str, Any]:
    limit = int(query.get("limit") or 0) or len(items) or 1
    start = int(query.get("continue") or 0)
    chunk = items[start : start + limit]
    more = start + limit < len(items)
    return {"kind": kind, "apiVersion": api_version, "metadata": {"continue": str(start + limit)} if more else {}, "items": chunk}


def _workloads_path(version: str, namespace: str) -> str:
    return f"/apis/{KUEUE_GROUP}/{version}/namespaces/{namespace}/{WORKLOAD_PLURAL}"
