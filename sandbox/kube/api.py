"""An in-memory Kubernetes API server: the calls the EKS orchestrator makes, with the semantics
the pipeline relies on, every stored object checked against Kubernetes' own schema.

There is no way to run a kube-apiserver here (no Docker, no envtest binaries): this is the faithful
double. It implements the KubeApi port (hyperpod_recovery/ports.py) and raises the same named
errors as the real adapter (adapters/kubernetes.py); tests/contract/test_kube_api.py holds both to
the same expectations, the real adapter through a local TLS server that serves this object
(``serve``, wire.py), so the requests are checked on the wire too (test_kube_api_wire.py).

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
* kube-scheduler (controllers.py ``_schedule``, scheduling.py): a pending pod bound to a Ready,
  uncordoned node whose taints it tolerates, whose labels its nodeSelector and required affinity
  match, and whose nvidia.com/gpu allocatable its request fits, then Running POD_START_SECONDS later;
  pod by pod (no gang placement); off (``scheduler=False``) the operator's pods stay Pending;
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
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hyperpod_recovery.errors import (
    KubeAlreadyExists,
    KubeObjectGone,
    KubeRequestRejected,
)
from hyperpod_recovery.models.kubernetes import (
    JOB_KINDS,
    KUEUE_GROUP,
    KUEUE_QUEUE_LABEL,
    WORKLOAD_PLURAL,
    KubeJobRef,
)
from sandbox.kube.controllers import Controllers
from sandbox.kube.kueue import Kueue
from sandbox.kube.objects import (
    FINISHED,
    KUEUE_0_19_VERSIONS,
    SANDBOX_CLUSTER_ID,
    WORKLOADS_RESOURCE,
    Invalid,
    _applied,
    _controller_uid,
    _selected,
    _selector,
    _stamp,
    _workloads_path,
)
from sandbox.kube.outside import Outside
from sandbox.kube.schemas import KUBERNETES_VERSION, SchemaChecks


class FakeKube(Outside, Controllers, Kueue, SchemaChecks):
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
        scheduler: bool = True,
        cluster_id: str = SANDBOX_CLUSTER_ID,
    ) -> None:
        """``kueue``: Kueue runs (HyperPod task governance: the Workload CRD and its controllers);
        ``suspend_field``: the PyTorchJob CRD has runPolicy.suspend (training operator 1.7 and later);
        ``epoch``: what second_copies counts its virtual seconds from (default: now at construction);
        ``scheduler``: kube-scheduler binds a pending pod to a node that takes it, and it runs a moment
        later (_schedule); off, the pods the operator makes stay Pending (a stuck scheduler); ``cluster_id``:
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
        self._starting: dict[tuple[str, str], datetime] = {}  # pods bound, not started yet -> when they run
        self._started_at: dict[tuple[str, str], datetime] = {}  # when each pod the scheduler bound started
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

    def list_node_events(self) -> list[dict[str, Any]]:
        self._call("list", "events")
        return [copy.deepcopy(e) for e in self.events if e["metadata"]["namespace"] == "default" and e["involvedObject"]["kind"] == "Node"]

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
    # --- HyperPod's side -----------------------------------------------------------------------------
    # --- the cluster's controllers, acting on what was just written --------------------------------
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
