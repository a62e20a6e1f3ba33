"""slurmctld's view of the cluster (nodes with state and drain reason, jobs with their nodes and
state) behind the agent's ``Slurm`` port, and what a drill does to it (a job hangs, fails, is slow to stop)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_recovery.errors import InvalidCommand, NodeNotFound
from hyperpod_recovery.models.commands import (
    JobSpec,
    NodeBoot,
    RunningJob,
    copy_mark_in_comment,
    job_display_name,
    resume_choice_in_comment,
)
from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from hyperpod_recovery_agent.capture import JobCapture, SubmitAs, resubmitted_from, user_comment
from hyperpod_recovery_agent.elastic import elastic_opt_in
from hyperpod_recovery_agent.sbatch_options import SbatchOptions
from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, FreeNode, NodeState, SlurmCommandFailed, StackDump
from sandbox.slurm.records import ALL_REDUCE_STACK, OWNER, PARTITION, SlurmJob, SlurmNode, Submission


class SimulatedSlurm:
    """slurmctld's state, behind the same port SlurmCli gives the executor."""

    def __init__(
        self, host_view: Callable[[str], tuple[datetime | None, bool]] | None = None, now: Callable[[], datetime] | None = None
    ) -> None:
        self.nodes: dict[str, SlurmNode] = {}
        self.now = now  # the drill's virtual clock, for when a pending job starts
        self.jobs: dict[str, SlurmJob] = {}
        self.submissions: list[Submission] = []
        # What slurmd on each host tells slurmctld (boot time, responding): the HyperPod double's
        # model of the hosts in a drill (HyperPodDouble.slurm_view), and since when it answers.
        self.host_view = host_view
        self.host_up_since: Callable[[str], datetime | None] | None = None
        self.host_unhealthy: Callable[[str], bool] | None = None  # the host fails a GPU check
        self.reserved: dict[str, str] = {}  # node -> reservation (root only: no user job starts there)
        self.sbatch_refuses: dict[str, str] = {}  # job id -> what sbatch prints when it refuses to submit it again
        self.py_spy_installed = True  # False: the compute nodes have no py-spy (the evidence says tool_absent)

    def add_node(self, name: str) -> None:
        self.nodes[name] = SlurmNode(name)

    def register_node(self, name: str) -> None:
        """A new host's slurmd registered (a replacement under a new hostname): slurmctld's next
        scheduling pass may start a pending job on it."""
        self.add_node(name)
        self.schedule()

    def add_job(self, job: SlurmJob) -> None:
        self.jobs[job.job_id] = job
        for name in job.nodes:
            self.nodes[name].state = "allocated"

    def drained_nodes(self) -> dict[str, str]:
        return {n.name: n.reason for n in self.nodes.values() if n.drained}

    # --- the agent's Slurm port -----------------------------------------------------------
    def node_states(self, nodes: Iterable[str]) -> dict[str, NodeState]:
        names = list(nodes)
        unknown = [n for n in names if n not in self.nodes]
        if unknown:
            raise NodeNotFound(f"unknown to slurmctld: {', '.join(unknown)}")
        return {n: NodeState(n, self.nodes[n].state, ("DRAIN",) if self.nodes[n].drained else (), self.nodes[n].reason) for n in names}

    def all_node_states(self) -> dict[str, NodeState]:
        return self.node_states(self.nodes)

    def free_nodes(self) -> dict[str, FreeNode]:
        """As sinfo shows them: idle (no job, not down), not drained, responding, not reserved; all in the one partition, no features."""
        self._settle()
        busy = {name for job in self.jobs.values() if job.state in ("RUNNING", "COMPLETING") for name in job.nodes}
        return {
            name: FreeNode((PARTITION,))
            for name, node in self.nodes.items()
            if node.state == "idle" and not node.drained and name not in busy and name not in self.reserved and self._responding(name)
        }

    def boot_times(self, nodes: Iterable[str]) -> list[NodeBoot]:
        """As ``scontrol show node`` reports them: BootTime, and State with its flags."""
        boots = []
        for name in nodes:
            node = self.nodes.get(name)
            if node is None:
                boots.append(NodeBoot(name=name))
                continue
            boot, responding = self.host_view(name) if self.host_view is not None else (node.boot_time, True)
            state = node.state.upper() + ("+DRAIN" if node.drained else "") + ("" if responding else "+NOT_RESPONDING")
            boots.append(NodeBoot(name=name, boot_time=boot, state=state))
        return boots

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        for name in nodes:
            self.nodes[name].drained, self.nodes[name].reason = True, " ".join(reason.split())

    def schedule(self) -> None:
        """slurmctld's scheduler, as far as a drill needs it: a pending resubmission starts as soon as
        enough nodes are free (not drained, not down, not running another job), on its old nodes
        first, then on any other (spares). Pending jobs are tried in submission order, and each that fits
        starts (a later, smaller job may start before a larger one that does not fit yet, as Slurm's
        backfill would let it).

        slurmctld schedules all the time; the drill calls this at each of its moments (and after
        each change), and a job that could start earlier, on nodes free since then, is given that
        start: the latest of its submission and its nodes' becoming free and answering."""
        now = self.now() if self.now is not None else None
        self._settle()
        busy = {name for job in self.jobs.values() if job.state in ("RUNNING", "COMPLETING") for name in job.nodes}
        for job in sorted(self.jobs.values(), key=lambda j: int(j.job_id)):
            if job.state != "PENDING" or not job.node_count or job.nodes:
                continue
            excluded = set(job.excluded)
            free = [
                name
                for name, node in self.nodes.items()
                if not node.drained and node.state != "down" and name not in busy and name not in excluded and name not in self.reserved
            ]
            if len(free) < job.node_count:
                continue  # (too few even before asking which answer: a job waiting for its replacement)
            free_set, preferred = set(free), set(job.preferred)  # (sets: a 2,048-node job's lists are long)
            # The first node_count that answer, preferred first: slurmd is asked only as far as needed
            # (the same nodes as asking every one: the sandbox's speed, issue 50's fleet runs).
            ordered = [n for n in job.preferred if n in free_set] + sorted(n for n in free if n not in preferred)
            chosen = list(itertools.islice((n for n in ordered if self._responding(n)), job.node_count))
            if len(chosen) < job.node_count:
                continue
            job.nodes, job.state = chosen, "RUNNING"
            job.started_at = self._could_start(job, now) if now is not None else None
            busy.update(job.nodes)
            for name in job.nodes:
                self.nodes[name].state = "allocated"

    def _could_start(self, job: SlurmJob, now: datetime) -> datetime:
        moments = [job.submitted_at] + [self.nodes[name].free_since for name in job.nodes]
        moments += [self.host_up_since(name) for name in job.nodes] if self.host_up_since is not None else []
        return min(now, max((m for m in moments if m is not None), default=now))

    def _freed(self, name: str, at: datetime | None = None) -> None:
        self.nodes[name].free_since = at or (self.now() if self.now is not None else None)

    def _settle(self) -> None:
        """Cancelled jobs whose KillWait has passed end (CANCELLED), and their nodes are free from then."""
        now = self.now() if self.now is not None else None
        for job in self.jobs.values():
            if job.state == "COMPLETING" and job.completing_until is not None and now is not None and job.completing_until <= now:
                job.state, job.ended_at = "CANCELLED", job.completing_until
                for name in job.nodes:
                    if self.nodes[name].state == "allocated":
                        self.nodes[name].state = "idle"
                    self._freed(name, job.completing_until)

    def _responding(self, name: str) -> bool:
        """slurmd on the host answers slurmctld (the HyperPod double's view, when there is one)."""
        return self.host_view is None or self.host_view(name)[1]

    # --- the health gate: a root-only reservation, and the check as a step in it ---------------
    def reserve(self, name: str, node: str) -> None:
        self.reserved[node] = name

    def has_reservation(self, name: str) -> bool:
        return name in self.reserved.values()

    def cancel_reserved(self, name: str) -> None:
        return None  # the simulated check never outlives its step

    def unreserve(self, name: str) -> None:
        for node in [n for n, r in self.reserved.items() if r == name]:
            del self.reserved[node]
        self.schedule()

    def run_check(self, name: str, node: str, argv: Sequence[str], timeout_seconds: int) -> tuple[int | None, str]:
        """The check's answer on this host: the double says whether its GPUs are sick (ASSUMPTION:
        a sick replacement fails any GPU check; a healthy one passes it)."""
        if self.reserved.get(node) != name:
            raise InvalidCommand(f"srun: node {node} is not in reservation {name}")
        if self.host_unhealthy is not None and self.host_unhealthy(node):
            return 1, "Unable to determine the device handle for GPU0000:9A:00.0: Unknown Error (GPU has fallen off the bus)"
        return 0, "0, NVIDIA H100 80GB HBM3, 00000000:53:00.0"

    def resume(self, nodes: Sequence[str]) -> None:
        for name in nodes:
            node = self.nodes[name]
            node.drained, node.reason = False, ""
            if node.state == "down":  # a replaced node's new instance registered: resume makes it usable
                node.state = "idle"
            self._freed(name)
        self.schedule()

    def jobs_on(self, nodes: Iterable[str]) -> list[JobSpec]:
        self._settle()
        wanted = set(self.node_states(nodes))
        return [
            self._spec(job) for job in self.jobs.values() if job.state in ("RUNNING", "COMPLETING", "NODE_FAIL") and wanted & set(job.nodes)
        ]

    def node_count(self) -> int:
        return len(self.nodes)

    def version(self) -> str:
        return ""  # a simulation is no Slurm release: the agent's check names none

    def running_job_nodes(self) -> dict[str, list[str]]:
        return {job.job_id: sorted(job.nodes) for job in self.jobs.values() if job.state == "RUNNING"}

    def running_jobs(self, limit: int) -> tuple[list[RunningJob], int]:
        running = [job for job in self.jobs.values() if job.state == "RUNNING"]
        listed = [
            RunningJob(job_id=job.job_id, name=job_display_name(job.name), checkpoint_uri=job.checkpoint_uri) for job in running[:limit]
        ]
        return listed, max(0, len(running) - limit)

    def job(self, job_id: str) -> JobSpec | None:
        self._settle()
        job = self.jobs.get(job_id)
        return self._spec(job) if job else None

    def job_state(self, job_id: str) -> str | None:
        self._settle()
        job = self.jobs.get(job_id)
        return job.state if job is not None else None

    def job_text(self, job_id: str) -> str | None:
        """``scontrol show job`` of a simulated job (the fields a human reads first)."""
        self._settle()
        job = self.jobs.get(job_id)
        if job is None:
            return None
        nodes, count = ",".join(job.nodes) or "(null)", max(1, len(job.nodes) or job.node_count)
        return (
            f"JobId={job.job_id} JobName={job.name}\n"
            f"   UserId={OWNER['user']}({OWNER['uid']}) GroupId={OWNER['group']}({OWNER['gid']}) MCS_label=N/A\n"
            f"   JobState={job.state} Reason=None Dependency=(null)\n"
            f"   Partition=gpu AllocNode:Sid=ip-10-1-0-254:4242\n"
            f"   NodeList={nodes}\n"
            f"   NumNodes={count} NumCPUs={96 * count} NumTasks={count}\n"
            f"   Command=/fsx/{job.name}/train.sbatch\n"
            f"   WorkDir=/fsx/{job.name}\n"
            f"   Comment={job.comment or '(null)'}\n"
        )

    def dump_stacks(self, job_id: str, node: str, timeout_seconds: float) -> StackDump:
        """What node_dump.py answers through ``srun --overlap`` on a simulated node: the job's rank
        there waits in the collective (ALL_REDUCE_STACK) unless hang_job named the node."""
        self._settle()
        job = self.jobs.get(job_id)
        if job is None or job.state not in ("RUNNING", "COMPLETING"):
            return StackDump("failed", f"srun exited 1: srun: error: Unable to create step for job {job_id}: Invalid job id specified")
        if node not in job.nodes:
            return StackDump("no_process", f"job {job_id} has no process on {node}")
        if not self._responding(node):
            return StackDump("failed", f"srun exited 1: srun: error: Task launch for StepId={job_id}.0 failed on node {node}: "
                                       "Communication connection failure")  # fmt: skip
        rank = job.nodes.index(node)
        pid = 4100 + 17 * rank
        if not self.py_spy_installed:
            return StackDump(
                "tool_absent",
                f"py-spy is not installed on {node} (not on PATH): its stacks were not dumped; job {job_id} runs python3.10({pid})",
            )
        stack = job.odd_stacks.get(node, ALL_REDUCE_STACK)
        if stack is None:
            return StackDump("timed_out", f"py-spy dump --pid {pid} did not answer in {timeout_seconds:g} s")
        return StackDump("captured", stack.replace("{pid}", str(pid)).replace("{thread}", str(pid + 61)))

    def resubmission_of(self, job_id: str) -> tuple[str, str] | None:
        prefix = f"{RESUBMISSION_MARK}{job_id} incident="
        found = next((j for j in self.jobs.values() if j.comment.startswith(prefix)), None)
        return None if found is None else (found.job_id, found.comment[len(prefix) :].split(" ", 1)[0])

    def capture(self, job_id: str) -> JobCapture | None:
        """What the real agent captures (capture.py), for a simulated job owned by ``trainer``."""
        job = self.jobs.get(job_id)
        if job is None:
            return None
        unresumable = None if job.batch else "it has no batch script: an salloc or srun allocation cannot be submitted again"
        return JobCapture(
            job_id=job.job_id,
            name=job.name,
            state=job.state,
            work_dir=f"/fsx/{job.name}",
            script=job.script if job.batch else None,
            environment={**job.environment, "SLURM_SUBMIT_DIR": f"/fsx/{job.name}"},
            comment=user_comment(job.comment),
            resubmitted_from=resubmitted_from(job.comment),
            options=SbatchOptions(partition=PARTITION, nodes=str(max(1, len(job.nodes) or job.node_count))),
            unresumable=unresumable,
            **OWNER,  # type: ignore[arg-type]
        )

    def submit_as_owner(self, capture: JobCapture, how: SubmitAs) -> str:
        if capture.unresumable or capture.script is None:
            raise InvalidCommand(f"job {capture.job_id} cannot be resubmitted as it was: {capture.unresumable or 'no batch script'}")
        old = self.jobs[capture.job_id]
        root = old
        while root.resubmission_of is not None:
            root = self.jobs[root.resubmission_of]
        refusal = self.sbatch_refuses.get(root.job_id)
        if refusal is not None:
            raise SlurmCommandFailed(["sbatch", "--parsable", "--export=ALL"], 1, refusal)
        new_id = str(max(int(j) for j in self.jobs) + 1)
        self.jobs[new_id] = SlurmJob(
            job_id=new_id,
            name=capture.name,
            nodes=[],
            state="PENDING",
            node_count=how.nodes or old.node_count or len(old.nodes),
            preferred=list(old.nodes),
            excluded=list(how.exclude_nodes),
            checkpoint_uri=old.checkpoint_uri,
            auto_resume=old.auto_resume,
            environment={**capture.environment, **how.extra_environment},
            comment=" ".join(part for part in (how.comment, capture.comment) if part),
            resubmission_of=old.job_id,
            script_bytes=old.script_bytes,
            node_range=old.node_range,
            submitted_by=capture.user,
            submitted_at=self.now() if self.now is not None else None,
        )
        self.schedule()
        incident = how.comment.rsplit("incident=", 1)[-1]
        resume = how.extra_environment
        self.submissions.append(Submission(incident, old.job_id, new_id, resume[RESUME_FROM_ENV], int(resume[RESUME_STEP_ENV])))
        return new_id

    # --- what a drill does to Slurm ------------------------------------------------------------
    def current_incarnation(self, job_id: str) -> SlurmJob:
        """The newest resubmission of ``job_id`` (or the job itself): what a job_failed fault hits."""
        current = self.jobs[job_id]
        while True:
            newer = [j for j in self.jobs.values() if j.resubmission_of == current.job_id]
            if not newer:
                return current
            current = max(newer, key=lambda j: int(j.job_id))

    def hang_job(self, job_id: str, odd_nodes: Mapping[str, str | None] | None = None) -> None:
        """The job hangs: its ranks wait in a collective (each node dumps ALL_REDUCE_STACK) except on
        ``odd_nodes``, whose dump is the text given (``{pid}`` filled in; DATA_LOADER_STACK is one),
        or, for None, a py-spy that never answers (outcome timed_out). Slurm still reports it RUNNING."""
        job = self.jobs[job_id]
        unknown = [node for node in odd_nodes or {} if node not in job.nodes]
        if unknown:
            raise ValueError(f"hang_job: {unknown} are not nodes of job {job_id} ({job.nodes})")
        job.odd_stacks = dict(odd_nodes or {})

    def slow_to_stop(self, job_id: str, seconds: float | None) -> None:
        """After scancel, the job stays COMPLETING for ``seconds`` of the drill's clock (KillWait, a slow
        epilog), or for ever with None (a process SIGKILL does not end)."""
        if seconds is not None and self.now is None:
            raise ValueError("slow_to_stop: a job that ends later needs the simulation's clock (now=)")
        self.jobs[job_id].kill_wait_seconds = seconds

    def fail_job(self, job_id: str, state: str, down_nodes: Sequence[str], requeued: bool) -> SlurmJob:
        """The job ends ``state``; ``down_nodes`` stop responding. A requeued job is pending again."""
        job = self.jobs[job_id]
        for name in job.nodes:
            node = self.nodes[name]
            if name in down_nodes:
                node.state = "down"
                if not node.drained:
                    node.reason = "Not responding"
            elif node.state == "allocated":
                node.state = "idle"
            self._freed(name)
        job.state = "PENDING" if requeued else state
        if not requeued:
            job.ended_at = self.now() if self.now is not None else None
        self.schedule()  # its nodes are free: a pending resubmission may start on them
        return job

    def cancel(self, job_id: str) -> None:
        self._settle()
        job = self.jobs[job_id]
        if job.state == "RUNNING" and job.kill_wait_seconds != 0:
            # Its processes are being ended: COMPLETING, on its nodes still, until KillWait has passed (or never).
            job.state = "COMPLETING"
            if job.kill_wait_seconds is not None and self.now is not None:
                job.completing_until = self.now() + timedelta(seconds=job.kill_wait_seconds)
            return
        if job.state == "COMPLETING" and job.kill_wait_seconds != 0:
            return  # scancel again: "already completing or completed"; it ends when its processes do
        if job.state in ("RUNNING", "COMPLETING", "PENDING"):
            job.state = "CANCELLED"
            job.ended_at = self.now() if self.now is not None else None
            for name in job.nodes:
                if self.nodes[name].state == "allocated":
                    self.nodes[name].state = "idle"
                self._freed(name)

    def requeue(self, job_id: str) -> bool:
        job = self.jobs.get(job_id)
        if job is None:
            raise InvalidCommand(f"job_id: {job_id} is unknown to slurmctld")
        if job.state == "PENDING":
            return False
        job.state = "PENDING"
        return True

    def second_copies(self) -> list[dict[str, Any]]:
        """Each time two jobs of one lineage (a job and its resubmissions) were live at once, pending
        or running: two copies of one training run. What the pipeline exists to prevent; 0 in every drill."""

        def root(job: SlurmJob) -> SlurmJob:
            while job.resubmission_of is not None:
                job = self.jobs[job.resubmission_of]
            return job

        lineages: dict[str, list[SlurmJob]] = {}
        for job in self.jobs.values():
            lineages.setdefault(root(job).job_id, []).append(job)
        never = datetime.max.replace(tzinfo=UTC)
        found = []
        for first, jobs in lineages.items():
            spans = sorted((j.submitted_at or datetime.min.replace(tzinfo=UTC), j.ended_at or never, j.job_id) for j in jobs)
            for (_, end_a, a), (start_b, _, b) in itertools.pairwise(spans):
                if start_b < end_a:
                    found.append({"lineage": first, "copies": [a, b], "at": start_b})
        return found

    def _spec(self, job: SlurmJob) -> JobSpec:
        num_nodes = max(1, len(job.nodes) or job.node_count)
        elastic, elastic_problem = elastic_opt_in(job.comment, job.script if job.batch else None, num_nodes)
        return JobSpec(
            job_id=job.job_id,
            name=job_display_name(job.name),
            user=OWNER["user"],  # type: ignore[arg-type]
            partition=PARTITION,
            num_nodes=num_nodes,
            nodes=job.nodes,
            state=job.state,
            checkpoint_uri=job.checkpoint_uri,
            auto_resume=job.auto_resume,
            resume=resume_choice_in_comment(job.comment),
            elastic=elastic,
            elastic_problem=elastic_problem,
            copy_of=copy_mark_in_comment(job.comment),
        )
