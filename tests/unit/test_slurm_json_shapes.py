"""Property: one job or node, printed the way each Slurm version prints it, reads to the same answer
(agent/hyperpod_recovery_agent/slurm_json.py). The printers below follow SchedMD/slurm's
``src/plugins/openapi/v0.0.38`` (22.05) and ``data_parser/v0.0.39`` (23.02), ``v0.0.40``-``v0.0.42``
(23.11-24.11): a number plain or ``{set, infinite, number}``, a state a word or a list, features a
string or a list, an exit code a wait status or ``{status, return_code, signal}``, paths as given or
expanded, fields missing. Each answer carries its release's own ``meta`` and is read as the agent reads
it (read_jobs, which tells the printer from the meta)."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hyperpod_recovery_agent.slurm_json import SlurmJob, read_job, read_jobs, read_node
from tests.unit.test_slurm_json_versions import FIXTURES, METAS

NO_VAL, INFINITE = 0xFFFFFFFE, 0xFFFFFFFF
JOB_BASES = ["PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
             "DEADLINE", "OUT_OF_MEMORY"]  # fmt: skip
# job_state_string(): the first of these a job carries is squeue's word for it
WORD_FLAGS = ["COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT",
              "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING"]  # fmt: skip
NODE_BASES = ["UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"]
NODE_FLAGS = ["DRAIN", "NOT_RESPONDING", "COMPLETING", "CLOUD", "MAINTENANCE", "RESERVED", "POWERED_DOWN", "FAIL", "REBOOT_REQUESTED"]
# (22.05 name, 23.02+ name) of the job flags the agent reads; v0.0.39 spelt one GRED_
RENAMED = [("JOB_MEM_SET", "EXACT_MEMORY_REQUESTED"), ("JOB_CPUS_SET", "EXACT_CPU_COUNT_REQUESTED"),
           ("KILL_INV_DEP", "KILL_INVALID_DEPENDENCY"),
           ("NO_KILL_INV_DEP", "NO_KILL_INVALID_DEPENDENCY"), ("USE_MIN_NODES", "PREFER_MINIMUM_NODE_COUNT"),
           ("GRES_ENFORCE_BIND", "GRES_BINDING_ENFORCED"), ("GRES_DISABLE_BIND", "GRES_BINDING_DISABLED"), ("SPREAD_JOB", "SPREAD_JOB"),
           ("JOB_WAS_RUNNING", "JOB_WAS_RUNNING")]  # fmt: skip


@dataclass(frozen=True)
class Job:
    """What slurmctld knows of a job, before any printer shapes it."""

    job_id: int
    base: str
    flags: tuple[str, ...]
    node_count: int
    time_limit: int | None  # None: unset; -1: UNLIMITED
    memory: int | None
    gpus_per_node: int | None
    gpus_per_task: int | None
    job_flags: tuple[int, ...]  # indexes into RENAMED
    shared: str | None  # 22.05's word
    exit: tuple[int, int] | None  # (code, signal); None: still running
    end_time: int
    output: str  # a pattern as given; "" for Slurm's default
    error: str
    nice: int
    constraint: str
    order: int  # a seed for the order lists come in


FILE_NAME = st.text(alphabet="abcxyz_-.", min_size=1, max_size=8)
# sbatch's escapes: the printer of 23.02-24.11 expands some (%j, %4j, %x, %u), leaves others (%N, %t...).
# (Not %%N: printed "%N" like %N itself, it is read as %N; accepted, as the copy then writes a file of its own.)
ESCAPES = ["", "%j", "%%", "%4j", "%10j", "%N", "%5t", "%J", "%n", "%s", "%x", "%u", "%%j", "%A"]
PATTERN = st.one_of(
    st.just(""),
    st.builds(lambda a, b, c, d: f"/w/{a}{b}{c}{d}", FILE_NAME, st.sampled_from(ESCAPES), FILE_NAME, st.sampled_from(ESCAPES)),
)
jobs = st.builds(
    Job,
    job_id=st.integers(1, 10**7),
    base=st.sampled_from(JOB_BASES),
    flags=st.lists(st.sampled_from(WORD_FLAGS), unique=True, max_size=3).map(tuple),
    node_count=st.integers(1, 4096),
    time_limit=st.one_of(st.none(), st.just(-1), st.integers(1, 10**6)),
    memory=st.one_of(st.none(), st.integers(1, 10**7)),
    gpus_per_node=st.one_of(st.none(), st.integers(1, 8)),
    gpus_per_task=st.one_of(st.none(), st.integers(1, 8)),
    job_flags=st.lists(st.integers(0, len(RENAMED) - 1), unique=True, max_size=4).map(tuple),
    shared=st.sampled_from([None, "none", "shared", "user", "mcs"]),
    exit=st.one_of(st.none(), st.tuples(st.integers(0, 255), st.just(0)), st.tuples(st.just(0), st.integers(1, 64))),
    end_time=st.integers(0, 2**31),
    output=PATTERN,
    error=PATTERN,
    nice=st.integers(0, 10_000),
    constraint=st.sampled_from(["", "a100", "a100&efa"]),
    order=st.integers(0, 2**16),
)


def _word(job: Job) -> str:
    return next((flag for flag in WORD_FLAGS if flag in job.flags), job.base)


def _shuffled(items: list[str], seed: int) -> list[str]:
    random.Random(seed).shuffle(items)  # noqa: S311 - an order to print in, not a secret
    return items


def _wrapped(value: int | None) -> dict[str, Any]:
    if value is None:
        return {"set": False, "infinite": False, "number": 0}
    if value == -1:
        return {"set": False, "infinite": True, "number": 0}
    return {"set": True, "infinite": False, "number": value}


ESCAPE = re.compile(r"%%|%(\d*)([A-Za-z])")
USER, NAME, NODE = "alice", "llama", "ip-10-1-0-1"


def _expanded(pattern: str, job_id: int) -> str:
    """src/api/job_info.c, _fname_format (what 23.02-24.11 print): %% is a %; %A %a %b %j %u %x are
    expanded (a width zero-pads, at most 10); any other escape is printed as given."""

    def one(escape: re.Match[str]) -> str:
        if escape[0] == "%%":
            return "%"
        width = min(int(escape[1]), 10) if escape[1] else 0
        values = {"j": f"{job_id:0{width}d}", "A": f"{job_id:0{width}d}", "u": USER, "x": NAME}
        return values.get(escape[2], escape[0])

    return ESCAPE.sub(one, pattern)


def _step_file(pattern: str, job_id: int) -> str:
    """src/slurmd/common/fname.c, _batch_path_check: the file a batch job of ``job_id`` writes, from
    the pattern it was given (the escapes the printer leaves as given are expanded here)."""

    def one(escape: re.Match[str]) -> str:
        if escape[0] == "%%":
            return "%"
        width = min(int(escape[1]), 10) if escape[1] else 0
        values = {"j": job_id, "A": job_id, "J": job_id, "n": 0, "t": 0}
        if escape[2] in values:
            return f"{values[escape[2]]:0{width}d}"
        return {"u": USER, "x": NAME, "N": NODE, "s": "batch"}.get(escape[2], escape[0])

    return ESCAPE.sub(one, pattern)


def _wait_status(job: Job) -> int:
    code, signal = job.exit or (0, 0)
    return (code << 8) | signal


def print_2205(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "job_state": _word(job),
        "node_count": job.node_count,
        "time_limit": None if job.time_limit == -1 else NO_VAL if job.time_limit is None else job.time_limit,
        "memory_per_node": job.memory,
        "tres_per_node": f"gres:gpu:{job.gpus_per_node}" if job.gpus_per_node else "",
        "tres_per_task": f"gres:gpu:{job.gpus_per_task}" if job.gpus_per_task else "",
        "flags": [RENAMED[i][0] for i in job.job_flags],
        "shared": job.shared,
        "profile": None,
        "exit_code": NO_VAL if job.exit is None else _wait_status(job),
        "end_time": job.end_time,
        "standard_output": job.output,
        "standard_error": job.error,
        "current_working_directory": "/w",
        "nice": job.nice or None,
        "features": job.constraint,
    }


def print_2302(job: Job) -> dict[str, Any]:
    """v0.0.39: numbers wrapped, the state still a word, the exit code a wrapped wait status, paths expanded."""
    default = f"/w/slurm-{job.job_id}.out"
    output = _expanded(job.output, job.job_id) or default
    return {
        **print_2205(job),
        "node_count": _wrapped(job.node_count),
        "time_limit": _wrapped(job.time_limit),
        "memory_per_node": _wrapped(job.memory or 0),
        "tres_per_node": f"gres/gpu:{job.gpus_per_node}" if job.gpus_per_node else "",
        "tres_per_task": f"gres/gpu={job.gpus_per_task}" if job.gpus_per_task else "",
        "flags": [RENAMED[i][1].replace("GRES_BINDING_DISABLED", "GRED_BINDING_DISABLED") for i in job.job_flags],
        "shared": [] if job.shared is None else ["oversubscribe" if job.shared == "shared" else job.shared],
        "profile": ["NOT_SET"],
        "exit_code": _wrapped(None if job.exit is None else _wait_status(job)),
        "end_time": _wrapped(job.end_time),
        "standard_output": output,
        "standard_error": _expanded(job.error, job.job_id) or output,
        "nice": job.nice,
    }


def print_2411(job: Job) -> dict[str, Any]:
    """v0.0.42: the state a list of base and flags, the exit code {status, return_code, signal}, per-task
    TRES with the job's CPUs per task."""
    code, signal = job.exit or (0, 0)
    exit_code = {
        "status": ["PENDING"] if job.exit is None else ["SIGNALED"] if signal else ["ERROR"] if code else ["SUCCESS"],
        "return_code": _wrapped(None if signal or job.exit is None else code),
        "signal": {"id": _wrapped(signal or None), "name": ""},
    }
    per_task = ",".join(["cpu=1", *([f"gres/gpu={job.gpus_per_task}"] if job.gpus_per_task else [])])
    return {
        **print_2302(job),
        "job_state": _shuffled([job.base, *job.flags], job.order),
        "flags": [RENAMED[i][1] for i in job.job_flags],
        "exit_code": exit_code,
        "tres_per_task": per_task,
    }


META_22_05, META_24_11 = (json.loads((FIXTURES / v / "squeue.json").read_text())["meta"] for v in ("22.05", "24.11"))
PRINTERS = (
    (print_2205, META_22_05),
    (print_2302, METAS["23.02"]),
    (print_2411, METAS["23.11"]),
    (print_2411, METAS["24.05"]),
    (print_2411, META_24_11),
)
EXAMPLE = Job(1, "RUNNING", (), 1, None, None, None, None, (), None, None, 0, "", "", 0, "", 0)
# Any field may be missing from an answer, but its id (and the directory Slurm's default output is named
# by); the output and error paths go together (23.02-24.11 print the output's path for an error given none)
PATHS = ("standard_output", "standard_error")
MAY_BE_MISSING = [PATHS, *((key,) for key in sorted(set(print_2205(EXAMPLE)) - {"job_id", "current_working_directory", *PATHS}))]


def _as_a_copy_sees_it(job: SlurmJob, flags: frozenset[str]) -> SlurmJob:
    """What the agent hands a copy, printer aside: the files its output patterns make a new job write
    (the job's own id handed back as %j or %4j make the same file), and 22.05's vocabulary."""
    copy_id = int(job.job_id) + 1
    return replace(
        job,
        standard_output=_step_file(job.standard_output, copy_id),
        standard_error=_step_file(job.standard_error, copy_id),
        base_state=None,
        state_flags=flags,
        command_lists_arguments=True,
        records_open_mode=True,
    )


@settings(max_examples=300, deadline=None)
@given(job=jobs, groups=st.sets(st.sampled_from(MAY_BE_MISSING)))
def test_a_job_reads_the_same_whichever_version_printed_it(job: Job, groups: set[tuple[str, ...]]) -> None:
    missing = {key for group in groups for key in group}
    # (23.02-24.11 print an error path that goes with the output as the output's path: an error given as
    # the output's own path reads as going with it, which writes the same file once, not twice)
    assume(not job.error or _expanded(job.error, job.job_id) != _expanded(job.output, job.job_id))
    # Given one job printed as 22.05, 23.02, 23.11, 24.05 and 24.11 print it, with the same fields left out
    read = []
    for printer, meta in PRINTERS:
        record = {key: value for key, value in printer(job).items() if key not in missing}
        # When the agent reads each answer (the printer told from its meta)
        [one] = read_jobs({"meta": meta, "errors": [], "jobs": [record]})
        read.append(one)
    # Then it reads one and the same job from all of them (a copy writing the same files); 23.11+ also
    # name the base state and every flag, which 22.05's one word hides
    seen_as_2205 = [_as_a_copy_sees_it(one, read[0].state_flags) for one in read]
    assert all(one == seen_as_2205[0] for one in seen_as_2205), [one for one in seen_as_2205 if one != seen_as_2205[0]]
    if "job_state" not in missing:
        assert read[0].state == _word(job) and read[-1].base_state == job.base and read[-1].state_flags == set(job.flags)
    # And the time limit: unlimited is UNLIMITED on every version, never the partition's default
    if "time_limit" not in missing:
        assert {one.time_unlimited for one in read} == {job.time_limit == -1}
    # And each says what its Slurm records of a submission
    assert [one.command_lists_arguments for one in read] == [True, False, False, False, False]
    assert [one.records_open_mode for one in read] == [True, True, True, True, False]


@settings(max_examples=200, deadline=None)
@given(
    base=st.sampled_from(NODE_BASES),
    flags=st.lists(st.sampled_from(NODE_FLAGS), unique=True, max_size=4),
    features=st.lists(st.sampled_from(["a100", "efa", "ib", "fast"]), unique=True, max_size=3),
    active=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_a_node_reads_the_same_whichever_version_printed_it(
    base: str, flags: list[str], features: list[str], active: bool, seed: int
) -> None:
    listed = {"features": list(features), **({"active_features": list(features)} if active else {})}
    as_2205 = {"name": "n1", "state": base.lower(), "state_flags": _shuffled(list(flags), seed), "partitions": ["dev"],
               **{key: ",".join(value) for key, value in listed.items()}}  # fmt: skip
    as_2411 = {"name": "n1", "state": _shuffled([base, *flags], seed), "partitions": ["dev"], **listed}
    node = read_node(as_2205)
    assert node == read_node(as_2411)
    assert (node.state, set(node.flags), node.features) == (base.lower(), set(flags), frozenset(features))


@given(number=st.integers(0, NO_VAL - 1))
def test_a_number_plain_or_wrapped_is_the_same_number(number: int) -> None:
    assert read_job({"job_id": 1, "tasks": number}).tasks == read_job({"job_id": 1, "tasks": _wrapped(number)}).tasks == number


def test_unset_and_infinite_read_as_no_number_in_every_form() -> None:
    forms: list[Any] = [None, NO_VAL, INFINITE, _wrapped(None), _wrapped(-1)]
    assert {read_job({"job_id": 1, "time_limit": form}).time_limit for form in forms} == {None}
    assert read_job({"job_id": 1}).time_limit is None
