"""Slurm's JSON, read into the agent's own types: the one module that knows Slurm's field names and shapes.

Every version a HyperPod cluster runs is read to the same answers (fixtures of the real 22.05 and 24.11
in tests/fixtures/slurm; the shapes from SchedMD/slurm ``src/plugins/openapi/v0.0.38`` and
``src/plugins/data_parser/v0.0.39``-``v0.0.43``):

- 22.05 (openapi/v0.0.38): ``sinfo --json`` dumps the nodes; a node's ``state`` is one lower-case word
  with ``state_flags`` apart; numbers are plain (null or 2**32-2 when unset); ``job_state`` is
  squeue's word (a flag such as COMPLETING over the base state); ``exit_code`` a wait status; output
  paths as given (``%j`` kept); TRES ``gres:gpu:1``; job flags under their 22.05 names.
- 23.02 (data_parser/v0.0.39): ``sinfo --json`` groups nodes (``scontrol show nodes --json`` dumps
  them); node ``state`` is a list of the base and its flags; numbers are ``{set, infinite, number}``;
  ``job_state`` still a word; ``exit_code`` a wrapped wait status; output paths expanded for the job.
- 23.11-24.11 (v0.0.40-v0.0.42): ``job_state`` a list (base and flags); ``exit_code`` is
  ``{status, return_code, signal}``; features lists; flags renamed (JOB_MEM_SET is
  EXACT_MEMORY_REQUESTED...); TRES ``gres/gpu:1``.
- 25.05 (v0.0.43): as v0.0.42, with output paths as given again.

Which printer wrote an answer is read from its ``meta`` (shape_of), never assumed. Anything Slurm
leaves unset (null, ``set: false``, 2**32-2) or infinite reads as None; a time limit's INFINITE is also
told apart (``time_unlimited``: the copy asks for UNLIMITED, not the partition's default). A field of an
unexpected type raises SlurmOutputUnreadable: a misread would act on the wrong node or job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_recovery_agent.output_paths import unexpanded

NO_VAL = {16: 0xFFFE, 32: 0xFFFFFFFE, 64: 0xFFFFFFFFFFFFFFFE}  # and +1: INFINITE
# Node base states (the rest of a 23.02+ state list are flags), as 22.05 names them (lower case).
_NODE_BASES = ("unknown", "down", "idle", "allocated", "error", "mixed", "future")
_JOB_BASES = frozenset(
    {"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
     "DEADLINE", "OUT_OF_MEMORY"}
)  # fmt: skip
# squeue's one word for a job (job_state_string() in src/common/slurm_protocol_defs.c): the first of
# these flags it carries, else its base state. 22.05's JSON says that word; 23.11+ list base and flags.
_STATE_WORD_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                     "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")  # fmt: skip
# Job flags renamed in 23.02 (v0.0.39's spelling GRED_ included), back to the names 22.05 printed.
_JOB_FLAG_22_05 = {
    "KILL_INVALID_DEPENDENCY": "KILL_INV_DEP",
    "NO_KILL_INVALID_DEPENDENCY": "NO_KILL_INV_DEP",
    "HAS_STATE_DIRECTORY": "HAS_STATE_DIR",
    "TESTING_BACKFILL": "BACKFILL_TEST",
    "GRES_BINDING_ENFORCED": "GRES_ENFORCE_BIND",
    "PREFER_MINIMUM_NODE_COUNT": "USE_MIN_NODES",
    "SKIP_TRES_STRING_ACCOUNTING": "TRES_STR_CALC",
    "SIBLING_CLUSTER_UPDATE_ONLY": "SIB_JOB_FLUSH",
    "HETEROGENEOUS_JOB": "HET_JOB_FLAG",
    "EXACT_CPU_COUNT_REQUESTED": "JOB_CPUS_SET",
    "TOP_PRIORITY_JOB": "TOP_PRIO_TMP",
    "ACCRUE_COUNT_CLEARED": "JOB_ACCRUE_OVER",
    "GRES_BINDING_DISABLED": "GRES_DISABLE_BIND",
    "GRED_BINDING_DISABLED": "GRES_DISABLE_BIND",
    "EXACT_MEMORY_REQUESTED": "JOB_MEM_SET",
}
# --exclusive and friends: 22.05's word; 23.11+ say "oversubscribe" for 22.05's "shared".
_SHARED_22_05 = {"oversubscribe": "shared"}
SHAPE_22_05_PARSER = "v0.0.38"
# The data_parser a release's commands print with when the answer names none: the newest it ships
# (SchedMD/slurm src/plugins/data_parser/ at each release's tag; 22.05 and before: openapi/v0.0.38).
_PARSER_OF_RELEASE = {(23, 2): "v0.0.39", (23, 11): "v0.0.40", (24, 5): "v0.0.41", (24, 11): "v0.0.42", (25, 5): "v0.0.43"}
_PARSER = re.compile(r"v(\d+)\.(\d+)\.(\d+)")
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


class SlurmOutputUnreadable(ValueError):
    """Slurm's JSON does not have the shape of any version the reader knows; the message names the field."""


@dataclass(frozen=True)
class Shape:
    """Which of Slurm's JSON printers wrote an answer: its data_parser (or 22.05's openapi) version."""

    parser: str = SHAPE_22_05_PARSER
    release: str = ""

    @property
    def _version(self) -> tuple[int, int, int]:
        found = _PARSER.fullmatch(self.parser)
        return (int(found[1]), int(found[2]), int(found[3])) if found else (0, 0, 38)

    @property
    def expands_paths(self) -> bool:
        """v0.0.39-v0.0.42 print a job's output paths expanded for that job (slurm_get_job_stdout)."""
        return (0, 0, 39) <= self._version <= (0, 0, 42)

    @property
    def lists_arguments(self) -> bool:
        """slurmctld up to 22.05 joins a batch script's arguments to its path in ``command``; 23.02+
        report the path alone (src/slurmctld/job_mgr.c, _pack_default_job_details: argv[0])."""
        return self._version <= (0, 0, 38)

    @property
    def records_open_mode(self) -> bool:
        """sbatch up to 24.05 records --open-mode as SLURM_OPEN_MODE in the job's environment; 24.11+
        nowhere a client can read (its data_parser is v0.0.42+)."""
        return self._version <= (0, 0, 41)


SHAPE_22_05 = Shape(SHAPE_22_05_PARSER, "22.05")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def shape_of(data: Mapping[str, Any]) -> Shape:
    """The printer of a whole answer, from its ``meta``: 22.05 names it in ``meta.plugin.type``
    (openapi/v0.0.38) beside ``meta.Slurm``; 23.02 in ``meta.plugins.data_parser`` beside ``meta.Slurm``
    (src/interfaces/data_parser.c, _populate_cli_response_meta); 23.11+ in ``meta.plugin.data_parser``
    beside ``meta.slurm``. A meta naming no parser is read by its release; one naming neither is
    refused (every Slurm names its release). No meta at all reads as 22.05 (the tests' doubles)."""
    if "meta" not in data:
        return SHAPE_22_05
    meta = _mapping(data.get("meta"))
    slurm = _mapping(meta.get("slurm") or meta.get("Slurm"))
    release = str(slurm.get("release") or "")
    for plugin in (_mapping(meta.get("plugin")), _mapping(meta.get("plugins"))):
        for key in ("data_parser", "type"):
            found = _PARSER.search(str(plugin.get(key) or ""))
            if found:
                return Shape(found[0], release)
    numbers = release_of(release)
    if numbers is not None and (22, 5) <= numbers[:2] < (23, 2):
        return Shape(SHAPE_22_05_PARSER, release)
    if numbers is not None and numbers[:2] in _PARSER_OF_RELEASE:
        return Shape(_PARSER_OF_RELEASE[numbers[:2]], release)
    raise SlurmOutputUnreadable(f"meta names no data_parser and no release the reader knows: {json.dumps(meta)[:160]}")


def release_of(version_text: str) -> tuple[int, int, int] | None:
    """(major, minor, micro) from ``scontrol --version`` ("slurm-wlm 24.11.5", "slurm 22.05.8")."""
    found = _RELEASE.search(version_text)
    return (int(found[1]), int(found[2]), int(found[3] or 0)) if found else None


def dumps_nodes_with_sinfo(release: tuple[int, int, int] | None) -> bool:
    """Whether ``sinfo --json`` lists nodes (22.05 and before); later, ``scontrol show nodes --json`` does."""
    return release is not None and release[:2] < (23, 2)


def parse_answer(text: str) -> dict[str, Any]:
    """A --json command's output: one JSON object."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SlurmOutputUnreadable(f"not JSON: {text[:80]!r}") from exc
    if not isinstance(data, dict):
        raise SlurmOutputUnreadable(f"not a JSON object: {text[:80]!r}")
    return data


def answer_errors(data: Mapping[str, Any]) -> tuple[bool, str]:
    """(slurmctld could not be reached, the answer's errors as text or ""). 22.05 writes
    ``{error, errno}``, 23.02+ ``{description, error_number, error, source}``; both answer an
    unreachable slurmctld with errno -1 and exit 0."""
    errors = data.get("errors") or []
    if not isinstance(errors, list) or not all(isinstance(error, Mapping) for error in errors):
        raise SlurmOutputUnreadable(f"errors: {str(errors)[:80]!r} is not a list of errors")
    unreachable = any(error.get("errno", error.get("error_number")) == -1 for error in errors)
    return unreachable, json.dumps(errors) if errors else ""


# --- values -------------------------------------------------------------------------------------
def _number(record: Mapping[str, Any], key: str, bits: int = 32) -> int | None:
    """A count or time: plain, or ``{set, infinite, number}``; None when unset or infinite."""
    value = record.get(key)
    if isinstance(value, Mapping):
        if not value.get("set") or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SlurmOutputUnreadable(f"{key}: {value!r} is not a number")
    number = int(value)
    return None if number in (NO_VAL[bits], NO_VAL[bits] + 1) else number


def _infinite(record: Mapping[str, Any], key: str, shape: Shape) -> bool:
    """A limit that is INFINITE: ``{infinite: true}``, 2**32-1, or (22.05's openapi/v0.0.38, which prints
    INFINITE as null and NO_VAL as 2**32-2) null."""
    value = record.get(key)
    if isinstance(value, Mapping):
        return bool(value.get("infinite"))
    if value is None:
        return key in record and shape.parser == SHAPE_22_05_PARSER
    return bool(value == NO_VAL[32] + 1)


def _text(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise SlurmOutputUnreadable(f"{key}: {value!r} is not text")


def _words(record: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A list of words, or 22.05's comma-separated string of them."""
    value = record.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(word.strip() for word in value.split(",") if word.strip())
    if isinstance(value, list) and all(isinstance(word, str) for word in value):
        return tuple(word.strip() for word in value if word.strip())
    raise SlurmOutputUnreadable(f"{key}: {value!r} is not a list of words")


def _flag(record: Mapping[str, Any], key: str) -> bool | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    raise SlurmOutputUnreadable(f"{key}: {value!r} is not true or false")


def _tres(record: Mapping[str, Any], key: str) -> str:
    """A TRES list in 22.05's spelling: 23.02+ write ``gres/gpu:1`` (per task ``gres/gpu=1``) for
    ``gres:gpu:1``, and list a job's --cpus-per-task among its per-task TRES as ``cpu=N`` (22.05 kept it
    apart, as capture.py reads it)."""
    parts = []
    for part in _text(record, key).split(","):
        if part.startswith("gres/"):
            name, equals, count = part.removeprefix("gres/").rpartition("=")
            part = f"gres:{name}:{count}" if equals else f"gres:{part.removeprefix('gres/')}"
        elif key == "tres_per_task" and re.fullmatch(r"cpu[=:]\d+", part):
            continue
        if part:
            parts.append(part)
    return ",".join(parts)


def _gpu_binding(record: Mapping[str, Any], per_task: str) -> str:
    """--gpu-bind in 22.05's spelling (``gpu:closest``; 23.02+ write ``gres/gpu:closest``), without the
    ``per_task:N`` binding 23.11+ add on their own for --gpus-per-task=N (sbatch implies it again)."""
    binding = ",".join(part.removeprefix("gres/") for part in _text(record, "tres_bind").split(",") if part)
    gpus_per_task = re.fullmatch(r"gres:gpu:(\d+)", per_task)
    return "" if gpus_per_task and binding == f"gpu:per_task:{gpus_per_task[1]}" else binding


# --- nodes --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlurmNode:
    """A node as slurmctld reports it, the same on every version."""

    name: str
    state: str  # the base state in 22.05's lower case: idle, allocated, mixed, down, unknown...
    flags: tuple[str, ...] = ()  # upper case, sorted: DRAIN, NOT_RESPONDING, CLOUD...
    reason: str = ""
    partitions: tuple[str, ...] = ()
    features: frozenset[str] = frozenset()  # active ones: what a job's --constraint is matched against
    available_features: frozenset[str] = frozenset()


def read_nodes(data: Mapping[str, Any]) -> list[SlurmNode]:
    """The nodes of ``sinfo --json`` (22.05) or ``scontrol show nodes --json`` (23.02+)."""
    if "nodes" not in data and "sinfo" in data:
        raise SlurmOutputUnreadable("sinfo --json of Slurm 23.02+ groups nodes: their dump is scontrol show nodes --json")
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not all(isinstance(node, Mapping) for node in nodes):
        raise SlurmOutputUnreadable(f"nodes: {str(nodes)[:80]!r} is not a list of nodes")
    return [read_node(node) for node in nodes]


def read_node(node: Mapping[str, Any]) -> SlurmNode:
    name = _text(node, "name")
    if not name:
        raise SlurmOutputUnreadable("a node without a name")
    words = [word.upper() for word in _words(node, "state")] if isinstance(node.get("state"), list) else [_text(node, "state").upper()]
    base = next((word.lower() for word in words if word.lower() in _NODE_BASES), "")
    flags = {word for word in words if word and word.lower() not in _NODE_BASES}
    flags |= {word.upper() for word in _words(node, "state_flags")}
    available = frozenset(_words(node, "features"))
    active = frozenset(_words(node, "active_features"))
    return SlurmNode(
        name=name,
        state=base or "unknown",  # (a node with no state is not one to call healthy)
        flags=tuple(sorted(flags)),
        reason=_text(node, "reason"),
        partitions=_words(node, "partitions"),
        features=active or available,
        available_features=available,
    )


# --- jobs ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExitStatus:
    """How a job's batch script ended: its exit code and the signal that ended it (0: none)."""

    code: int
    signal: int


@dataclass(frozen=True)
class SlurmJob:
    """A job as ``squeue --json`` reports it, the same on every version. Texts are "" when unset;
    numbers None when unset or infinite."""

    job_id: str
    name: str = ""
    state: str = "UNKNOWN"  # squeue's word (%T): COMPLETING, CONFIGURING... over the base state
    base_state: str | None = None  # PENDING, RUNNING, FAILED...: 22.05 and 23.02 hide it under a flag's word
    state_flags: frozenset[str] = frozenset()
    state_reason: str = ""
    user_name: str = ""
    user_id: int = -1
    group_name: str = ""
    group_id: int = -1
    comment: str = ""
    nodes: str = ""  # Slurm's node list expression: ip-10-1-0-[1-2]
    # The same nodes one by one, as the job's resources list them (None: the record lists none).
    allocated_nodes: tuple[str, ...] | None = None
    node_count: int | None = None
    max_nodes: int | None = None
    batch_flag: bool = False
    work_dir: str = ""
    command: str = ""
    restart_count: int = 0
    end_time: int | None = None  # epoch seconds
    exit: ExitStatus | None = None  # None: still running
    flags: frozenset[str] = frozenset()  # under their 22.05 names
    array_job_id: int | None = None
    array_task_id: int | None = None
    het_job_id: int | None = None
    het_job_offset: int | None = None
    het_job_id_set: str = ""
    # what the job asked for (capture.py turns these back into sbatch options)
    partition: str = ""
    account: str = ""
    qos: str = ""
    reservation: str = ""
    wckey: str = ""
    tasks: int | None = None
    tasks_per_node: int | None = None
    tasks_per_socket: int | None = None
    tasks_per_core: int | None = None
    minimum_cpus_per_node: int | None = None
    sockets_per_node: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    memory_per_node: int | None = None
    memory_per_cpu: int | None = None
    minimum_tmp_disk_per_node: int | None = None
    tres_per_node: str = ""
    tres_per_job: str = ""
    tres_per_task: str = ""
    tres_per_socket: str = ""
    cpus_per_tres: str = ""
    memory_per_tres: str = ""
    tres_bind: str = ""
    tres_freq: str = ""
    constraint: str = ""  # the job's --constraint (squeue's "features")
    prefer: str = ""
    batch_features: str = ""
    shared: str | None = None  # 22.05's word: none (--exclusive), user, mcs, shared (--oversubscribe)
    contiguous: bool = False
    licenses: str = ""
    time_limit: int | None = None  # minutes
    time_unlimited: bool = False  # UNLIMITED (INFINITE), which time_limit's None does not tell from unset
    time_minimum: int | None = None
    deadline: int | None = None  # epoch seconds
    delay_boot: int | None = None  # seconds
    required_nodes: str = ""
    excluded_nodes: str = ""
    standard_output: str = ""  # as the owner gave it (%j kept); "" when Slurm's default
    standard_error: str = ""  # "" when it goes with the output
    standard_input: str = ""
    dependency: str = ""
    requeue: bool | None = None
    nice: int = 0
    profile: tuple[str, ...] = ()
    burst_buffer: str = ""
    cluster_features: str = ""
    network: str = ""
    cpu_frequency: tuple[int | None, int | None, int | None] = (None, None, None)  # minimum, maximum, governor
    reboot: bool = False
    container: str = ""
    mcs_label: str = ""
    # What the Slurm that printed it records of a submission (see Shape): the script's arguments in
    # ``command``, and --open-mode in the job's environment.
    command_lists_arguments: bool = True
    records_open_mode: bool = True


def read_jobs(data: Mapping[str, Any]) -> list[SlurmJob]:
    """The jobs of ``squeue --json`` or ``scontrol show jobs --json``."""
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not all(isinstance(job, Mapping) for job in jobs):
        raise SlurmOutputUnreadable(f"jobs: {str(jobs)[:80]!r} is not a list of jobs")
    shape = shape_of(data)
    return [read_job(job, shape) for job in jobs]


def read_job(record: Mapping[str, Any], shape: Shape = SHAPE_22_05) -> SlurmJob:
    job_id = _number(record, "job_id")
    if job_id is None or job_id <= 0:
        raise SlurmOutputUnreadable(f"job_id: {record.get('job_id')!r} is not a job id")
    state, base, flags = _job_state(record)
    output, error, stdin = _paths(record, shape, str(job_id))
    return SlurmJob(
        job_id=str(job_id),
        name=_text(record, "name"),
        state=state,
        base_state=base,
        state_flags=flags,
        state_reason=_text(record, "state_reason"),
        user_name=_text(record, "user_name"),
        user_id=_id(record, "user_id"),
        group_name=_text(record, "group_name"),
        group_id=_id(record, "group_id"),
        comment=_text(record, "comment"),
        nodes=_text(record, "nodes"),
        allocated_nodes=_allocated_nodes(record),
        node_count=_number(record, "node_count"),
        max_nodes=_number(record, "max_nodes"),
        batch_flag=bool(_flag(record, "batch_flag")),
        work_dir=_text(record, "current_working_directory"),
        command=_text(record, "command"),
        restart_count=_number(record, "restart_cnt", 16) or 0,
        end_time=_number(record, "end_time", 64) or None,
        exit=_exit_status(record),
        flags=frozenset(_JOB_FLAG_22_05.get(flag, flag) for flag in _words(record, "flags")),
        array_job_id=_number(record, "array_job_id"),
        array_task_id=_number(record, "array_task_id"),
        het_job_id=_number(record, "het_job_id"),
        het_job_offset=_number(record, "het_job_offset"),
        het_job_id_set=_text(record, "het_job_id_set"),
        partition=_text(record, "partition"),
        account=_text(record, "account"),
        qos=_text(record, "qos"),
        reservation=_text(record, "resv_name"),
        wckey=_text(record, "wckey"),
        tasks=_number(record, "tasks"),
        tasks_per_node=_number(record, "tasks_per_node", 16),
        tasks_per_socket=_number(record, "tasks_per_socket", 16),
        tasks_per_core=_number(record, "tasks_per_core", 16),
        minimum_cpus_per_node=_number(record, "minimum_cpus_per_node", 16),
        sockets_per_node=_number(record, "sockets_per_node", 16),
        cores_per_socket=_number(record, "cores_per_socket", 16),
        threads_per_core=_number(record, "threads_per_core", 16),
        memory_per_node=_number(record, "memory_per_node", 64) or None,  # 23.02+: 0 for none
        memory_per_cpu=_number(record, "memory_per_cpu", 64) or None,
        minimum_tmp_disk_per_node=_number(record, "minimum_tmp_disk_per_node"),
        tres_per_node=_tres(record, "tres_per_node"),
        tres_per_job=_tres(record, "tres_per_job"),
        tres_per_task=_tres(record, "tres_per_task"),
        tres_per_socket=_tres(record, "tres_per_socket"),
        cpus_per_tres=_tres(record, "cpus_per_tres"),
        memory_per_tres=_tres(record, "memory_per_tres"),
        tres_bind=_gpu_binding(record, _tres(record, "tres_per_task")),
        tres_freq=_text(record, "tres_freq"),
        constraint=_text(record, "features"),
        prefer=_text(record, "prefer"),
        batch_features=_text(record, "batch_features"),
        shared=_shared(record),
        contiguous=bool(_flag(record, "contiguous")),
        licenses=_text(record, "licenses"),
        time_limit=_number(record, "time_limit"),
        time_unlimited=_infinite(record, "time_limit", shape),
        time_minimum=_number(record, "time_minimum"),
        deadline=_number(record, "deadline", 64) or None,
        delay_boot=_number(record, "delay_boot"),
        required_nodes=_text(record, "required_nodes"),
        excluded_nodes=_text(record, "excluded_nodes"),
        standard_output=output,
        standard_error=error,
        standard_input=stdin,
        dependency=_text(record, "dependency"),
        requeue=_flag(record, "requeue"),
        nice=_nice(record),
        profile=tuple(word for word in _words(record, "profile") if word.upper() != "NOT_SET"),
        burst_buffer=_text(record, "burst_buffer"),
        cluster_features=_text(record, "cluster_features"),
        network=_text(record, "network"),
        cpu_frequency=(
            _number(record, "cpu_frequency_minimum"),
            _number(record, "cpu_frequency_maximum"),
            _number(record, "cpu_frequency_governor"),
        ),
        reboot=bool(_flag(record, "reboot")),
        container=_text(record, "container"),
        mcs_label=_text(record, "mcs_label"),
        command_lists_arguments=shape.lists_arguments,
        records_open_mode=shape.records_open_mode,
    )


def _allocated_nodes(record: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The job's nodes by name: ``job_resources.allocated_nodes[].nodename`` up to 23.02,
    ``job_resources.nodes.allocation[].name`` from 23.11; None when the record has neither."""
    resources = _mapping(record.get("job_resources"))
    nodes = resources.get("nodes")
    entries, key = (nodes.get("allocation"), "name") if isinstance(nodes, Mapping) else (resources.get("allocated_nodes"), "nodename")
    if not isinstance(entries, list):
        return None
    names = [entry.get(key) if isinstance(entry, Mapping) else None for entry in entries]
    if not all(isinstance(name, str) and name for name in names):
        raise SlurmOutputUnreadable(f"job_resources: a node without a name in {str(entries)[:80]!r}")
    return tuple(str(name) for name in names)


def _job_state(record: Mapping[str, Any]) -> tuple[str, str | None, frozenset[str]]:
    """(squeue's word, the base state, the flags)."""
    raw = record.get("job_state")
    if isinstance(raw, list):
        words = [word.upper() for word in _words(record, "job_state")]
        base = next((word for word in words if word in _JOB_BASES), None)
        flags = frozenset(word for word in words if word not in _JOB_BASES)
        word = next((flag for flag in _STATE_WORD_FLAGS if flag in flags), base)
        return word or "UNKNOWN", base, flags
    text = _text(record, "job_state").upper()
    if not text:
        return "UNKNOWN", None, frozenset()
    return text, (text if text in _JOB_BASES else None), (frozenset({text}) if text in _STATE_WORD_FLAGS else frozenset())


def _id(record: Mapping[str, Any], key: str) -> int:
    number = _number(record, key)
    return -1 if number is None else number


def _nice(record: Mapping[str, Any]) -> int:
    value = record.get("nice")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise SlurmOutputUnreadable(f"nice: {value!r} is not a number")
    return value


def _shared(record: Mapping[str, Any]) -> str | None:
    words = _words(record, "shared")
    if len(words) > 1:
        raise SlurmOutputUnreadable(f"shared: {words!r} is more than one sharing mode")
    return _SHARED_22_05.get(words[0], words[0]) if words else None


def _exit_status(record: Mapping[str, Any]) -> ExitStatus | None:
    """22.05 and 23.02: a wait status (plain, or wrapped); 23.11+: ``{status, return_code, signal}``."""
    value = record.get("exit_code")
    if isinstance(value, Mapping) and "status" in value:
        if "PENDING" in (word.upper() for word in _words(value, "status")):
            return None
        signal = value.get("signal")
        return ExitStatus(
            code=(_number(value, "return_code") or 0) & 0xFF,
            signal=((_number(signal, "id") or 0) if isinstance(signal, Mapping) else 0) & 0x7F,
        )
    wait_status = _number(record, "exit_code")
    return None if wait_status is None else ExitStatus(code=(wait_status >> 8) & 0xFF, signal=wait_status & 0x7F)


def _paths(record: Mapping[str, Any], shape: Shape, job_id: str) -> tuple[str, str, str]:
    """The job's output, error and input paths as its owner gave them (``%j`` kept)."""
    output, error, stdin = (_text(record, key) for key in ("standard_output", "standard_error", "standard_input"))
    if not shape.expands_paths:
        return output, error, stdin
    # 23.02-24.11 print them expanded for this job (and the output's path for an error given none):
    # the job id goes back to %j, and Slurm's own defaults back to none, as 22.05 and 25.05 print them.
    default = f"{_text(record, 'current_working_directory')}/slurm-{job_id}.out"  # (cwd / gives //slurm-1.out)
    error = "" if error in (output, default) else unexpanded(error, job_id)
    output = "" if output == default else unexpanded(output, job_id)
    return output, error, unexpanded(stdin, job_id)
