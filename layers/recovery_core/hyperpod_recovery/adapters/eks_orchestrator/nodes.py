"""The node commands on EKS: cordon, resume through HyperPod's health gate, boot times, and each
node's state as the job-failure classifier reads it (the rules are domain/nodes/eks_nodes.py's).

A conflict (the node changed between read and write) is re-read and decided again, up to
CONFLICT_RETRIES times."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from hyperpod_recovery.adapters.eks_orchestrator.lookups import Orchestration
from hyperpod_recovery.domain.nodes.eks_nodes import (
    NodeView,
    cordon_plan,
    give_back_plan,
    health_gate,
    hyperpod_name,
    rebooted_since_cordon,
)
from hyperpod_recovery.errors import ControllerAgentError, InvalidCommand, KubeConflict, KubeObjectGone
from hyperpod_recovery.models.commands import (
    MAX_UNHEALTHY_ANSWERED,
    OWNER_TAG_PREFIX,
    UNHEALTHY_REASON_KEPT,
    BootTimes,
    BootTimesResult,
    CordonNodes,
    CordonResult,
    NodeBoot,
    NodeStates,
    NodeStatesResult,
    NodeStatus,
    ResumeNodes,
    ResumeResult,
    UnhealthyNode,
    plainly_healthy,
)
from hyperpod_recovery.models.kubernetes import COMPUTE_TYPE_LABEL, HEALTH_STATUS_LABEL, PENDING_REPAIR_STATUSES

CONFLICT_RETRIES = 3


def _node_state(node: dict[str, Any]) -> str:
    """A Kubernetes node's state in the words NodeBoot reads (its ``responding``): "Ready" once Ready
    with HyperPod's checks settled (whatever their verdict: the health gate acts on it); Ready while
    HyperPod still checks it is UNKNOWN, and a node not Ready is NOT_RESPONDING."""
    verdict, _ = health_gate(node)
    if not NodeView.of(node).ready:
        return "NotReady+NOT_RESPONDING"
    return "Ready" if verdict != "not_ready" else "Ready+UNKNOWN"


@dataclass(frozen=True)
class _ResumeDecision:
    outcome: Literal["resumed", "not_drained", "not_ours"]
    operations: list[dict[str, Any]]
    verdict: str = "passed"
    said: str = ""


def _resume_decision(node: dict[str, Any], incident: str, at: datetime) -> _ResumeDecision:
    """What Resume Nodes writes on one node, from one read of it."""
    marked_by = NodeView.of(node).marked_by
    if marked_by not in (None, incident):
        return _ResumeDecision("not_ours", [])
    verdict, said = health_gate(node)
    if verdict != "passed":
        # Kept out of service under our marks (a replacement's new node is cordoned now): never given a job.
        return _ResumeDecision("not_drained", cordon_plan(node, incident, at).operations, verdict, said)
    back = give_back_plan(node, incident)
    # Through the gate and carrying nothing of ours (a replacement's new node): in service, resumed.
    return _ResumeDecision("resumed" if back.outcome == "not_drained" else back.outcome, back.operations)


def _node_status(name: str, node: dict[str, Any] | None, unmatched: str = "") -> NodeStatus:
    if node is None:
        said = f"Kubernetes has no such node (replaced, or gone){unmatched}"[:256]
        return NodeStatus(name=name, state="down", flags=["NOT_RESPONDING"], reason=said)
    view = NodeView.of(node)
    if not view.ready:
        return NodeStatus(name=name, state="down", flags=["NOT_RESPONDING"], reason="the node is not Ready")
    if view.health_status in PENDING_REPAIR_STATUSES:
        action = "Action:Replace" if view.health_status == "UnschedulablePendingReplacement" else "Action:Reboot"
        return NodeStatus(name=name, state="drained", flags=["DRAIN"], reason=f"{action} ({HEALTH_STATUS_LABEL}={view.health_status})")
    if view.marked_by is not None:
        return NodeStatus(name=name, state="drained", flags=["DRAIN"], reason=f"{OWNER_TAG_PREFIX}:{view.marked_by}"[:256])
    if view.unschedulable:
        return NodeStatus(name=name, state="drained", flags=["DRAIN"], reason="cordoned (spec.unschedulable) by someone else")
    return NodeStatus(name=name, state="idle")


def _nodes_with_job_pods(pods: list[dict[str, Any]]) -> set[str]:
    """The nodes a live pod of some workload is bound to: a node is idle only when none is. Pods of the
    node's own (a DaemonSet's: HyperPod's health agent, the device plugins; a static pod's mirror, owned
    by its Node) run on every node and make none busy."""
    busy = set()
    for pod in pods:
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        controller = next((o for o in owners if o.get("controller")), None)
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (controller is None or controller.get("kind") not in ("DaemonSet", "Node")):
            busy.add(str(node))
    return busy


def incident_of(tag: str) -> str:
    """``hyperpod-recovery:<incident> ...`` -> ``<incident>`` (the cordon's reason, the resume's owner tag)."""
    first = tag.split(maxsplit=1)[0] if tag.strip() else ""
    if not first.startswith(OWNER_TAG_PREFIX + ":") or first == OWNER_TAG_PREFIX + ":":
        raise InvalidCommand(f"{tag[:80]!r} does not start with {OWNER_TAG_PREFIX}:<incident>: only our own marks are ever undone")
    return first.removeprefix(OWNER_TAG_PREFIX + ":")


class NodeCommands(Orchestration):
    def _patch_until_settled(self, name: str, decide: Callable[[dict[str, Any]], Any]) -> tuple[dict[str, Any] | None, Any]:
        """Read the node, decide, write: again from a fresh read when the node changed in between."""
        for attempt in range(1, CONFLICT_RETRIES + 1):
            node = self.find_node(name)
            if node is None:
                return None, None
            plan = decide(node)
            if not plan.operations:
                return node, plan
            try:
                return self.kube.patch_node(NodeView.of(node).name, plan.operations), plan
            except (KubeConflict, KubeObjectGone):
                if attempt == CONFLICT_RETRIES:
                    raise KubeConflict(f"node {name} changed under each of {CONFLICT_RETRIES} writes") from None
        raise AssertionError("unreachable")

    def cordon_only(self, command: CordonNodes) -> tuple[CordonResult, list[str]]:
        """Cordon and mark each node (a dry run's: only say what would be); the answer without its
        jobs, and the names Kubernetes knows the nodes found by."""
        incident = incident_of(command.reason)
        at = self.now()
        result = CordonResult()
        found: list[str] = []
        for name in command.nodes:
            if command.drain:
                node, plan = self._patch_until_settled(name, lambda n: cordon_plan(n, incident, at))
            else:  # a dry run: what would be done, nothing written
                node = self.find_node(name)
                plan = cordon_plan(node, incident, at) if node is not None else None
            if node is None:
                # Kubernetes has no such node (HyperPod replacing it already, or a stack pointed at
                # another cluster): no pod can run there, but nothing was cordoned: said as it is.
                result.absent.append(name)
                continue
            found.append(NodeView.of(node).name)
            assert plan is not None
            (result.drained if plan.outcome == "drained" else result.already_drained).append(name)
        return result, found

    def resume(self, command: ResumeNodes) -> ResumeResult:
        """Each node through the health gate first, read in the same read as the write it decides
        (a node HyperPod marks between two reads is never given back): only a node that passes is
        given back; one that fails is kept out under our marks. A node another incident marked is
        that incident's (it holds its lock): reported not ours, never touched."""
        incident = incident_of(command.owner_tag)
        at = self.now()
        outcomes: dict[str, list[str]] = {"resumed": [], "not_drained": [], "not_ours": []}
        unhealthy: list[UnhealthyNode] = []
        for name in command.nodes:
            node, decision = self._patch_until_settled(name, lambda n: _resume_decision(n, incident, at))
            if node is None or decision is None:
                said = f"Kubernetes has no such node (not registered yet){self._nodes.unmatched()}"
                unhealthy.append(UnhealthyNode(node=name, verdict="could_not_run", detail=said))
            elif decision.verdict != "passed" and decision.outcome != "not_ours":
                unhealthy.append(
                    UnhealthyNode(node=name, verdict="failed" if decision.verdict == "failed" else "could_not_run", detail=decision.said)
                )
            else:
                outcomes[decision.outcome].append(name)
        return ResumeResult(
            resumed=outcomes["resumed"], not_drained=outcomes["not_drained"], not_ours=outcomes["not_ours"], unhealthy=unhealthy
        )

    def boot_times(self, command: BootTimes) -> BootTimesResult:
        """A boot is proved by a boot id other than the one our cordon recorded, and dated by the
        Ready transition that followed it. ASSUMPTION: a reboot makes the node NotReady for longer
        than the node controller's grace period (40 s) so that Ready moves; where it does not, the
        node reads as not back and the reboot deadline replaces it (the safe direction)."""
        readings: list[NodeBoot] = []
        for name in command.nodes:
            node = self.find_node(name)
            if node is None:
                readings.append(NodeBoot(name=name))
                continue
            view = NodeView.of(node)
            rebooted = rebooted_since_cordon(node) is True
            boot_time = view.ready_since if rebooted and view.ready else None
            readings.append(NodeBoot(name=name, boot_time=boot_time, state=_node_state(node)))
        return BootTimesResult(nodes=readings)

    def node_states(self, command: NodeStates) -> NodeStatesResult:
        """Each node in the words the job-failure classifier reads (domain/jobs/job_failure.py): down when
        Kubernetes has no such node or it is not Ready; drained for repair (``Action:Replace``/``Reboot``)
        when HyperPod's health label says so; drained under our tag when we cordoned it; drained by
        someone else when another cordoned it; otherwise allocated when a live pod of a workload is bound
        there (one cluster-wide list), idle when none is."""
        if command.not_plainly_healthy:
            # (a job on more nodes than a command names: every HyperPod node whose state the classifier
            # reads; a node Kubernetes no longer has cannot be named here, and counts as healthy)
            # (each by the name the workflow knows it by, as the job's own list names it: hyperpod-<instance>)
            listed = [_node_status(hyperpod_name(n), n) for n in self.kube.list_nodes(f"{COMPUTE_TYPE_LABEL}=hyperpod")]
            if not listed:
                raise ControllerAgentError("Kubernetes listed no HyperPod node: which of the job's nodes are unhealthy cannot be told")
            states = [
                s.model_copy(update={"reason": s.reason[:UNHEALTHY_REASON_KEPT]})
                for s in listed
                if not plainly_healthy(s.state, s.flags, s.reason)
            ]
            if len(states) > MAX_UNHEALTHY_ANSWERED:
                raise ControllerAgentError(
                    f"{len(states)} nodes are not Ready, cordoned or pending repair, more than an answer carries "
                    f"({MAX_UNHEALTHY_ANSWERED}): which of the job's nodes are among them cannot be told"
                )
            return NodeStatesResult(nodes=states)
        states = []
        busy = _nodes_with_job_pods(self.kube.list_live_pods())
        for name in command.nodes:
            node = self.find_node(name)
            status = _node_status(name, node, self._nodes.unmatched() if node is None else "")
            if status.state == "idle" and node is not None and node["metadata"].get("name") in busy:
                status = status.model_copy(update={"state": "allocated"})  # (Slurm's word: a job's pod runs there)
            states.append(status)
        return NodeStatesResult(nodes=states)
