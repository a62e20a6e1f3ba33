"""Everything needed to resubmit a Slurm job faithfully, as slurmctld records it (Slurm 22.05 to 25.05).

A resubmission runs the owner's script again as the owner, with the owner's submission environment and
the options the job was submitted with: ``JobCapture`` holds them, ``SbatchOptions.arguments()`` turns
them back into sbatch arguments. What cannot be reproduced makes the capture ``unresumable`` with the
reason, so a job is resubmitted as it was or not at all.

Where each part comes from (found by submitting jobs with every option on a real 22.05 and reading
what each interface prints; ``scontrol`` has no ``--json`` in 22.05; 24.11 checked the same way, its
differences read away by slurm_json.py, which hands this module a ``SlurmJob``):

- ``squeue --json`` (OpenAPI v0.0.38 in 22.05): ids, user/group (name and number), name (in full, up to
  Slurm's 1024 bytes), account, qos, resv_name, partition, node_count/max_nodes, tasks,
  tasks_per_node/socket/core, minimum_cpus_per_node, sockets_per_node, cores_per_socket,
  threads_per_core, memory_per_node/cpu (with flag JOB_MEM_SET), minimum_tmp_disk_per_node,
  tres_per_node/job/task/socket, cpus_per_tres, memory_per_tres, tres_bind, tres_freq, features,
  prefer, batch_features, shared, contiguous, flags (SPREAD_JOB, USE_MIN_NODES, GRES_ENFORCE_BIND,
  GRES_DISABLE_BIND, KILL_INV_DEP, NO_KILL_INV_DEP, JOB_CPUS_SET), licenses, standard_output/
  error/input (the patterns as given, ``%j`` kept, made absolute by sbatch; ``scontrol`` prints them
  expanded, and so does squeue from 23.02 to 24.11: slurm_json.py puts the job id back as ``%j``),
  comment, dependency, requeue, nice, wckey, time_limit (an UNLIMITED one, null in 22.05, is asked for
  again as ``--time=UNLIMITED``), time_minimum, deadline,
  delay_boot, required_nodes, excluded_nodes, container, mcs_label, profile, current_working_directory,
  command (script path and arguments, joined by spaces), array_*, het_*, batch_flag, and what we
  refuse on (cpu_frequency_*, burst_buffer, cluster_features, reboot).
- ``scontrol show job``: CPUs/Task (squeue prints null even for ``-c 2``), NtasksPerTRES
  (``--ntasks-per-gpu``), MailUser/MailType (squeue has neither), Switches (refused).
- ``scontrol write batch_script``: the script.
- ``StateSaveLocation/hash.<id % 10>/job.<id>/environment`` (root only): the environment sbatch sent,
  already filtered by ``--export``; a uint32 count then NUL-terminated ``NAME=value`` strings. sbatch
  adds what it derived from the options (SLURM_NTASKS only when a task count was asked for, SLURM_OPEN_MODE
  for ``--open-mode``, SLURM_RLIMIT_* for the propagated limits, "U"-prefixed for ``--propagate=``,
  none for ``--get-user-env``/``--propagate=NONE``, SLURM_UMASK, SLURM_SUBMIT_DIR), which is how
  those are carried.

Asked for only when the owner asked: ``--cpus-per-task`` with flag JOB_CPUS_SET (else Slurm shows its
default 1), ``--mem``/``--mem-per-cpu`` with JOB_MEM_SET, ``--ntasks`` with SLURM_NTASKS recorded (else
Slurm shows the count it derived, and asking for it would add SLURM_NTASKS to the job's environment).
``--mincpus`` is asked for as reported: when Slurm derived it, asking for the same value changes nothing.
A script's arguments are carried when there is one (``command`` cannot tell two from one with a space).

Not carried, on purpose:
- ``--signal``, ``--no-kill``, ``--overcommit``, ``--wait-all-nodes``, ``--ignore-pbs``: 22.05 shows them
  nowhere (no JSON field, no scontrol line, no environment mark for the allocation). From the script's
  ``#SBATCH`` lines or SBATCH_* variables they come back, because the script is re-read and the
  environment is sent again; given on the original command line, they are lost, and cannot be detected.
- ``--distribution``, ``--hint``, ``--mem-bind``, ``--cpu-bind``, ``--acctg-freq``: recorded only as
  SLURM_* variables for the job's steps, which the environment carries unchanged (SLURM_HINT is also
  read again by sbatch).
- ``--begin``, ``--hold``, ``--priority``, negative ``--nice``, admin/system comments, our own comment
  mark: scheduling decisions about the old job (a start time already passed, a hold already released,
  an admin's boost), not part of the work. An ``#SBATCH --hold`` line in the script still holds the copy.
- ``--dependency``: a job that started had its dependencies met, and slurmctld clears them; an
  ``#SBATCH --dependency`` line would wait again (or on jobs long gone), so when the job had one
  (SLURM_JOB_DEPENDENCY in its environment) an empty ``--dependency=`` overrides it. A job still
  showing one (it never started) carries it.
- A node range (``-N 1-4``) of a job that started: 22.05 resets max_nodes at start and reports the
  nodes it got, so the copy asks for the size the job ran at. Measured on 22.05.8 with ``sbatch -N 1-2``
  on two idle nodes: pending, squeue shows ``node_count=1 max_nodes=2`` and scontrol ``NumNodes=1-2``;
  running, ``node_count=2 max_nodes=0`` and ``NumNodes=2``, flag JOB_WAS_RUNNING; the environment file
  holds no trace of it. The same for an ``#SBATCH --nodes=1-2`` line, which stays in the batch script:
  that is where the agent reads a job's elastic opt-in (elastic.py). A shrink or a grow-back gives the
  copy its own ``--nodes``, with the per-job totals (``--ntasks``, ``--gpus``) kept per node. ``--time-min`` likewise: the granted
  time limit replaces the requested one, so a started job with a minimum time is refused.
- ``--chdir`` is carried as the job's working directory; SLURM_SUBMIT_HOST becomes the controller (sbatch
  sets it from the host it runs on); SLURM_PRIO_PROCESS is re-derived (used only with
  PropagatePrioProcess).
- ``--uid``/``--gid``: a resubmission is the owner's own sbatch, so slurmctld checks the owner's
  permissions (partitions, reservations, accounts) exactly as for the original.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models.commands import OWNER_TAG_PREFIX
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, matches
from hyperpod_recovery_agent.sbatch_options import SbatchOptions, Unresumable, has_control_character, sbatch_options
from hyperpod_recovery_agent.script_reads import first_argument_read
from hyperpod_recovery_agent.slurm_json import SlurmJob

# Slurm 22.05 rejects a longer job name or comment ("Pathname ... too long"); measured, in UTF-8 bytes.
SLURM_MAX_STRING_BYTES = 1024
# SLURM_RLIMIT_<NAME> as sbatch writes them; each is also prlimit's option name in lower case.
RLIMIT_NAMES = ("CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS")
RLIM_INFINITY_TEXT = str(2**64 - 1)  # how sbatch prints "unlimited"
# Our own comment mark (slurm.RESUBMISSION_MARK + incident), removed from the comment a copy carries on.
_OUR_COMMENT = re.compile(rf"(?:^|\s){re.escape(OWNER_TAG_PREFIX)}:resubmission-of=(\S+) incident=\S+")
_SCONTROL_TASKS = re.compile(r"^\s*NumNodes=\S+ NumCPUs=\S+ NumTasks=\S+ CPUs/Task=(?P<cpus>\S+) ReqB:S:C:T=\S+\s*$", re.MULTILINE)
_SCONTROL_MAIL = re.compile(r"^\s*MailUser=(?P<user>\S*) MailType=(?P<type>\S+)\s*$", re.MULTILINE)
_SCONTROL_MAIL_LINE = re.compile(r"^\s*MailUser=", re.MULTILINE)
_SCONTROL_NTASKS_PER_TRES = re.compile(r"^\s*NtasksPerTRES=(?P<n>\d+)\s*$", re.MULTILINE)
_SCONTROL_SWITCHES = re.compile(r"^\s*Switches=", re.MULTILINE)


@dataclass(frozen=True)
class SubmitAs:
    """How a captured job is submitted again: our mark first in its comment, the resume variables
    added to its environment, the nodes it must avoid or use, where its output goes, and its size
    (None: as it was)."""

    comment: str
    extra_environment: Mapping[str, str]
    exclude_nodes: Sequence[str] = ()
    nodelist: Sequence[str] = ()
    output: str | None = None
    nodes: int | None = None


class JobCapture(BaseModel):
    """One job, captured on the controller, enough to submit it again as it was, as its owner.

    It holds the owner's submission environment, which may hold secrets: it stays on the controller
    (root-only), never in a command reply or a workflow's history."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(pattern=SLURM_JOB_ID_PATTERN)
    user: str
    uid: int
    group: str
    gid: int
    name: str
    state: str = "UNKNOWN"
    work_dir: str = ""
    script: str | None = None
    script_args: tuple[str, ...] = ()
    environment: dict[str, str] = Field(default_factory=dict)
    # Read back from the environment (sbatch overwrites them from the process it runs in).
    submit_dir: str | None = None  # SLURM_SUBMIT_DIR: sbatch's working directory
    umask: int | None = Field(default=None, ge=0, le=0o777)  # SLURM_UMASK
    rlimits: dict[str, str] = Field(default_factory=dict)  # SLURM_RLIMIT_*: soft limit, or "unlimited"
    propagate: str | None = None  # --propagate=...: "NONE", explicit names, or None for the configured default
    comment: str = ""  # the job's comment without our own resubmission mark
    # The job is our own copy of this job (its comment starts with our mark): a grow-back stops only these.
    resubmitted_from: str | None = None
    # The incident whose grow-back cancelled this copy (written before the cancel): on a retry, a copy
    # that no longer runs is followed by its successor only if this grow-back stopped it.
    stopped_for: str | None = None
    options: SbatchOptions = SbatchOptions()
    unresumable: str | None = None

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> JobCapture:
        return cls.model_validate_json(text)


def ensure_resubmittable(capture: JobCapture) -> None:
    """InvalidCommand when the capture cannot be submitted again as it was (unresumable, or no batch
    script): what a submission checks first, the agent's sbatch and the sandbox's simulated one alike."""
    if capture.unresumable or capture.script is None:
        raise InvalidCommand(f"job {capture.job_id} cannot be resubmitted as it was: {capture.unresumable or 'no batch script'}")


class CaptureStore:
    """Job captures, one file per job id, in a root-only directory on the controller (they hold the
    owner's submission environment, which may hold secrets). ``None``: in memory, for tests."""

    def __init__(self, directory: Path | None = None, keep_days: int = 7) -> None:
        self.directory = directory
        self.keep_seconds = keep_days * 86_400
        self._memory: dict[str, str] = {}
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            directory.chmod(0o700)

    def _path(self, job_id: str) -> Path:
        if self.directory is None or not matches(SLURM_JOB_ID_PATTERN, job_id):
            raise InvalidCommand(f"job_id: {job_id!r} is not a Slurm job id")
        return self.directory / f"{job_id}.json"

    def put(self, capture: JobCapture) -> None:
        if self.directory is None:
            self._memory[capture.job_id] = capture.to_json()
            return
        path = self._path(capture.job_id)
        partial = path.with_suffix(".partial")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(capture.to_json())
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(path)  # atomic: a crash leaves the old capture or the whole new one

    def get(self, job_id: str) -> JobCapture | None:
        if self.directory is None:
            text = self._memory.get(job_id)
            return None if text is None else JobCapture.from_json(text)
        try:
            return JobCapture.from_json(self._path(job_id).read_text())
        except FileNotFoundError:
            return None

    def prune(self, now: float | None = None) -> int:
        if self.directory is None:
            return 0
        cutoff = (now if now is not None else time.time()) - self.keep_seconds
        old = [p for p in self.directory.glob("*.json") if p.stat().st_mtime < cutoff]
        for path in old:
            path.unlink(missing_ok=True)
        return len(old)


# --- reading what Slurm recorded ---------------------------------------------------------------
def parse_environment(raw: bytes) -> dict[str, str]:
    """slurmctld's ``environment`` file: a native uint32 count, then that many NUL-terminated strings."""
    if len(raw) < 4:
        raise Unresumable("its recorded submission environment is empty or truncated")
    (count,) = struct.unpack("=I", raw[:4])
    items = raw[4:].split(b"\0")
    if len(items) != count + 1 or items[-1] != b"":
        raise Unresumable(f"its recorded submission environment is not {count} NUL-terminated strings")
    environment: dict[str, str] = {}
    for item in items[:-1]:
        try:
            text = item.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Unresumable("its recorded submission environment is not UTF-8") from exc
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise Unresumable(f"its recorded submission environment has an entry that is not NAME=value: {text[:40]!r}")
        environment[key] = value
    return environment


def scontrol_details(text: str) -> dict[str, str]:
    """The few values only ``scontrol show job`` prints (each on a line of its own, known shape)."""
    details: dict[str, str] = {}
    tasks = _SCONTROL_TASKS.findall(text)
    if len(tasks) == 1:
        details["cpus_per_task"] = tasks[0]
    mail = list(_SCONTROL_MAIL.finditer(text))
    if len(mail) != len(_SCONTROL_MAIL_LINE.findall(text)) or len(mail) > 1:
        raise Unresumable("its mail settings cannot be read unambiguously from scontrol show job")
    if mail:
        details["mail_user"], details["mail_type"] = mail[0]["user"], mail[0]["type"]
    ntasks_per_tres = _SCONTROL_NTASKS_PER_TRES.findall(text)
    if ntasks_per_tres:
        details["ntasks_per_gpu"] = ntasks_per_tres[0]
    if _SCONTROL_SWITCHES.search(text):
        details["switches"] = "yes"
    return details


def resubmitted_from(comment: str) -> str | None:
    """The job a copy was resubmitted from, by our mark at the start of its comment; None when the job is no copy of ours."""
    found = _OUR_COMMENT.match(comment)
    return found[1] if found else None


def user_comment(comment: str) -> str:
    """The comment without our own resubmission mark (a resubmitted job carries the owner's part on)."""
    return " ".join(_OUR_COMMENT.sub(" ", comment).split())


def script_arguments(command: str, is_file: Callable[[str], bool] = os.path.isfile) -> tuple[str, ...]:
    """The batch script's arguments from squeue's ``command`` (the script path and arguments joined by
    single spaces: an argument's own spaces are indistinguishable). Exact for none or one argument;
    more are refused rather than re-split differently."""
    if not command or is_file(command) or " " not in command:
        return ()
    words = command.split(" ")
    for cut in range(len(words) - 1, 0, -1):
        if is_file(" ".join(words[:cut])):
            rest = words[cut:]
            if len(rest) == 1:
                return (rest[0],)
            raise Unresumable(
                f"its script was given {len(rest)} arguments ({' '.join(rest)[:80]!r}), which Slurm 22.05 records only "
                "joined by spaces: they cannot be recovered exactly"
            )
    raise Unresumable(f"its command {command[:120]!r} cannot be split into the script path and its arguments (the script is not found)")


_SHELL = re.compile(r"#!\s*(?:/usr)?/bin/(?:env\s+)?(?:ba|da|z|k)?sh(?:\s|$)")


def no_arguments_read(command: str, script: str) -> tuple[str, ...]:
    """No arguments (Slurm 23.02+ report a batch script's path alone, so whether it was given any is
    unknown): right when the job was submitted without a script file, or when its script never reads
    its arguments; Unresumable otherwise, as a copy without them would not be the same job. (A file the
    script sources also sees its arguments: not looked into.)"""
    if not command:
        return ()  # its script came on sbatch's input, which takes no arguments
    first = script.split("\n", 1)[0]
    if not _SHELL.match(first):
        reads = f"its interpreter ({first[:60]!r}) is not a shell whose reading of them the agent can see"
    elif found := first_argument_read(script):
        number, line = found
        reads = f"its script may read its arguments: line {number}: {line[:120]}"
    else:
        return ()
    raise Unresumable(
        f"it was submitted as {command[:120]!r}, and Slurm 23.02 and later no longer report the arguments a script was "
        f"given, which matter here: {reads}"
    )


def owner_problem(user: str, uid: int, gid: int) -> str | None:
    """Why the job's owner cannot submit it from this host, or None (the user and group still resolve)."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return f"its user {user} (uid {uid}) is unknown on this host"
    if entry.pw_name != user:
        return f"uid {uid} is user {entry.pw_name} on this host, not the job's user {user}"
    if gid != entry.pw_gid and gid not in os.getgrouplist(entry.pw_name, entry.pw_gid):
        return f"gid {gid} is not one of user {user}'s groups on this host"
    return None


def group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


# --- building the capture ----------------------------------------------------------------------
def identity(record: SlurmJob) -> dict[str, Any]:
    uid, gid = record.user_id, record.group_id
    return {
        "job_id": record.job_id,
        "user": record.user_name or str(uid),
        "uid": uid,
        "group": record.group_name or group_name(gid) or str(gid),
        "gid": gid,
        "name": record.name,
        "state": record.state,
        "work_dir": record.work_dir,
        "resubmitted_from": resubmitted_from(record.comment),
    }


def refusal(record: SlurmJob) -> str | None:
    """Why a job is not one sbatch can submit again as it was, from its squeue record alone."""
    if record.het_job_id:
        return (
            f"it is component {record.het_job_offset} of heterogeneous job {record.het_job_id} "
            f"({record.het_job_id_set}): a resubmission would have to re-create every component together"
        )
    if record.array_job_id:
        return (
            f"it is task {record.array_task_id} of array job {record.array_job_id}: resubmitting it alone "
            "would be a plain job with different SLURM_ARRAY_* values, outside the array"
        )
    if not record.batch_flag:
        return "it is not a batch job (salloc or srun): there is no batch script to resubmit"
    if record.user_id < 0 or record.group_id < 0:
        return "slurmctld does not report its user and group"
    return None


def build_capture(
    record: SlurmJob,
    *,
    script: str | None,
    environment_raw: bytes | None,
    scontrol_text: str,
    is_file: Callable[[str], bool] = os.path.isfile,
) -> JobCapture:
    """The capture of a job from what slurmctld recorded; ``unresumable`` says why when it cannot be
    resubmitted as it was."""
    who = identity(record)
    reason = refusal(record) or owner_problem(who["user"], who["uid"], who["gid"])
    if reason:
        return JobCapture(**who, unresumable=reason)
    if script is None:
        return JobCapture(**who, unresumable="slurmctld no longer has its batch script")
    if environment_raw is None:
        return JobCapture(**who, script=script, unresumable="its submission environment is missing from slurmctld's StateSaveLocation")
    try:
        environment = parse_environment(environment_raw)
        details = scontrol_details(scontrol_text)
        options = sbatch_options(record, environment, details)
        args = script_arguments(record.command, is_file) if record.command_lists_arguments else no_arguments_read(record.command, script)
        rlimits, propagate = propagated_limits(environment)
        umask = int(environment["SLURM_UMASK"], 8) if "SLURM_UMASK" in environment else None
        for label, value in (("name", who["name"]), ("work directory", who["work_dir"]), *(("argument", a) for a in args)):
            if has_control_character(value):
                raise Unresumable(f"its {label} {value[:60]!r} has a control character")
        if len(who["name"].encode()) > SLURM_MAX_STRING_BYTES:
            raise Unresumable(f"its name is longer than Slurm's {SLURM_MAX_STRING_BYTES} bytes")
    except (Unresumable, ValueError) as exc:
        return JobCapture(**who, script=script, unresumable=str(exc))
    return JobCapture(
        **who,
        script=script,
        script_args=args,
        environment=environment,
        submit_dir=environment.get("SLURM_SUBMIT_DIR"),
        umask=umask,
        rlimits=rlimits,
        propagate=propagate,
        comment=user_comment(record.comment),
        options=options,
    )


def propagated_limits(environment: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """The soft limits sbatch propagated (SLURM_RLIMIT_*), and the ``--propagate`` value that makes a new
    sbatch propagate the same set: none (``--get-user-env``, ``--propagate=NONE``), the names given to
    ``--propagate`` (values prefixed "U"), or the configured default (plain values)."""
    limits: dict[str, str] = {}
    explicit: list[str] = []
    for name in RLIMIT_NAMES:
        value = environment.get(f"SLURM_RLIMIT_{name}")
        if value is None:
            continue
        if value.startswith("U"):
            explicit.append(name)
            value = value[1:]
        if not (value.isascii() and value.isdigit()):
            raise Unresumable(f"SLURM_RLIMIT_{name}={value[:30]!r} in its environment is not a limit")
        limits[name] = "unlimited" if value == RLIM_INFINITY_TEXT else value
    if not limits:
        return {}, "NONE"
    if explicit and len(explicit) != len(limits):
        raise Unresumable("its environment mixes limits propagated by --propagate and by configuration")
    return limits, ",".join(explicit) if explicit else None
