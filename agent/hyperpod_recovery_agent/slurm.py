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
import os
import pwd
import re
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, get_args

from pydantic import ValidationError

from hyperpod_recovery.errors import ControllerUnavailable, InvalidCommand, NodeNotFound
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
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, SLURM_NODE_PATTERN
from hyperpod_recovery_agent import node_dump
from hyperpod_recovery_agent.capture import SLURM_MAX_STRING_BYTES, JobCapture, build_capture, owner_problem, parse_environment, refusal
from hyperpod_recovery_agent.elastic import elastic_opt_in
from hyperpod_recovery_agent.sbatch_options import Unresumable, has_control_character
from hyperpod_recovery_agent.slurm_json import (
    SlurmJob,
    SlurmNode,
    SlurmOutputUnreadable,
    answer_errors,
    dumps_nodes_with_sinfo,
    parse_answer,
    read_jobs,
    read_nodes,
    release_of,
)

_NODE = re.compile(SLURM_NODE_PATTERN)
_JOB_ID = re.compile(SLURM_JOB_ID_PATTERN)
_S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](?:/[^\s'\"]*)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Where the agent finds prlimit (util-linux) and, without slurm_bin_dir, sbatch: never the job owner's PATH.
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What slurmctld prints when it cannot be reached: retried, then ControllerUnavailable.
_UNREACHABLE = ("Unable to contact slurm controller", "Connection refused", "Socket timed out", "Zero Bytes were transmitted")
# The job comment that links a resubmission to its original: also the idempotency key Slurm keeps for us.
RESUBMISSION_MARK = f"{OWNER_TAG_PREFIX}:resubmission-of="
MAX_CHECKPOINT_URI = 1024  # JobSpec.checkpoint_uri
DEFAULT_CHECKPOINT_ENV = ("HYPERPOD_RECOVERY_CHECKPOINT_URI", "CHECKPOINT_URI")
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
        if name is None or not _NODE.fullmatch(name[1]):
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


_Read = TypeVar("_Read")


class SlurmUnreachable(Exception):
    """slurmctld did not answer (down, restarting, network); the caller retries with backoff."""


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


def validate_nodes(nodes: Iterable[str]) -> list[str]:
    names = list(nodes)
    bad = [n for n in names if not _NODE.fullmatch(n)]  # re.match would let a trailing newline through
    if bad or not names:
        raise InvalidCommand(f"nodes: not Slurm node names: {bad[:5] or 'none given'}")
    return names


def validate_job_id(job_id: str) -> str:
    if not _JOB_ID.fullmatch(job_id):
        raise InvalidCommand(f"job_id: {job_id!r} is not a Slurm job id")
    return job_id


class SlurmCli:
    """Slurm through its own commands (scontrol, squeue, sinfo, sbatch) as the controller's root."""

    def __init__(
        self,
        *,
        bin_dir: str | None = None,
        timeout_seconds: float = 30,
        checkpoint_env: Sequence[str] = DEFAULT_CHECKPOINT_ENV,
        env: dict[str, str] | None = None,
        py_spy: str = "py-spy",
    ) -> None:
        self.bin_dir = bin_dir
        # The stack dumper on the compute nodes: a name looked up on the node's PATH, or a path there.
        self.py_spy = py_spy
        self.timeout_seconds = timeout_seconds
        self.checkpoint_env = tuple(checkpoint_env)
        self.env = env  # None: inherit (SLURM_CONF included)

    # --- plumbing ---------------------------------------------------------------------------
    def _run(
        self,
        argv: list[str],
        *,
        stdin: str | None = None,
        ok_codes: tuple[int, ...] = (0,),
        owner: _Owner | None = None,
        env_overrides: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        program = argv[0] if os.path.isabs(argv[0]) else os.path.join(self.bin_dir, argv[0]) if self.bin_dir else argv[0]
        try:
            done = subprocess.run(  # noqa: S603 - an argument list, never a shell; inputs validated above
                [program, *argv[1:]],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout_seconds,
                check=False,
                env=owner.environment if owner is not None else self._environment(env_overrides),
                # The owner's identity is taken in the child before exec: no process of the owner's
                # environment (LD_PRELOAD, PATH...) ever runs as root.
                **(owner.popen_arguments() if owner else {}),
            )
        except subprocess.TimeoutExpired as exc:
            raise SlurmUnreachable(f"{argv[0]} timed out after {timeout or self.timeout_seconds} s") from exc
        except FileNotFoundError as exc:
            raise ControllerUnavailable(f"{argv[0]} is not installed on this host") from exc
        if done.returncode not in ok_codes:
            text = (done.stderr or done.stdout).strip()
            if any(marker in text for marker in _UNREACHABLE):
                raise SlurmUnreachable(f"{' '.join(argv[:2])}: {text}")
            raise SlurmCommandFailed(argv, done.returncode, text)
        return done

    def _environment(self, overrides: Mapping[str, str] | None) -> dict[str, str] | None:
        if not overrides:
            return self.env  # None: inherit (SLURM_CONF included)
        return {**(self.env if self.env is not None else os.environ), **overrides}

    def _read(self, reader: Callable[[dict[str, Any]], _Read], argv: list[str]) -> _Read:
        """A command's JSON through slurm_json.py; SlurmCommandFailed when it has no shape the reader knows."""
        try:
            return reader(self._json(argv))
        except SlurmOutputUnreadable as exc:
            raise SlurmCommandFailed(argv, 0, f"its JSON cannot be read: {exc}") from exc

    def _json(self, argv: list[str]) -> dict[str, Any]:
        done = self._run(argv)
        try:
            data = parse_answer(done.stdout)
            unreachable, errors = answer_errors(data)
        except SlurmOutputUnreadable as exc:
            raise SlurmCommandFailed(argv, 0, f"its output cannot be read: {exc}") from exc
        # squeue/sinfo --json exit 0 when slurmctld cannot be reached, with an "Unspecified error" (-1).
        if unreachable or any(marker in f"{errors} {done.stderr}" for marker in _UNREACHABLE):
            raise SlurmUnreachable(f"{argv[0]}: {errors[:300]} {done.stderr.strip()[:300]}")
        if errors:
            raise SlurmCommandFailed(argv, 0, errors[:500])
        return data

    def version(self) -> str:
        """Slurm's release as ``scontrol --version`` says it ("24.11.5"); "" when it names none."""
        if self._release is None:
            return ""
        major, minor, micro = self._release
        return f"{major}.{minor:02d}.{micro}"

    @cached_property
    def _release(self) -> tuple[int, int, int] | None:
        """Read once per agent process (the node dump's command depends on it)."""
        return release_of(self._run(["scontrol", "--version"]).stdout)

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

    def submit_as_owner(
        self,
        capture: JobCapture,
        *,
        comment: str,
        extra_environment: Mapping[str, str],
        exclude_nodes: Sequence[str] = (),
        nodelist: Sequence[str] = (),
        output: str | None = None,
        nodes: int | None = None,
    ) -> str:
        """sbatch the captured job again, run by its owner (uid, gid, groups, umask, limits), with its
        submission environment plus ``extra_environment`` (and SLURM_CONF, so that sbatch finds this
        cluster), and its options (``nodes``: at that node count instead); the new job id. The job's comment
        is ``comment`` (our mark) followed by the owner's own. InvalidCommand when it would not be the job
        that was captured."""
        if capture.unresumable or capture.script is None:
            raise InvalidCommand(f"job {capture.job_id} cannot be resubmitted as it was: {capture.unresumable or 'no batch script'}")
        problem = owner_problem(capture.user, capture.uid, capture.gid)
        if problem:
            raise InvalidCommand(f"job {capture.job_id} cannot be resubmitted as its owner: {problem}")
        full_comment = " ".join(part for part in (comment, capture.comment) if part)
        if has_control_character(full_comment) or len(full_comment.encode()) > SLURM_MAX_STRING_BYTES:
            raise InvalidCommand(f"comment: {full_comment[:80]!r}... is not one line within Slurm's {SLURM_MAX_STRING_BYTES} bytes")
        try:
            options = capture.options.arguments(
                exclude_nodes=tuple(validate_nodes(exclude_nodes)) if exclude_nodes else (),
                nodelist=tuple(validate_nodes(nodelist)) if nodelist else (),
                output=output,
                nodes=nodes,
                now=time.time(),
            )
        except Unresumable as exc:
            raise InvalidCommand(f"job {capture.job_id} cannot be resubmitted as it was: {exc}") from exc
        argv = [self._program("sbatch"), "--parsable", "--export=ALL", f"--job-name={capture.name}", f"--comment={full_comment}"]
        if capture.work_dir:
            argv.append(f"--chdir={capture.work_dir}")
        argv += options
        if capture.propagate:
            argv.append(f"--propagate={capture.propagate}")
        owner = _Owner.of(capture, self._owner_environment(capture, extra_environment))
        script: str | None = capture.script
        script_file: str | None = None
        try:
            if capture.script_args:
                # sbatch takes script arguments only after a script file (a pipe's /dev/stdin is root's).
                script_file, script = self._script_file(capture), None
                argv += [script_file, *capture.script_args]
            if capture.rlimits:
                argv = [*self._limits_prefix(capture.rlimits), *argv]
            new_id = self._run(argv, stdin=script, owner=owner).stdout.strip().split(";", 1)[0]
        finally:
            if script_file:
                Path(script_file).unlink(missing_ok=True)
        return validate_job_id(new_id)

    def _owner_environment(self, capture: JobCapture, extra: Mapping[str, str]) -> dict[str, str]:
        for key, value in extra.items():
            if not _ENV_NAME.fullmatch(key) or "\0" in value:
                raise InvalidCommand(f"environment: {key!r} cannot be set for the job")
        environment = {**capture.environment, **extra}
        # The only thing taken from the agent: where this cluster's slurm.conf is.
        conf = (self.env if self.env is not None else os.environ).get("SLURM_CONF")
        if conf:
            environment["SLURM_CONF"] = conf
        return environment

    def _program(self, name: str) -> str:
        """An absolute path, so that the owner's PATH never chooses what runs."""
        if self.bin_dir and name != "prlimit":
            return os.path.join(self.bin_dir, name)
        path = shutil.which(name, path=_SYSTEM_PATH if name == "prlimit" else (self.env or os.environ).get("PATH", _SYSTEM_PATH))
        if not path:
            raise ControllerUnavailable(f"{name} is not installed on this host")
        return os.path.abspath(path)

    def _limits_prefix(self, limits: Mapping[str, str]) -> list[str]:
        """prlimit, run as the owner, sets the soft limits the job propagated (sbatch records its own
        process's, which would otherwise be the agent's); the agent's hard limits are raised first where
        an owner's soft limit is above them, since the owner cannot raise a hard limit."""
        for name, value in limits.items():
            which = getattr(resource, f"RLIMIT_{name}")
            wanted = resource.RLIM_INFINITY if value == "unlimited" else int(value)
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and (wanted == resource.RLIM_INFINITY or wanted > hard):
                try:
                    resource.setrlimit(which, (soft, wanted))
                except (OSError, ValueError) as exc:
                    raise InvalidCommand(
                        f"the job's {name} limit {value} is above the agent's hard limit {hard}, which it may not raise ({exc}): "
                        "raise the agent service's limit"
                    ) from exc
        return [self._program("prlimit"), *(f"--{name.lower()}={value}:" for name, value in limits.items()), "--"]

    @staticmethod
    def _script_file(capture: JobCapture) -> str:
        """The script in a file (0600) of the owner's, for sbatch to read as the owner; removed after."""
        fd, path = tempfile.mkstemp(prefix=f"hyperpod-recovery-{capture.job_id}-", suffix=".sbatch")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            os.fchown(file.fileno(), capture.uid, capture.gid)
            file.write(capture.script or "")
        return path

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

    def _config_value(self, key: str) -> str | None:
        return self._config.get(key)

    @cached_property
    def _config(self) -> dict[str, str]:
        """``scontrol show config``, read once per agent process."""
        lines = self._run(["scontrol", "show", "config"]).stdout.splitlines()
        return {k.strip(): v.strip() for k, sep, v in (line.partition("=") for line in lines) if sep}

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


@dataclass(frozen=True)
class _Owner:
    """Who a resubmission's sbatch runs as, and with what."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    umask: int
    cwd: str
    environment: dict[str, str]

    @classmethod
    def of(cls, capture: JobCapture, environment: dict[str, str]) -> _Owner:
        entry = pwd.getpwuid(capture.uid)
        # initgroups' groups (the passwd group and /etc/group memberships) plus the job's own group.
        groups = tuple(sorted({*os.getgrouplist(entry.pw_name, entry.pw_gid), capture.gid}))
        # sbatch records its working directory as SLURM_SUBMIT_DIR: the original one when it still exists.
        cwd = next((d for d in (capture.submit_dir, capture.work_dir) if d and os.path.isdir(d)), "/")
        return cls(capture.uid, capture.gid, groups, -1 if capture.umask is None else capture.umask, cwd, environment)

    def popen_arguments(self) -> dict[str, Any]:
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups), "umask": self.umask, "cwd": self.cwd}


class SlurmCommandFailed(Exception):
    def __init__(self, argv: list[str], returncode: int, output: str) -> None:
        super().__init__(f"{' '.join(argv[:3])} exited {returncode}: {output}")
        self.argv, self.returncode, self.output = argv, returncode, output
