"""The Slurm side of the agent: one method per thing the pipeline needs from slurmctld.

Every call is an argument list run without a shell, node names and job ids are validated against
the protocol's patterns before they reach a command line, and outputs are read from Slurm's JSON
rather than scraped from text, through slurm_json.py alone (Slurm 22.05 to 25.05: its node dump is
``sinfo --json`` up to 22.05 and ``scontrol show nodes --json`` from 23.02, so the version is read
once, from ``scontrol --version``). A job is resubmitted by its owner's own sbatch
(``submit_as_owner``), never by root's.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple, get_args

from pydantic import ValidationError

from hyperpod_recovery.errors import InvalidCommand, NodeNotFound
from hyperpod_recovery.models.commands import (
    OWNER_TAG_PREFIX,
    EvidenceOutcome,
    JobSpec,
    NodeBoot,
    RunningJob,
    copy_mark_in_comment,
    job_display_name,
    resume_choice_in_comment,
)
from hyperpod_recovery_agent import node_dump
from hyperpod_recovery_agent.capture import JobCapture, build_capture, parse_environment, refusal
from hyperpod_recovery_agent.elastic import elastic_opt_in
from hyperpod_recovery_agent.owner_submit import OwnerSubmission
from hyperpod_recovery_agent.sbatch_options import Unresumable
from hyperpod_recovery_agent.slurm_json import SlurmJob, SlurmNode, dumps_nodes_with_sinfo, read_jobs, read_nodes

# (re-exported: the agent's other modules, the sandbox and the tests import these from here)
from hyperpod_recovery_agent.slurm_run import DEFAULT_CHECKPOINT_ENV as DEFAULT_CHECKPOINT_ENV
from hyperpod_recovery_agent.slurm_run import NODE_NAME
from hyperpod_recovery_agent.slurm_run import SlurmCommandFailed as SlurmCommandFailed
from hyperpod_recovery_agent.slurm_run import SlurmUnreachable as SlurmUnreachable
from hyperpod_recovery_agent.slurm_run import validate_job_id as validate_job_id
from hyperpod_recovery_agent.slurm_run import validate_nodes as validate_nodes

_S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](?:/[^\s'\"]*)?")
# The job comment that links a resubmission to its original: also the idempotency key Slurm keeps for us.
RESUBMISSION_MARK = f"{OWNER_TAG_PREFIX}:resubmission-of="
MAX_CHECKPOINT_URI = 1024  # JobSpec.checkpoint_uri
# Jobs that hold (or held, until a node failed under them) an allocation on a node.
AFFECTED_JOB_STATES = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "RESIZING", "NODE_FAIL")


# scontrol prints times in the local zone of its process, in the format SLURM_TIME_FORMAT asks for.
_UTC_TIMES = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
# `scontrol show node -o`: one node per line, Key=Value fields separated by spaces. Reason (free text,
# from whoever drained the node: it may contain anything) comes last, so each field is read from its
# first occurrence, which is never inside the reason.
_NODE_FIELD = r"(?:^|\s){}=(\S*)"


def parse_node_boots(text: str) -> list[NodeBoot]:
    """NodeName, BootTime (UTC, as ``boot_times`` asks for it; "None" or unparsable: no boot time)
    and State of each node in ``scontrol show node -o`` output."""
    boots = []
    for line in text.splitlines():
        reason_at = line.find(" Reason=")
        fields = line if reason_at < 0 else line[:reason_at]
        name = re.search(_NODE_FIELD.format("NodeName"), fields)
        if name is None or not NODE_NAME.fullmatch(name[1]):
            continue
        boot = re.search(_NODE_FIELD.format("BootTime"), fields)
        state = re.search(_NODE_FIELD.format("State"), fields)
        boots.append(NodeBoot(name=name[1], boot_time=_utc(boot[1]) if boot else None, state=state[1][:64] if state else ""))
    return boots


# Node state flags that leave an idle node free to take a job.
_FREE_NODE_FLAGS = frozenset({"CLOUD"})
# A plain feature name, as a node's features and a job's --constraint write it.
_FEATURE = re.compile(r"^[A-Za-z0-9_.:+=-]+$")


class FreeNode(NamedTuple):
    """A node that could take a job at once: its partitions, and its active features (what a job's
    ``--constraint`` is matched against)."""

    partitions: tuple[str, ...]
    features: frozenset[str] = frozenset()


def constraint_features(constraint: str | None) -> frozenset[str] | None:
    """The features a job's ``--constraint`` requires of every node, when it is a plain AND of names
    (``a100&efa``); an empty set without a constraint. None for any other form (OR, matching OR,
    counts, brackets): the agent cannot tell which idle nodes fit, so it counts none of them."""
    if not constraint or not constraint.strip():
        return frozenset()
    names = [name.strip() for name in constraint.split("&")]
    return frozenset(names) if all(_FEATURE.match(name) for name in names) else None


def _free(node: SlurmNode) -> bool:
    """An idle node with no flag that keeps jobs off it."""
    return node.state == "idle" and not set(node.flags) - _FREE_NODE_FLAGS


def _utc(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None  # "None", "Unknown": slurmctld has no boot time for the node


@dataclass(frozen=True)
class StackDump:
    """What one node answered for a hang's stack dump: an EvidenceOutcome and the whole text (the
    dump, or why there is none); the executor cuts it and signs it."""

    outcome: EvidenceOutcome
    text: str


# The program the evidence step runs on each node (node_dump.py, sent as ``python3 -c`` text: nothing
# to install on the nodes beyond py-spy itself).
_NODE_DUMP_PROGRAM = Path(node_dump.__file__).read_text()
_OUTCOMES: frozenset[str] = frozenset(get_args(EvidenceOutcome))
# After the step's deadline, srun has this long to end on SIGTERM (forwarded to our step's task only).
_STEP_STOP_SECONDS = 3


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # idle, allocated, mixed, down, ...
    flags: tuple[str, ...] = ()  # DRAIN, NOT_RESPONDING, ...
    reason: str = ""

    @property
    def drained_or_draining(self) -> bool:
        return "DRAIN" in self.flags or self.state in ("drained", "draining")

    @property
    def drained_by_us(self) -> bool:
        return self.drained_or_draining and self.reason.startswith(OWNER_TAG_PREFIX + ":")


# scontrol's answer about a reservation that does not exist (ESLURM_RESERVATION_INVALID).
_RESERVATION_GONE = "Requested reservation is invalid"
# srun's own errors: the step never started, so the node was not checked (not a failed check).
_STEP_NOT_STARTED = ("srun: error: Unable to allocate resources", "srun: error: Unable to contact slurm controller",
                     "Requested node configuration is not available", "Invalid reservation")  # fmt: skip
# The health check may wait this long for its allocation (the node just resumed) beyond its own deadline.
CHECK_ALLOCATION_SLACK_SECONDS = 30
CHECK_OUTPUT_CHARS = 400


def _reservation(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
        raise InvalidCommand(f"reservation name {name!r} is not one Slurm accepts")
    return name


class SlurmCli(OwnerSubmission):
    """Slurm through its own commands (scontrol, squeue, sinfo, sbatch) as the controller's root."""

    def nodes(self) -> list[SlurmNode]:
        """Every node: ``sinfo --json`` up to 22.05; from 23.02 sinfo groups them, and
        ``scontrol show nodes --json`` lists them."""
        argv = ["sinfo", "--json"] if dumps_nodes_with_sinfo(self._release) else ["scontrol", "show", "nodes", "--json"]
        return self._read(read_nodes, argv)

    def queue(self) -> list[SlurmJob]:
        """Every job slurmctld remembers, ended ones included (23.02+ show only active jobs unless asked
        for all states; 22.05 ignores squeue's filters)."""
        return self._read(read_jobs, ["squeue", "--json", "--states=all"])

    def node_count(self) -> int:
        return len(self.nodes())

    def running_jobs(self, limit: int) -> tuple[list[RunningJob], int]:
        """The first ``limit`` RUNNING jobs with their checkpoint location, and how many more run.

        A check must answer within a minute on a busy cluster: only the jobs it reports are read,
        and only what finds their checkpoints (comment, submission environment, batch script), never
        their hostnames or a whole JobSpec. A job that ends while it is read is left out."""
        running = [job for job in self.queue() if job.state == "RUNNING"]
        listed = [found for job in running[:limit] if (found := self._running_job(job)) is not None]
        return listed, max(0, len(running) - limit)

    def running_job_nodes(self) -> dict[str, list[str]]:
        """Every running job's nodes (one squeue), keyed as its progress reports name the job: its
        id, an array task also as ``<array id>_<task>``, a heterogeneous job's components together
        under the leader's id. Names come from the job's resources; a record without them (or
        with another count than the job's) is expanded by ``scontrol show hostnames``."""
        found: dict[str, set[str]] = {}
        for job in self.queue():
            if (job.base_state or job.state) != "RUNNING":
                continue
            listed = job.allocated_nodes
            if listed is None or (job.node_count is not None and len(listed) != job.node_count):
                listed = tuple(self.hostnames(job.nodes))
            if not listed:
                continue
            names = set(validate_nodes(listed))
            keys = {job.job_id}
            if job.array_job_id and job.array_task_id is not None:  # (0: not an array, as is het_job_id's)
                keys.add(f"{job.array_job_id}_{job.array_task_id}")
            if job.het_job_id:
                keys.add(str(job.het_job_id))
            for key in keys:
                found.setdefault(key, set()).update(names)
        return {key: sorted(names) for key, names in found.items()}

    def _running_job(self, job: SlurmJob) -> RunningJob | None:
        job_id = job.job_id
        try:
            script = self.batch_script(job_id) if job.batch_flag else None
        except SlurmCommandFailed:
            return None  # gone between squeue and scontrol; SlurmUnreachable is the whole check's answer
        uri = self._checkpoint_uri(job.comment, self.submission_environment(job_id), script or "")
        name = job_display_name(job.name or f"job-{job_id}")
        try:
            return RunningJob(job_id=job_id, name=name, checkpoint_uri=uri)
        except ValidationError:  # a location the protocol cannot carry is none, as for a resubmission
            return RunningJob(job_id=job_id, name=name)

    # --- nodes ------------------------------------------------------------------------------
    def node_states(self, nodes: Iterable[str]) -> dict[str, NodeState]:
        """State of each node; NodeNotFound names the ones slurmctld does not know."""
        wanted = validate_nodes(nodes)
        known = self.all_node_states()
        missing = [n for n in wanted if n not in known]
        if missing:
            raise NodeNotFound(f"unknown to slurmctld: {', '.join(missing)}")
        return {n: known[n] for n in wanted}

    def all_node_states(self) -> dict[str, NodeState]:
        """Every node's state, flags and reason (one node dump)."""
        return {node.name: NodeState(node.name, node.state, node.flags, node.reason) for node in self.nodes()}

    def free_nodes(self) -> dict[str, FreeNode]:
        """The nodes that could take a job at once, each with its partitions and features (one node dump):
        idle (no job on it), with no state flag but CLOUD, so never drained or draining, not responding,
        reserved, in maintenance, completing a job, powered down or rebooting. Counted short rather than
        long: a grow-back stops a shrunk job only when enough of these are there."""
        return {node.name: FreeNode(node.partitions, node.features) for node in self.nodes() if _free(node)}

    def boot_times(self, nodes: Iterable[str]) -> list[NodeBoot]:
        """Each node's BootTime and State as slurmctld reports them (``scontrol show node -o``, every
        node: one that slurmctld does not know is answered with no boot time and no state, not an error).

        BootTime is the host's boot as slurmd computed it from its uptime when it registered: it
        changes on every boot and on nothing else. scontrol prints it in its own local time with no
        zone, so it runs with TZ=UTC and Slurm's standard time format."""
        wanted = validate_nodes(nodes)
        text = self._run(["scontrol", "show", "node", "-o"], env_overrides=_UTC_TIMES).stdout
        known = {boot.name: boot for boot in parse_node_boots(text)}
        return [known.get(name, NodeBoot(name=name)) for name in wanted]

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        one_line = " ".join(reason.split())  # a health event's reason may span lines; Slurm's may not
        if not one_line:
            raise InvalidCommand("reason: must not be empty")
        self._run(["scontrol", "update", f"NodeName={','.join(validate_nodes(nodes))}", "State=DRAIN", f"Reason={one_line}"])

    def resume(self, nodes: Sequence[str]) -> None:
        self._run(["scontrol", "update", f"NodeName={','.join(validate_nodes(nodes))}", "State=RESUME"])

    # --- the replacement's health gate ----------------------------------------------------
    def reserve(self, name: str, node: str) -> None:
        """A maintenance reservation of ``node`` for root alone, with no end: once its drain is
        lifted the node runs no user's job, only the check run in the reservation, until the gate
        deletes it (an agent that dies mid-gate leaves the node closed, not open). An existing one
        is reused (a retry)."""
        try:
            self._run(["scontrol", "create", "reservation", f"ReservationName={_reservation(name)}",
                       f"Nodes={validate_nodes([node])[0]}", "StartTime=now", "Duration=UNLIMITED",
                       "Users=root", "Flags=MAINT,IGNORE_JOBS"])  # fmt: skip
        except SlurmCommandFailed as exc:
            if "Duplicate reservation name" not in exc.output:
                raise

    def has_reservation(self, name: str) -> bool:
        try:
            self._run(["scontrol", "show", f"ReservationName={_reservation(name)}"])
        except SlurmCommandFailed as exc:
            if _RESERVATION_GONE in exc.output or "not found" in exc.output.lower():
                return False
            raise
        return True

    def cancel_reserved(self, name: str) -> None:
        """Cancel a check still running in the reservation (its srun timed out): Slurm refuses to
        delete a reservation in use."""
        self._run(["scancel", f"--reservation={_reservation(name)}"], ok_codes=(0, 1))

    def unreserve(self, name: str) -> None:
        try:
            self._run(["scontrol", "delete", f"ReservationName={_reservation(name)}"])
        except SlurmCommandFailed as exc:
            if _RESERVATION_GONE not in exc.output and "not found" not in exc.output.lower():
                raise

    def run_check(self, name: str, node: str, argv: Sequence[str], timeout_seconds: int) -> tuple[int | None, str]:
        """``argv`` on ``node`` as a one-task Slurm step in the reservation, within ``timeout_seconds``:
        (exit code, or None when it did not end in time; the end of its output)."""
        minutes = max(1, -(-timeout_seconds // 60))
        step = ["srun", f"--reservation={_reservation(name)}", f"--nodelist={validate_nodes([node])[0]}", "--nodes=1", "--ntasks=1",
                f"--time={minutes}", "--job-name=hyperpod-recovery-health-check", "--", *argv]  # fmt: skip
        try:
            done = self._run(step, ok_codes=tuple(range(-64, 256)), timeout=timeout_seconds + CHECK_ALLOCATION_SLACK_SECONDS)
        except SlurmUnreachable as exc:
            if "timed out" in str(exc):
                return None, str(exc)[-CHECK_OUTPUT_CHARS:]
            raise
        if done.returncode != 0 and any(marker in done.stderr for marker in _STEP_NOT_STARTED):
            # srun's own failure (no allocation, slurmctld away): the check never ran on the node.
            raise SlurmCommandFailed(step, done.returncode, done.stderr.strip()[-CHECK_OUTPUT_CHARS:])
        return done.returncode, " ".join(f"{done.stdout} {done.stderr}".split())[-CHECK_OUTPUT_CHARS:]

    # --- jobs -------------------------------------------------------------------------------
    def jobs_on(self, nodes: Iterable[str]) -> list[JobSpec]:
        """Active jobs with an allocation on any of ``nodes``, with their captured batch script."""
        wanted = set(validate_nodes(nodes))
        # squeue --json in Slurm 22.05 ignores --nodelist/--jobs/--states: filter here.
        jobs = [job for job in self.queue() if job.state in AFFECTED_JOB_STATES]
        return [self._job_spec(job) for job in jobs if wanted & set(self.hostnames(job.nodes))]

    def job(self, job_id: str) -> JobSpec | None:
        """The job if slurmctld still knows it (active or recently finished), else None."""
        record = self.job_record(job_id)
        return self._job_spec(record) if record else None

    def job_record(self, job_id: str) -> SlurmJob | None:
        """squeue's record of one job (state, reason, comment, restart count...), ended or not, or None."""
        try:
            jobs = self._read(read_jobs, ["squeue", "--json", "--states=all", "--jobs", validate_job_id(job_id)])
        except SlurmCommandFailed as exc:
            if "Invalid job id" in exc.output:
                return None
            raise
        return next((job for job in jobs if job.job_id == job_id), None)

    def job_state(self, job_id: str) -> str | None:
        """The job's state as squeue shows it (PENDING, RUNNING...; COMPLETING while its processes are
        being ended, as ``squeue -o %T`` says it), None when slurmctld forgot it."""
        record = self.job_record(job_id)
        return record.state if record is not None else None

    def job_text(self, job_id: str) -> str | None:
        """``scontrol show job`` as a human reads it, None when slurmctld no longer knows the job."""
        try:
            return self._run(["scontrol", "show", "job", validate_job_id(job_id)]).stdout
        except SlurmCommandFailed as exc:
            if "Invalid job id" in exc.output:
                return None
            raise

    def dump_stacks(self, job_id: str, node: str, timeout_seconds: float) -> StackDump:
        """The Python stacks of the job's processes on ``node``: node_dump.py run as a one-task step
        of the job itself (``srun --overlap --jobid``: it shares the job's CPUs, memory and GPUs, so a
        job holding all of them still lets it start; run by root, so py-spy may ptrace the job's
        processes), within ``timeout_seconds``. Read-only: the only process ever signalled is this
        step's own srun, when it runs past the deadline."""
        # The node's own deadline comes first, so that it answers with what it has before srun is stopped.
        on_node = max(1.0, timeout_seconds - max(2.0, timeout_seconds / 5))
        step = [
            "srun", "--overlap", f"--jobid={validate_job_id(job_id)}", f"--nodelist={validate_nodes([node])[0]}", "--nodes=1",
            "--ntasks=1", f"--time={max(1, math.ceil(timeout_seconds / 60))}", "--job-name=hyperpod-recovery-hang-evidence",
            "--", "python3", "-c", _NODE_DUMP_PROGRAM, job_id, self.py_spy, self._program("scontrol"), f"{on_node:g}",
        ]  # fmt: skip
        program = self._program("srun")
        try:
            process = subprocess.Popen(  # noqa: S603 - an argument list, never a shell; inputs validated above
                [program, *step[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self._environment(dict([node_dump.EVIDENCE_MARK.split("=", 1)])),
            )
        except OSError as exc:
            return StackDump("failed", f"srun could not run on the controller: {exc}")
        try:
            out, err = process.communicate(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                out, err = process.communicate(timeout=_STEP_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
            said = " ".join(err.split())[-CHECK_OUTPUT_CHARS:]
            late = f"the evidence step on {node} did not end in {timeout_seconds:g} s"
            return StackDump("timed_out", f"{late}: {said}" if said else late)
        answer = _node_answer(out)
        if process.returncode != 0 or answer is None:
            said = " ".join((err or out).split())[-CHECK_OUTPUT_CHARS:] or "no output"
            return StackDump("failed", f"srun exited {process.returncode}: {said}")
        return answer

    def job_spec_of(self, record: SlurmJob) -> JobSpec:
        """The spec of a job from its squeue record (batch script and checkpoint location included)."""
        return self._job_spec(record)

    def resubmission_of(self, job_id: str) -> tuple[str, str] | None:
        """The copy of ``job_id`` we already submitted, whichever incident did (its comment starts with
        our mark, then the owner's own comment): (new job id, incident), or None."""
        prefix = f"{RESUBMISSION_MARK}{validate_job_id(job_id)} incident="
        for job in self.queue():
            if job.comment.startswith(prefix):
                return job.job_id, job.comment[len(prefix) :].split(" ", 1)[0]
        return None

    def batch_script(self, job_id: str) -> str | None:
        try:
            return self._run(["scontrol", "write", "batch_script", validate_job_id(job_id), "-"]).stdout
        except SlurmCommandFailed as exc:
            if "No batch script" in exc.output or "Invalid job id" in exc.output or "not batch" in exc.output:
                return None
            raise

    # --- resubmission as the job's owner ----------------------------------------------------------
    def capture(self, job_id: str) -> JobCapture | None:
        """Everything needed to resubmit the job as it was (see capture.py), or None when slurmctld no
        longer knows it. Take it while the job is known: its script and environment go with it."""
        record = self.job_record(job_id)
        return self.capture_of(record) if record else None

    def capture_of(self, record: SlurmJob) -> JobCapture | None:
        """The capture of a job from its squeue record (``queue()``/``job_record()``)."""
        job_id = validate_job_id(record.job_id)
        if refusal(record):
            return build_capture(record, script=None, environment_raw=None, scontrol_text="")
        try:
            text = self._run(["scontrol", "show", "job", job_id]).stdout
        except SlurmCommandFailed as exc:
            if "Invalid job id" in exc.output:
                return None
            raise
        return build_capture(record, script=self.batch_script(job_id), environment_raw=self._environment_file(job_id), scontrol_text=text)

    def cancel(self, job_id: str) -> None:
        """scancel; a job that already ended is left as is (scancel says so and exits non-zero)."""
        try:
            self._run(["scancel", validate_job_id(job_id)])
        except SlurmCommandFailed as exc:
            if "already completing or completed" not in exc.output and "Invalid job id" not in exc.output:
                raise

    def requeue(self, job_id: str) -> bool:
        """Requeue a running job; False when it is already pending (Slurm: "Job is pending execution")."""
        try:
            self._run(["scontrol", "requeue", validate_job_id(job_id)])
            return True
        except SlurmCommandFailed as exc:
            if "pending execution" in exc.output:
                return False
            raise

    def _job_spec(self, job: SlurmJob) -> JobSpec:
        job_id = job.job_id
        script = self.batch_script(job_id) if job.batch_flag else None
        environment = self.submission_environment(job_id)
        num_nodes = max(1, job.node_count or 1)
        elastic, elastic_problem = elastic_opt_in(job.comment, script, num_nodes)
        return JobSpec(
            job_id=job_id,
            name=job_display_name(job.name or f"job-{job_id}"),  # Slurm allows 1024 bytes; the capture keeps all
            user=job.user_name or None,
            partition=job.partition or None,
            num_nodes=num_nodes,
            nodes=self.hostnames(job.nodes),
            state=job.state,
            checkpoint_uri=self._checkpoint_uri(job.comment, environment, script or ""),
            auto_resume="--auto-resume=1" in (script or ""),
            resume=resume_choice_in_comment(job.comment),
            elastic=elastic,
            elastic_problem=elastic_problem,
            copy_of=copy_mark_in_comment(job.comment),
        )

    def hostnames(self, nodelist: str) -> list[str]:
        """``ip-10-1-0-[1-2]`` -> ``["ip-10-1-0-1", "ip-10-1-0-2"]`` (scontrol show hostnames)."""
        if not nodelist or nodelist == "(null)":
            return []
        if not re.fullmatch(r"[A-Za-z0-9._,\[\]-]+", nodelist):
            raise InvalidCommand(f"nodelist {nodelist!r} from slurmctld is not a node list")
        return self._run(["scontrol", "show", "hostnames", nodelist]).stdout.split()

    def submission_environment(self, job_id: str) -> dict[str, str]:
        """The job's submission environment (the ``checkpoint_env`` variables only), from
        slurmctld's state directory (root on the controller)."""
        raw = self._environment_file(job_id)
        try:
            environment = parse_environment(raw) if raw is not None else {}
        except Unresumable:
            return {}
        return {k: v for k, v in environment.items() if k in self.checkpoint_env}

    def _environment_file(self, job_id: str) -> bytes | None:
        """The ``environment`` file slurmctld keeps for a job while it remembers it (MinJobAge after it
        ends); readable by root only."""
        state_dir = self._config_value("StateSaveLocation")
        if not state_dir:
            return None
        number = int(job_id.split("_", 1)[0])
        try:
            return (Path(state_dir) / f"hash.{number % 10}" / f"job.{number}" / "environment").read_bytes()
        except OSError:
            return None

    def _checkpoint_uri(self, comment: str, environment: dict[str, str], script: str) -> str | None:
        """Checkpoint location: ``checkpoint=s3://…`` in the comment, else the first configured env var
        (submission environment, or an ``export NAME=s3://…`` line of the batch script). A location
        longer than the protocol carries counts as none (the job is then unresumable, and says why)."""
        uri = self._checkpoint_uri_anywhere(comment, environment, script)
        return uri if uri is not None and len(uri) <= MAX_CHECKPOINT_URI else None

    def _checkpoint_uri_anywhere(self, comment: str, environment: dict[str, str], script: str) -> str | None:
        for token in comment.split():
            if token.startswith("checkpoint=") and _S3_URI.fullmatch(token.removeprefix("checkpoint=")):
                return token.removeprefix("checkpoint=")
        for name in self.checkpoint_env:
            value = environment.get(name, "")
            if _S3_URI.fullmatch(value):
                return value
            match = re.search(rf"^\s*(?:export\s+)?{name}=[\"']?({_S3_URI.pattern})", script, re.MULTILINE)
            if match:
                return match.group(1)
        return None


def _node_answer(stdout: str) -> StackDump | None:
    """node_dump.py's JSON line (its last line), or None when srun's output holds none."""
    lines = stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("outcome") not in _OUTCOMES or not isinstance(answer.get("text"), str):
        return None
    return StackDump(answer["outcome"], answer["text"])
