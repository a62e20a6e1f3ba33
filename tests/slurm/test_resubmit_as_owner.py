"""A job is resubmitted as its owner's own submission, with its options and its submission environment
(issue 15), against the real slurmctld of tests/slurm/conftest.py.

Without slurmdbd (none on the test host) Slurm 22.05 records any ``--account`` string as given, which
is tested, and accepts ``--qos`` but records no QOS: the QOS is carried when Slurm has one, and here
both jobs show none. Account and QOS *limits* (associations) cannot be exercised at all.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models.commands import CheckpointRef, CommandEnvelope, JobsOnNodes, ResubmitJob
from hyperpod_recovery_agent.capture import JobCapture, SubmitAs, parse_environment
from hyperpod_recovery_agent.executor import CaptureStore, CommandExecutor
from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, SlurmCli
from hyperpod_recovery_agent.slurm_json import SlurmJob
from tests.fakes import T0
from tests.slurm.conftest import job_state, login_path, slurm_version, wait_for

pytestmark = pytest.mark.slurm

OWNER, TEAM = "hprtrainer", "hprteam"
RESERVATION = "hprtrainer-resv"
RESERVATION_TIMES = ("StartTime=now", "Duration=60", "Flags=IGNORE_JOBS")
AGENT_MARKER = "HPR_AGENT_ONLY_MARKER"  # in the agent's environment: must never reach a job
RESUME = {"HYPERPOD_RECOVERY_RESUME_FROM": "s3://llm-train-checkpoints/llama/step-000002000/", "HYPERPOD_RECOVERY_RESUME_STEP": "2000"}
LONG_NAME = "llama 70b pretrain " + "x" * 281  # 300 characters: longer than the protocol's old 256
# The job flags that are options (sbatch_options.py reads them), under their 22.05 names
OPTION_FLAGS = {"KILL_INV_DEP", "NO_KILL_INV_DEP", "GRES_ENFORCE_BIND", "GRES_DISABLE_BIND", "SPREAD_JOB", "USE_MIN_NODES", "JOB_CPUS_SET",
                "JOB_MEM_SET"}  # fmt: skip
# What the job reports about itself, in its working directory (the owner's).
TRAIN = """#!/bin/bash
echo "job $SLURM_JOB_ID started"
id -un > whoami-$SLURM_JOB_ID.txt
id -gn >> whoami-$SLURM_JOB_ID.txt
id -Gn >> whoami-$SLURM_JOB_ID.txt
ulimit -n >> whoami-$SLURM_JOB_ID.txt
env > env-$SLURM_JOB_ID.txt
sleep 600
"""
OWNER_NOFILE = "512"  # the owner's open-files limit at submission, below the agent's
OPTIONS = (
    f"--job-name={LONG_NAME}",
    "--account=acme",
    "--qos=normal",
    f"--reservation={RESERVATION}",
    "--partition=dev",
    "--nodes=2",
    "--time=30",
    "--gres=gpu:1",
    "--ntasks-per-node=1",
    "--cpus-per-task=1",
    "--mem=100",
    "--constraint=fast",
    "--exclusive",
    "--licenses=fluent:1",
    "--output=train-%6j-%N.out",  # (23.02-24.11 print it 000042-%N: the node name is left for the job)
    "--error=train-%j.err",
    "--mail-user=trainer@example.com",
    "--mail-type=END,FAIL",
    "--comment=team=llm checkpoint=s3://llm-train-checkpoints/llama",
    "--no-requeue",
    "--nice=5",
    "--wckey=pretrain",
    "--open-mode=append",
)
# scontrol show job fields that must be the same on the copy (values without spaces).
SAME_FIELDS = (
    *("UserId", "GroupId", "Account", "QOS", "Partition", "Nice", "Requeue", "TimeLimit", "WorkDir", "MailUser", "MailType"),
    *("NumNodes", "NumTasks", "CPUs/Task", "NtasksPerN:B:S:C", "MinCPUsNode", "MinMemoryNode", "MinTmpDiskNode", "TresPerNode"),
    *("Features", "Reservation", "OverSubscribe", "Contiguous", "Licenses"),
)


@dataclass(frozen=True)
class Owner:
    name: str
    uid: int
    gid: int
    home: Path

    def environment(self, slurm_env: dict[str, str], **extra: str) -> dict[str, str]:
        """A login-like environment of the owner's own, as on a login node."""
        return {
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "SHELL": "/bin/bash",
            "PATH": login_path(slurm_env),
            "SLURM_CONF": slurm_env["SLURM_CONF"],
            "TRAINER_OWN_VARIABLE": "set at submission",
            **extra,
        }


def ensure_user(name: str, *, groups: str | None = None) -> Owner:
    """Create the user (with its own group and home) unless it exists: reruns and parallel sessions reuse it."""
    if groups and subprocess.run(["getent", "group", groups], capture_output=True, check=False).returncode != 0:
        subprocess.run(["groupadd", groups], check=False)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--user-group", "--create-home", "--shell", "/bin/bash", *(["--groups", groups] if groups else []), name],
            check=True,
        )
        entry = pwd.getpwnam(name)
    return Owner(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def sbatch_as(owner: Owner, env: dict[str, str], *args: str, script: str, cwd: Path, nofile: str | None = None) -> str:
    """sbatch run by the owner, as the owner would on a login node (with its own open-files limit)."""
    limits = ["prlimit", f"--nofile={nofile}:", "--"] if nofile else []
    done = subprocess.run(
        [*limits, "sbatch", "--parsable", *args],
        input=script,
        env=env,
        cwd=cwd,
        user=owner.uid,
        group=owner.gid,
        extra_groups=os.getgrouplist(owner.name, owner.gid),
        umask=0o027,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";", 1)[0]


def scontrol_fields(env: dict[str, str], job_id: str) -> dict[str, str]:
    text = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True, check=True).stdout
    first, _, rest = text.partition("\n")
    fields = dict(token.split("=", 1) for token in rest.split() if "=" in token)
    fields["JobName"] = first.split("JobName=", 1)[1]
    return fields


def squeue_record(slurm: SlurmCli, job_id: str) -> SlurmJob:
    record = slurm.job_record(job_id)
    assert record is not None
    return record


def recorded_environment(slurm: SlurmCli, job_id: str) -> dict[str, str]:
    raw = slurm._environment_file(job_id)
    assert raw is not None
    return parse_environment(raw)


def cancel_owned_jobs(env: dict[str, str], *users: str) -> None:
    for user in users:
        subprocess.run(["scancel", "-u", user], env=env, check=False)


@pytest.fixture(scope="module")
def owner() -> Owner:
    return ensure_user(OWNER, groups=TEAM)


@pytest.fixture(scope="module")
def agent(slurm_env: dict[str, str]) -> Iterator[SlurmCli]:
    """The agent's SlurmCli, whose own environment holds a marker (and the test's dummy AWS keys)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(AGENT_MARKER, "agent")
        yield SlurmCli(env={**slurm_env, AGENT_MARKER: "agent"})


@pytest.fixture
def owner_dir(owner: Owner) -> Iterator[Path]:
    """A working directory of the owner's (the test's tmp_path is under root's 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="job-", dir=owner.home))
    os.chown(path, owner.uid, owner.gid)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _envelope(command: Any) -> CommandEnvelope:
    return CommandEnvelope(
        command_id=f"inc-15:{command.type}", incident_id="inc-15", execution_name="inc-15", task_token="t", requested_at=T0, command=command
    )


@pytest.fixture(scope="module")
def resubmitted(slurm_env: dict[str, str], owner: Owner, agent: SlurmCli) -> Iterator[dict[str, Any]]:
    """A 2-node job submitted by the owner with command-line options, captured by the agent's executor
    when the workflow asks which jobs run on its first node, cancelled, and resubmitted by job id
    (the command carries nothing else) as its owner, off that node, with the resume variables."""
    work = Path(tempfile.mkdtemp(prefix="resubmit-", dir=owner.home))
    os.chown(work, owner.uid, owner.gid)
    subprocess.run(
        ["scontrol", "create", f"ReservationName={RESERVATION}", f"Users={owner.name}", "Nodes=ip-10-1-0-[2-4]", *RESERVATION_TIMES],
        env=slurm_env,
        check=True,
        capture_output=True,
    )
    try:
        old = sbatch_as(owner, owner.environment(slurm_env), *OPTIONS, script=TRAIN, cwd=work, nofile=OWNER_NOFILE)
        wait_for(lambda: job_state(slurm_env, old) == "RUNNING", f"job {old} running")
        old_fields, old_record = scontrol_fields(slurm_env, old), squeue_record(agent, old)
        old_environment = recorded_environment(agent, old)
        first_node = agent.hostnames(old_record.nodes)[0]
        executor = CommandExecutor(agent, captures=CaptureStore(Path(tempfile.mkdtemp(prefix="captures-"))))
        [found] = executor.execute(_envelope(JobsOnNodes(nodes=[first_node]))).result.jobs
        assert found.job_id == old and found.unresumable is None
        capture = executor.captures.get(old)
        assert capture is not None
        subprocess.run(["scancel", old], env=slurm_env, check=True)
        checkpoint = CheckpointRef(uri=RESUME["HYPERPOD_RECOVERY_RESUME_FROM"], step=int(RESUME["HYPERPOD_RECOVERY_RESUME_STEP"]))
        answer = executor.execute(_envelope(ResubmitJob(job_id=old, checkpoint=checkpoint, exclude_nodes=[first_node]))).result
        new = answer.new_job_id
        assert new is not None and not answer.already_submitted
        wait_for(lambda: (work / f"env-{new}.txt").exists() and (work / f"whoami-{new}.txt").exists(), f"job {new} started")
        yield {
            "old": old,
            "new": new,
            "capture": capture,
            "work": work,
            "first_node": first_node,
            "old_fields": old_fields,
            "old_record": old_record,
            "old_environment": old_environment,
        }
    finally:
        cancel_owned_jobs(slurm_env, owner.name)
        # The reservation can only be deleted once no job runs in it.
        wait_for(
            lambda: all(j.state not in ("RUNNING", "COMPLETING") for j in agent.queue() if j.user_name == owner.name),
            f"{owner.name}'s jobs ended",
        )
        subprocess.run(["scontrol", "delete", f"ReservationName={RESERVATION}"], env=slurm_env, check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


# --- the resubmitted job is the owner's job, as it was ------------------------------------------------
def test_the_capture_holds_the_owner_the_full_name_and_the_options_given_on_the_command_line(
    resubmitted: dict[str, Any], owner: Owner
) -> None:
    capture: JobCapture = resubmitted["capture"]
    work = resubmitted["work"]
    expected = {
        **{"account": "acme", "reservation": RESERVATION, "partition": "dev", "nodes": "2", "time_minutes": 30},
        **{"gres": "gpu:1", "ntasks_per_node": 1, "cpus_per_task": 1, "mem_mb": 100, "constraint": "fast", "sharing": "--exclusive"},
        **{"licenses": "fluent:1", "requeue": False, "nice": 5, "wckey": "pretrain"},
        # --open-mode: 22.05 records it; 24.11 nowhere (a copy appends only to a file its job wrote: none here, %j)
        "open_mode": "append" if slurm_version() == "22.05" else None,
        **{"mail_user": "trainer@example.com", "mail_type": "END,FAIL"},
        # Slurm's patterns as the owner gave them (made absolute by sbatch), not expanded for the old job
        **{"output": f"{work}/train-%6j-%N.out", "error": f"{work}/train-%j.err"},
    }
    options = capture.options.model_dump()
    assert {k: options[k] for k in expected} == expected
    assert (capture.user, capture.uid, capture.group, capture.gid) == (owner.name, owner.uid, owner.name, owner.gid)
    assert capture.name == LONG_NAME and capture.unresumable is None and capture.script == TRAIN
    assert capture.comment == "team=llm checkpoint=s3://llm-train-checkpoints/llama"
    assert capture.umask == 0o027 and capture.environment["TRAINER_OWN_VARIABLE"] == "set at submission"
    assert JobCapture.from_json(capture.to_json()) == capture


def test_scontrol_shows_the_copy_with_the_same_user_group_account_resources_and_options(
    resubmitted: dict[str, Any], slurm_env: dict[str, str], agent: SlurmCli
) -> None:
    # Given the original as scontrol showed it while it ran, When scontrol shows the copy
    new_fields = scontrol_fields(slurm_env, resubmitted["new"])
    old_fields = resubmitted["old_fields"]
    # Then everything the owner asked for is the same; only the drained node is excluded in addition
    assert {k: new_fields.get(k) for k in SAME_FIELDS} == {k: old_fields.get(k) for k in SAME_FIELDS}
    assert new_fields["JobName"] == old_fields["JobName"] == LONG_NAME
    assert new_fields["UserId"] == f"{OWNER}({pwd.getpwnam(OWNER).pw_uid})" and new_fields["Account"] == "acme"
    assert new_fields["QOS"] == "(null)"  # no slurmdbd: Slurm records no QOS for either job
    assert new_fields["ExcNodeList"] == resubmitted["first_node"]
    new_record, old_record = squeue_record(agent, resubmitted["new"]), resubmitted["old_record"]
    for key in ("standard_output", "standard_error", "standard_input", "wckey", "tres_per_node", "shared", "licenses"):
        assert getattr(new_record, key) == getattr(old_record, key), key
    # (24.11 also flags what slurmctld chose itself, USING_DEFAULT_QOS...: not options, and the copy asks no QOS)
    assert new_record.flags & OPTION_FLAGS == old_record.flags & OPTION_FLAGS
    assert new_record.comment == f"{RESUBMISSION_MARK}{resubmitted['old']} incident=inc-15 {old_record.comment}"


def logs_in(work: Path) -> dict[int, Path]:
    """The jobs' logs in ``work`` by job id (train-<id in 6 digits>-<node>.out)."""
    return {int(path.name.split("-")[1]): path for path in work.glob("train-*-*.out")}


def test_the_copy_writes_a_log_of_its_own_and_the_jobs_log_keeps_what_it_wrote(resubmitted: dict[str, Any]) -> None:
    # Given the job's log, named by its zero-padded id and its node (train-%6j-%N.out)
    work, old, new = resubmitted["work"], resubmitted["old"], resubmitted["new"]
    wait_for(lambda: int(new) in logs_in(work), f"job {new}'s log")
    logs = logs_in(work)
    # Then the copy wrote its own, padded as the job's and named by its node, and the job's holds its own line only
    assert sorted(logs) == sorted([int(old), int(new)]), sorted(path.name for path in logs.values())
    assert logs[int(new)].name.startswith(f"train-{int(new):06d}-") and "%" not in logs[int(new)].name
    assert logs[int(old)].read_text() == f"job {old} started\n"


def test_the_copy_runs_as_the_owner_with_the_owners_environment_and_the_resume_variables(resubmitted: dict[str, Any]) -> None:
    # Given what the copy wrote about itself; Then it is the owner's process, not root's, with no agent variable
    work, new = resubmitted["work"], resubmitted["new"]
    user, group, groups, nofile = (work / f"whoami-{new}.txt").read_text().splitlines()
    assert (user, group) == (OWNER, OWNER) and TEAM in groups.split()
    assert nofile == OWNER_NOFILE  # the owner's limit, propagated as for the original, not the agent's
    environment = dict(line.split("=", 1) for line in (work / f"env-{new}.txt").read_text().splitlines() if "=" in line)
    assert {k: environment.get(k) for k in RESUME} == RESUME
    assert environment["TRAINER_OWN_VARIABLE"] == "set at submission" and environment["HOME"] == str(pwd.getpwnam(OWNER).pw_dir)
    leaked = [k for k in environment if k == AGENT_MARKER or k.startswith("AWS_") or k.startswith("POWERTOOLS_")]
    assert leaked == []
    assert logs_in(work)[int(new)].stat().st_mode & 0o777 == 0o640  # the owner's umask (027), not the agent's


def test_slurm_records_the_copys_environment_as_the_original_plus_the_resume_variables(
    resubmitted: dict[str, Any], agent: SlurmCli
) -> None:
    new_environment = recorded_environment(agent, resubmitted["new"])
    assert new_environment == {**resubmitted["old_environment"], **RESUME}


def test_the_copy_is_found_again_by_its_comment(resubmitted: dict[str, Any], agent: SlurmCli) -> None:
    assert agent.resubmission_of(resubmitted["old"]) == (resubmitted["new"], "inc-15")
    assert agent.resubmission_of(resubmitted["new"]) is None


def test_a_script_given_an_argument_is_resubmitted_with_it_or_not_at_all(
    slurm_env: dict[str, str], owner: Owner, owner_dir: Path, agent: SlurmCli
) -> None:
    # Given a job whose script file was given one argument, which it reads
    (owner_dir / "train.sh").write_text('#!/bin/bash\necho "config=$1 user=$(id -un)" > args-$SLURM_JOB_ID.txt\n')
    old = sbatch_as(owner, owner.environment(slurm_env), "--hold", "train.sh", "configs/70b.yaml", script="", cwd=owner_dir)
    capture = agent.capture(old)
    if slurm_version() != "22.05":
        # Then on 23.02+, which report the script's path alone, it is unresumable: never a copy without it
        try:
            assert capture is not None and capture.unresumable is not None and "no longer report the arguments" in capture.unresumable
            with pytest.raises(InvalidCommand, match="no longer report the arguments"):
                agent.submit_as_owner(capture, SubmitAs(comment="c", extra_environment=RESUME))
        finally:
            cancel_owned_jobs(slurm_env, owner.name)
        return
    assert capture is not None and capture.script_args == ("configs/70b.yaml",)
    # When it is resubmitted
    try:
        new = agent.submit_as_owner(capture, SubmitAs(comment=f"{RESUBMISSION_MARK}{old} incident=inc-args", extra_environment=RESUME))
        # Then the copy's script sees the same argument
        wait_for(lambda: (owner_dir / f"args-{new}.txt").exists(), f"job {new} output")
        assert (owner_dir / f"args-{new}.txt").read_text() == f"config=configs/70b.yaml user={OWNER}\n"
    finally:
        cancel_owned_jobs(slurm_env, owner.name)


# --- what cannot be resubmitted as it was -------------------------------------------------------------
def test_an_array_job_is_unresumable(slurm_env: dict[str, str], owner: Owner, owner_dir: Path, agent: SlurmCli) -> None:
    # Given an array job; When captured; Then unresumable, and a submission of it anyway is refused
    job_id = sbatch_as(owner, owner.environment(slurm_env), "--hold", "--array=0-1", script=TRAIN, cwd=owner_dir)
    try:
        capture = agent.capture(job_id)
        assert capture is not None and capture.unresumable is not None and "array job" in capture.unresumable
        with pytest.raises(InvalidCommand, match="array job"):
            agent.submit_as_owner(capture, SubmitAs(comment="c", extra_environment=RESUME))
    finally:
        cancel_owned_jobs(slurm_env, owner.name)


def test_a_heterogeneous_job_is_unresumable(slurm_env: dict[str, str], owner: Owner, owner_dir: Path, agent: SlurmCli) -> None:
    script = "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH hetjob\n#SBATCH --nodes=1\nsleep 600\n"
    job_id = sbatch_as(owner, owner.environment(slurm_env), "--hold", script=script, cwd=owner_dir)
    try:
        capture = agent.capture(job_id)
        assert capture is not None and capture.unresumable is not None and "heterogeneous job" in capture.unresumable
    finally:
        cancel_owned_jobs(slurm_env, owner.name)


def test_an_allocation_without_a_batch_script_is_unresumable(
    slurm_env: dict[str, str], owner: Owner, owner_dir: Path, agent: SlurmCli
) -> None:
    done = subprocess.run(
        ["salloc", "--no-shell", "--nodes=1", "--immediate=30"],
        env=owner.environment(slurm_env),
        cwd=owner_dir,
        user=owner.uid,
        group=owner.gid,
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = re.search(r"allocation (\d+)", done.stderr)[1]  # type: ignore[index]
    try:
        capture = agent.capture(job_id)
        assert capture is not None and capture.unresumable is not None and "not a batch job" in capture.unresumable
    finally:
        cancel_owned_jobs(slurm_env, owner.name)


def test_a_job_whose_user_no_longer_exists_is_unresumable(slurm_env: dict[str, str], agent: SlurmCli) -> None:
    # Given a job submitted by a user who is then deleted from this host
    gone = ensure_user("hprgone")
    work = Path(tempfile.mkdtemp(prefix="hprgone-", dir="/tmp"))
    os.chown(work, gone.uid, gone.gid)
    job_id = sbatch_as(gone, gone.environment(slurm_env), "--hold", script=TRAIN, cwd=work)
    subprocess.run(["userdel", "--remove", gone.name], check=True, capture_output=True)
    try:
        # When it is captured
        capture = agent.capture(job_id)
        # Then it is unresumable, and submitting it anyway is refused
        assert capture is not None and capture.unresumable is not None and "unknown on this host" in capture.unresumable
        assert str(gone.uid) in capture.unresumable
        with pytest.raises(InvalidCommand, match="unknown on this host"):
            agent.submit_as_owner(capture, SubmitAs(comment="c", extra_environment=RESUME))
    finally:
        subprocess.run(["scancel", job_id], env=slurm_env, check=False)
        shutil.rmtree(work, ignore_errors=True)
        if _group_exists(gone.name):
            subprocess.run(["groupdel", gone.name], check=False, capture_output=True)


def test_a_capture_whose_uid_is_no_longer_its_user_is_refused_at_submission(
    slurm_env: dict[str, str], agent: SlurmCli, owner_dir: Path, owner: Owner
) -> None:
    # Given a good capture, whose uid is by now another user's on this host
    job_id = sbatch_as(owner, owner.environment(slurm_env), "--hold", script=TRAIN, cwd=owner_dir)
    try:
        capture = agent.capture(job_id)
        assert capture is not None and capture.unresumable is None
        stale = capture.model_copy(update={"user": "someone-else"})
        jobs_before = [j.job_id for j in agent.queue()]
        # When it is submitted, Then it is refused and nothing is submitted
        with pytest.raises(InvalidCommand, match="not the job's user someone-else"):
            agent.submit_as_owner(stale, SubmitAs(comment="c", extra_environment=RESUME))
        assert [j.job_id for j in agent.queue()] == jobs_before
    finally:
        cancel_owned_jobs(slurm_env, owner.name)


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True
