"""What reaches the fake cluster from outside its API: a test or drill seeding it (nodes, jobs, pods,
logs, events), a job failing, HyperPod's health agent and repairs."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from hyperpod_recovery.models.kubernetes import (
    DEEP_HEALTH_LABEL,
    HEALTH_STATUS_LABEL,
    INSTANCE_GROUP_LABEL,
    JOB_KINDS,
    node_name_for_instance,
)
from sandbox.kube.objects import (
    DEFAULT_GRACE_SECONDS,
    HYPERPOD_TAINT_KEY,
    _node_info,
    _owned_by,
    _ready_condition,
    _stamp,
)
from sandbox.kube.scheduling import GPU


class Outside:
    """Mixed into FakeKube: the cluster seeded, and what happens to it outside the API."""

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
        gpus: int = 8,
    ) -> dict[str, Any]:
        """A node; ``instance_id``: its instance, named in its providerID in HyperPod's form (in
        ``provider_id`` when given: EC2's form, or none: a node whose providerID names no instance);
        ``gpus``: its nvidia.com/gpu capacity and allocatable (a p5.48xlarge's 8 by default)."""
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
        if gpus:
            node["status"]["capacity"] = {GPU: str(gpus)}
            node["status"]["allocatable"] = {GPU: str(gpus)}
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
        gpus: int = 8,
    ) -> dict[str, Any]:
        """A training job whose pods run one on each of ``nodes`` (created through the API, as a user
        would; a PyTorchJob's pods are its operator's, bound to the nodes as the scheduler would);
        ``grace_seconds``: its pod template's terminationGracePeriodSeconds; ``gpus``: what each pod
        requests of nvidia.com/gpu (a node's all, as a training pod asks; 0: none)."""
        count = replicas if replicas is not None else len(nodes)
        image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1"
        container: dict[str, Any] = {"name": "pytorch", "image": image, "command": ["torchrun"]}
        if gpus:
            container["resources"] = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
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
                    resources={container["name"]: container["resources"]} if gpus else None,
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
        resources: dict[str, Any] | None = None,
        terms: dict[str, Any] | None = None,
    ) -> None:
        """A pod (``node`` None: not scheduled yet); ``owner``: (kind, name, uid) of its controller;
        ``containers``: their names (a job's pods: its template's); ``grace_seconds``: its
        terminationGracePeriodSeconds (the API server's default, 30, when not given); ``resources``:
        each container's, by its name; ``terms``: its nodeSelector, affinity and tolerations."""
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
            "containers": [
                {"name": c, "image": "train:1"} | ({"resources": (resources or {})[c]} if c in (resources or {}) else {})
                for c in containers
            ],
            "terminationGracePeriodSeconds": DEFAULT_GRACE_SECONDS if grace_seconds is None else grace_seconds,
            **(terms or {}),
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

    def node_condition(self, name: str, kind: str, reason: str, message: str) -> None:
        """HyperPod's health agent sets a fault condition on the node and repairs nothing (a warning-only
        class: its label stays Schedulable). ASSUMPTION: the condition's shape (type = fault type)."""
        node = copy.deepcopy(self.nodes[name])
        kept = [c for c in node["status"]["conditions"] if c["type"] != kind]
        stamp = _stamp(self.now())
        condition = {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        node["status"]["conditions"] = [*kept, condition]
        self._store_node(node)

    def node_event(self, name: str, reason: str, message: str) -> dict[str, Any]:
        """A Warning event about the node, as a node agent records it (namespace default)."""
        node = self.nodes[name]
        involved = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "namespace": "default", "uid": node["metadata"]["uid"]}}
        return self.record_event(involved, reason, message, type_="Warning", component="hyperpod-health-monitoring-agent")

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
