"""A hang's evidence on EKS, read-only: the job's conditions and events, and on each node the last
lines of its pod's training container's log (domain/hangs/pod_logs.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.adapters.eks_node_lookup import HyperPodNodes
from hyperpod_recovery.adapters.eks_orchestrator.lookups import Orchestration, job_pods
from hyperpod_recovery.domain.hangs.pod_logs import PodLog, comparable, job_text, node_signature, node_text, training_container
from hyperpod_recovery.domain.jobs.eks_jobs import job_condition
from hyperpod_recovery.errors import KubeAccessDenied, KubeObjectGone, KubeRequestRejected, KubeThrottled, KubeUnavailable
from hyperpod_recovery.models.commands import (
    JOB_TEXT_LIMIT,
    MAX_EVIDENCE_NODES,
    STACKS_TEXT_LIMIT,
    CaptureHangEvidence,
    HangEvidenceResult,
    NodeStacks,
)
from hyperpod_recovery.redact import redact

# A hang's evidence: each node's pod log, its last lines. The API server stops at limitBytes from the
# START of the tail (mid-line if it must), so the bound is wide enough for 40 long lines and the
# text kept is the end of what came (EvidenceText's bound).
LOG_TAIL_LINES = 40
LOG_LIMIT_BYTES = 16 * 1024
EVIDENCE_TOOL = f"pods/log tailLines={LOG_TAIL_LINES}"
# The function that sends Capture Hang Evidence carries it out itself, within its own 45 s Timeout:
# it stops asking after this much (or the command's timeout, if shorter), leaving room for a
# request still under way (23 s at worst: adapters/kubernetes.py) and the answer.
EKS_EVIDENCE_SECONDS = 15
# What a read for the evidence may meet and report instead of raising: the evidence is best-effort.
_UNREAD = (KubeAccessDenied, KubeRequestRejected, KubeUnavailable, KubeThrottled, KubeObjectGone)


class EvidenceCommands(Orchestration):
    def capture_hang_evidence(self, command: CaptureHangEvidence) -> HangEvidenceResult:
        """What the hung job was doing, read-only: its conditions and the events of it and of its pods
        (job_text), and on each node the last lines of its pod's training container's log, with a
        signature of where the log stopped (domain/hangs/pod_logs.py). Only pods the job owns (their
        controller is this very object) are read. Asking stops at the deadline; what was not asked
        by then is timed_out. A read refused or unanswered is said, never raised: a node is failed."""
        seconds = min(command.timeout_seconds, EKS_EVIDENCE_SECONDS)
        deadline = self.now() + timedelta(seconds=seconds)
        nodes = list(dict.fromkeys(command.nodes))[:MAX_EVIDENCE_NODES]
        found = self.find_job(command.job_id, command.kube)
        if found is None:
            gone = f"job {command.job_id} has no pod to read: Kubernetes no longer has it"
            return HangEvidenceResult(
                job_id=command.job_id,
                job_text=gone,
                nodes=[NodeStacks(node=n, outcome="no_process", text=gone) for n in nodes],
                tool=EVIDENCE_TOOL,
            )
        ref, job = found
        uid = str(job["metadata"]["uid"])
        notes: list[str] = []
        events = self._events_of(ref.namespace, ref.kind, ref.name, uid, notes)
        pods_by_node: dict[str, list[dict[str, Any]]] = {}
        names = HyperPodNodes(self.kube)
        for pod in job_pods(self.kube, ref, job):
            placed = (pod.get("spec") or {}).get("nodeName")
            if placed:
                pods_by_node.setdefault(names.known_as(str(placed)), []).append(pod)
        stacks: dict[str, NodeStacks] = {}
        late = 0
        for node in nodes:
            pods = pods_by_node.get(node, [])
            if self.now() >= deadline:
                stacks[node] = NodeStacks(node=node, outcome="timed_out", text=f"not read: the capture's {seconds} s had passed")
                late += len(pods)
                continue
            if not pods:
                stacks[node] = NodeStacks(
                    node=node, outcome="no_process", text=f"no pod of {ref.kind} {ref.namespace}/{ref.name} on {node}"
                )
                continue
            stacks[node] = self._node_logs(node, ref.namespace, pods, deadline, seconds)
            for pod in pods:
                if self.now() >= deadline:
                    late += 1
                    continue
                events += self._events_of(ref.namespace, "Pod", str(pod["metadata"]["name"]), str(pod["metadata"].get("uid")), notes)
        if late:
            notes.append(f"(the events of {late} pod(s) were not read: the capture's {seconds} s had passed)")
        signed = comparable({n: s.signature for n, s in stacks.items() if s.outcome == "captured" and s.signature})
        title = f"{ref.kind} {ref.namespace}/{ref.name} (uid {uid}): {job_condition(job)}"
        return HangEvidenceResult(
            job_id=command.job_id,
            job_state=job_condition(job),
            job_text=job_text(title, job, events, notes, JOB_TEXT_LIMIT),
            nodes=[s.model_copy(update={"signature": signed.get(n)}) for n, s in stacks.items()],
            tool=EVIDENCE_TOOL,
        )

    def _node_logs(self, node: str, namespace: str, pods: list[dict[str, Any]], deadline: datetime, seconds: int) -> NodeStacks:
        logs: list[PodLog] = []
        for pod in pods:
            name = str(pod["metadata"]["name"])
            container = training_container(pod)
            if self.now() >= deadline:
                return NodeStacks(node=node, outcome="timed_out", text=f"pod {name}: not read, the capture's {seconds} s had passed")
            if container is None:
                return NodeStacks(node=node, outcome="failed", text=f"pod {name} has no container")
            try:
                text = self.kube.get_pod_log(namespace, name, container, LOG_TAIL_LINES, LOG_LIMIT_BYTES)
            except _UNREAD as exc:
                said = f"pod {name} container {container}: the API did not give its log ({type(exc).__name__}): {exc}"
                return NodeStacks(node=node, outcome="failed", text=said[:STACKS_TEXT_LIMIT])
            # Redacted as read: before the tail is cut to its bound and before its signature (redact.py).
            logs.append(PodLog(pod=name, container=container, text=redact(text), cut=len(text.encode()) >= LOG_LIMIT_BYTES))
        return NodeStacks(
            node=node, outcome="captured", text=node_text(logs, STACKS_TEXT_LIMIT, LOG_TAIL_LINES), signature=node_signature(logs)
        )

    def _events_of(self, namespace: str, kind: str, name: str, uid: str, notes: list[str]) -> list[dict[str, Any]]:
        """The events about this very object (an earlier one of the same name had its own uid)."""
        try:
            events = self.kube.list_events(namespace, kind, name)
        except _UNREAD as exc:
            notes.append(f"(the events of {kind} {name} were not read ({type(exc).__name__}): {str(exc)[:200]})")
            return []
        return [e for e in events if (e.get("involvedObject") or {}).get("uid") in (uid, None)]
