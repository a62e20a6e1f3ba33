"""Everything needed to resubmit a Slurm job faithfully, as slurmctld (Slurm 22.05) records it.

A resubmission runs the owner's script again as the owner, with the owner's submission environment and
the options the job was submitted with: ``JobCapture`` holds them, ``SbatchOptions.arguments()`` turns
them back into sbatch arguments. What cannot be reproduced makes the capture ``unresumable`` with the
reason, so a job is resubmitted as it was or not at all.

Where each part comes from (found by submitting jobs with every option on a real 22.05 and reading
what each interface prints; ``scontrol`` has no ``--json`` in 22.05):

- ``squeue --json`` (OpenAPI v0.0.38): ids, user/group (name and number), name (in full, up to
  Slurm's 1024 bytes), account, qos, resv_name, partition, node_count/max_nodes, tasks,
  tasks_per_node/socket/core, minimum_cpus_per_node, sockets_per_node, cores_per_socket,
  threads_per_core, memory_per_node/cpu (with flag JOB_MEM_SET), minimum_tmp_disk_per_node,
  tres_per_node/job/task/socket, cpus_per_tres, memory_per_tres, tres_bind, tres_freq, features,
  prefer, batch_features, shared, contiguous, flags (SPREAD_JOB, USE_MIN_NODES, GRES_ENFORCE_BIND,
  GRES_DISABLE_BIND, KILL_INV_DEP, NO_KILL_INV_DEP, JOB_CPUS_SET), licenses, standard_output/
  error/input (the patterns as given, ``%j`` kept, made absolute by sbatch; ``scontrol`` prints them
  expanded), comment, dependency, requeue, nice, wckey, time_limit, time_minimum, deadline,
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
- ``--time=UNLIMITED`` shows as no limit, like no ``--time`` at all: the copy gets the partition's default.
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
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hyperpod_recovery.models.commands import OWNER_TAG_PREFIX
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN

# Slurm 22.05 rejects a longer job name or comment ("Pathname ... too long"); measured, in UTF-8 bytes.
SLURM_MAX_STRING_BYTES = 1024
# sbatch's --mail-type words, as scontrol prints them back (ALL comes back expanded).
MAIL_TYPES = frozenset(
    {"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "ARRAY_TASKS"}
    | {f"TIME_LIMIT{percent}" for percent in ("", "_90", "_80", "_50")}
)
# SLURM_RLIMIT_<NAME> as sbatch writes them; each is also prlimit's option name in lower case.
RLIMIT_NAMES = ("CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS")
RLIM_INFINITY_TEXT = str(2**64 - 1)  # how sbatch prints "unlimited"
Sharing = Literal["--exclusive", "--exclusive=user", "--exclusive=mcs", "--oversubscribe"]
OpenMode = Literal["append", "truncate"]
# squeue's "shared" -> the sbatch option that asks for it; None is the partition's default.
_SHARING: dict[str, Sharing] = {"none": "--exclusive", "user": "--exclusive=user", "mcs": "--exclusive=mcs", "shared": "--oversubscribe"}
# SLURM_OPEN_MODE, which sbatch sets only for --open-mode (the allocation's own mode is not reported).
_OPEN_MODE: dict[str, OpenMode] = {"a": "append", "t": "truncate"}
_NODELIST = re.compile(r"[A-Za-z0-9._,\[\]-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_GPU_TRES = re.compile(r"gres:gpu(?::[A-Za-z0-9_.-]+)?:\d+")
# Our own comment mark (slurm.RESUBMISSION_MARK + incident), removed from the comment a copy carries on.
_OUR_COMMENT = re.compile(rf"(?:^|\s){re.escape(OWNER_TAG_PREFIX)}:resubmission-of=(\S+) incident=\S+")
_SCONTROL_TASKS = re.compile(r"^\s*NumNodes=\S+ NumCPUs=\S+ NumTasks=\S+ CPUs/Task=(?P<cpus>\S+) ReqB:S:C:T=\S+\s*$", re.MULTILINE)
_SCONTROL_MAIL = re.compile(r"^\s*MailUser=(?P<user>\S*) MailType=(?P<type>\S+)\s*$", re.MULTILINE)
_SCONTROL_MAIL_LINE = re.compile(r"^\s*MailUser=", re.MULTILINE)
_SCONTROL_NTASKS_PER_TRES = re.compile(r"^\s*NtasksPerTRES=(?P<n>\d+)\s*$", re.MULTILINE)
_SCONTROL_SWITCHES = re.compile(r"^\s*Switches=", re.MULTILINE)


class Unresumable(Exception):
    """The job cannot be resubmitted as it was; the message says why (it becomes ``unresumable``)."""


class SbatchOptions(BaseModel):
    """The sbatch options a job was submitted with, as far as Slurm 22.05 records them (see the module
    docstring for the source of each and for what is not here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partition: str | None = None
    account: str | None = None
    qos: str | None = None  # always "" without slurmdbd: 22.05 accepts --qos and drops it
    reservation: str | None = None
    nodes: str | None = None  # "2" or "1-3"; None: the count Slurm derives from tasks/CPUs, as it did
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    ntasks_per_socket: int | None = None
    ntasks_per_core: int | None = None
    ntasks_per_gpu: int | None = None
    cpus_per_task: int | None = None
    mincpus: int | None = None
    sockets_per_node: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    mem_mb: int | None = None  # --mem (per node)
    mem_per_cpu_mb: int | None = None
    mem_per_gpu: str | None = None
    tmp_mb: int | None = None
    gres: str | None = None  # per node: --gres and --gpus-per-node record the same thing
    gpus: str | None = None
    gpus_per_task: str | None = None
    gpus_per_socket: str | None = None
    cpus_per_gpu: str | None = None
    gpu_bind: str | None = None
    gpu_freq: str | None = None
    gres_flags: Literal["enforce-binding", "disable-binding"] | None = None
    constraint: str | None = None
    prefer: str | None = None
    batch_features: str | None = None
    sharing: Sharing | None = None
    contiguous: bool = False
    spread_job: bool = False
    use_min_nodes: bool = False
    licenses: str | None = None
    time_minutes: int | None = None
    time_min_minutes: int | None = None
    deadline: int | None = None  # epoch seconds
    delay_boot_minutes: int | None = None
    nodelist: str | None = None
    exclude: str | None = None
    output: str | None = None
    error: str | None = None
    input: str | None = None
    open_mode: OpenMode | None = None
    mail_user: str | None = None
    mail_type: str | None = None
    requeue: bool | None = None
    nice: int | None = Field(default=None, ge=0)
    wckey: str | None = None
    dependency: str | None = None  # "": override the script's with none
    kill_on_invalid_dep: Literal["yes", "no"] | None = None
    container: str | None = None
    mcs_label: str | None = None
    profile: str | None = None

    def arguments(
        self,
        *,
        exclude_nodes: tuple[str, ...] = (),
        nodelist: tuple[str, ...] = (),
        output: str | None = None,
        nodes: int | None = None,
        now: float,
    ) -> list[str]:
        """The sbatch arguments, each a single ``--option=value`` element (a value never becomes an option).

        ``exclude_nodes`` are added to the job's own exclusions, ``nodelist`` replaces its required
        nodes and ``output`` its output file (drills pin and collect their jobs); ``nodes`` replaces its
        node count (a shrink or a grow-back: ``--nodes`` on the command line wins over the script's, and
        the job's per-job totals keep their share per node); ``now`` turns the deadline into the
        relative form sbatch parses the same in any time zone."""
        args: list[str] = []
        ntasks, gpus = self._totals_at(nodes) if nodes is not None else (self.ntasks, self.gpus)

        def add(option: str, value: object | None) -> None:
            if value is None or value == "":
                return
            text = str(value)
            if _CONTROL.search(text):
                raise Unresumable(f"{option}: {text[:60]!r} has a control character")
            args.append(f"{option}={text}")

        add("--partition", self.partition)
        add("--account", self.account)
        add("--qos", self.qos)
        add("--reservation", self.reservation)
        add("--nodes", nodes if nodes is not None else self.nodes)
        add("--ntasks", ntasks)
        add("--ntasks-per-node", self.ntasks_per_node)
        add("--ntasks-per-socket", self.ntasks_per_socket)
        add("--ntasks-per-core", self.ntasks_per_core)
        add("--ntasks-per-gpu", self.ntasks_per_gpu)
        add("--cpus-per-task", self.cpus_per_task)
        add("--mincpus", self.mincpus)
        add("--sockets-per-node", self.sockets_per_node)
        add("--cores-per-socket", self.cores_per_socket)
        add("--threads-per-core", self.threads_per_core)
        add("--mem", self.mem_mb)
        add("--mem-per-cpu", self.mem_per_cpu_mb)
        add("--mem-per-gpu", self.mem_per_gpu)
        add("--tmp", self.tmp_mb)
        add("--gres", self.gres)
        add("--gpus", gpus)
        add("--gpus-per-task", self.gpus_per_task)
        add("--gpus-per-socket", self.gpus_per_socket)
        add("--cpus-per-gpu", self.cpus_per_gpu)
        add("--gpu-bind", self.gpu_bind)
        add("--gpu-freq", self.gpu_freq)
        add("--gres-flags", self.gres_flags)
        add("--constraint", self.constraint)
        add("--prefer", self.prefer)
        add("--batch", self.batch_features)
        if self.sharing:
            args.append(self.sharing)
        if self.contiguous:
            args.append("--contiguous")
        if self.spread_job:
            args.append("--spread-job")
        if self.use_min_nodes:
            args.append("--use-min-nodes")
        add("--licenses", self.licenses)
        add("--time", self.time_minutes)
        add("--time-min", self.time_min_minutes)
        if self.deadline:
            remaining = int(self.deadline - now)
            if remaining <= 0:
                raise Unresumable("its --deadline has passed")
            add("--deadline", f"now+{remaining}")
        add("--delay-boot", self.delay_boot_minutes)
        if nodelist:
            add("--nodelist", ",".join(nodelist))
        else:
            add("--nodelist", self.nodelist)
        add("--exclude", ",".join(part for part in (self.exclude, *exclude_nodes) if part))
        add("--output", output or self.output)
        add("--error", self.error)
        add("--input", self.input)
        add("--open-mode", self.open_mode)
        add("--mail-user", self.mail_user)
        add("--mail-type", self.mail_type)
        if self.requeue is not None:
            args.append("--requeue" if self.requeue else "--no-requeue")
        add("--nice", self.nice)
        add("--wckey", self.wckey)
        if self.dependency is not None:
            args.append(f"--dependency={self.dependency}")
        add("--kill-on-invalid-dep", self.kill_on_invalid_dep)
        add("--container", self.container)
        add("--mcs-label", self.mcs_label)
        add("--profile", self.profile)
        return args

    def resize_problem(self, nodes: int) -> str | None:
        """Why the job cannot be submitted at ``nodes`` nodes (pinned, or totals not whole per node), or None."""
        try:
            self._totals_at(nodes)
        except Unresumable as exc:
            return str(exc)
        return None

    def _totals_at(self, nodes: int) -> tuple[int | None, str | None]:
        """``--ntasks`` and ``--gpus`` (totals for the whole job) at ``nodes`` nodes, the same per node
        as at the size the job ran at; Unresumable when that is not a whole number, or unknown, or when
        the job is pinned to its nodes."""
        if self.nodes == str(nodes):
            return self.ntasks, self.gpus
        if self.nodelist:
            # sbatch raises the count to the list's (22.05.8: "-N 1 -w n[1-2]" is "invalid number of nodes (-N 2-1)").
            raise Unresumable(f"it is pinned to nodes {self.nodelist} (--nodelist): it runs at its own size only")
        if self.ntasks is None and self.gpus is None:
            return self.ntasks, self.gpus
        if not (self.nodes and self.nodes.isascii() and self.nodes.isdigit()):
            raise Unresumable(f"its --ntasks/--gpus are totals for a node count Slurm did not record ({self.nodes}): not resizable")
        ran = int(self.nodes)

        def scaled(total: int, option: str) -> int:
            if total * nodes % ran:
                raise Unresumable(f"its {option} {total} on {ran} node(s) is no whole number per node at {nodes} node(s)")
            return total * nodes // ran

        gpus = self.gpus
        if gpus is not None:
            kind, _, count = gpus.rpartition(":")
            gpus = f"{kind}:{scaled(int(count), '--gpus')}" if kind else str(scaled(int(count), "--gpus"))
        return (scaled(self.ntasks, "--ntasks") if self.ntasks is not None else None), gpus


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


def has_control_character(text: str) -> bool:
    """Newlines, NUL, escapes: what a value passed to sbatch (one line in Slurm's records) must not hold."""
    return _CONTROL.search(text) is not None


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
def identity(record: Mapping[str, Any]) -> dict[str, Any]:
    job_id = str(record["job_id"])
    uid, gid = int(record.get("user_id", -1)), int(record.get("group_id", -1))
    return {
        "job_id": job_id,
        "user": str(record.get("user_name") or uid),
        "uid": uid,
        "group": str(record.get("group_name") or group_name(gid) or gid),
        "gid": gid,
        "name": str(record.get("name") or ""),
        "state": str(record.get("job_state") or "UNKNOWN"),
        "work_dir": str(record.get("current_working_directory") or ""),
        "resubmitted_from": resubmitted_from(str(record.get("comment") or "")),
    }


def refusal(record: Mapping[str, Any]) -> str | None:
    """Why a job is not one sbatch can submit again as it was, from its squeue record alone."""
    if record.get("het_job_id"):
        return (
            f"it is component {record.get('het_job_offset')} of heterogeneous job {record.get('het_job_id')} "
            f"({record.get('het_job_id_set')}): a resubmission would have to re-create every component together"
        )
    if record.get("array_job_id"):
        return (
            f"it is task {record.get('array_task_id')} of array job {record.get('array_job_id')}: resubmitting it alone "
            "would be a plain job with different SLURM_ARRAY_* values, outside the array"
        )
    if not record.get("batch_flag"):
        return "it is not a batch job (salloc or srun): there is no batch script to resubmit"
    if int(record.get("user_id", -1)) < 0 or int(record.get("group_id", -1)) < 0:
        return "slurmctld does not report its user and group"
    return None


def build_capture(
    record: Mapping[str, Any],
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
        args = script_arguments(str(record.get("command") or ""), is_file)
        rlimits, propagate = propagated_limits(environment)
        umask = int(environment["SLURM_UMASK"], 8) if "SLURM_UMASK" in environment else None
        for label, value in (("name", who["name"]), ("work directory", who["work_dir"]), *(("argument", a) for a in args)):
            if _CONTROL.search(value):
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
        comment=user_comment(str(record.get("comment") or "")),
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


def sbatch_options(record: Mapping[str, Any], environment: Mapping[str, str], details: Mapping[str, str]) -> SbatchOptions:
    """The options from the squeue record, scontrol's extra lines and the environment's marks."""
    flags = set(record.get("flags") or ())
    # A requeued job is pending again, with the record its first start rewrote.
    started = record.get("job_state") != "PENDING" or bool(record.get("restart_cnt"))
    for key, what in (
        ("burst_buffer", "a burst buffer"),
        ("cluster_features", "cluster constraints (federation)"),
        ("network", "a network option"),
    ):
        if record.get(key):
            raise Unresumable(f"it asks for {what} ({str(record[key])[:60]!r}), which the agent does not re-apply")
    if any(record.get(k) is not None for k in ("cpu_frequency_minimum", "cpu_frequency_maximum", "cpu_frequency_governor")):
        raise Unresumable("it asks for a CPU frequency (--cpu-freq), which Slurm 22.05 does not report in a form sbatch accepts back")
    if record.get("reboot"):
        raise Unresumable("it asks for a node reboot (--reboot), which only an administrator may request")
    if details.get("switches"):
        raise Unresumable("it asks for a switch count (--switches), which the agent does not re-apply")
    if started and record.get("time_minimum"):
        raise Unresumable(
            "it asked for --time-min: once a job has started Slurm 22.05 reports the time limit it granted "
            f"({record.get('time_limit')} min), not the one asked for"
        )
    node_count, max_nodes = _int(record.get("node_count")), _int(record.get("max_nodes"))
    if started:
        # 22.05 resets max_nodes when a job starts and node_count becomes the nodes it got: the
        # size it ran at is all there is (a range, or a count Slurm derived from tasks, looks the same).
        nodes = str(node_count) if node_count else None
    elif max_nodes:
        nodes = str(node_count) if node_count == max_nodes else f"{node_count}-{max_nodes}"
    else:
        nodes = None  # none asked for: Slurm derives it from tasks and CPUs again
    # A dependency left (the job never started) is carried; one that was met (sbatch recorded
    # SLURM_JOB_DEPENDENCY) is overridden with an empty one, so an #SBATCH line cannot wait again.
    dependency = re.sub(r"\([A-Za-z_]+\)", "", str(record.get("dependency") or "")) or (
        "" if "SLURM_JOB_DEPENDENCY" in environment else None
    )
    kill_on_invalid_dep: Literal["yes", "no"] | None = "yes" if "KILL_INV_DEP" in flags else "no" if "NO_KILL_INV_DEP" in flags else None
    mem_set = "JOB_MEM_SET" in flags
    mail_type = details.get("mail_type")
    if mail_type and not set(mail_type.split(",")) <= MAIL_TYPES:
        raise Unresumable(f"its mail type {mail_type!r} is not one sbatch accepts")
    shared = record.get("shared")
    if shared not in (None, "", *_SHARING):
        raise Unresumable(f"its sharing mode {shared!r} is not one the agent knows how to ask for")
    profile = record.get("profile") or []
    nice = _int(record.get("nice"))
    return SbatchOptions(
        partition=_text(record.get("partition")),
        account=_text(record.get("account")),
        qos=_text(record.get("qos")),
        reservation=_text(record.get("resv_name")),
        nodes=nodes,
        ntasks=_int(record.get("tasks")) if "SLURM_NTASKS" in environment else None,
        ntasks_per_node=_int(record.get("tasks_per_node")) or None,
        ntasks_per_socket=_int(record.get("tasks_per_socket")) or None,
        ntasks_per_core=_int(record.get("tasks_per_core")) or None,
        ntasks_per_gpu=_int(details.get("ntasks_per_gpu")) or None,
        cpus_per_task=_int(details.get("cpus_per_task")) if "JOB_CPUS_SET" in flags else None,
        mincpus=_int(record.get("minimum_cpus_per_node")) or None,
        sockets_per_node=_int(record.get("sockets_per_node")) or None,
        cores_per_socket=_int(record.get("cores_per_socket")) or None,
        threads_per_core=_int(record.get("threads_per_core")) or None,
        mem_mb=_int(record.get("memory_per_node")) if mem_set and record.get("memory_per_node") is not None else None,
        mem_per_cpu_mb=_int(record.get("memory_per_cpu")) if mem_set and record.get("memory_per_cpu") is not None else None,
        mem_per_gpu=_gpu_tres(record.get("memory_per_tres"), "memory_per_tres"),
        tmp_mb=_int(record.get("minimum_tmp_disk_per_node")) or None,
        gres=_gres(record.get("tres_per_node")),
        gpus=_gpu_tres(record.get("tres_per_job"), "tres_per_job"),
        gpus_per_task=_gpu_tres(record.get("tres_per_task"), "tres_per_task"),
        gpus_per_socket=_gpu_tres(record.get("tres_per_socket"), "tres_per_socket"),
        cpus_per_gpu=_gpu_tres(record.get("cpus_per_tres"), "cpus_per_tres"),
        gpu_bind=_gpu_setting(record.get("tres_bind"), "tres_bind"),
        gpu_freq=_gpu_setting(record.get("tres_freq"), "tres_freq"),
        gres_flags="enforce-binding" if "GRES_ENFORCE_BIND" in flags else "disable-binding" if "GRES_DISABLE_BIND" in flags else None,
        constraint=_text(record.get("features")),
        prefer=_text(record.get("prefer")),
        batch_features=_text(record.get("batch_features")),
        sharing=_SHARING.get(str(shared)) if shared else None,
        contiguous=bool(record.get("contiguous")),
        spread_job="SPREAD_JOB" in flags,
        use_min_nodes="USE_MIN_NODES" in flags,
        licenses=_text(record.get("licenses")),
        time_minutes=_int(record.get("time_limit")) or None,
        time_min_minutes=_int(record.get("time_minimum")) or None,
        deadline=_int(record.get("deadline")) or None,
        delay_boot_minutes=(_int(record.get("delay_boot")) // 60) or None,
        nodelist=_nodelist(record.get("required_nodes"), "required_nodes"),
        exclude=_nodelist(record.get("excluded_nodes"), "excluded_nodes"),
        output=_text(record.get("standard_output")),
        error=_text(record.get("standard_error")),
        input=_text(record.get("standard_input")),
        open_mode=_OPEN_MODE.get(environment.get("SLURM_OPEN_MODE", "")),
        mail_user=details.get("mail_user") or None,
        mail_type=mail_type or None,
        requeue=bool(record["requeue"]) if record.get("requeue") is not None else None,
        nice=nice if nice > 0 else None,
        wckey=_text(record.get("wckey")),
        dependency=dependency,
        kill_on_invalid_dep=kill_on_invalid_dep,
        container=_text(record.get("container")),
        mcs_label=_text(record.get("mcs_label")),
        profile=",".join(str(p).lower() for p in profile) or None,
    )


def _text(value: object) -> str | None:
    text = "" if value is None else str(value)
    if _CONTROL.search(text):
        raise Unresumable(f"{text[:60]!r} has a control character")
    return text or None


def _int(value: object) -> int:
    if value is None or value == "" or value == "N/A":
        return 0
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise Unresumable(f"{value!r} is not a number")
    return int(value)


def _gres(value: object) -> str | None:
    """tres_per_node ``gres:gpu:1,gres:nic:2`` -> ``--gres=gpu:1,nic:2`` (``--gpus-per-node`` records the same)."""
    text = _text(value)
    if not text:
        return None
    parts = text.split(",")
    if not all(p.startswith("gres:") and len(p) > 5 for p in parts):
        raise Unresumable(f"its per-node TRES {text!r} is not generic resources the agent can ask for again")
    return ",".join(p.removeprefix("gres:") for p in parts)


def _gpu_tres(value: object, field: str) -> str | None:
    """``gres:gpu[:type]:N`` -> ``[type:]N`` for the --gpus*/--cpus-per-gpu/--mem-per-gpu options, which
    are the only way 22.05's sbatch asks for these (no --tres-per-task or per-job GRES)."""
    text = _text(value)
    if not text:
        return None
    if not _GPU_TRES.fullmatch(text):
        raise Unresumable(f"its {field} {text!r} is not a GPU request the agent can ask for again")
    return text.removeprefix("gres:gpu:")


def _gpu_setting(value: object, field: str) -> str | None:
    text = _text(value)
    if not text:
        return None
    if not text.startswith("gpu:"):
        raise Unresumable(f"its {field} {text!r} is not a GPU setting the agent can ask for again")
    return text.removeprefix("gpu:")


def _nodelist(value: object, field: str) -> str | None:
    text = _text(value)
    if text and not _NODELIST.fullmatch(text):
        raise Unresumable(f"its {field} {text!r} is not a Slurm node list")
    return text
