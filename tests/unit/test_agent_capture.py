"""How the agent reads what a job was submitted with and turns it back into sbatch arguments (the pure
parts of agent/hyperpod_recovery_agent/capture.py; against a real slurmctld in tests/slurm/test_resubmit_as_owner.py)."""

from __future__ import annotations

import pwd
import struct
from typing import Any

import pytest

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery_agent.capture import (
    JobCapture,
    SubmitAs,
    build_capture,
    no_arguments_read,
    owner_problem,
    parse_environment,
    propagated_limits,
    refusal,
    scontrol_details,
    script_arguments,
    user_comment,
)
from hyperpod_recovery_agent.sbatch_options import SbatchOptions, Unresumable, sbatch_options
from hyperpod_recovery_agent.slurm import SlurmCli, validate_job_id, validate_nodes
from hyperpod_recovery_agent.slurm_json import Shape, read_job

# squeue --json of a pending job (Slurm 22.05; read through slurm_json.read_job, as the agent does) submitted with:
# -J "my job name" -A acme -p dev -N 2 -t 1:30:00
# --gres=gpu:1 --ntasks-per-node=2 -c 1 --mem=200 -C "fast&ib" --exclusive -o out-%j-%x.txt -e err-%j.txt
# -L matlab:1 --comment=... --no-requeue --nice=10 --time-min=60 --tmp=10 --wckey=wk --kill-on-invalid-dep=yes
PENDING: dict[str, Any] = {
    "account": "acme",
    "array_job_id": 0,
    "array_task_id": None,
    "batch_flag": True,
    "flags": ["KILL_INV_DEP", "JOB_CPUS_SET", "JOB_MEM_SET"],
    "burst_buffer": "",
    "cluster_features": "",
    "command": "/tmp/work/job.sh",
    "comment": "team=llm checkpoint=s3://b/c",
    "contiguous": False,
    "cores_per_socket": None,
    "cpus_per_task": None,
    "cpu_frequency_minimum": None,
    "cpu_frequency_maximum": None,
    "cpu_frequency_governor": None,
    "cpus_per_tres": "",
    "deadline": 0,
    "delay_boot": 0,
    "dependency": "",
    "excluded_nodes": "",
    "features": "fast&ib",
    "group_id": 0,
    "group_name": "root",
    "het_job_id": 0,
    "job_id": 1,
    "job_state": "PENDING",
    "licenses": "matlab:1",
    "max_nodes": 2,
    "memory_per_tres": "",
    "name": "my job name",
    "nice": 10,
    "tasks_per_core": None,
    "tasks_per_node": 2,
    "tasks_per_socket": None,
    "node_count": 2,
    "tasks": 4,
    "partition": "dev",
    "prefer": "",
    "memory_per_node": 200,
    "memory_per_cpu": None,
    "minimum_cpus_per_node": 2,
    "minimum_tmp_disk_per_node": 10,
    "profile": None,
    "qos": "",
    "reboot": False,
    "required_nodes": "",
    "requeue": False,
    "restart_cnt": 0,
    "resv_name": "",
    "shared": "none",
    "sockets_per_node": None,
    "standard_error": "/tmp/work/err-%j.txt",
    "standard_input": "/dev/null",
    "standard_output": "/tmp/work/out-%j-%x.txt",
    "time_limit": 90,
    "time_minimum": 60,
    "threads_per_core": None,
    "tres_bind": "",
    "tres_freq": "",
    "tres_per_job": "",
    "tres_per_node": "gres:gpu:1",
    "tres_per_socket": "",
    "tres_per_task": "",
    "user_id": 0,
    "user_name": "root",
    "wckey": "wk",
    "container": "",
    "mcs_label": "",
    "current_working_directory": "/tmp/work",
}
SCONTROL = """JobId=1 JobName=my job name
   NumNodes=2-2 NumCPUs=4 NumTasks=4 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   MailUser=me@example.com MailType=END,FAIL
"""
ENVIRONMENT = {"HOME": "/root", "MYVAR": "hello", "SLURM_NTASKS": "4", "SLURM_UMASK": "0027", "SLURM_RLIMIT_NOFILE": "1024"}


def environment_file(variables: dict[str, str]) -> bytes:
    """What slurmctld writes: a native uint32 count, then NUL-terminated NAME=value strings."""
    return struct.pack("=I", len(variables)) + b"".join(f"{k}={v}".encode() + b"\0" for k, v in variables.items())


# --- the options -----------------------------------------------------------------------------------
def test_a_pending_jobs_options_become_the_sbatch_arguments_it_was_submitted_with() -> None:
    options = sbatch_options(read_job(PENDING), ENVIRONMENT, scontrol_details(SCONTROL))
    assert options.arguments(now=0) == [
        *("--partition=dev", "--account=acme", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--cpus-per-task=1"),
        *("--mincpus=2", "--mem=200", "--tmp=10", "--gres=gpu:1", "--constraint=fast&ib", "--exclusive", "--licenses=matlab:1"),
        *("--time=90", "--time-min=60", "--output=/tmp/work/out-%j-%x.txt", "--error=/tmp/work/err-%j.txt", "--input=/dev/null"),
        *("--mail-user=me@example.com", "--mail-type=END,FAIL", "--no-requeue", "--nice=10", "--wckey=wk", "--kill-on-invalid-dep=yes"),
    ]


def test_a_started_job_asks_for_the_nodes_it_ran_on_since_slurm_forgets_the_maximum() -> None:
    running = {**PENDING, "job_state": "RUNNING", "max_nodes": 0, "time_minimum": 0}
    assert sbatch_options(read_job(running), ENVIRONMENT, {}).nodes == "2"


def test_a_task_count_is_asked_for_only_when_sbatch_recorded_one() -> None:
    # -N 2 alone: Slurm reports 2 tasks, but asking for them would add SLURM_NTASKS to the job's environment
    environment = {k: v for k, v in ENVIRONMENT.items() if k != "SLURM_NTASKS"}
    assert sbatch_options(read_job(PENDING), environment, {}).ntasks is None


def test_a_started_job_with_a_minimum_time_is_unresumable() -> None:
    with pytest.raises(Unresumable, match="--time-min"):
        sbatch_options(read_job({**PENDING, "job_state": "RUNNING"}), ENVIRONMENT, {})


def test_a_met_dependency_is_overridden_and_a_waiting_one_is_carried() -> None:
    had_one = {**ENVIRONMENT, "SLURM_JOB_DEPENDENCY": "afterok:7"}
    assert sbatch_options(read_job(PENDING), had_one, {}).dependency == ""
    assert sbatch_options(read_job(PENDING), ENVIRONMENT, {}).dependency is None
    waiting = {**PENDING, "dependency": "afterok:7(unfulfilled),afterany:8(unfulfilled)"}
    assert sbatch_options(read_job(waiting), had_one, {}).dependency == "afterok:7,afterany:8"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"cpu_frequency_maximum": 2147483651}, "CPU frequency"),
        ({"burst_buffer": "#BB create_persistent"}, "burst buffer"),
        ({"reboot": True}, "reboot"),
        ({"tres_per_node": "license/matlab:1"}, "per-node TRES"),
        ({"tres_per_task": "gres:nic:1"}, "tres_per_task"),
        ({"shared": "topo"}, "sharing mode"),
        ({"standard_output": "/tmp/out\n--wrap=evil"}, "control character"),
    ],
)
def test_what_the_agent_cannot_ask_for_again_is_unresumable(changes: dict[str, Any], reason: str) -> None:
    with pytest.raises(Unresumable, match=reason):
        sbatch_options(read_job({**PENDING, **changes}), ENVIRONMENT, {})


def test_gpu_requests_map_back_to_the_gpu_options() -> None:
    record = {
        **PENDING,
        "tres_per_node": "",
        "tres_per_job": "gres:gpu:a100:8",
        "tres_per_task": "gres:gpu:1",
        "cpus_per_tres": "gres:gpu:4",
        "memory_per_tres": "gres:gpu:100",
        "tres_bind": "gpu:closest",
        "tres_freq": "gpu:high",
    }
    options = sbatch_options(read_job(record), ENVIRONMENT, {})
    assert (options.gpus, options.gpus_per_task, options.cpus_per_gpu, options.mem_per_gpu) == ("a100:8", "1", "4", "100")
    assert (options.gpu_bind, options.gpu_freq, options.gres) == ("closest", "high", None)


def test_drills_pin_nodes_exclude_more_and_collect_the_output() -> None:
    options = SbatchOptions(nodelist="ip-10-1-0-[1-2]", exclude="ip-10-1-0-9", output="/x/%j.out")
    args = options.arguments(exclude_nodes=("ip-10-1-0-3",), nodelist=("ip-10-1-0-4",), output="/drill/job.txt", now=0)
    assert args == ["--nodelist=ip-10-1-0-4", "--exclude=ip-10-1-0-9,ip-10-1-0-3", "--output=/drill/job.txt"]


def test_a_deadline_is_given_relative_to_now_and_a_passed_one_refused() -> None:
    assert SbatchOptions(deadline=1_000_600).arguments(now=1_000_000) == ["--deadline=now+600"]
    with pytest.raises(Unresumable, match="deadline has passed"):
        SbatchOptions(deadline=1_000_000).arguments(now=1_000_001)


# --- what Slurm recorded ---------------------------------------------------------------------------
def test_the_recorded_environment_is_read_exactly() -> None:
    variables = {"BASH_FUNC_module%%": "() {  eval $(lmod bash $*)\n}", "EMPTY": "", "EQ": "a=b"}
    assert parse_environment(environment_file(variables)) == variables


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty"),
        (struct.pack("=I", 3) + b"A=1\0B=2\0", "not 3"),
        (struct.pack("=I", 1) + b"A=\xff\0", "not UTF-8"),
        (struct.pack("=I", 1) + b"NOEQUALS\0", "NAME=value"),
    ],
)
def test_a_damaged_environment_is_unresumable(raw: bytes, reason: str) -> None:
    with pytest.raises(Unresumable, match=reason):
        parse_environment(raw)


def test_scontrol_gives_cpus_per_task_and_mail_settings() -> None:
    assert scontrol_details(SCONTROL) == {"cpus_per_task": "1", "mail_user": "me@example.com", "mail_type": "END,FAIL"}
    assert scontrol_details("JobId=1 JobName=x\n") == {}


def test_mail_settings_that_cannot_be_read_unambiguously_are_unresumable() -> None:
    with pytest.raises(Unresumable, match="mail settings"):
        scontrol_details(SCONTROL + "   MailUser=a b MailType=ALL\n")


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"SLURM_RLIMIT_NOFILE": "1024", "SLURM_RLIMIT_AS": "18446744073709551615"}, ({"NOFILE": "1024", "AS": "unlimited"}, None)),
        ({"SLURM_RLIMIT_NOFILE": "U512", "SLURM_RLIMIT_MEMLOCK": "U8388608"}, ({"NOFILE": "512", "MEMLOCK": "8388608"}, "NOFILE,MEMLOCK")),
        ({"HOME": "/root"}, ({}, "NONE")),  # --get-user-env or --propagate=NONE: sbatch must not add the agent's
    ],
)
def test_propagated_limits_are_read_with_how_they_were_propagated(
    environment: dict[str, str], expected: tuple[dict[str, str], str | None]
) -> None:
    assert propagated_limits(environment) == expected


@pytest.mark.parametrize(
    ("command", "files", "expected"),
    [
        ("", set(), ()),
        ("/work/train.sh", set(), ()),
        ("/work/train.sh configs/70b.yaml", {"/work/train.sh"}, ("configs/70b.yaml",)),
        ("/work/my job.sh", {"/work/my job.sh"}, ()),
        ("/work/my job.sh --resume", {"/work/my job.sh"}, ("--resume",)),
    ],
)
def test_a_single_script_argument_is_recovered_exactly(command: str, files: set[str], expected: tuple[str, ...]) -> None:
    assert script_arguments(command, files.__contains__) == expected


@pytest.mark.parametrize(
    "script",
    [
        "#!/bin/bash\nsrun python train.py --config llama.yaml\n",
        '#!/bin/sh\n# usage: sbatch train.sh $1 is ignored\necho "${#NAME} ${NAME:1}"\n',  # a comment; a length; a slice
        "#!/usr/bin/env bash\nsource ~/venv/bin/activate\nsrun train.py\n",
    ],
)
def test_on_2302_and_later_a_script_that_never_reads_its_arguments_is_resubmitted_without_any(script: str) -> None:
    # (Slurm 23.02+ report a batch script's path alone: whether it was given arguments is unknown)
    assert no_arguments_read("/work/train.sh", script) == ()
    assert no_arguments_read("", "#!/bin/bash\necho $1\n") == ()  # submitted on sbatch's input: none


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ('#!/bin/bash\nsrun python train.py --config "$1"\n', "$1"),
        ('#!/bin/bash\nexec torchrun train.py "$@"\n', "$@"),
        ("#!/bin/bash\nwhile getopts c: o; do :; done\n", "getopts"),
        ("#!/bin/bash\nCONFIG=${1:-default.yaml}\n", "${1"),
        ("#!/usr/bin/env python3\nimport sys\nprint(sys.argv)\n", "not a shell"),
    ],
)
def test_on_2302_and_later_a_script_that_reads_its_arguments_is_unresumable(script: str, said: str) -> None:
    with pytest.raises(Unresumable, match="no longer report the arguments") as raised:
        no_arguments_read("/work/train.sh", script)
    assert said in str(raised.value)


def test_a_2411_capture_of_a_file_submitted_job_reads_no_arguments_from_its_command() -> None:
    # Given a 24.11 record whose command is the script's path alone, and a script that reads $1
    record = read_job({**PENDING, "command": "/tmp/work/job.sh", "time_minimum": 0}, Shape("v0.0.42"))
    capture = build_capture(record, script="#!/bin/bash\necho $1\n", environment_raw=environment_file(ENVIRONMENT), scontrol_text="")
    # Then the capture is unresumable, saying why; a script that reads none resubmits without any
    assert capture.unresumable is not None and "no longer report the arguments" in capture.unresumable
    fine = build_capture(record, script="#!/bin/bash\necho hi\n", environment_raw=environment_file(ENVIRONMENT), scontrol_text="")
    assert fine.unresumable is None and fine.script_args == ()


@pytest.mark.parametrize(
    ("output", "mode"),
    [("/tmp/work/train.log", "append"), ("/tmp/work/train-3.log", None), ("/tmp/work/train-0003.log", None), ("/dev/null", None)],
)
def test_on_2411_a_copy_writing_its_jobs_own_log_appends_to_it(output: str, mode: str | None) -> None:
    # Given a 24.11 record (its sbatch keeps no --open-mode) whose output is that file (job 3: -3 reads as %j)
    record = read_job({**PENDING, "job_id": 3, "standard_output": output, "standard_error": output}, Shape("v0.0.42"))
    # Then a copy writing the very same file appends to it: what the failed job wrote there stays
    assert sbatch_options(record, {}, {}).open_mode == mode
    assert sbatch_options(read_job({**PENDING, "standard_output": output}), {}, {}).open_mode is None  # 22.05: as recorded


@pytest.mark.parametrize(("command", "files"), [("/work/train.sh a b", {"/work/train.sh"}), ("/gone/train.sh a", set())])
def test_script_arguments_that_cannot_be_split_exactly_are_unresumable(command: str, files: set[str]) -> None:
    with pytest.raises(Unresumable):
        script_arguments(command, files.__contains__)


def test_the_owners_comment_is_kept_without_our_mark() -> None:
    comment = "hyperpod-recovery:resubmission-of=41 incident=inc-7 team=llm checkpoint=s3://b/c"
    assert user_comment(comment) == "team=llm checkpoint=s3://b/c"
    assert user_comment("team=llm") == "team=llm"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"array_job_id": 41, "array_task_id": 3}, "task 3 of array job 41"),
        ({"het_job_id": 41, "het_job_offset": 1, "het_job_id_set": "41-42"}, "heterogeneous job 41"),
        ({"batch_flag": False}, "not a batch job"),
    ],
)
def test_arrays_heterogeneous_jobs_and_allocations_are_refused(changes: dict[str, Any], reason: str) -> None:
    assert reason in (refusal(read_job({**PENDING, **changes})) or "")


# --- the owner -------------------------------------------------------------------------------------
def test_an_unknown_or_reused_uid_or_a_foreign_group_is_an_owner_problem() -> None:
    unknown = next(uid for uid in range(60_000, 61_000) if not _uid_exists(uid))
    assert owner_problem("root", 0, 0) is None
    assert f"(uid {unknown}) is unknown" in (owner_problem("alice", unknown, unknown) or "")
    assert "not the job's user alice" in (owner_problem("alice", 0, 0) or "")
    assert "not one of user root's groups" in (owner_problem("root", 0, 65534) or "")


def test_a_job_of_an_unknown_user_is_captured_as_unresumable() -> None:
    unknown = next(uid for uid in range(60_000, 61_000) if not _uid_exists(uid))
    record = {**PENDING, "user_id": unknown, "user_name": "gone"}
    capture = build_capture(read_job(record), script="#!/bin/bash\n", environment_raw=environment_file(ENVIRONMENT), scontrol_text=SCONTROL)
    assert capture.unresumable == f"its user gone (uid {unknown}) is unknown on this host"


def test_a_capture_survives_json_and_refuses_a_submission_when_unresumable() -> None:
    capture = build_capture(
        read_job({**PENDING, "time_minimum": 0}),
        script="#!/bin/bash\n",
        environment_raw=environment_file(ENVIRONMENT),
        scontrol_text=SCONTROL,
    )
    assert capture.unresumable is None and capture.umask == 0o027 and capture.rlimits == {"NOFILE": "1024"}
    assert JobCapture.from_json(capture.to_json()) == capture
    refused = capture.model_copy(update={"unresumable": "it is task 3 of array job 41"})
    with pytest.raises(InvalidCommand, match="array job 41"):
        SlurmCli().submit_as_owner(refused, SubmitAs(comment="c", extra_environment={}))


# --- validation before anything reaches a command line ----------------------------------------------
@pytest.mark.parametrize("node", ["ip-10-1-0-1\n", "ip-10-1-0-1\nip-10-1-0-2"])
def test_a_node_name_with_a_trailing_newline_is_refused(node: str) -> None:
    with pytest.raises(InvalidCommand, match="nodes"):
        validate_nodes([node])


@pytest.mark.parametrize("job_id", ["12\n", "12_3\n"])
def test_a_job_id_with_a_trailing_newline_is_refused(job_id: str) -> None:
    with pytest.raises(InvalidCommand, match="job_id"):
        validate_job_id(job_id)


@pytest.mark.parametrize("name", ["RESUME\n", "A=B", "1X", ""])
def test_an_extra_variable_whose_name_is_not_a_name_is_refused(name: str) -> None:
    capture = JobCapture(job_id="1", user="root", uid=0, group="root", gid=0, name="x", script="#!/bin/bash\n")
    with pytest.raises(InvalidCommand, match="environment"):
        SlurmCli(env={})._owner_environment(capture, {name: "1"})


def test_the_submission_environment_is_the_owners_plus_ours_plus_only_slurm_conf() -> None:
    capture = JobCapture(
        job_id="1", user="root", uid=0, group="root", gid=0, name="x", environment={"HOME": "/home/a", "SLURM_CONF": "/old"}
    )
    agent = SlurmCli(env={"SLURM_CONF": "/etc/slurm/slurm.conf", "AWS_ACCESS_KEY_ID": "AKIA", "PATH": "/usr/bin"})
    assert agent._owner_environment(capture, {"HYPERPOD_RECOVERY_RESUME_STEP": "2000"}) == {
        "HOME": "/home/a",
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "HYPERPOD_RECOVERY_RESUME_STEP": "2000",
    }


def _uid_exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
