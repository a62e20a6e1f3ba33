"""The sbatch options a job was submitted with: read from its squeue record (capture.py says where each
comes from on each Slurm version), and turned back into sbatch arguments."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hyperpod_recovery_agent.output_paths import names_job_id
from hyperpod_recovery_agent.slurm_json import SlurmJob

# sbatch's --mail-type words, as scontrol prints them back (ALL comes back expanded).
MAIL_TYPES = frozenset(
    {"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "ARRAY_TASKS"}
    | {f"TIME_LIMIT{percent}" for percent in ("", "_90", "_80", "_50")}
)
Sharing = Literal["--exclusive", "--exclusive=user", "--exclusive=mcs", "--oversubscribe"]
OpenMode = Literal["append", "truncate"]
# squeue's "shared" -> the sbatch option that asks for it; None is the partition's default.
_SHARING: dict[str, Sharing] = {"none": "--exclusive", "user": "--exclusive=user", "mcs": "--exclusive=mcs", "shared": "--oversubscribe"}
# SLURM_OPEN_MODE, which sbatch sets only for --open-mode (the allocation's own mode is not reported).
_OPEN_MODE: dict[str, OpenMode] = {"a": "append", "t": "truncate"}
_NODELIST = re.compile(r"[A-Za-z0-9._,\[\]-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_GPU_TRES = re.compile(r"gres:gpu(?::[A-Za-z0-9_.-]+)?:\d+")


class Unresumable(Exception):
    """The job cannot be resubmitted as it was; the message says why (it becomes ``unresumable``)."""


def has_control_character(text: str) -> bool:
    """Newlines, NUL, escapes: what a value passed to sbatch (one line in Slurm's records) must not hold."""
    return _CONTROL.search(text) is not None


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
    time_minutes: int | Literal["UNLIMITED"] | None = None  # None: the partition's default
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


def sbatch_options(record: SlurmJob, environment: Mapping[str, str], details: Mapping[str, str]) -> SbatchOptions:
    """The options from the squeue record, scontrol's extra lines and the environment's marks."""
    flags = record.flags
    # A requeued job is pending again, with the record its first start rewrote.
    started = record.state != "PENDING" or bool(record.restart_count)
    for value, what in (
        (record.burst_buffer, "a burst buffer"),
        (record.cluster_features, "cluster constraints (federation)"),
        (record.network, "a network option"),
    ):
        if value:
            raise Unresumable(f"it asks for {what} ({value[:60]!r}), which the agent does not re-apply")
    if any(value is not None for value in record.cpu_frequency):
        raise Unresumable("it asks for a CPU frequency (--cpu-freq), which Slurm 22.05 does not report in a form sbatch accepts back")
    if record.reboot:
        raise Unresumable("it asks for a node reboot (--reboot), which only an administrator may request")
    if details.get("switches"):
        raise Unresumable("it asks for a switch count (--switches), which the agent does not re-apply")
    if started and record.time_minimum:
        raise Unresumable(
            "it asked for --time-min: once a job has started Slurm 22.05 reports the time limit it granted "
            f"({record.time_limit} min), not the one asked for"
        )
    node_count, max_nodes = record.node_count or 0, record.max_nodes or 0
    if started:
        # 22.05 resets max_nodes when a job starts and node_count becomes the nodes it got: the
        # size it ran at is all there is (a range, or a count Slurm derived from tasks, looks the same).
        nodes = str(node_count) if node_count else None
    elif max_nodes:
        # (24.11 shows a job that asked for no count with max_nodes = node_count: the count it chose)
        nodes = str(node_count) if node_count == max_nodes else f"{node_count}-{max_nodes}"
    else:
        nodes = None  # none asked for: Slurm derives it from tasks and CPUs again
    # A dependency left (the job never started) is carried; one that was met (sbatch recorded
    # SLURM_JOB_DEPENDENCY) is overridden with an empty one, so an #SBATCH line cannot wait again.
    dependency = re.sub(r"\([A-Za-z_]+\)", "", record.dependency) or ("" if "SLURM_JOB_DEPENDENCY" in environment else None)
    kill_on_invalid_dep: Literal["yes", "no"] | None = "yes" if "KILL_INV_DEP" in flags else "no" if "NO_KILL_INV_DEP" in flags else None
    mem_set = "JOB_MEM_SET" in flags
    mail_type = details.get("mail_type")
    if mail_type and not set(mail_type.split(",")) <= MAIL_TYPES:
        raise Unresumable(f"its mail type {mail_type!r} is not one sbatch accepts")
    shared = record.shared
    if shared not in (None, "", *_SHARING):
        raise Unresumable(f"its sharing mode {shared!r} is not one the agent knows how to ask for")
    return SbatchOptions(
        partition=_text(record.partition),
        account=_text(record.account),
        qos=_text(record.qos),
        reservation=_text(record.reservation),
        nodes=nodes,
        ntasks=record.tasks if "SLURM_NTASKS" in environment else None,
        ntasks_per_node=record.tasks_per_node or None,
        ntasks_per_socket=record.tasks_per_socket or None,
        ntasks_per_core=record.tasks_per_core or None,
        ntasks_per_gpu=_int(details.get("ntasks_per_gpu")) or None,
        cpus_per_task=_int(details.get("cpus_per_task")) if "JOB_CPUS_SET" in flags else None,
        mincpus=record.minimum_cpus_per_node or None,
        sockets_per_node=record.sockets_per_node or None,
        cores_per_socket=record.cores_per_socket or None,
        threads_per_core=record.threads_per_core or None,
        mem_mb=record.memory_per_node if mem_set else None,
        mem_per_cpu_mb=record.memory_per_cpu if mem_set else None,
        mem_per_gpu=_gpu_tres(record.memory_per_tres, "memory_per_tres"),
        tmp_mb=record.minimum_tmp_disk_per_node or None,
        gres=_gres(record.tres_per_node),
        gpus=_gpu_tres(record.tres_per_job, "tres_per_job"),
        gpus_per_task=_gpu_tres(record.tres_per_task, "tres_per_task"),
        gpus_per_socket=_gpu_tres(record.tres_per_socket, "tres_per_socket"),
        cpus_per_gpu=_gpu_tres(record.cpus_per_tres, "cpus_per_tres"),
        gpu_bind=_gpu_setting(record.tres_bind, "tres_bind"),
        gpu_freq=_gpu_setting(record.tres_freq, "tres_freq"),
        gres_flags="enforce-binding" if "GRES_ENFORCE_BIND" in flags else "disable-binding" if "GRES_DISABLE_BIND" in flags else None,
        constraint=_text(record.constraint),
        prefer=_text(record.prefer),
        batch_features=_text(record.batch_features),
        sharing=_SHARING.get(shared) if shared else None,
        contiguous=record.contiguous,
        spread_job="SPREAD_JOB" in flags,
        use_min_nodes="USE_MIN_NODES" in flags,
        licenses=_text(record.licenses),
        time_minutes="UNLIMITED" if record.time_unlimited else record.time_limit or None,
        time_min_minutes=record.time_minimum or None,
        deadline=record.deadline,
        delay_boot_minutes=((record.delay_boot or 0) // 60) or None,
        nodelist=_nodelist(record.required_nodes, "required_nodes"),
        exclude=_nodelist(record.excluded_nodes, "excluded_nodes"),
        output=_text(record.standard_output),
        error=_text(record.standard_error),
        input=_text(record.standard_input),
        open_mode=_open_mode(record, environment),
        mail_user=details.get("mail_user") or None,
        mail_type=mail_type or None,
        requeue=record.requeue,
        nice=record.nice if record.nice > 0 else None,
        wckey=_text(record.wckey),
        dependency=dependency,
        kill_on_invalid_dep=kill_on_invalid_dep,
        container=_text(record.container),
        mcs_label=_text(record.mcs_label),
        profile=",".join(word.lower() for word in record.profile) or None,
    )


def _open_mode(record: SlurmJob, environment: Mapping[str, str]) -> OpenMode | None:
    """--open-mode as sbatch recorded it. Slurm 24.11 records it nowhere: a copy writing to the very file
    its job wrote (no %j in the path) appends, so that it never erases what the failed job wrote there."""
    if "SLURM_OPEN_MODE" in environment or record.records_open_mode:
        return _OPEN_MODE.get(environment.get("SLURM_OPEN_MODE", ""))
    same_file = [
        path for path in (record.standard_output, record.standard_error) if path and not names_job_id(path) and path != "/dev/null"
    ]
    return "append" if same_file else None


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
