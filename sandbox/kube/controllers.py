"""The controllers that act on a training job after every write, as they would a moment later: the
scheduler, Kubeflow's training operator, pods terminating through their grace period; and the copies
and runs they leave (second_copies, runs)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.models.kubernetes import (
    DNS1123_LABEL_MAX,
)
from sandbox.kube.objects import (
    DEFAULT_GRACE_SECONDS,
    DNS1035_LABEL,
    FINISHED,
    RESUBMITTED_FROM,
    _container_names,
    _controller_uid,
    _grace_seconds,
    _job_state,
    _name_order,
    _ready,
    _replicas,
    _set_condition,
    _stamp,
    _suspended,
    _template_terms,
)
from sandbox.kube.scheduling import POD_START_SECONDS, allocatable_gpus, gpu_request, placement_fits, shape, takes_pods


class Controllers:
    """Mixed into FakeKube: the cluster's controllers, acting on what was just written."""

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
        """kube-scheduler (``scheduler``): each pending pod without a node, bound
        in name order, to the first node (by name) that takes it (sandbox/kube/scheduling.py: Ready, not cordoned, its taints
        tolerated, its selector and affinity met, its GPUs free); it runs POD_START_SECONDS later
        (_start_due). A pod no node can take stays Pending until one can. Pods are placed one by one, as
        kube-scheduler does: no gang (all-or-nothing) placement, which needs a gang scheduler the job's
        operator is configured for (Kueue admits a job's quota whole before its pods exist: kueue.py).
        Whether it bound one."""
        if not self.scheduler:
            return False
        waiting = sorted(k for k, p in self.pods.items() if p["status"].get("phase") == "Pending" and not p["spec"].get("nodeName"))
        if not waiting:
            return False  # (nothing to place: the nodes need not be looked at, 2,048 of them in a fleet run)
        free: dict[str, int] = {name: allocatable_gpus(node) for name, node in self.nodes.items() if takes_pods(node)}
        for pod in self.pods.values():
            bound = pod["spec"].get("nodeName")
            if bound in free and pod["status"].get("phase") in ("Pending", "Running"):  # (Terminating ones still hold theirs)
                free[bound] -= gpu_request(pod)
        candidates: dict[str, list[str]] = {}  # pod shape -> the nodes its own terms allow, by name
        placed = False
        for key in waiting:
            pod = self.pods[key]
            want = gpu_request(pod)
            kind = shape(pod)
            if kind not in candidates:
                candidates[kind] = sorted(name for name in free if placement_fits(pod, self.nodes[name]))
            node = next((name for name in candidates[kind] if free[name] >= want), None)
            if node is None:
                continue
            free[node] -= want
            pod["spec"]["nodeName"] = node
            pod["metadata"]["resourceVersion"] = self._next_version()
            self._starting[key] = self.now() + timedelta(seconds=POD_START_SECONDS)
            self._started_at.pop(key, None)  # (a pod of that name that ran before)
            placed = True
        return placed

    def _start_due(self, by: datetime | None = None) -> bool:
        """Each bound pod whose start is due (now, or ``by``) runs (its containers started). Whether one did."""
        now = by or self.now()
        started = False
        for key, due in sorted(self._starting.items(), key=lambda kv: kv[1]):
            pod = self.pods.get(key)
            if pod is None or "deletionTimestamp" in pod["metadata"] or pod["status"].get("phase") != "Pending":
                del self._starting[key]
            elif due <= now:
                del self._starting[key]
                pod["status"]["phase"] = "Running"
                pod["metadata"]["resourceVersion"] = self._next_version()
                self._started_at[key] = due
                started = True
        return started

    def start_due_by(self, moment: datetime) -> None:
        """A reader at ``moment``, ahead of the last request: the pods due to start by then have (nothing
        else moves: the API server's clock stays at its last request)."""
        if self._start_due(moment):
            self._settle()

    def next_start(self) -> datetime | None:
        """When the next pod bound and not yet started runs (None: none is starting)."""
        live = [due for key, due in self._starting.items() if key in self.pods and "deletionTimestamp" not in self.pods[key]["metadata"]]
        return min(live, default=None)

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
            resources, terms = _template_terms(job, replica_type)
            self.add_pod(
                namespace,
                name,
                None,
                owner=("PyTorchJob", key[2], job["metadata"]["uid"]),
                labels={"training.kubeflow.org/replica-type": replica_type.lower()},
                phase="Pending",
                containers=_container_names(job, replica_type),
                grace_seconds=_grace_seconds(job, replica_type),
                resources=resources,
                terms=terms,
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
        """Time passed: what the kubelets confirm now is gone, the pods whose start was due run, and the
        controllers act on it."""
        gone = self._finish_terminations()
        if self._start_due() | gone:
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
        for (kind, namespace, _), job in self.jobs.items():
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
                # (from when its last pod started, not when a request next looked)
                started = [self._started_at[k] for p in owned if (k := (namespace, p["metadata"]["name"])) in self._started_at]
                begun = round((max(started) - self.epoch).total_seconds(), 3) if started else at
                self._runs.setdefault(uid, []).append([begun, None])
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
