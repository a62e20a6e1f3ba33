"""The EKS orchestrator: the workflow's typed commands carried out here, against the Kubernetes API.

No in-cluster agent: ``dispatch`` executes the command in the Lambda that sends it and answers the
waiting task itself (SendTaskSuccess), the way the Slurm agent answers from the controller. The
state machines are the same for both orchestrators; only this class and the Slurm one differ.

What a command means here (the node rules are domain/nodes/eks_nodes.py's, the job rules domain/jobs/eks_jobs.py's):

| command       | on EKS                                                                                 |
|---------------|----------------------------------------------------------------------------------------|
| cordon_nodes  | each node cordoned and marked in one conflict-checked patch; then the jobs of its pods |
| resume_nodes  | each node through HyperPod's health gate (Ready, Schedulable, deep checks passed where  |
|               | run); a node that passes loses our marks (and our cordon), one that fails is marked     |
| boot_times    | a node whose kernel boot id differs from the one our cordon recorded is back from a     |
|               | reboot once Ready: its Ready time is its boot time                                     |
| jobs_on_nodes | the jobs of the pods on the nodes (read-only)                                           |
| resubmit_job  | the old job stopped for certain (Kueue: its Workload inactive; else suspended:          |
|               | adapters/eks_stop.py), then re-created from the checkpoint under <lineage>-r<n>, once   |
|               | (found again by our token); a stop only stops it, its pods not waited for               |
| capture_job_spec | the job by its uid (a list of each kind), with the nodes of its pods                |
| capture_hang_evidence | the job's conditions and events, and on each node the last lines of its pod's     |
|               | training container's log (read-only, within the capture's time; domain/hangs/pod_logs.py) |
| node_states   | each node as the job-failure classifier reads it (down, drained for repair, ours...) |
| check         | the API server answers (a node list), and which commands this orchestrator executes   |

A conflict (the node changed between read and write) is re-read and decided again, up to
CONFLICT_RETRIES times. What the API server cannot do now (5xx, 429, conflicts past that) leaves as
ControllerChannelError, the name the workflow retries on every orchestrator state; access refused
(KubeAccessDenied) and malformed requests (KubeRequestRejected) leave under their own names and
escalate: retrying will not fix them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from hyperpod_recovery.adapters.eks_node_lookup import HyperPodNodes
from hyperpod_recovery.adapters.eks_stop import JobStopper, stop_only
from hyperpod_recovery.adapters.eks_workloads import KueueWorkloads
from hyperpod_recovery.adapters.stepfunctions import StepFunctions
from hyperpod_recovery.domain.hangs.pod_logs import PodLog, comparable, job_text, node_signature, node_text, training_container
from hyperpod_recovery.domain.jobs.eks_jobs import (
    RECREATION_TOKEN_LABEL,
    STOPPED_FOR_ANNOTATION,
    UnsizableJob,
    carries_token,
    finished,
    is_pod_of,
    job_condition,
    job_spec_of,
    jobs_of_pods,
    live_pods_of,
    owning_job,
    owning_job_any,
    recreated_job,
    recreated_name,
    sized_spec,
    suspended,
)
from hyperpod_recovery.domain.nodes.eks_nodes import (
    NodeView,
    cordon_plan,
    give_back_plan,
    health_gate,
    hyperpod_name,
    rebooted_since_cordon,
)
from hyperpod_recovery.errors import (
    ControllerAgentError,
    ControllerChannelError,
    InvalidCommand,
    JobSpecUnavailable,
    KubeAccessDenied,
    KubeAlreadyExists,
    KubeConflict,
    KubeObjectGone,
    KubeRequestRejected,
    KubeThrottled,
    KubeUnavailable,
    OldCopyStillStopping,
    TaskAnswerFailed,
)
from hyperpod_recovery.models.commands import (
    JOB_TEXT_LIMIT,
    MAX_EVIDENCE_NODES,
    MAX_JOB_NODES,
    MAX_JOBS_CHECKED,
    MAX_UNHEALTHY_ANSWERED,
    OWNER_TAG_PREFIX,
    STACKS_TEXT_LIMIT,
    UNHEALTHY_REASON_KEPT,
    AgentCheckResult,
    BootTimes,
    BootTimesResult,
    CaptureHangEvidence,
    CaptureJobSpec,
    CheckAgent,
    CommandEnvelope,
    CommandReply,
    CordonNodes,
    CordonResult,
    DrainNodes,
    DrainResult,
    HangEvidenceResult,
    JobsOnNodes,
    JobsOnNodesResult,
    JobSpec,
    JobSpecResult,
    NodeBoot,
    NodeStacks,
    NodeStates,
    NodeStatesResult,
    NodeStatus,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    ResumeResult,
    RunningJob,
    UnhealthyNode,
    carried,
    plainly_healthy,
)
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.kubernetes import (
    COMPUTE_TYPE_LABEL,
    DNS1123_LABEL_MAX,
    HEALTH_STATUS_LABEL,
    HEALTHY_STATUS,
    HPTO_JOB_LABEL,
    INSTANCE_GROUP_LABEL,
    JOB_KINDS,
    KUBEFLOW_JOB_NAME_LABEL,
    PENDING_REPAIR_STATUSES,
    KubeJobRef,
)
from hyperpod_recovery.ports import KubeApi
from hyperpod_recovery.redact import redact

ORCHESTRATOR_VERSION = "eks-1"
CONFLICT_RETRIES = 3
# The commands this orchestrator carries out (the preflight compares them with what the stack sends).
EKS_COMMANDS = (
    "boot_times",
    "capture_hang_evidence",
    "capture_job_spec",
    "check",
    "cordon_nodes",
    "drain_nodes",
    "jobs_on_nodes",
    "node_states",
    "resubmit_job",
    "resume_nodes",
)

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


def _declined(copy_id: str, why: str, *, ended: bool = False) -> ResubmitResult:
    return ResubmitResult(old_job_id=copy_id, new_job_id=None, declined=why, copy_ended=ended)


def _check_size(job: dict[str, Any], kind: str, nodes: int) -> None:
    """The job can be made at ``nodes`` (checked before anything is stopped)."""
    try:
        sized_spec(copy.deepcopy(job.get("spec") or {}), kind, nodes)
    except UnsizableJob as exc:
        raise InvalidCommand(f"{kind} {(job.get('metadata') or {}).get('name')}: {exc}: nothing stopped or created") from exc


def _spare(view: NodeView, groups: set[str | None]) -> bool:
    """A node a pod could be placed on now (the job's pods are placed one a node: ASSUMPTION)."""
    blocking = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in view.taints)
    return (
        view.ready
        and not view.unschedulable
        and not blocking
        and view.marked_by is None
        and view.health_status == HEALTHY_STATUS
        and view.labels.get(INSTANCE_GROUP_LABEL) in groups
    )


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


def installed_jobs(kube: KubeApi, kind: str) -> list[dict[str, Any]]:
    """A kind's jobs; none when its CRD is not installed (the training operator, Kubeflow: add-ons; 404)."""
    try:
        return kube.list_jobs(kind)
    except KubeObjectGone:
        return []


def job_pods(kube: KubeApi, ref: KubeJobRef, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of this very job (its operator's label narrows the list; its controller's kind,
    name and uid decide: pods of a TFJob of the same name, or of an earlier object, are not its)."""
    label = KUBEFLOW_JOB_NAME_LABEL if ref.kind == "PyTorchJob" else HPTO_JOB_LABEL
    return [p for p in kube.list_pods(ref.namespace, f"{label}={ref.name}") if owning_job_any(p) == ref and is_pod_of(p, job)]


def job_pod_nodes(
    kube: KubeApi, ref: KubeJobRef, job: dict[str, Any], names: HyperPodNodes | None = None, pods: list[dict[str, Any]] | None = None
) -> list[str]:
    """The nodes of the pods of this very job (``pods``: job_pods, when already listed), by the
    names the workflow knows them by (``hyperpod-<instance>``: HyperPodNodes; ``names``: one shared
    by the calls of one poll)."""
    pods = job_pods(kube, ref, job) if pods is None else pods
    placed = list(dict.fromkeys(str(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName")))
    return list(dict.fromkeys((names or HyperPodNodes(kube)).known_as(node) for node in placed))


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


def incident_of(tag: str) -> str:
    """``hyperpod-recovery:<incident> ...`` -> ``<incident>`` (the cordon's reason, the resume's owner tag)."""
    first = tag.split(maxsplit=1)[0] if tag.strip() else ""
    if not first.startswith(OWNER_TAG_PREFIX + ":") or first == OWNER_TAG_PREFIX + ":":
        raise InvalidCommand(f"{tag[:80]!r} does not start with {OWNER_TAG_PREFIX}:<incident>: only our own marks are ever undone")
    return first.removeprefix(OWNER_TAG_PREFIX + ":")


class EksOrchestrator:
    def __init__(self, kube: KubeApi, tasks: StepFunctions, now: Callable[[], datetime]) -> None:
        self.kube = kube
        self.tasks = tasks
        self.now = now
        self._nodes = HyperPodNodes(kube)
        self._stopper = JobStopper(kube, KueueWorkloads(kube), now)
        self._spare_view: tuple[list[dict[str, Any]], set[str]] | None = None

    # --- the port ------------------------------------------------------------------------------------
    def dispatch(self, envelope: CommandEnvelope) -> None:
        command = envelope.command
        started = self.now()
        try:
            result = self.execute(command, envelope.incident_id)
        except OldCopyStillStopping:
            raise  # (under its own name: the workflow waits longer for it than for a channel error)
        except (KubeUnavailable, KubeThrottled, KubeConflict) as exc:
            raise ControllerChannelError(
                f"{command.type} for {envelope.incident_id}: the Kubernetes API could not do it now: {exc}"
            ) from exc
        reply: CommandReply[Any] = CommandReply(
            command_id=envelope.command_id,
            type=command.type,
            requested_at=envelope.requested_at,
            started_at=started,
            completed_at=self.now(),
            dry_run=isinstance(command, CordonNodes) and not command.drain,
            result=result,
        )
        self.answer(envelope.task_token, reply)

    def answer(self, task_token: str, reply: CommandReply[Any]) -> None:
        try:
            self.tasks.send_task_success(task_token, reply.model_dump_json())
        except TaskAnswerFailed as exc:
            raise ControllerChannelError(f"could not answer task for {reply.command_id}: {exc}") from exc

    def execute(self, command: Any, incident_id: str = "") -> Any:
        self._nodes = HyperPodNodes(self.kube)  # (listed at most once per command)
        self._stopper = JobStopper(self.kube, KueueWorkloads(self.kube), self.now)  # (Kueue's API discovered once per command)
        self._spare_view = None
        if isinstance(command, CordonNodes):
            return self.cordon(command)
        if isinstance(command, DrainNodes):
            cordoned = self.cordon(CordonNodes(nodes=command.nodes, reason=command.reason), with_jobs=False)
            return DrainResult(drained=cordoned.drained, already_drained=cordoned.already_drained)
        if isinstance(command, ResumeNodes):
            return self.resume(command)
        if isinstance(command, BootTimes):
            return self.boot_times(command)
        if isinstance(command, JobsOnNodes):
            return self.jobs_on(command.nodes)
        if isinstance(command, CheckAgent):
            return self.check()
        if isinstance(command, ResubmitJob):
            return self.resubmit(command, incident_id)
        if isinstance(command, CaptureJobSpec):
            return self.capture(command)
        if isinstance(command, NodeStates):
            return self.node_states(command)
        if isinstance(command, CaptureHangEvidence):
            return self.hang_evidence(command)
        raise InvalidCommand(f"{command.type} is not carried out on EKS-orchestrated clusters (it executes {', '.join(EKS_COMMANDS)})")

    # --- nodes ----------------------------------------------------------------------------------------
    def find_node(self, name: str) -> dict[str, Any] | None:
        """The node by its name, or by the instance in its providerID (adapters/eks_node_lookup.py);
        None: Kubernetes has no such node (replaced, gone), or none that can be told to be it."""
        return self._nodes.find(name)

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

    def cordon(self, command: CordonNodes, *, with_jobs: bool = True) -> CordonResult:
        """Cordon and mark each node, then list the jobs of the pods on them: after the cordon, so
        no pod can be placed on them in between."""
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
        if with_jobs:
            jobs = self._jobs_on_found(found)
            result.jobs, result.omitted = jobs.jobs, jobs.omitted
        return result

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

    # --- jobs ------------------------------------------------------------------------------------------
    def jobs_on(self, nodes: list[str]) -> JobsOnNodesResult:
        found = [NodeView.of(node).name for node in map(self.find_node, nodes) if node is not None]
        return self._jobs_on_found(found)

    def _jobs_on_found(self, node_names: list[str]) -> JobsOnNodesResult:
        """The running jobs with a pod on the nodes. A job that already ended (Failed, Succeeded) is
        not a node recovery's: a failed one is JobRecovery's (Find Failed Jobs), with its budget
        and crash-loop rules; a pod of an earlier object of the same name is that object's."""
        pods = [pod for name in node_names for pod in self.kube.list_pods_on_node(name)]
        jobs: list[JobSpec] = []
        seen: set[str] = set()
        omitted = 0
        for ref in jobs_of_pods(pods):
            try:
                job = self.kube.get_job(ref)
            except KubeObjectGone:
                continue  # deleted since its pod was listed: nothing to restart
            if finished(job) or not any(owning_job(p) == ref and is_pod_of(p, job) for p in pods):
                continue
            spec = job_spec_of(job, ref, grace=True)
            if spec is None or spec.job_id in seen:
                continue
            seen.add(spec.job_id)
            if spec.elastic is not None or spec.elastic_problem is not None:
                spec = self._counted(spec, job, pods)  # (``pods``: those on the incident's nodes)
            if len(jobs) < MAX_JOBS_PER_INCIDENT:
                jobs.append(spec)
            else:
                omitted += 1
        return JobsOnNodesResult(jobs=jobs, omitted=omitted)

    def _counted(self, spec: JobSpec, job: dict[str, Any], pods: list[dict[str, Any]]) -> JobSpec:
        """An elastic job's lost nodes (the incident's nodes its pods are on) and the spare nodes that
        could take it at once (spare_nodes): counted only for a job that opted in (they decide nothing
        for a rigid one), after the cordon, so never the failed nodes."""
        lost = sorted(
            {str(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName") and owning_job(p) and is_pod_of(p, job)}
        )
        return spec.model_copy(update={"lost_nodes": min(len(lost), MAX_JOB_NODES), "spare_nodes": self._spare_for(lost)})

    def _spare_for(self, job_nodes: list[str], excluded: set[str] | frozenset[str] = frozenset()) -> int:
        """The nodes that could take a pod of a job on ``job_nodes`` at once: HyperPod nodes of the same
        instance group (a pod's GPUs are its group's kind), Ready, schedulable (not cordoned, HyperPod's
        health label Schedulable, no NoSchedule/NoExecute taint) and holding no training job's pod. One
        list of nodes and one of live pods per count (cached for the command)."""
        if self._spare_view is None:
            nodes = self.kube.list_nodes(f"{COMPUTE_TYPE_LABEL}=hyperpod")
            live = self.kube.list_live_pods()
            busy = {str(p["spec"]["nodeName"]) for p in live if (p.get("spec") or {}).get("nodeName") and owning_job(p)}
            self._spare_view = (nodes, busy)
        nodes, busy = self._spare_view
        views = [NodeView.of(n) for n in nodes]
        groups = {v.labels.get(INSTANCE_GROUP_LABEL) for v in views if v.name in job_nodes}
        free = [v for v in views if v.name not in job_nodes and v.name not in busy and v.name not in excluded and _spare(v, groups)]
        return min(len(free), MAX_JOB_NODES)

    def resubmit(self, command: ResubmitJob, incident_id: str) -> ResubmitResult:
        """Re-create the job from ``command.checkpoint`` (domain/jobs/eks_jobs.py recreated_job), with never
        two copies running: first the name is checked free (or found ours), then the old job is
        stopped the way the controller that owns it honours and the stop verified by reading back,
        and only then the new one created. A retry finds its own work at each step: the old job
        already stopped, and our re-creation by the token the ledger recorded before the create
        (never by an annotation anyone may write). Where the old copy cannot be stopped for certain,
        nothing is created (JobSpecUnavailable, with why)."""
        if command.require_free_nodes is not None:
            return self.grow_back(command, incident_id)
        ref, token = command.kube, command.recreation_token
        if ref is None or token is None:
            raise InvalidCommand("resubmit_job on EKS names the job object to re-create (kube) and its re-creation token: missing")
        try:
            old = self.kube.get_job(ref)
        except KubeObjectGone:
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name} no longer exists: there is nothing to re-create it from"
            ) from None
        uid = str((old.get("metadata") or {}).get("uid") or "")
        if uid != command.job_id:
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name} is another job now (uid {uid}, not {command.job_id}): never re-created in its stead"
            )
        new = self._our_recreation(ref, token)
        if new is None and command.nodes is not None:
            _check_size(old, ref.kind, command.nodes)
        name = str(new["metadata"]["name"]) if new is not None else self._free_name(ref, old, command.nodes)
        if command.stop_only:
            return stop_only(self._stopper, ref, old, made=new)
        try:
            stopped = self._stopper.stop(ref, old)
        except JobSpecUnavailable as exc:
            if new is None:
                raise
            # (stopped before, since restarted by someone: our copy exists too, and both may run)
            raise JobSpecUnavailable(
                f"{exc} — and its copy {ref.namespace}/{name} (uid {new['metadata']['uid']}) exists: both may run"
            ) from exc
        if new is None:
            new = self._create(ref, old, name, command, incident_id, token, stopped=stopped)
        return ResubmitResult(
            old_job_id=uid,
            new_job_id=str(new["metadata"]["uid"]),
            cancelled_old=stopped,
            new_job_name=f"{ref.namespace}/{new['metadata']['name']}",
            new_job_state=job_condition(new),
            nodes=command.nodes,
        )

    def _create(
        self, ref: KubeJobRef, old: dict[str, Any], name: str, command: ResubmitJob, incident_id: str, token: str, *, stopped: bool
    ) -> dict[str, Any]:
        """The re-creation of ``old`` (stopped) under ``name``, or ours made by a first try whose answer was lost."""
        body = recreated_job(
            old,
            ref.kind,
            name=name,
            resume_from=command.checkpoint.uri,
            step=command.checkpoint.step,
            incident=incident_id,
            token=token,
            nodes=command.nodes,
            data_parallel=command.data_parallel,
        )
        try:
            new = self.kube.create_job(ref.kind, ref.namespace, body)
        except KubeAlreadyExists:
            # Ours if a first try of this request was created and its answer lost; else someone
            # took the name since we looked: nothing of ours runs, the old job stays stopped.
            ours = self._our_recreation(ref, token)
            if ours is None:
                raise JobSpecUnavailable(
                    f"{ref.kind} {ref.namespace}/{name} was created by someone else while {ref.name} was being stopped: "
                    f"nothing created; {ref.name} stays stopped"
                ) from None
            return ours
        except (KubeAccessDenied, KubeRequestRejected, KubeUnavailable, KubeThrottled) as exc:
            if not stopped:
                raise
            # (the same error, retried or escalated under its own name, saying what is true now)
            raise type(exc)(
                f"{exc} — {ref.kind} {ref.namespace}/{ref.name} was stopped for its re-creation and stays stopped: "
                f"nothing of it runs until {ref.namespace}/{name} is created from {command.checkpoint.uri}"
            ) from exc
        return new

    def grow_back(self, command: ResubmitJob, incident_id: str) -> ResubmitResult:
        """A shrunk copy back to full size (``require_free_nodes``): only a copy we made (it carries the
        token our ledger recorded for its re-creation, ``copy_token``; ``kube`` names the job it was
        re-created from), and only when that many nodes could take the full-size one at once (its own
        and the spare ones); else nothing is touched and the answer says why (``declined``). The copy is
        marked (STOPPED_FOR_ANNOTATION) before it is stopped: a copy that no longer runs is followed by
        its successor only when this incident's grow-back stopped it; one that ended on its own, or was
        stopped or deleted by someone else, is never started again."""
        ref, token, proof, copy_id = command.kube, command.recreation_token, command.copy_token, command.job_id
        if ref is None or token is None or proof is None:
            raise InvalidCommand(
                "a grow-back on EKS names the job its shrunk copy was re-created from (kube), the copy's re-creation token "
                "(copy_token) and the token of its successor: missing"
            )
        made = self._our_recreation(ref, token)
        if made is not None:  # (a retry: the full-size copy was made, its answer lost)
            return ResubmitResult(
                old_job_id=copy_id,
                new_job_id=str(made["metadata"]["uid"]),
                new_job_name=f"{ref.namespace}/{made['metadata']['name']}",
                new_job_state=job_condition(made),
                nodes=command.nodes,
            )
        shrunk = self._our_recreation(ref, proof)
        if shrunk is None or shrunk["metadata"].get("uid") != copy_id:
            found = self.find_job(copy_id)
            if found is not None:
                raise InvalidCommand(
                    f"{found[0].kind} {found[0].namespace}/{found[0].name} (uid {copy_id}) is no re-creation of ours (it lacks "
                    "the token our ledger recorded): a grow-back never stops it"
                )
            return _declined(copy_id, f"{ref.kind} {ref.namespace} uid {copy_id} no longer exists: not started again", ended=True)
        copy_ref = KubeJobRef(kind=ref.kind, namespace=ref.namespace, name=str(shrunk["metadata"]["name"]))
        where = f"{copy_ref.kind} {copy_ref.namespace}/{copy_ref.name}"
        if command.nodes is not None:
            _check_size(shrunk, ref.kind, command.nodes)
        stopped_here = ((shrunk["metadata"].get("annotations") or {}).get(STOPPED_FOR_ANNOTATION)) == incident_id
        if not stopped_here:
            pods = job_pods(self.kube, copy_ref, shrunk)
            live = live_pods_of(pods, shrunk)
            if finished(shrunk) or suspended(shrunk) or not live:
                state = "suspended" if suspended(shrunk) and not finished(shrunk) else job_condition(shrunk)
                return _declined(
                    copy_id, f"{where} is {state}, and no grow-back of this incident stopped it: not started again", ended=True
                )
            excluded = set(command.exclude_nodes)
            own = sorted({str(p["spec"]["nodeName"]) for p in live if (p.get("spec") or {}).get("nodeName")} - excluded)
            needed = command.require_free_nodes or 0
            able = len(own) + self._spare_for(own, excluded)
            if able < needed:
                return _declined(
                    copy_id, f"only {able} node(s) could take it at once, {needed} needed: {where} keeps running on {len(own)} node(s)"
                )
        name = self._free_name(copy_ref, shrunk, command.nodes)  # (named for its full size: before anything is stopped)
        if not stopped_here:
            add = (
                {"op": "add", "path": f"/metadata/annotations/{STOPPED_FOR_ANNOTATION.replace('/', '~1')}", "value": incident_id}
                if shrunk["metadata"].get("annotations")
                else {"op": "add", "path": "/metadata/annotations", "value": {STOPPED_FOR_ANNOTATION: incident_id}}
            )
            mark = [{"op": "test", "path": "/metadata/uid", "value": copy_id}, add]
            shrunk = self.kube.patch_job(copy_ref, mark)  # (before the stop: what a retry trusts)
        stopped = self._stopper.stop(copy_ref, shrunk)
        new = self._create(copy_ref, shrunk, name, command, incident_id, token, stopped=stopped)
        return ResubmitResult(
            old_job_id=copy_id,
            new_job_id=str(new["metadata"]["uid"]),
            cancelled_old=stopped or stopped_here,
            new_job_name=f"{ref.namespace}/{new['metadata']['name']}",
            new_job_state=job_condition(new),
            nodes=command.nodes,
        )

    def _our_recreation(self, ref: KubeJobRef, token: str) -> dict[str, Any] | None:
        """The job carrying our re-creation token, whatever its name (a retry's, or a first try's whose answer was lost)."""
        found = [j for j in self.kube.list_jobs_in(ref.kind, ref.namespace, f"{RECREATION_TOKEN_LABEL}={token}") if carries_token(j, token)]
        return found[0] if found else None

    def _free_name(self, ref: KubeJobRef, old: dict[str, Any], nodes: int | None = None) -> str:
        """The re-creation's name, for the size it is made at (``nodes``; else the old job's), checked
        free before anything is stopped: a name someone else holds (a job that happens to have it, or
        one made to be taken for ours) is never ours."""
        name = recreated_name(old, ref.kind, nodes)
        if name is None:
            size = f" at {nodes} node(s)" if nodes is not None else ""
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name}: no name leaves room{size} for the names its operator derives from it "
                f"(<name>-<replica type>-<index>, at most {DNS1123_LABEL_MAX} characters): nothing stopped, nothing re-created"
            )
        try:
            self.kube.get_job(KubeJobRef(kind=ref.kind, namespace=ref.namespace, name=name))
        except KubeObjectGone:
            return name
        raise JobSpecUnavailable(
            f"{ref.kind} {ref.namespace}/{name} exists and is not our re-creation of {ref.name} (it lacks the token our "
            f"ledger recorded): nothing created, {ref.name} left as it is"
        )

    def find_job(self, uid: str, ref: KubeJobRef | None = None) -> tuple[KubeJobRef, dict[str, Any]] | None:
        """The training job whose uid is ``uid``: read by its name when known (the poller's failure
        names it), else found in the lists of each kind (a manual request names a uid only)."""
        if ref is not None:
            try:
                job = self.kube.get_job(ref)
            except KubeObjectGone:
                return None
            return (ref, job) if (job.get("metadata") or {}).get("uid") == uid else None
        for kind in JOB_KINDS:
            for job in installed_jobs(self.kube, kind):
                metadata = job.get("metadata") or {}
                if metadata.get("uid") == uid:
                    ref = KubeJobRef.model_validate({"kind": kind, "namespace": metadata.get("namespace"), "name": metadata.get("name")})
                    return ref, job
        return None

    def capture(self, command: CaptureJobSpec) -> JobSpecResult:
        """The job by its uid, as the workflow carries it, with the nodes its pods ran on (None: gone)."""
        found = self.find_job(command.job_id, command.kube)
        if found is None:
            return JobSpecResult(job=None)
        ref, job = found
        spec = job_spec_of(job, ref)
        if spec is None:
            return JobSpecResult(job=None)
        # (as the Slurm agent answers: a job on more nodes than a workflow carries the names of, none of them)
        return JobSpecResult(
            job=carried(spec.model_copy(update={"nodes": job_pod_nodes(self.kube, ref, job)[:MAX_JOB_NODES]}), command.asked)
        )

    def node_states(self, command: NodeStates) -> NodeStatesResult:
        """Each node in the words the job-failure classifier reads (domain/jobs/job_failure.py): down when
        Kubernetes has no such node or it is not Ready; drained for repair (``Action:Replace``/``Reboot``)
        when HyperPod's health label says so; drained under our tag when we cordoned it; drained by
        someone else when another cordoned it; idle otherwise."""
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
        for name in command.nodes:
            node = self.find_node(name)
            states.append(_node_status(name, node, self._nodes.unmatched() if node is None else ""))
        return NodeStatesResult(nodes=states)

    def check(self) -> AgentCheckResult:
        try:
            count = len(self.kube.list_nodes())
        except (KubeUnavailable, KubeThrottled, KubeAccessDenied) as exc:
            return AgentCheckResult(
                agent_version=ORCHESTRATOR_VERSION, slurm_reachable=False, slurm_detail=str(exc)[:512], commands=list(EKS_COMMANDS)
            )
        try:
            running, omitted = self.running_jobs(MAX_JOBS_CHECKED)
        except (KubeUnavailable, KubeThrottled, KubeAccessDenied) as exc:
            # Without the list, "no running jobs" would be a false pass of the preflight's checkpoints.
            return AgentCheckResult(
                agent_version=ORCHESTRATOR_VERSION,
                slurm_reachable=False,
                slurm_detail=f"its jobs could not be listed ({count} node(s) listed): {exc}"[:512],
                commands=list(EKS_COMMANDS),
            )
        return AgentCheckResult(
            agent_version=ORCHESTRATOR_VERSION,
            slurm_reachable=True,
            slurm_detail=f"the Kubernetes API answers: {count} node(s)",
            running_jobs=running,
            running_jobs_omitted=omitted,
            commands=list(EKS_COMMANDS),
        )

    def running_jobs(self, limit: int) -> tuple[list[RunningJob], int]:
        """The jobs of every kind whose checkpoints a recovery would read (not Succeeded or Failed),
        by uid, with the name their checkpoints are written under; the first ``limit`` and how many more."""
        running: list[RunningJob] = []
        for kind in JOB_KINDS:
            for job in installed_jobs(self.kube, kind):
                metadata = job.get("metadata") or {}
                if finished(job):
                    continue
                spec = job_spec_of(
                    job, KubeJobRef.model_validate({"kind": kind, "namespace": metadata.get("namespace"), "name": metadata.get("name")})
                )
                if spec is not None:
                    running.append(RunningJob(job_id=spec.job_id, name=spec.name, checkpoint_uri=spec.checkpoint_uri))
        return running[:limit], max(len(running) - limit, 0)

    # --- a hang's evidence -------------------------------------------------------------------------
    def hang_evidence(self, command: CaptureHangEvidence) -> HangEvidenceResult:
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
