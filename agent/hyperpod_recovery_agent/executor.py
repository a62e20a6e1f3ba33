"""Execute one typed command against Slurm and build the reply the workflow expects.

Idempotent by construction, so a redelivered message or an agent restarted mid-command never does
anything twice: draining a drained node and resuming a resumed one are no-ops, and a resubmission
is found again by the comment it carries (Slurm itself keeps the idempotency key).

A job is captured (script, owner, submission environment, sbatch options: capture.py) when the
workflow first asks about it, while slurmctld still has it, and kept on the controller's disk. A
resubmission names only the job id: what runs, and as whom, comes from that capture, never from
the message.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from hyperpod_recovery.errors import ControllerAgentError, InvalidCommand, JobSpecUnavailable, OldJobNotStopped
from hyperpod_recovery.models.command_dispatch import command_reply, orchestrator_handlers
from hyperpod_recovery.models.commands import (
    JOB_TEXT_BYTES,
    MAX_EVIDENCE_NODES,
    MAX_JOBS_CHECKED,
    MAX_UNHEALTHY_ANSWERED,
    NODE_EVIDENCE_BYTES,
    OWNER_TAG_PREFIX,
    UNHEALTHY_REASON_KEPT,
    AgentCheckResult,
    BootTimes,
    BootTimesResult,
    CaptureHangEvidence,
    CaptureJobSpec,
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
    RequeueJob,
    RequeueResult,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    ResumeResult,
    RunningJob,
    UnhealthyNode,
    carried,
    carries_owner_tag,
    plainly_healthy,
)
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.manifest import RESUME_DATA_PARALLEL_ENV, RESUME_FROM_ENV, RESUME_NODES_ENV, RESUME_STEP_ENV
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV
from hyperpod_recovery.redact import redact_within
from hyperpod_recovery_agent import __version__
from hyperpod_recovery_agent.capture import CaptureStore as CaptureStore
from hyperpod_recovery_agent.capture import JobCapture, SubmitAs
from hyperpod_recovery_agent.slurm import (
    RESUBMISSION_MARK,
    FreeNode,
    NodeState,
    SlurmCommandFailed,
    SlurmUnreachable,
    StackDump,
    constraint_features,
)
from hyperpod_recovery_agent.stacks import stack_signature

# The old job's state at resubmission time: restarting on its own, or still holding an allocation.
log = logging.getLogger("hyperpod_recovery_agent")
RESTARTED_BY_SLURM = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"})
STILL_ALIVE = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING"})
# How long a resubmission waits for a cancelled job to end (Slurm's KillWait is 30 s by default, then
# SIGKILL; UnkillableStepTimeout 60 s), and how often it asks slurmctld meanwhile.
OLD_JOB_STOP_SECONDS = 120.0
OLD_JOB_POLL_SECONDS = 5.0
# The variables a resubmission sets: a copy's own (from the resubmission that made it) never carry over.
RESUME_ENV = frozenset({RESUME_FROM_ENV, RESUME_STEP_ENV, RESUME_NODES_ENV, RESUME_DATA_PARALLEL_ENV})
_JOB_STATE_FIELD = re.compile(r"(?:^|\s)JobState=(\S+)")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Slurm(Protocol):
    """What the executor needs from Slurm: SlurmCli on a controller, the sandbox's simulation in drills."""

    def node_states(self, nodes: Iterable[str]) -> dict[str, NodeState]: ...
    def all_node_states(self) -> dict[str, NodeState]: ...
    def free_nodes(self) -> dict[str, FreeNode]: ...
    def boot_times(self, nodes: Iterable[str]) -> list[NodeBoot]: ...
    def drain(self, nodes: Sequence[str], reason: str) -> None: ...
    def resume(self, nodes: Sequence[str]) -> None: ...
    def reserve(self, name: str, node: str) -> None: ...
    def has_reservation(self, name: str) -> bool: ...
    def cancel_reserved(self, name: str) -> None: ...
    def unreserve(self, name: str) -> None: ...
    def run_check(self, name: str, node: str, argv: Sequence[str], timeout_seconds: int) -> tuple[int | None, str]: ...
    def jobs_on(self, nodes: Iterable[str]) -> list[JobSpec]: ...
    def job(self, job_id: str) -> JobSpec | None: ...
    def job_state(self, job_id: str) -> str | None: ...
    def job_text(self, job_id: str) -> str | None: ...
    def dump_stacks(self, job_id: str, node: str, timeout_seconds: float) -> StackDump: ...
    def capture(self, job_id: str) -> JobCapture | None: ...
    def resubmission_of(self, job_id: str) -> tuple[str, str] | None: ...
    def submit_as_owner(self, capture: JobCapture, how: SubmitAs) -> str: ...
    def cancel(self, job_id: str) -> None: ...
    def requeue(self, job_id: str) -> bool: ...
    def node_count(self) -> int: ...
    def running_jobs(self, limit: int) -> tuple[list[RunningJob], int]: ...
    def version(self) -> str: ...


class CommandExecutor:
    def __init__(
        self,
        slurm: Slurm,
        *,
        captures: CaptureStore | None = None,
        now: Callable[[], datetime] = _utcnow,
        parallel_checks: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        old_job_stop_seconds: float = OLD_JOB_STOP_SECONDS,
        old_job_poll_seconds: float = OLD_JOB_POLL_SECONDS,
    ) -> None:
        self.slurm = slurm
        # Health checks of a replacement's nodes, and a hang's stack dumps, run at once (the
        # sandbox's virtual clock runs them one by one).
        self.parallel_checks = parallel_checks
        self.captures = captures or CaptureStore()
        self.now = now
        # Waiting for a cancelled job to end: ``now`` and ``sleep`` together (tests and the sandbox
        # pass a virtual clock's).
        self.sleep = sleep
        self.old_job_stop_seconds = old_job_stop_seconds
        self.old_job_poll_seconds = old_job_poll_seconds

    def execute(self, envelope: CommandEnvelope) -> CommandReply[Any]:
        started = self.now()
        result = HANDLERS.run(self, envelope.command, envelope.incident_id)
        return command_reply(envelope, result, started=started, completed=self.now())

    def node_states(self, command: NodeStates) -> NodeStatesResult:
        """The nodes' Slurm states, or every node not plainly healthy (a job on more nodes than a command names)."""
        states = self.slurm.node_states(command.nodes) if command.nodes else self.not_plainly_healthy()
        return NodeStatesResult(
            # (a drain reason Slurm keeps whole must not fail the answer: the classifier reads its start)
            nodes=[NodeStatus(name=s.name, state=s.state, flags=list(s.flags), reason=s.reason[:256]) for s in states.values()]
        )

    def capture_job_spec(self, command: CaptureJobSpec) -> JobSpecResult:
        spec = self.slurm.job(command.job_id)
        return JobSpecResult(job=carried(self.captured(spec), command.asked) if spec else None)

    def requeue(self, command: RequeueJob) -> RequeueResult:
        return RequeueResult(job_id=command.job_id, requeued=self.slurm.requeue(command.job_id))

    def boot_times(self, command: BootTimes) -> BootTimesResult:
        return BootTimesResult(nodes=self.slurm.boot_times(command.nodes))

    def check(self) -> AgentCheckResult:
        """Who answers, and what slurmctld says: Slurm's version, its node count and the running jobs
        with their checkpoint location. slurmctld not answering is the check's answer, not a retried
        error: the operator asking wants to know now."""
        try:
            version = self.slurm.version()
            nodes = self.slurm.node_count()
            jobs, omitted = self.slurm.running_jobs(MAX_JOBS_CHECKED)
        except (SlurmUnreachable, SlurmCommandFailed, OSError) as exc:
            known = list(HANDLERS.types())
            return AgentCheckResult(agent_version=__version__, slurm_reachable=False, slurm_detail=str(exc)[:512], commands=known)
        return AgentCheckResult(
            commands=list(HANDLERS.types()),
            agent_version=__version__,
            slurm_reachable=True,
            slurm_detail=f"{_slurmctld(version)} answers: {nodes} node(s), {len(jobs) + omitted} running job(s)",
            running_jobs=jobs,
            running_jobs_omitted=omitted,
        )

    def drain(self, command: DrainNodes) -> DrainResult:
        if not command.reason.startswith(OWNER_TAG_PREFIX + ":"):
            raise InvalidCommand(f"reason: must start with {OWNER_TAG_PREFIX}: so that only our drains are ever resumed")
        states = self.slurm.node_states(command.nodes)
        already = [n for n, s in states.items() if s.drained_or_draining]  # ours from a retry, or someone else's: kept as is
        tag = command.reason.split(maxsplit=1)[0]
        to_drain = [n for n in command.nodes if n not in already]
        if to_drain:
            self.slurm.drain(to_drain, command.reason)
        ours = [n for n in already if carries_owner_tag(states[n].reason, tag)]
        return DrainResult(drained=to_drain, already_drained=already, ours_already=ours)

    def cordon(self, command: CordonNodes) -> CordonResult:
        """Drain (or, with ``drain`` false, only say what would be drained), then capture the jobs
        on the nodes: after the drain, so no job can start on them in between."""
        if command.drain:
            drained = self.drain(DrainNodes(nodes=command.nodes, reason=command.reason))
        else:
            if not command.reason.startswith(OWNER_TAG_PREFIX + ":"):
                raise InvalidCommand(f"reason: must start with {OWNER_TAG_PREFIX}: so that only our drains are ever resumed")
            states = self.slurm.node_states(command.nodes)
            already = [n for n, s in states.items() if s.drained_or_draining]
            drained = DrainResult(drained=[n for n in command.nodes if n not in already], already_drained=already)
        jobs = self.jobs_on(command.nodes)
        return CordonResult(
            drained=drained.drained,
            already_drained=drained.already_drained,
            ours_already=drained.ours_already,
            jobs=jobs.jobs,
            omitted=jobs.omitted,
        )

    def resume(self, command: ResumeNodes) -> ResumeResult:
        if not command.owner_tag.startswith(OWNER_TAG_PREFIX + ":"):
            raise InvalidCommand(f"owner_tag: must start with {OWNER_TAG_PREFIX}:")
        result = ResumeResult()
        for name, state in self.slurm.node_states(command.nodes).items():
            if not state.drained_or_draining:
                result.not_drained.append(name)
            elif not carries_owner_tag(state.reason, command.owner_tag):
                result.not_ours.append(name)  # someone else's drain (or another incident's): never undone by us
            else:
                result.resumed.append(name)
        if command.health_check is not None and (result.resumed or result.not_drained):
            return self._gated_resume(command, result)
        if result.resumed:
            self.slurm.resume(result.resumed)
        return result

    def _gated_resume(self, command: ResumeNodes, result: ResumeResult) -> ResumeResult:
        """Each node runs the check before it takes a job: reserved for root (a reservation with no
        end), its drain lifted, the check run as a Slurm step in the reservation; the reservation is
        deleted only once the node passed, or once it is drained again under the incident's tag with
        what the check said. Anything else (an error, a crash) leaves the node reserved: closed to
        jobs until a retry or a human. All nodes at once: a replacement is checked in one check's time.

        A retried command (a crash, a redelivery) finds the nodes it already resumed in our
        reservation and checks them again; they are not "not drained"."""
        check = command.health_check
        assert check is not None
        tag = command.owner_tag
        prefix = f"hpr-{hashlib.sha256(tag.encode()).hexdigest()[:12]}"

        def reservation(node: str) -> str:
            return f"{prefix}-{hashlib.sha256(node.encode()).hexdigest()[:12]}"

        resumed_before = [n for n in result.not_drained if self.slurm.has_reservation(reservation(n))]
        to_check = [*result.resumed, *resumed_before]

        def gate(node: str) -> tuple[str, bool, str, Literal["failed", "could_not_run"]]:
            name = reservation(node)
            try:
                self.slurm.reserve(name, node)
                self.slurm.resume([node])
                code, output = self.slurm.run_check(name, node, check.argv, check.timeout_seconds)
            except (SlurmCommandFailed, SlurmUnreachable, InvalidCommand) as exc:
                # The check could not run: the node stays drained (or reserved), never in service.
                self._keep_out(node, name, f"{tag} health check could not run: {exc}")
                return node, False, f"the check could not run: {exc}"[:400], "could_not_run"
            if code == 0:
                self.slurm.unreserve(name)
                return node, True, output, "failed"
            said = f"exit {code}" if code is not None else f"no answer in {check.timeout_seconds} s"
            self._keep_out(node, name, f"{tag} health check failed ({said}): {output}")
            return node, False, f"{said}: {output}", "failed"

        if self.parallel_checks and len(to_check) > 1:
            with ThreadPoolExecutor(max_workers=len(to_check)) as pool:
                outcomes = list(pool.map(gate, to_check))
        else:
            outcomes = [gate(node) for node in to_check]
        # Built, not copied: the model keeps the check's output of the first nodes only (the state's bound).
        return ResumeResult(
            resumed=[node for node, ok, _, _ in outcomes if ok],
            not_drained=[n for n in result.not_drained if n not in resumed_before],
            not_ours=result.not_ours,
            unhealthy=[UnhealthyNode(node=node, detail=detail[:1000], verdict=verdict) for node, ok, detail, verdict in outcomes if not ok],
        )

    def _keep_out(self, node: str, reservation: str, reason: str) -> None:
        """Drain the node again under our tag; only once that held is its reservation deleted (a
        step still running in it is cancelled first). If the drain fails, the reservation stays."""
        try:
            self.slurm.drain([node], reason[:256])
        except (SlurmCommandFailed, SlurmUnreachable):
            return  # still reserved for root: no job lands on it
        try:
            self.slurm.cancel_reserved(reservation)
            self.slurm.unreserve(reservation)
        except (SlurmCommandFailed, SlurmUnreachable):
            return  # drained, and still reserved: doubly closed

    def not_plainly_healthy(self) -> dict[str, NodeState]:
        """Every node whose state the job-failure classifier would act on (for a job on more nodes than a
        command names), each reason cut to UNHEALTHY_REASON_KEPT: at most MAX_UNHEALTHY_ANSWERED, and a
        cluster with more such nodes is one whose job failures a human must sort out."""
        every = self.slurm.all_node_states()
        if not every:
            raise ControllerAgentError("slurmctld listed no node at all: which of the job's nodes are unhealthy cannot be told")
        states = {
            name: NodeState(s.name, s.state, s.flags, s.reason[:UNHEALTHY_REASON_KEPT])
            for name, s in every.items()
            if not plainly_healthy(s.state, s.flags, s.reason)
        }
        if len(states) > MAX_UNHEALTHY_ANSWERED:
            raise ControllerAgentError(
                f"{len(states)} nodes are down, drained or failing in slurmctld, more than an answer carries "
                f"({MAX_UNHEALTHY_ANSWERED}): which of the job's nodes are among them cannot be told"
            )
        return states

    def jobs_on_nodes(self, command: JobsOnNodes) -> JobsOnNodesResult:
        return self.jobs_on(command.nodes)

    def jobs_on(self, nodes: Sequence[str]) -> JobsOnNodesResult:
        """The jobs holding any of ``nodes``, each captured now. Their node lists stay here: the
        workflow needs the jobs, not where else they run (a 1,000-node job on a failed node would
        otherwise carry 1,000 names through the state)."""
        found = self.slurm.jobs_on(nodes)
        asked = set(nodes)
        # Nodes free to take each job at once (after a cordon's drain): one read of slurmctld for all jobs.
        free = self.slurm.free_nodes() if found else {}
        # One incident carries at most MAX_JOBS_PER_INCIDENT jobs through the workflow (Step Functions'
        # 256 KiB per state); any beyond are counted, and the incident escalates naming how many.
        return JobsOnNodesResult(
            jobs=[
                (captured := self.captured(spec)).model_copy(
                    # (how many of its nodes the incident takes: how far an elastic job would shrink)
                    update={
                        "nodes": [],
                        "spare_nodes": _spare_for(spec.partition, free, self._constraint_of(captured.job_id)),
                        "lost_nodes": len(set(spec.nodes) & asked),
                    }
                )
                for spec in found[:MAX_JOBS_PER_INCIDENT]
            ],
            omitted=max(0, len(found) - MAX_JOBS_PER_INCIDENT),
        )

    def _constraint_of(self, job_id: str) -> str | None:
        capture = self.captures.get(job_id)
        return capture.options.constraint if capture is not None else None

    def captured(self, spec: JobSpec) -> JobSpec:
        """Capture the job while slurmctld still has its script and environment (it forgets both
        MinJobAge after the job ends, long before a replacement is back), keep the capture on this
        controller, and say in the spec when the job cannot be resubmitted as it was."""
        capture = self.slurm.capture(spec.job_id)
        if capture is None:
            return spec.model_copy(update={"unresumable": "slurmctld no longer knows the job: there is nothing to resubmit it with"})
        self.captures.put(capture)
        return spec.model_copy(
            update={
                "unresumable": capture.unresumable[:512] if capture.unresumable else None,
                # The owner's own opt-in to progress monitoring: only this makes a hang verdict actionable.
                "reports_progress": bool(capture.environment.get(PROGRESS_TABLE_ENV)),
            }
        )

    def resubmit(self, command: ResubmitJob, incident_id: str) -> ResubmitResult:
        """Submit the captured job again from ``checkpoint`` (at ``nodes``, when given), once: the old
        job is cancelled first, and its copy submitted only once slurmctld says it ended.

        A grow-back (``require_free_nodes``) stops only a copy we made (a shrunk one), and only when that
        many nodes can take the new copy at once: the copy's own and the free ones of its partition.
        With fewer, nothing is touched and the answer says so (``declined``): the shrunk copy trains on."""
        job_id = command.job_id
        existing = self._submitted_before(command, incident_id)
        if existing is not None:
            return existing
        capture, stopped_here = self._capture_to_resubmit(command, incident_id)
        current = self.slurm.job(job_id)
        unsizable = capture.options.resize_problem(command.nodes) if command.nodes is not None else None
        if unsizable is not None and command.require_free_nodes is not None:
            return ResubmitResult(old_job_id=job_id, new_job_id=None, declined=f"not resized: {unsizable}"[:300])
        if unsizable is not None:
            # A shrink the job's own options forbid: it is submitted as it ran (it waits for its nodes, as
            # a rigid job does), and the answer's size (none) tells the workflow it did not shrink.
            command = command.model_copy(update={"nodes": None, "data_parallel": None})
        if command.require_free_nodes is not None:
            declined = self._too_few_to_grow(job_id, current, command, stopped_here=stopped_here, constraint=capture.options.constraint)
            if declined is not None:
                ended = current is None or current.state not in STILL_ALIVE
                return ResubmitResult(old_job_id=job_id, new_job_id=None, declined=declined, copy_ended=ended)
        if current is not None and current.state in RESTARTED_BY_SLURM:
            # Slurm requeued it after the node failure: it is restarting already. A second copy
            # would train twice on the same data and race it for checkpoints.
            return ResubmitResult(old_job_id=job_id, new_job_id=job_id, already_submitted=True, restarted_by_slurm=True)
        cancelled = False
        if current is not None and current.state in STILL_ALIVE:
            # Still holding nodes we replaced (or hung on them): never two copies of a training run,
            # so nothing is submitted until slurmctld says the old one ended.
            if command.require_free_nodes is not None:
                self.captures.put(capture.model_copy(update={"stopped_for": incident_id}))  # before the cancel: what a retry trusts
            self.slurm.cancel(job_id)
            cancelled = True
            self._wait_until_stopped(job_id)
        new_id = self.slurm.submit_as_owner(
            # A copy's own capture carries the resume variables it was given: this command's replace them.
            capture.model_copy(update={"environment": {k: v for k, v in capture.environment.items() if k not in RESUME_ENV}}),
            SubmitAs(
                comment=f"{RESUBMISSION_MARK}{job_id} incident={incident_id}",
                extra_environment=_resume_environment(command),
                exclude_nodes=tuple(command.exclude_nodes),
                nodes=command.nodes,
            ),
        )
        return ResubmitResult(
            old_job_id=job_id, new_job_id=new_id, cancelled_old=cancelled, new_job_state=self._state_of(new_id), nodes=command.nodes
        )

    def _submitted_before(self, command: ResubmitJob, incident_id: str) -> ResubmitResult | None:
        """The answer when a copy of the job is in Slurm already (Slurm keeps our mark in its comment):
        ours, submitted before a crash or a lost answer, or another incident's; None: no copy yet."""
        job_id = command.job_id
        existing = self.slurm.resubmission_of(job_id)
        if existing is None:
            return None
        new_id, by = existing
        if by == incident_id:
            return ResubmitResult(old_job_id=job_id, new_job_id=new_id, new_job_state=self._state_of(new_id), nodes=command.nodes)
        # Another incident's copy is in Slurm (its ledger claim may have been given back): never two copies.
        return ResubmitResult(
            old_job_id=job_id, new_job_id=new_id, already_submitted=True, submitted_by=by, new_job_state=self._state_of(new_id)
        )

    def _capture_to_resubmit(self, command: ResubmitJob, incident_id: str) -> tuple[JobCapture, bool]:
        """The capture to submit the job again from, and whether this incident's grow-back stopped it.
        A grow-back reads the copy as slurmctld has it now (whose copy it is), before a capture kept earlier."""
        job_id = command.job_id
        stopped_here = False
        if command.require_free_nodes is not None:
            kept = self.captures.get(job_id)
            stopped_here = kept is not None and kept.stopped_for == incident_id
            fresh = self.slurm.capture(job_id)
            if fresh is not None:
                fresh = fresh.model_copy(update={"stopped_for": kept.stopped_for if kept is not None else None})
                self.captures.put(fresh)  # a retry after slurmctld forgot the stopped copy still has it
            capture = fresh or kept
        else:
            capture = self.captures.get(job_id) or self.slurm.capture(job_id)
        if capture is None:
            raise JobSpecUnavailable(f"job {job_id} was never captured on this controller and slurmctld no longer knows it")
        if capture.unresumable:
            raise InvalidCommand(f"job {job_id} cannot be resubmitted as it was: {capture.unresumable}")
        if command.require_free_nodes is not None and capture.resubmitted_from is None:
            raise InvalidCommand(f"job {job_id} is no copy of ours (its comment has no {RESUBMISSION_MARK}): a grow-back never stops it")
        return capture, stopped_here

    def _too_few_to_grow(
        self, job_id: str, current: JobSpec | None, command: ResubmitJob, *, stopped_here: bool, constraint: str | None = None
    ) -> str | None:
        """Why a grow-back must not stop the copy now (fewer nodes could take its successor at once than
        it needs), or None. A copy that no longer runs is followed by its successor only when this
        grow-back stopped it (before a crash or a lost answer): one that ended on its own (its training
        done, failed, or stopped by a human) is never started again by a grow-back."""
        if current is None or current.state not in STILL_ALIVE:
            if stopped_here:
                return None
            state = current.state if current is not None else "gone from slurmctld"
            return f"job {job_id} is {state}, and no grow-back of this incident stopped it: not started again"
        needed = command.require_free_nodes or 0
        own = list(current.nodes)
        excluded = set(command.exclude_nodes)  # the successor may not run there: they take nothing
        free = _spare_for(current.partition, {n: f for n, f in self.slurm.free_nodes().items() if n not in excluded}, constraint)
        able = len([n for n in own if n not in excluded]) + free
        if able >= needed:
            return None
        unmatched = (
            f" (its --constraint {constraint!r} is not a plain AND of features: no idle node counted)"
            if constraint_features(constraint) is None
            else ""
        )
        return f"only {able} node(s) could take it at once{unmatched}, {needed} needed: job {job_id} keeps running on {len(own)} node(s)"

    def _wait_until_stopped(self, job_id: str) -> None:
        """Poll the cancelled job's state until slurmctld no longer reports it alive (a job ends
        COMPLETING, for up to KillWait and the epilog), within ``old_job_stop_seconds``; else
        OldJobNotStopped, and nothing is submitted. Bounded by the number of polls as well as the
        clock, so a clock that does not move cannot make it wait forever."""
        started = self.now()
        state = self.slurm.job_state(job_id)
        for _ in range(math.ceil(self.old_job_stop_seconds / self.old_job_poll_seconds)):
            if state not in STILL_ALIVE:
                return
            if (self.now() - started).total_seconds() >= self.old_job_stop_seconds:
                break
            self.sleep(self.old_job_poll_seconds)
            state = self.slurm.job_state(job_id)
        if state not in STILL_ALIVE:
            return
        waited = (self.now() - started).total_seconds()
        raise OldJobNotStopped(
            f"job {job_id} was cancelled and is still {state} after {waited:.0f} s (an unkillable process, or a node that "
            "does not answer): nothing was submitted, so its copy never runs beside it"
        )

    def capture_hang_evidence(self, command: CaptureHangEvidence) -> HangEvidenceResult:
        """``scontrol show job`` and, on each node at once, a stack dump of the job's processes,
        each within ``timeout_seconds``. Read-only. A job that no longer runs has no process to dump:
        each node says so, without a step started into it."""
        job_id = command.job_id
        text = self.slurm.job_text(job_id)
        state = _job_state_in(text) if text is not None else None
        nodes = list(dict.fromkeys(command.nodes))[:MAX_EVIDENCE_NODES]
        if state not in STILL_ALIVE:
            why = "slurmctld no longer knows it" if text is None else f"it is {state or 'in no state scontrol names'}"
            dumps = [StackDump("no_process", f"job {job_id} has no process to dump: {why}") for _ in nodes]
        elif self.parallel_checks and len(nodes) > 1:
            with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
                dumps = list(pool.map(lambda node: self.slurm.dump_stacks(job_id, node, command.timeout_seconds), nodes))
        else:
            dumps = [self.slurm.dump_stacks(job_id, node, command.timeout_seconds) for node in nodes]
        stacks = [
            NodeStacks(
                node=node,
                outcome=dump.outcome,
                # Redacted before it is cut (a cut first could keep a secret's tail) and before it leaves the node.
                text=redact_within(dump.text, NODE_EVIDENCE_BYTES, "end"),
                # Signed over the whole dump, not the kept end: every thread counts.
                signature=stack_signature(dump.text) if dump.outcome == "captured" else None,
            )
            for node, dump in zip(nodes, dumps, strict=True)
        ]
        return HangEvidenceResult(
            job_id=job_id,
            job_state=state[:32] if state else None,
            job_text=redact_within(text or "", JOB_TEXT_BYTES, "start"),
            nodes=stacks,
            tool_absent=any(s.outcome == "tool_absent" for s in stacks),
        )

    def _state_of(self, job_id: str) -> str | None:
        """A copy's state as squeue shows it now (PENDING, RUNNING...), for the human's message; None
        when Slurm cannot say: the submission happened, and that must not fail for a read."""
        try:
            state = self.slurm.job_state(job_id)
        except Exception:  # anything: the copy was submitted, and its answer must say so
            log.warning("could not read the state of job %s after submitting it", job_id, exc_info=True)
            return None
        return state[:32] if state else None


# The agent's handler per command type (models/command_dispatch.py): the common ones, and Slurm's requeue.
HANDLERS = orchestrator_handlers(
    CommandExecutor, "by the Slurm controller agent", requeue_job=lambda agent, command, _: agent.requeue(command)
)


def _spare_for(partition: str | None, free: Mapping[str, FreeNode], constraint: str | None = None) -> int:
    """How many of the ``free`` nodes could take the job: in its partition (any of them, for a job
    that names several; any node, for one that names none) and with every feature its ``--constraint``
    requires. A constraint the agent cannot evaluate counts none: short rather than long, so a
    grow-back never stops a copy whose successor would wait for nodes that do not fit it."""
    required = constraint_features(constraint)
    if required is None:
        return 0
    wanted = set(partition.split(",")) if partition else None
    return sum(1 for node in free.values() if (wanted is None or wanted & set(node.partitions)) and required <= node.features)


def _resume_environment(command: ResubmitJob) -> dict[str, str]:
    """What the copy finds in its environment: where to resume from and, for a resize, at which size."""
    environment = {RESUME_FROM_ENV: command.checkpoint.uri, RESUME_STEP_ENV: str(command.checkpoint.step)}
    if command.nodes is not None:
        environment[RESUME_NODES_ENV] = str(command.nodes)
    if command.data_parallel is not None:
        environment[RESUME_DATA_PARALLEL_ENV] = str(command.data_parallel)
    return environment


def _slurmctld(version: str) -> str:
    return f"slurmctld (Slurm {version})" if version else "slurmctld"


def _job_state_in(scontrol_text: str) -> str | None:
    """JobState= of ``scontrol show job`` (its first: a job's own line comes before anything free-form)."""
    found = _JOB_STATE_FIELD.search(scontrol_text)
    return found[1] if found else None
