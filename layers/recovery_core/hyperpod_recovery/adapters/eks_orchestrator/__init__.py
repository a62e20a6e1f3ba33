"""The EKS orchestrator: the workflow's typed commands carried out here, against the Kubernetes API.

No in-cluster agent: ``dispatch`` executes the command in the Lambda that sends it and answers the
waiting task itself (SendTaskSuccess), the way the Slurm agent answers from the controller. The
state machines are the same for both orchestrators; only this class and the Slurm one differ.

Each command has its handler in HANDLERS (models/command_dispatch.py), carried out by the part of
the package it is about: nodes.py, jobs.py, evidence.py (lookups.py finds what a command names).
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

from typing import Any

from hyperpod_recovery.adapters.eks_node_lookup import HyperPodNodes
from hyperpod_recovery.adapters.eks_orchestrator.evidence import (
    EKS_EVIDENCE_SECONDS,
    EVIDENCE_TOOL,
    LOG_LIMIT_BYTES,
    LOG_TAIL_LINES,
    EvidenceCommands,
)
from hyperpod_recovery.adapters.eks_orchestrator.jobs import JobCommands
from hyperpod_recovery.adapters.eks_orchestrator.lookups import installed_jobs, job_pod_nodes, job_pods
from hyperpod_recovery.adapters.eks_orchestrator.nodes import CONFLICT_RETRIES, NodeCommands, incident_of
from hyperpod_recovery.adapters.eks_stop import JobStopper
from hyperpod_recovery.adapters.eks_workloads import KueueWorkloads
from hyperpod_recovery.errors import (
    ControllerChannelError,
    KubeAccessDenied,
    KubeConflict,
    KubeThrottled,
    KubeUnavailable,
    OldCopyStillStopping,
    TaskAnswerFailed,
)
from hyperpod_recovery.models import commands
from hyperpod_recovery.models.command_dispatch import CommandResult, command_reply, orchestrator_handlers

__all__ = [
    "CONFLICT_RETRIES",
    "EKS_COMMANDS",
    "EKS_EVIDENCE_SECONDS",
    "EVIDENCE_TOOL",
    "LOG_LIMIT_BYTES",
    "LOG_TAIL_LINES",
    "ORCHESTRATOR_VERSION",
    "EksOrchestrator",
    "incident_of",
    "installed_jobs",
    "job_pod_nodes",
    "job_pods",
]

ORCHESTRATOR_VERSION = "eks-1"


class EksOrchestrator(NodeCommands, JobCommands, EvidenceCommands):
    """The orchestrator port on EKS: each command executed here and answered to its waiting task."""

    def dispatch(self, envelope: commands.CommandEnvelope) -> None:
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
        reply = command_reply(envelope, result, started=started, completed=self.now())
        self.answer(envelope.task_token, reply)

    def answer(self, task_token: str, reply: commands.CommandReply[Any]) -> None:
        try:
            self.tasks.send_task_success(task_token, reply.model_dump_json())
        except TaskAnswerFailed as exc:
            raise ControllerChannelError(f"could not answer task for {reply.command_id}: {exc}") from exc

    def execute(self, command: Any, incident_id: str = "") -> CommandResult:
        """The command carried out by its handler (HANDLERS), with the lookups fresh for it."""
        self._nodes = HyperPodNodes(self.kube)  # (listed at most once per command)
        self._stopper = JobStopper(self.kube, KueueWorkloads(self.kube), self.now)  # (Kueue's API discovered once per command)
        self._spare_view = None
        return HANDLERS.run(self, command, incident_id)

    def cordon(self, command: commands.CordonNodes, *, with_jobs: bool = True) -> commands.CordonResult:
        """Cordon and mark each node, then list the jobs of the pods on them: after the cordon, so
        no pod can be placed on them in between."""
        result, found = self.cordon_only(command)
        if with_jobs:
            jobs = self._jobs_on_found(found)
            result.jobs, result.omitted = jobs.jobs, jobs.omitted
        return result

    def drain(self, command: commands.DrainNodes) -> commands.DrainResult:
        """A cordon without its jobs (the nodes' marks are the drain's reason)."""
        cordoned, _ = self.cordon_only(commands.CordonNodes(nodes=command.nodes, reason=command.reason))
        return commands.DrainResult(drained=cordoned.drained, already_drained=cordoned.already_drained)

    def check(self) -> commands.AgentCheckResult:
        try:
            count = len(self.kube.list_nodes())
        except (KubeUnavailable, KubeThrottled, KubeAccessDenied) as exc:
            return commands.AgentCheckResult(
                agent_version=ORCHESTRATOR_VERSION, slurm_reachable=False, slurm_detail=str(exc)[:512], commands=list(EKS_COMMANDS)
            )
        try:
            running, omitted = self.running_jobs(commands.MAX_JOBS_CHECKED)
        except (KubeUnavailable, KubeThrottled, KubeAccessDenied) as exc:
            # Without the list, "no running jobs" would be a false pass of the preflight's checkpoints.
            return commands.AgentCheckResult(
                agent_version=ORCHESTRATOR_VERSION,
                slurm_reachable=False,
                slurm_detail=f"its jobs could not be listed ({count} node(s) listed): {exc}"[:512],
                commands=list(EKS_COMMANDS),
            )
        return commands.AgentCheckResult(
            agent_version=ORCHESTRATOR_VERSION,
            slurm_reachable=True,
            slurm_detail=f"the Kubernetes API answers: {count} node(s)",
            running_jobs=running,
            running_jobs_omitted=omitted,
            commands=list(EKS_COMMANDS),
        )


# The handler per command type (models/command_dispatch.py): the common ones; requeue_job is Slurm's alone.
HANDLERS = orchestrator_handlers(EksOrchestrator, "on EKS-orchestrated clusters")
# The commands this orchestrator carries out (the preflight compares them with what the stack sends).
EKS_COMMANDS = HANDLERS.types()
