"""The orchestrator steps: Cordon Nodes, Find Affected Jobs, Read Boot Times, Resume Nodes, Resubmit
Job, JobRecovery's Capture Job Spec and Check Job Nodes, and the agent-check workflow's Check
Controller Agent.

Each Lambda dispatches one typed command with its task token to the orchestrator (ports.py; on
Slurm the controller agent carries it out) and returns; the state completes when the token is
answered. In a dry run the orchestrator is behind the gate (adapters/dry_run.py): mutating commands
are answered there ("would drain ...") and never reach the cluster; read-only ones (jobs on nodes)
still go to the agent so a drill shows real jobs.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.domain.job_failure import job_nodes
from hyperpod_recovery.models.commands import (
    BootTimes,
    CaptureJobSpec,
    CheckAgent,
    CommandEnvelope,
    CommandReply,
    ControllerCommand,
    DrainNodes,
    JobsOnNodes,
    NodeStates,
    NodeStatesResult,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    ResumeResult,
    owner_tag,
)
from hyperpod_recovery.models.common import one_line
from hyperpod_recovery.models.job_recovery import CaptureJobSpecInput, CheckJobNodesInput
from hyperpod_recovery.models.preflight import CheckControllerAgentInput
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest
from hyperpod_recovery.models.workflow import (
    CordonNodesInput,
    FindAffectedJobsInput,
    ReadBootTimesInput,
    ResubmitJobInput,
    ResumeNodesInput,
)
from hyperpod_recovery.ports import Ledger, Orchestrator


def _answer_here(
    orchestrator: Orchestrator, task_token: str, command_id: str, command_type: str, result: Any, now: datetime, *, dry_run: bool = False
) -> None:
    """Complete the waiting task without the agent (a dry run, a claim that says it is done, nothing to ask)."""
    reply: CommandReply[Any] = CommandReply(
        command_id=command_id, type=command_type, requested_at=now, started_at=now, completed_at=now, dry_run=dry_run, result=result
    )
    orchestrator.answer(task_token, reply)


def _dispatch(
    *,
    orchestrator: Orchestrator,
    request: RecoveryRequest | JobRecoveryRequest,
    execution_name: str,
    task_token: str,
    command: ControllerCommand,
    command_id: str,
    now: datetime,
) -> dict[str, Any]:
    orchestrator.dispatch(
        CommandEnvelope(
            command_id=command_id,
            incident_id=request.incident_id or execution_name,
            execution_name=execution_name,
            task_token=task_token,
            requested_at=now,
            command=command,
        )
    )
    return {"command_id": command_id, "sent": True, "dry_run": bool(request.dry_run)}


def cordon_nodes(step: CordonNodesInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    nodes = [t.slurm_node for t in step.assessment.targets]
    # The trigger's text comes from an outside event: one printable line before it reaches Slurm.
    reason = one_line(f"{owner_tag(step.execution_name)} {step.request.triggers[0].reason}", 256)
    return _dispatch(
        orchestrator=orchestrator,
        request=step.request,
        execution_name=step.execution_name,
        task_token=step.task_token,
        command=DrainNodes(nodes=nodes, reason=reason),
        command_id=f"{step.execution_name}:drain",
        now=now,
    )


def find_affected_jobs(step: FindAffectedJobsInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    nodes = [t.slurm_node for t in step.assessment.targets]
    return _dispatch(
        orchestrator=orchestrator,
        request=step.request,
        execution_name=step.execution_name,
        task_token=step.task_token,
        command=JobsOnNodes(nodes=nodes),
        command_id=f"{step.execution_name}:jobs",
        now=now,
    )


def read_boot_times(step: ReadBootTimesInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """slurmctld's boot time and state of the nodes Check Rejoin asked about (read-only): the
    evidence that a rebooted node came back, whatever HyperPod's status showed meanwhile."""
    return _dispatch(
        orchestrator=orchestrator,
        request=step.request,
        execution_name=step.execution_name,
        task_token=step.task_token,
        command=BootTimes(nodes=step.rejoin.boot_check),
        # One reading per check (the agent answers a command id it has seen from its journal).
        command_id=f"{step.execution_name}:boot-times:{step.rejoin.checks}:{step.rejoin.boot_readings}",
        now=now,
    )


def resume_nodes(step: ResumeNodesInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    # A node whose replacement came back under another name left its own name drained: that name is
    # the old instance's, and the new one was never drained by us. Only names that came back are resumed.
    nodes = [n.slurm_node for n in step.rejoin.nodes if (n.rejoined and n.replacement_slurm_node is None) or step.rejoin.dry_run]
    command_id = f"{step.execution_name}:resume"
    if not nodes:
        _answer_here(orchestrator, step.task_token, command_id, "resume_nodes", ResumeResult(), now, dry_run=bool(step.request.dry_run))
        return {"command_id": command_id, "sent": False, "dry_run": bool(step.request.dry_run)}
    return _dispatch(
        orchestrator=orchestrator,
        request=step.request,
        execution_name=step.execution_name,
        task_token=step.task_token,
        command=ResumeNodes(nodes=nodes, owner_tag=owner_tag(step.execution_name)),
        command_id=command_id,
        now=now,
    )


def resubmit_job(
    step: ResubmitJobInput, *, orchestrator: Orchestrator, ledger: Ledger, claim_ttl: timedelta, now: datetime
) -> dict[str, Any]:
    """Once per job: the ledger claim stops a second incident (or a retried Lambda) from
    restarting a job that was already resubmitted."""
    request, plan = step.request, step.plan
    job_id = plan.job.job_id
    command_id = f"{step.execution_name}:resubmit:{job_id}"
    claim = ledger.claim_resubmission(request.cluster, job_id, step.execution_name, now, claim_ttl)
    if not claim.claimed or claim.new_job_id:
        # Another incident restarted this job, or this incident already did (a retried step):
        # answer from the claim instead of submitting the job a second time.
        result = ResubmitResult(
            old_job_id=job_id,
            new_job_id=claim.new_job_id,
            already_submitted=not claim.claimed,
            submitted_by=None if claim.claimed else claim.incident_id,
        )
        _answer_here(orchestrator, step.task_token, command_id, "resubmit_job", result, now)
        return {"command_id": command_id, "sent": False, "already_resubmitted_by": claim.incident_id}
    return _dispatch(
        orchestrator=orchestrator,
        request=request,
        execution_name=step.execution_name,
        task_token=step.task_token,
        command=ResubmitJob(job_id=job_id, checkpoint=plan.checkpoint),
        command_id=command_id,
        now=now,
    )


def capture_job_spec(step: CaptureJobSpecInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """The failed job as slurmctld knows it now: state (requeued already?), nodes, batch script."""
    return _dispatch(
        orchestrator=orchestrator,
        request=step.request,
        execution_name=step.execution_name,
        task_token=step.task_token,
        command=CaptureJobSpec(job_id=step.request.job_id),
        command_id=f"{step.execution_name}:job-spec",
        now=now,
    )


def check_job_nodes(step: CheckJobNodesInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """Slurm's state of the nodes the job ran on (the event's list: squeue forgets an ended job's)."""
    nodes = job_nodes(step.request, step.inspection.result.job)
    command_id = f"{step.execution_name}:job-nodes"
    if not nodes:
        # Nothing to ask (the job never got nodes, or slurmctld forgot it): answer at once.
        _answer_here(orchestrator, step.task_token, command_id, "node_states", NodeStatesResult(), now)
        return {"command_id": command_id, "sent": False, "dry_run": False}
    return _dispatch(
        orchestrator=orchestrator,
        request=step.request,
        execution_name=step.execution_name,
        task_token=step.task_token,
        command=NodeStates(nodes=nodes),
        command_id=command_id,
        now=now,
    )


def check_controller_agent(step: CheckControllerAgentInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """Ask the agent to check in (hyperpod-recovery preflight). Read-only, so it goes to the agent
    whatever the stack's DryRun: the point is to see the agent answer."""
    command_id = f"{step.execution_name}:check"
    orchestrator.dispatch(
        CommandEnvelope(
            command_id=command_id,
            incident_id=step.execution_name,
            execution_name=step.execution_name,
            task_token=step.task_token,
            requested_at=now,
            command=CheckAgent(),
        )
    )
    return {"command_id": command_id, "sent": True, "dry_run": False}
