"""The agent's Slurm side against a real slurmctld with four slurmd (tests/slurm/conftest.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperpod_recovery.errors import InvalidCommand, NodeNotFound
from hyperpod_recovery.models.commands import (
    AgentCheckResult,
    BootTimes,
    BootTimesResult,
    CaptureHangEvidence,
    CheckAgent,
    CheckpointRef,
    CommandEnvelope,
    CordonNodes,
    DrainNodes,
    HangEvidenceResult,
    HealthCheck,
    JobsOnNodes,
    NodeBoot,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    carries_owner_tag,
)
from hyperpod_recovery_agent.executor import CaptureStore, CommandExecutor
from hyperpod_recovery_agent.slurm import SlurmCli, SlurmUnreachable, validate_job_id, validate_nodes
from hyperpod_recovery_agent.stacks import stack_signature
from tests.fakes import T0
from tests.slurm.conftest import NODES, job_state, sbatch, wait_for

pytestmark = pytest.mark.slurm
TAG = "hyperpod-recovery:inc-1"
TRAIN = """#!/bin/bash
#SBATCH --comment=checkpoint=s3://llm-train-checkpoints/llama
echo "from=$HYPERPOD_RECOVERY_RESUME_FROM step=$HYPERPOD_RECOVERY_RESUME_STEP nodes=$SLURM_JOB_NODELIST" > out-$SLURM_JOB_ID.txt
sleep 600
"""


def envelope(command: object, command_id: str = "inc-1:cmd") -> CommandEnvelope:
    return CommandEnvelope(
        command_id=command_id, incident_id="inc-1", execution_name="inc-1", task_token="tok", requested_at=T0, command=command
    )


def run(slurm: SlurmCli, command: object, captures: CaptureStore | None = None) -> object:
    return CommandExecutor(slurm, captures=captures).execute(envelope(command)).result


def nodes_of(slurm: SlurmCli, job_id: str) -> list[str]:
    """Where Slurm put the job (a previous test's job may still be completing on the first nodes)."""
    spec = slurm.job(job_id)
    assert spec is not None and spec.nodes, job_id
    return list(spec.nodes)


def start_training(slurm_env: dict[str, str], job_dir: Path, *extra: str) -> str:
    job_id = sbatch(slurm_env, "-J", "llama", "-N", "2", "-t", "30", "-D", str(job_dir), *extra, script=TRAIN)
    wait_for(lambda: job_state(slurm_env, job_id) == "RUNNING", f"job {job_id} running")
    return job_id


# --- boot times --------------------------------------------------------------------------------
def test_boot_times_are_the_hosts_boot_as_slurmctld_reports_it_in_utc_whatever_the_agents_zone(
    slurm: SlurmCli, slurm_env: dict[str, str]
) -> None:
    # Given the four slurmd of this host (one of them drained by us), and an agent whose zone is not UTC
    # (the `slurm` fixture puts every node back to idle afterwards)
    slurm = SlurmCli(env={**slurm_env, "TZ": "Asia/Tokyo"})
    run(slurm, DrainNodes(nodes=[NODES[0]], reason=f"{TAG} reboot"))
    host_boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    # When the agent answers a boot_times command, for them and a node slurmctld does not know
    result = run(slurm, BootTimes(nodes=[*NODES, "ip-10-9-9-9"]))
    assert isinstance(result, BootTimesResult)
    *known, unknown = result.nodes
    # Then each node's boot time is this host's boot (slurmd computes it from the uptime: to the second), in UTC
    assert [b.name for b in known] == NODES
    assert all(b.boot_time is not None and abs(b.boot_time.timestamp() - host_boot) <= 2 for b in known), known
    # And each responds, with its state as scontrol shows it (our drain included)
    assert all(b.responding for b in known) and "DRAIN" in known[0].state.split("+")
    # And the unknown node is answered without a boot time, not an error
    assert unknown == NodeBoot(name="ip-10-9-9-9")


# --- drain / resume ---------------------------------------------------------------------------
def test_drain_tags_the_reason_and_repeating_it_changes_nothing(slurm: SlurmCli) -> None:
    # (a reason with a newline never gets this far: the command model refuses control characters)
    first = run(slurm, DrainNodes(nodes=["ip-10-1-0-1"], reason=f"{TAG} HMA: NvidiaErrorTerminate   replace"))
    again = run(slurm, DrainNodes(nodes=["ip-10-1-0-1"], reason=f"{TAG} HMA: NvidiaErrorTerminate"))
    state = slurm.node_states(["ip-10-1-0-1"])["ip-10-1-0-1"]
    assert (first.drained, again.drained, again.already_drained) == (["ip-10-1-0-1"], [], ["ip-10-1-0-1"])  # type: ignore[attr-defined]
    assert state.drained_by_us and state.reason == f"{TAG} HMA: NvidiaErrorTerminate replace"


def test_resume_undoes_only_our_own_drain(slurm: SlurmCli, slurm_env: dict[str, str]) -> None:
    # Given one node drained by us and one drained by an operator for maintenance
    run(slurm, DrainNodes(nodes=["ip-10-1-0-1"], reason=f"{TAG} unhealthy"))
    subprocess.run(["scontrol", "update", "NodeName=ip-10-1-0-2", "State=DRAIN", "Reason=ops: DIMM swap"], env=slurm_env, check=True)
    # When resuming both, and a node that was never drained
    result = run(slurm, ResumeNodes(nodes=["ip-10-1-0-1", "ip-10-1-0-2", "ip-10-1-0-3"], owner_tag=TAG))
    # Then only ours is back; the operator's drain stays
    assert (result.resumed, result.not_ours, result.not_drained) == (["ip-10-1-0-1"], ["ip-10-1-0-2"], ["ip-10-1-0-3"])  # type: ignore[attr-defined]
    states = slurm.node_states(["ip-10-1-0-1", "ip-10-1-0-2"])
    assert not states["ip-10-1-0-1"].drained_or_draining
    assert states["ip-10-1-0-2"].reason == "ops: DIMM swap"


@pytest.mark.parametrize(("check", "healthy"), [(["true"], True), (["sh", "-c", "echo GPU 3 has fallen off the bus; exit 3"], False)])
def test_a_replacement_runs_the_health_check_before_any_job_and_stays_drained_if_it_fails(
    slurm: SlurmCli, slurm_env: dict[str, str], check: list[str], healthy: bool
) -> None:
    # Given a node drained by us, and a user's job waiting for exactly that node
    run(slurm, DrainNodes(nodes=["ip-10-1-0-3"], reason=f"{TAG} unhealthy"))
    submit = ["sbatch", "--parsable", "--output=/dev/null", "-w", "ip-10-1-0-3", "-N1", "--wrap", "sleep 600"]
    waiting = subprocess.run(submit, env=slurm_env, capture_output=True, text=True, check=True).stdout.strip()
    try:
        # When it is resumed through the gate
        gate = HealthCheck(argv=check, timeout_seconds=30)
        result = run(slurm, ResumeNodes(nodes=["ip-10-1-0-3"], owner_tag=TAG, health_check=gate))
        state = slurm.node_states(["ip-10-1-0-3"])["ip-10-1-0-3"]
        reservations = subprocess.run(["scontrol", "show", "reservation"], env=slurm_env, capture_output=True, text=True).stdout
        # Then the check ran on it in a root-only reservation that is gone afterwards
        assert "hpr-" not in reservations
        if healthy:
            # passed: in service, and the user's job may now start there
            assert result.resumed == ["ip-10-1-0-3"] and result.unhealthy == []  # type: ignore[attr-defined]
            assert not state.drained_or_draining
            wait_for(lambda: job_state(slurm_env, waiting) == "RUNNING", "the waiting job to start on the checked node")
        else:
            # failed: drained again under our tag with what the check said; the user's job never ran there
            (unhealthy,) = result.unhealthy  # type: ignore[attr-defined]
            assert result.resumed == [] and unhealthy.node == "ip-10-1-0-3" and "exit 3" in unhealthy.detail  # type: ignore[attr-defined]
            assert "fallen off the bus" in unhealthy.detail
            assert state.drained_by_us and state.reason.startswith(f"{TAG} health check failed (exit 3)")
            assert job_state(slurm_env, waiting) == "PENDING"
    finally:
        subprocess.run(["scancel", waiting], env=slurm_env, check=False)
        subprocess.run(["scontrol", "update", "NodeName=ip-10-1-0-3", "State=RESUME"], env=slurm_env, check=False)


def test_several_replacements_are_checked_at_once_and_each_is_resumed_on_its_own_result(slurm: SlurmCli) -> None:
    # Given two nodes drained by us, one whose check fails (the check reads the node's own name)
    nodes = ["ip-10-1-0-3", "ip-10-1-0-4"]
    run(slurm, DrainNodes(nodes=nodes, reason=f"{TAG} unhealthy"))
    check = HealthCheck(argv=["sh", "-c", 'test "$SLURMD_NODENAME" != ip-10-1-0-4 || { echo ECC errors; exit 2; }'], timeout_seconds=30)
    # When both are resumed through the gate (in parallel: the agent's executor)
    result = run(slurm, ResumeNodes(nodes=nodes, owner_tag=TAG, health_check=check))
    # Then the healthy one is in service and the other drained again, with its own output
    assert result.resumed == ["ip-10-1-0-3"] and [u.node for u in result.unhealthy] == ["ip-10-1-0-4"]  # type: ignore[attr-defined]
    assert "ECC errors" in result.unhealthy[0].detail  # type: ignore[attr-defined]
    states = slurm.node_states(nodes)
    assert not states["ip-10-1-0-3"].drained_or_draining and states["ip-10-1-0-4"].drained_by_us


def test_another_incidents_drain_is_not_ours_to_resume(slurm: SlurmCli) -> None:
    run(slurm, DrainNodes(nodes=["ip-10-1-0-4"], reason="hyperpod-recovery:inc-2 unhealthy"))
    result = run(slurm, ResumeNodes(nodes=["ip-10-1-0-4"], owner_tag=TAG))
    assert result.not_ours == ["ip-10-1-0-4"]  # type: ignore[attr-defined]


def test_an_unknown_node_is_node_not_found(slurm: SlurmCli) -> None:
    with pytest.raises(NodeNotFound, match="ip-10-9-9-9"):
        run(slurm, DrainNodes(nodes=["ip-10-1-0-1", "ip-10-9-9-9"], reason=f"{TAG} x"))
    assert not slurm.node_states(["ip-10-1-0-1"])["ip-10-1-0-1"].drained_or_draining  # nothing half-done


# --- jobs ---------------------------------------------------------------------------------------
def test_jobs_on_a_node_are_captured_on_the_controller_and_answered_without_their_script(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path, tmp_path: Path
) -> None:
    # Given a running 2-node job
    job_id = start_training(slurm_env, job_dir)
    captures = CaptureStore(tmp_path / "captures")
    # When the workflow asks which jobs run on one of its nodes
    mine = nodes_of(slurm, job_id)
    result = run(slurm, JobsOnNodes(nodes=mine[:1]), captures)
    # Then the answer says who the job is and where its checkpoints are, and nothing to run
    [job] = result.jobs  # type: ignore[attr-defined]
    assert (job.job_id, job.name, job.partition, job.num_nodes, job.state) == (job_id, "llama", "dev", 2, "RUNNING")
    assert job.checkpoint_uri == "s3://llm-train-checkpoints/llama" and not job.auto_resume and job.unresumable is None
    assert "sleep 600" not in result.model_dump_json()  # type: ignore[attr-defined]
    # And the agent kept everything needed to resubmit it, root-only, on the controller
    capture = captures.get(job_id)
    assert capture is not None and capture.script == TRAIN and capture.work_dir == str(job_dir)
    assert (capture.options.nodes, capture.options.time_minutes) == ("2", 30)
    assert (tmp_path / "captures").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "captures" / f"{job_id}.json").stat().st_mode & 0o777 == 0o600
    other = next(n for n in NODES if n not in mine)
    assert run(slurm, JobsOnNodes(nodes=[other]), captures).jobs == []  # type: ignore[attr-defined]


def test_a_cordon_drains_the_node_then_captures_the_job_still_running_on_it_in_one_command(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path, tmp_path: Path
) -> None:
    # Given a running 2-node job
    job_id = start_training(slurm_env, job_dir)
    captures = CaptureStore(tmp_path / "captures")
    # When a dry run's cordon (no drain) and then Cordon Nodes run on its first node
    (node, *_) = nodes_of(slurm, job_id)
    dry = run(slurm, CordonNodes(nodes=[node], reason=f"{TAG} unhealthy", drain=False), captures)
    assert not slurm.node_states([node])[node].drained_or_draining
    result = run(slurm, CordonNodes(nodes=[node], reason=f"{TAG} unhealthy"), captures)
    # Then the dry run only said what it would drain, and the cordon drained it under our tag
    assert dry.drained == result.drained == [node]  # type: ignore[attr-defined]
    state = slurm.node_states([node])[node]
    assert state.drained_or_draining and carries_owner_tag(state.reason, TAG)
    # And the job, still running on the draining node, is captured in the same answer, both times
    assert [j.job_id for j in result.jobs] == [j.job_id for j in dry.jobs] == [job_id]  # type: ignore[attr-defined]
    assert captures.get(job_id) is not None


def test_checkpoint_location_is_read_from_the_submission_environment(slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path) -> None:
    script = TRAIN.replace("#SBATCH --comment=checkpoint=s3://llm-train-checkpoints/llama\n", "")
    job_id = sbatch(
        slurm_env,
        "-J",
        "env",
        "-N",
        "1",
        "-D",
        str(job_dir),
        "--export=ALL,HYPERPOD_RECOVERY_CHECKPOINT_URI=s3://ckpt/env-job",
        script=script,
    )
    wait_for(lambda: job_state(slurm_env, job_id) == "RUNNING", "job running")
    job = slurm.job(job_id)
    assert job is not None and job.checkpoint_uri == "s3://ckpt/env-job"


def test_resubmission_sees_the_resume_checkpoint_avoids_the_drained_node_and_happens_once(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path
) -> None:
    # Given a running 2-node job, captured when the workflow asked about it, its first node drained
    # by us, the old job cancelled
    job_id = start_training(slurm_env, job_dir)
    # (its first node, wherever Slurm put it: a previous test's job may still be completing on one)
    failed = nodes_of(slurm, job_id)[0]
    captures = CaptureStore()
    run(slurm, JobsOnNodes(nodes=[failed]), captures)
    run(slurm, DrainNodes(nodes=[failed], reason=f"{TAG} unhealthy"))
    subprocess.run(["scancel", job_id], env=slurm_env, check=True)
    command = ResubmitJob(job_id=job_id, checkpoint=CheckpointRef(uri="s3://llm-train-checkpoints/llama/step-000002000/", step=2000))
    # When resubmitting, twice (a redelivered message)
    first = run(slurm, command, captures)
    again = run(slurm, command, captures)
    # Then one new job runs, off the drained node, with the checkpoint in its environment; the second
    # answer finds this incident's own copy by its comment
    new_id = first.new_job_id  # type: ignore[attr-defined]
    assert (again.new_job_id, again.already_submitted) == (new_id, False)  # type: ignore[attr-defined]
    wait_for(lambda: (job_dir / f"out-{new_id}.txt").exists(), "the resubmitted job's output")
    output = (job_dir / f"out-{new_id}.txt").read_text()
    assert "from=s3://llm-train-checkpoints/llama/step-000002000/ step=2000" in output
    assert failed not in output.split("nodes=")[1]
    resubmitted = slurm.job(new_id)
    assert resubmitted is not None and resubmitted.name == "llama" and resubmitted.num_nodes == 2


def test_requeue_puts_a_running_job_back_in_the_queue_once(slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path) -> None:
    job_id = start_training(slurm_env, job_dir)
    assert slurm.requeue(job_id) is True
    wait_for(lambda: job_state(slurm_env, job_id) == "PENDING", "job pending after requeue")
    assert slurm.requeue(job_id) is False  # already pending: nothing to do


# --- bad input and faults ----------------------------------------------------------------------
@pytest.mark.parametrize("nodes", [["ip-10-1-0-1;reboot"], ["$(id)"], ["-rf"], []])
def test_node_names_that_a_shell_would_expand_never_reach_slurm(nodes: list[str]) -> None:
    with pytest.raises(InvalidCommand, match="nodes"):
        validate_nodes(nodes)


@pytest.mark.parametrize("job_id", ["1;scancel -u root", "abc", "-1", ""])
def test_job_ids_are_validated(job_id: str) -> None:
    with pytest.raises(InvalidCommand, match="job_id"):
        validate_job_id(job_id)


def test_an_unreachable_slurmctld_is_reported_as_such(slurm_env: dict[str, str], tmp_path: Path) -> None:
    # Given a configuration pointing at a port nobody listens on, with a short message timeout
    conf = Path(slurm_env["SLURM_CONF"]).read_text().replace("SlurmctldPort=6817", "SlurmctldPort=6999")
    (tmp_path / "slurm.conf").write_text(conf + "MessageTimeout=1\n")
    dead = SlurmCli(env={**slurm_env, "SLURM_CONF": str(tmp_path / "slurm.conf")})
    with pytest.raises(SlurmUnreachable):
        dead.node_states(["ip-10-1-0-1"])


# --- the preflight's check -----------------------------------------------------------------------
def test_a_check_names_the_running_jobs_and_their_checkpoint_location(slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path) -> None:
    # Given a training job running under slurmctld
    job_id = start_training(slurm_env, job_dir)
    # When the preflight's check command is executed
    result = run(slurm, CheckAgent())
    # Then slurmctld answered, and the job is named with the checkpoint prefix its comment gives
    assert isinstance(result, AgentCheckResult) and result.slurm_reachable
    assert f"{len(NODES)} node(s)" in result.slurm_detail
    running = {job.job_id: job for job in result.running_jobs}
    assert running[job_id].name == "llama" and running[job_id].checkpoint_uri == "s3://llm-train-checkpoints/llama"


def test_a_check_reports_an_unreachable_slurmctld_instead_of_retrying(slurm_env: dict[str, str], tmp_path: Path) -> None:
    conf = Path(slurm_env["SLURM_CONF"]).read_text().replace("SlurmctldPort=6817", "SlurmctldPort=6999")
    (tmp_path / "slurm.conf").write_text(conf + "MessageTimeout=1\n")
    dead = SlurmCli(env={**slurm_env, "SLURM_CONF": str(tmp_path / "slurm.conf")})
    result = run(dead, CheckAgent())
    assert isinstance(result, AgentCheckResult) and not result.slurm_reachable and result.slurm_detail


# --- a hung job: its evidence, and its resubmission ---------------------------------------------
# A job that stands in for a hung training run: one Python rank per node, waiting for ever in the same place.
HUNG = """#!/bin/bash
srun python3 -c 'import time
def all_reduce():
    time.sleep(600)
all_reduce()'
"""


def start_hung_job(slurm_env: dict[str, str], job_dir: Path) -> str:
    job_id = sbatch(slurm_env, "-J", "hung", "-N", "2", "-t", "30", "-D", str(job_dir), script=HUNG)
    wait_for(lambda: job_state(slurm_env, job_id) == "RUNNING", f"job {job_id} running")
    # Its ranks have started on both nodes (srun's step 0)
    wait_for(lambda: subprocess.run(["pgrep", "-f", "def all_reduce"], capture_output=True).stdout.count(b"\n") >= 2, "ranks started")
    return job_id


@pytest.mark.parametrize("tool", ["absent", "installed"])
def test_a_hung_jobs_evidence_is_scontrols_text_and_each_nodes_stacks_read_in_a_step_of_the_job(
    slurm_env: dict[str, str], slurm: SlurmCli, job_dir: Path, tool: str
) -> None:
    # Given a running job whose ranks wait on both its nodes, and py-spy absent from the nodes or installed
    # (requirements-dev.txt installs it beside this interpreter, which need not be on PATH)
    found = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    py_spy = found if tool == "installed" else "/nonexistent/py-spy"
    if py_spy is None:
        pytest.skip("py-spy is not installed on this host (pip install py-spy): the absent case ran")
    agent = SlurmCli(env=slurm_env, py_spy=py_spy)
    job_id = start_hung_job(slurm_env, job_dir)
    nodes = nodes_of(agent, job_id)
    # When the agent captures its evidence
    result = run(agent, CaptureHangEvidence(job_id=job_id, nodes=nodes, timeout_seconds=30))
    assert isinstance(result, HangEvidenceResult)
    # Then scontrol's text and the job's state come back
    assert result.job_state == "RUNNING" and result.job_text.startswith(f"JobId={job_id} JobName=hung")
    # And each node answered from inside a step of the job on that node (slurmd named the node; scontrol
    # listpids there found the job's Python rank), nothing signalled: the job still runs
    assert [n.node for n in result.nodes] == nodes
    if tool == "absent":
        assert result.tool_absent and [n.outcome for n in result.nodes] == ["tool_absent"] * 2
        for node in result.nodes:
            assert f"/nonexistent/py-spy is not installed on {node.node}" in node.text and "python3" in node.text
    else:
        assert [n.outcome for n in result.nodes] == ["captured"] * 2, result.nodes
        assert all("all_reduce (<string>:3)" in n.text for n in result.nodes), [n.text for n in result.nodes]
        assert result.nodes[0].signature == result.nodes[1].signature == stack_signature(result.nodes[0].text)
    assert job_state(slurm_env, job_id) == "RUNNING"


def test_a_hung_jobs_node_without_its_processes_says_so_and_an_ended_job_is_not_stepped_into(
    slurm_env: dict[str, str], slurm: SlurmCli, job_dir: Path
) -> None:
    # Given a hung job, and a node it does not run on
    job_id = start_hung_job(slurm_env, job_dir)
    nodes = nodes_of(slurm, job_id)
    other = next(n for n in NODES if n not in nodes)
    # When its evidence is asked for on that node, Then srun refuses the step there and says why
    [elsewhere] = run(slurm, CaptureHangEvidence(job_id=job_id, nodes=[other], timeout_seconds=20)).nodes  # type: ignore[attr-defined]
    assert elsewhere.outcome == "failed" and "srun exited" in elsewhere.text
    # And once the job ended, each node says there is no process to dump
    subprocess.run(["scancel", job_id], env=slurm_env, check=True)
    wait_for(lambda: job_state(slurm_env, job_id) not in ("RUNNING", "COMPLETING"), "job ended")
    ended = run(slurm, CaptureHangEvidence(job_id=job_id, nodes=nodes, timeout_seconds=20))
    assert [n.outcome for n in ended.nodes] == ["no_process"] * 2  # type: ignore[attr-defined]


# A job slow to end on scancel: its shell ignores the first SIGTERM for a few seconds (as a training
# script that saves on SIGTERM does), so slurmctld reports it COMPLETING meanwhile.
SLOW_TO_STOP = """#!/bin/bash
#SBATCH --comment=checkpoint=s3://llm-train-checkpoints/llama
trap 'sleep 6; exit 0' TERM
echo "from=$HYPERPOD_RECOVERY_RESUME_FROM step=$HYPERPOD_RECOVERY_RESUME_STEP" > out-$SLURM_JOB_ID.txt
sleep 600 &
wait
"""


def test_resubmitting_a_running_job_cancels_it_and_submits_only_once_slurmctld_says_it_ended(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path
) -> None:
    # Given a running job, captured when the workflow asked about it, that takes seconds to end on scancel
    job_id = sbatch(slurm_env, "-J", "llama", "-N", "1", "-t", "30", "-D", str(job_dir), script=SLOW_TO_STOP)
    wait_for(lambda: (job_dir / f"out-{job_id}.txt").exists(), f"job {job_id} running")
    node = nodes_of(slurm, job_id)[0]
    captures = CaptureStore()
    run(slurm, JobsOnNodes(nodes=[node]), captures)
    seen_at_submission: list[str] = []
    submit = slurm.submit_as_owner

    def watching(*args: object, **kwargs: object) -> str:
        seen_at_submission.append(job_state(slurm_env, job_id))
        return submit(*args, **kwargs)  # type: ignore[arg-type]

    slurm.submit_as_owner = watching  # type: ignore[method-assign]
    executor = CommandExecutor(slurm, captures=captures, old_job_poll_seconds=1)
    command = ResubmitJob(job_id=job_id, checkpoint=CheckpointRef(uri="s3://llm-train-checkpoints/llama/step-000002000/", step=2000))
    # When it is resubmitted
    started = time.monotonic()
    result = executor.execute(envelope(command)).result
    waited = time.monotonic() - started
    # Then it was cancelled, and its copy submitted only once slurmctld no longer reported it alive
    assert isinstance(result, ResubmitResult) and result.cancelled_old and result.new_job_id
    assert seen_at_submission and seen_at_submission[0] not in ("RUNNING", "COMPLETING"), seen_at_submission
    assert waited >= 3, waited  # the trap kept it COMPLETING for seconds: the agent waited for them
    new_id = result.new_job_id
    wait_for(lambda: (job_dir / f"out-{new_id}.txt").exists(), "the resubmitted job's output")
    assert "from=s3://llm-train-checkpoints/llama/step-000002000/ step=2000" in (job_dir / f"out-{new_id}.txt").read_text()


# --- shrink-and-continue: a node-range job shrunk onto what is left, then grown back -----------------
# A job whose own script may run on 1 or 2 nodes (read by the agent: Slurm 22.05 forgets a started job's
# range); it records the size it was started at and the one the pipeline resumed it at.
ELASTIC = """#!/bin/bash
#SBATCH --nodes=1-2
#SBATCH --comment=checkpoint=s3://llm-train-checkpoints/llama
echo "from=$HYPERPOD_RECOVERY_RESUME_FROM resume_nodes=${HYPERPOD_RECOVERY_RESUME_NODES:-none}" \\
  "count=$SLURM_JOB_NUM_NODES" > out-$SLURM_JOB_ID.txt
sleep 600
"""


def test_a_node_range_job_shrinks_onto_the_node_left_and_grows_back_once_its_partner_is_resumed(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path
) -> None:
    # Given a job whose script asks for 1-2 nodes running on 2, and another job holding the cluster's other two
    job_id = sbatch(slurm_env, "-J", "llama", "-t", "30", "-D", str(job_dir), script=ELASTIC)
    wait_for(lambda: job_state(slurm_env, job_id) == "RUNNING", f"job {job_id} running")
    mine = nodes_of(slurm, job_id)
    assert len(mine) == 2
    filler = sbatch(slurm_env, "-N", "2", "-t", "30", "--output=/dev/null", f"--exclude={','.join(mine)}", "--wrap", "sleep 600", script="")
    wait_for(lambda: job_state(slurm_env, filler) == "RUNNING", "the other job running")
    captures = CaptureStore()
    executor = CommandExecutor(slurm, captures=captures, old_job_poll_seconds=1)
    alive_at_submission: list[str] = []
    submit = slurm.submit_as_owner

    def watching(*args: object, **kwargs: object) -> str:
        alive_at_submission.extend(job.job_id for job in slurm.queue() if job.state in ("RUNNING", "COMPLETING") and job.job_id != filler)
        return submit(*args, **kwargs)  # type: ignore[arg-type]

    slurm.submit_as_owner = watching  # type: ignore[method-assign]

    # When one of its nodes is cordoned (the failed one)
    healthy, failed = mine
    cordon = executor.execute(envelope(CordonNodes(nodes=[failed], reason=f"{TAG} xid 79"), "inc-1:cordon")).result
    # Then the job may shrink to 1 node (its script's range) and no node is free to take it
    [job] = cordon.jobs  # type: ignore[attr-defined]
    assert job.elastic is not None and (job.elastic.min_nodes, job.elastic.max_nodes, job.elastic.source) == (1, 2, "node_range")
    assert job.spare_nodes == 0 and job.num_nodes == 2

    # When it is resubmitted at 1 node
    shrink = ResubmitJob(
        job_id=job_id, checkpoint=CheckpointRef(uri="s3://llm-train-checkpoints/llama/step-000002000/", step=2000), nodes=1
    )
    shrunk = executor.execute(envelope(shrink, "inc-1:shrink")).result
    # Then the old job was cancelled and had ended before its 1-node copy was submitted, which runs on the node left
    assert isinstance(shrunk, ResubmitResult) and shrunk.cancelled_old and shrunk.nodes == 1 and shrunk.new_job_id
    assert alive_at_submission == [], alive_at_submission
    copy_id = shrunk.new_job_id
    wait_for(lambda: (job_dir / f"out-{copy_id}.txt").exists(), "the 1-node copy's output")
    assert "from=s3://llm-train-checkpoints/llama/step-000002000/ resume_nodes=1 count=1" in (job_dir / f"out-{copy_id}.txt").read_text()
    assert nodes_of(slurm, copy_id) == [healthy] and job_state(slurm_env, job_id) not in ("RUNNING", "COMPLETING")
    # And the copy is elastic still (1 node lies within its script's range), its size its own --nodes=1
    copy = slurm.job(copy_id)
    assert copy is not None and copy.num_nodes == 1 and copy.elastic is not None and copy.elastic.source == "node_range"

    # When a grow-back to 2 nodes is asked for while its partner is still drained
    grow = ResubmitJob(
        job_id=copy_id, checkpoint=CheckpointRef(uri="s3://llm-train-checkpoints/llama/step-000002500/", step=2500), nodes=2,
        require_free_nodes=2,
    )  # fmt: skip
    declined = executor.execute(envelope(grow, "inc-1:grow-early")).result
    # Then it is declined, and the 1-node copy trains on untouched
    assert isinstance(declined, ResubmitResult) and declined.new_job_id is None and not declined.cancelled_old
    assert declined.declined == f"only 1 node(s) could take it at once, 2 needed: job {copy_id} keeps running on 1 node(s)"
    assert job_state(slurm_env, copy_id) == "RUNNING"

    # When its partner passes its gate and is resumed, and the grow-back comes again
    run(slurm, ResumeNodes(nodes=[failed], owner_tag=TAG))
    wait_for(lambda: failed in slurm.free_nodes(), "the resumed node free")
    grown = executor.execute(envelope(grow, "inc-1:grow")).result
    # Then the 1-node copy was cancelled and ended before the 2-node copy was submitted, which runs on both nodes
    assert isinstance(grown, ResubmitResult) and grown.cancelled_old and grown.nodes == 2 and grown.new_job_id
    assert alive_at_submission == [], alive_at_submission
    full_id = grown.new_job_id
    wait_for(lambda: (job_dir / f"out-{full_id}.txt").exists(), "the 2-node copy's output")
    assert "from=s3://llm-train-checkpoints/llama/step-000002500/ resume_nodes=2 count=2" in (job_dir / f"out-{full_id}.txt").read_text()
    assert sorted(nodes_of(slurm, full_id)) == sorted(mine) and job_state(slurm_env, copy_id) not in ("RUNNING", "COMPLETING")
    # And the same grow-back, retried after a lost answer, answers that copy and stops nothing
    again = executor.execute(envelope(grow, "inc-1:grow")).result
    assert isinstance(again, ResubmitResult) and (again.new_job_id, again.declined, again.cancelled_old) == (full_id, None, False)
    assert job_state(slurm_env, full_id) == "RUNNING"


def test_a_grow_back_never_stops_a_job_the_pipeline_did_not_submit(slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path) -> None:
    job_id = sbatch(slurm_env, "-J", "llama", "-t", "30", "-D", str(job_dir), script=ELASTIC)
    wait_for(lambda: job_state(slurm_env, job_id) == "RUNNING", f"job {job_id} running")
    grow = ResubmitJob(job_id=job_id, checkpoint=CheckpointRef(uri="s3://llm-train-checkpoints/llama/step-000002500/", step=2500),
                       nodes=2, require_free_nodes=1)  # fmt: skip
    with pytest.raises(InvalidCommand, match=f"job {job_id} is no copy of ours"):
        run(slurm, grow)
    assert job_state(slurm_env, job_id) == "RUNNING"
