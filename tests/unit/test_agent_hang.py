"""A hung job's evidence on the controller (capture_hang_evidence), the stack signature nodes are
compared by, and a resubmission that never starts a copy beside a job that has not stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from hyperpod_recovery.errors import OldJobNotStopped
from hyperpod_recovery.models.commands import (
    COMMAND_TYPES,
    JOB_TEXT_BYTES,
    JOB_TEXT_LIMIT,
    NODE_EVIDENCE_BYTES,
    CaptureHangEvidence,
    CheckpointRef,
    CommandEnvelope,
    HangEvidenceResult,
    ResubmitJob,
)
from hyperpod_recovery.redact import CUT_MARKER
from hyperpod_recovery_agent import node_dump
from hyperpod_recovery_agent.executor import OLD_JOB_STOP_SECONDS, CommandExecutor
from hyperpod_recovery_agent.slurm import SlurmCli, StackDump
from hyperpod_recovery_agent.stacks import innermost_frames, stack_signature
from sandbox.clock import DRIVER, EPOCH, VirtualClock
from sandbox.slurm import ALL_REDUCE_STACK, DATA_LOADER_STACK, SimulatedController, SimulatedSlurm, SlurmJob
from tests.fakes import T0

NODES = ["ip-10-1-0-1", "ip-10-1-0-2", "ip-10-1-0-3", "ip-10-1-0-4"]

# `py-spy dump --pid` (0.4.2) of a Python 3.11 process with a waiting main thread and a sleeping worker:
# its output as printed, byte for byte.
PY_SPY_DUMP = """Process 25506: /root/.pyenv/versions/3.11.7/bin/python3 /tmp/hang_sample.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 25506 (idle): "MainThread"
    wait (threading.py:327)
    wait (threading.py:629)
    all_reduce_wait (hang_sample.py:3)
    train_step (hang_sample.py:10)
    <module> (hang_sample.py:11)
Thread 25548 (idle): "pin_memory"
    worker (hang_sample.py:5)
    run (threading.py:982)
    _bootstrap_inner (threading.py:1045)
    _bootstrap (threading.py:1002)
"""
# The same process as `py-spy dump --locals` prints it (older releases name threads by hex id).
PY_SPY_DUMP_LOCALS = """Process 25506: /root/.pyenv/versions/3.11.7/bin/python3 /tmp/hang_sample.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 0x7F3A2C1B5740 (idle): "MainThread"
    wait (threading.py:320)
        Arguments:
            self: <Condition at 0x7f3a2c0e0a90>
            timeout: None
        Locals:
            waiter: <lock at 0x7f3a2c0e0b40>
    wait (threading.py:629)
    all_reduce_wait (hang_sample.py:3)
Thread 0x7F3A2A9FF640 (active+gil): "pin_memory"
    worker (hang_sample.py:5)
        Locals:
            n: 3
"""


class VirtualTime:
    """now() and sleep() of one clock that moves only when slept on."""

    def __init__(self) -> None:
        self.at = T0
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += timedelta(seconds=seconds)


def envelope(command: object, incident: str = "inc-1") -> CommandEnvelope:
    return CommandEnvelope(
        command_id=f"{incident}:cmd", incident_id=incident, execution_name=incident, task_token="tok", requested_at=T0, command=command
    )


@pytest.fixture
def clock() -> VirtualTime:
    return VirtualTime()


@pytest.fixture
def slurm(clock: VirtualTime) -> SimulatedSlurm:
    simulated = SimulatedSlurm(now=clock.now)
    for name in NODES:
        simulated.add_node(name)
    simulated.add_job(SlurmJob(job_id="1001", name="llama", nodes=NODES[:3], state="RUNNING", checkpoint_uri="s3://ckpt/llama"))
    return simulated


def capture(slurm: SimulatedSlurm, nodes: list[str], clock: VirtualTime | None = None) -> HangEvidenceResult:
    executor = CommandExecutor(slurm, now=clock.now if clock else lambda: T0)
    result = executor.execute(envelope(CaptureHangEvidence(job_id="1001", nodes=nodes))).result
    assert isinstance(result, HangEvidenceResult)
    return result


# --- the signature ----------------------------------------------------------------------------
def test_the_innermost_frame_of_every_thread_is_read_from_a_real_dump() -> None:
    assert innermost_frames(PY_SPY_DUMP) == {("wait", "threading.py"), ("worker", "hang_sample.py")}


def test_line_numbers_locals_and_thread_ids_do_not_change_the_signature() -> None:
    # (--locals lines are indented deeper than frames; the wait is at another line of the same function)
    assert stack_signature(PY_SPY_DUMP_LOCALS) == stack_signature(PY_SPY_DUMP)


def test_the_signature_is_order_free_and_counts_each_place_once() -> None:
    # Given the same threads in the other order, and the dump of a second process stuck in the same places
    header, main_thread, worker = PY_SPY_DUMP.partition("\nThread 25506")[0], *PY_SPY_DUMP.split("Thread ")[1:]
    swapped = f"{header}\nThread {worker}Thread {main_thread}"
    two_processes = PY_SPY_DUMP + "\n" + PY_SPY_DUMP.replace("25506", "25601").replace("25548", "25602")
    # Then all three share one signature: 16 hex digits
    signature = stack_signature(PY_SPY_DUMP)
    assert signature is not None and len(signature) == 16 and int(signature, 16) >= 0
    assert stack_signature(swapped) == signature == stack_signature(two_processes)


def test_a_thread_stuck_elsewhere_changes_the_signature() -> None:
    elsewhere = PY_SPY_DUMP.replace("    worker (hang_sample.py:5)\n", "    read_shard (data.py:88)\n    worker (hang_sample.py:5)\n")
    assert stack_signature(elsewhere) != stack_signature(PY_SPY_DUMP)
    # The file counts too: the same function name in another module is another place
    assert stack_signature(PY_SPY_DUMP.replace("wait (threading.py:327)", "wait (queue.py:327)")) != stack_signature(PY_SPY_DUMP)


@pytest.mark.parametrize("text", ["", "py-spy is not installed on ip-10-1-0-1", 'Process 1: python\nThread 1 (idle): "MainThread"\n'])
def test_text_without_a_frame_has_no_signature(text: str) -> None:
    assert stack_signature(text) is None


# --- capture_hang_evidence on the simulated Slurm ------------------------------------------------
def test_a_hung_jobs_nodes_waiting_in_the_same_collective_share_a_signature(slurm: SimulatedSlurm) -> None:
    # Given job 1001 hung on three nodes, every rank in the all_reduce
    slurm.hang_job("1001")
    # When its evidence is captured
    result = capture(slurm, NODES[:3])
    # Then scontrol's text and state come back, and each node's stack, all with one signature
    assert result.job_state == "RUNNING" and result.job_text.startswith("JobId=1001 JobName=llama")
    assert [n.outcome for n in result.nodes] == ["captured"] * 3 and not result.tool_absent
    assert "all_reduce (torch/distributed/distributed_c10d.py:2050)" in result.nodes[0].text
    assert len({n.signature for n in result.nodes}) == 1 and result.nodes[0].signature == stack_signature(ALL_REDUCE_STACK)


def test_the_odd_node_of_a_hang_has_its_own_signature_and_a_node_whose_dump_hangs_times_out(slurm: SimulatedSlurm) -> None:
    # Given a hang whose rank on node 2 never reached the collective, and whose py-spy on node 3 never answers
    slurm.hang_job("1001", odd_nodes={NODES[1]: DATA_LOADER_STACK, NODES[2]: None})
    # When its evidence is captured
    result = capture(slurm, NODES[:3])
    # Then node 2 is the odd one, and node 3 says it timed out, with no signature
    first, odd, stuck = result.nodes
    assert first.signature is not None and odd.signature is not None and odd.signature != first.signature
    assert "read_shard (data.py:88)" in odd.text
    assert (stuck.outcome, stuck.signature) == ("timed_out", None) and "did not answer in 60 s" in stuck.text


def test_without_py_spy_each_node_says_so_and_the_answer_says_the_tool_was_absent(slurm: SimulatedSlurm) -> None:
    slurm.py_spy_installed = False
    result = capture(slurm, NODES[:2])
    assert result.tool_absent and result.tool == "py-spy"
    assert [(n.outcome, n.signature) for n in result.nodes] == [("tool_absent", None)] * 2
    assert "py-spy is not installed on ip-10-1-0-1" in result.nodes[0].text


def test_a_node_the_job_does_not_run_on_has_no_process_and_one_that_does_not_answer_failed(slurm: SimulatedSlurm) -> None:
    # Given node 2's slurmd not answering, and node 4 outside the job
    slurm.host_view = lambda name: (None, name != NODES[1])
    result = capture(slurm, [NODES[0], NODES[1], NODES[3]])
    # Then node 2's step failed with srun's message, and node 4 has no process of the job
    assert [n.outcome for n in result.nodes] == ["captured", "failed", "no_process"]
    assert "Communication connection failure" in result.nodes[1].text


def test_a_job_that_no_longer_runs_is_not_stepped_into(slurm: SimulatedSlurm) -> None:
    # Given the job ended, and a Slurm that fails the test if a step is started
    slurm.cancel("1001")

    def no_step(job_id: str, node: str, timeout_seconds: float) -> StackDump:
        raise AssertionError("a step was started in an ended job")

    slurm.dump_stacks = no_step  # type: ignore[method-assign]
    result = capture(slurm, NODES[:2])
    # Then each node says there is no process, and why
    assert result.job_state == "CANCELLED"
    assert [n.outcome for n in result.nodes] == ["no_process"] * 2 and "it is CANCELLED" in result.nodes[0].text


def test_an_unknown_job_is_answered_without_state_or_text() -> None:
    slurm = SimulatedSlurm()
    slurm.add_node(NODES[0])
    result = CommandExecutor(slurm, now=lambda: T0).capture_hang_evidence(CaptureHangEvidence(job_id="77", nodes=[NODES[0]]))
    assert (result.job_state, result.job_text) == (None, "")
    assert result.nodes[0].outcome == "no_process" and "slurmctld no longer knows it" in result.nodes[0].text


def test_long_texts_are_cut_to_the_answers_bounds_and_the_signature_covers_the_whole_dump(slurm: SimulatedSlurm) -> None:
    # Given a dump far longer than the answer carries, whose first thread is the only one stuck elsewhere
    many = "\n".join(ALL_REDUCE_STACK.replace("{pid}", str(pid)).replace("{thread}", str(pid + 1)) for pid in range(100, 140))
    odd = DATA_LOADER_STACK + "\n" + many
    slurm.hang_job("1001", odd_nodes={NODES[0]: odd})
    slurm.jobs["1001"].comment = "c" * (JOB_TEXT_LIMIT + 100)
    result = capture(slurm, NODES[:2])
    # Then both texts are within bounds (scontrol's start and the dump's end kept) and the signature still tells it apart
    assert len(result.job_text.encode()) == JOB_TEXT_BYTES and result.job_text.startswith("JobId=1001")
    assert len(result.nodes[0].text.encode()) == NODE_EVIDENCE_BYTES and "read_shard" not in result.nodes[0].text
    assert result.nodes[0].text.startswith(CUT_MARKER) and result.nodes[0].text.endswith("_bootstrap (threading.py:973)")
    assert result.nodes[0].signature == stack_signature(odd) != result.nodes[1].signature


SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_a_secret_in_a_stack_dump_never_leaves_the_node(slurm: SimulatedSlurm) -> None:
    # Given a hung rank whose stack dump (py-spy --locals) shows an AWS secret key and a token, far from its end
    odd = DATA_LOADER_STACK.replace(
        "    <module>", f"        aws_secret_access_key = '{SECRET_KEY}'\n        hf = 'hf_{'a' * 34}'\n    <module>"
    )
    slurm.hang_job("1001", odd_nodes={NODES[0]: odd + "\n" + "x" * 1900})
    # When the agent answers capture_hang_evidence
    result = capture(slurm, NODES[:1])
    # Then its answer (what SendTaskSuccess carries) has neither, nor a piece of either
    answer = result.model_dump_json()
    assert SECRET_KEY[20:] not in answer and "a" * 20 not in answer


def test_a_secret_in_the_job_s_scontrol_text_is_redacted(slurm: SimulatedSlurm) -> None:
    # Given a job whose comment (shown by scontrol show job) carries a token
    slurm.hang_job("1001")
    slurm.jobs["1001"].comment = "run by ci token=ghp_" + "B" * 36
    # When the agent answers; Then the token is gone and says what was removed
    result = capture(slurm, NODES[:1])
    assert "B" * 12 not in result.job_text and "token=[REDACTED:token]" in result.job_text


def test_the_agent_says_it_executes_the_evidence_command() -> None:
    slurm = SimulatedSlurm()
    slurm.add_node(NODES[0])
    check = CommandExecutor(slurm, now=lambda: T0).check()
    assert "capture_hang_evidence" in check.commands and set(check.commands) == COMMAND_TYPES


# --- resubmission beside a job that has not stopped ------------------------------------------
def resubmit(executor: CommandExecutor, incident: str = "inc-1") -> object:
    command = ResubmitJob(job_id="1001", checkpoint=CheckpointRef(uri="s3://ckpt/llama/step-000002000/", step=2000))
    return executor.execute(envelope(command, incident)).result


def test_a_resubmission_cancels_the_running_job_waits_until_it_ended_then_submits(slurm: SimulatedSlurm, clock: VirtualTime) -> None:
    # Given job 1001 running, which takes 30 s to end after scancel (KillWait)
    slurm.slow_to_stop("1001", 30)
    submitted_while: list[str | None] = []
    submit = slurm.submit_as_owner

    def watching(*args: object, **kwargs: object) -> str:
        submitted_while.append(slurm.job_state("1001"))
        return submit(*args, **kwargs)  # type: ignore[arg-type]

    slurm.submit_as_owner = watching  # type: ignore[method-assign]
    executor = CommandExecutor(slurm, now=clock.now, sleep=clock.sleep)
    # When it is resubmitted
    result = resubmit(executor)
    # Then the copy was submitted only once the old job had ended, after polling it every 5 s
    assert submitted_while == ["CANCELLED"] and clock.slept == [5.0] * 6
    assert result.cancelled_old and result.new_job_id == "1002"  # type: ignore[attr-defined]
    assert slurm.second_copies() == []


def test_a_resubmission_refuses_when_the_old_job_never_stops_and_submits_nothing(slurm: SimulatedSlurm, clock: VirtualTime) -> None:
    # Given job 1001 with a process SIGKILL does not end
    slurm.slow_to_stop("1001", None)
    executor = CommandExecutor(slurm, now=clock.now, sleep=clock.sleep)
    # When it is resubmitted, Then the agent waits its bound and refuses, naming the state
    with pytest.raises(OldJobNotStopped, match="job 1001 was cancelled and is still COMPLETING after 120 s"):
        resubmit(executor)
    assert sum(clock.slept) == OLD_JOB_STOP_SECONDS
    assert slurm.submissions == [] and slurm.job_state("1001") == "COMPLETING"


def test_a_clock_that_does_not_move_still_bounds_the_wait(slurm: SimulatedSlurm) -> None:
    slurm.slow_to_stop("1001", None)
    polls: list[float] = []
    executor = CommandExecutor(slurm, now=lambda: T0, sleep=polls.append)
    with pytest.raises(OldJobNotStopped):
        resubmit(executor)
    assert len(polls) == OLD_JOB_STOP_SECONDS / 5 and slurm.submissions == []


def test_a_resubmission_repeated_after_a_lost_answer_finds_its_copy_and_waits_no_more(slurm: SimulatedSlurm, clock: VirtualTime) -> None:
    # Given a resubmission that cancelled the old job, waited for it and submitted, but whose answer was lost
    slurm.slow_to_stop("1001", 12)
    executor = CommandExecutor(slurm, now=clock.now, sleep=clock.sleep)
    first = resubmit(executor)
    waited = list(clock.slept)
    # When the same incident's command comes again
    again = resubmit(executor)
    # Then it answers the same copy without cancelling, waiting or submitting anything
    assert again.new_job_id == first.new_job_id and len(slurm.submissions) == 1  # type: ignore[attr-defined]
    assert clock.slept == waited == [5.0, 5.0, 5.0]


def test_a_retry_after_old_job_not_stopped_waits_again_and_submits_once_the_job_ended(slurm: SimulatedSlurm, clock: VirtualTime) -> None:
    # Given a job that takes longer than the agent's bound to end (200 s), and a first attempt that refused
    slurm.slow_to_stop("1001", 200)
    executor = CommandExecutor(slurm, now=clock.now, sleep=clock.sleep)
    with pytest.raises(OldJobNotStopped):
        resubmit(executor)
    # When the workflow retries (scancel again is harmless), Then the copy is submitted once the old job ended
    result = resubmit(executor)
    assert result.new_job_id == "1002" and len(slurm.submissions) == 1 and slurm.second_copies() == []  # type: ignore[attr-defined]


# --- the program run on each node, and srun around it -------------------------------------------
@pytest.fixture
def processes() -> Iterator[dict[str, int]]:
    """A Python process and a non-Python one standing in for a job's processes on a node, and the
    Python process of another evidence step of the same job (marked as such)."""
    python = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    shell = subprocess.Popen(["cat"], stdin=subprocess.PIPE)
    mark, value = node_dump.EVIDENCE_MARK.split("=", 1)
    other_capture = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, env={**os.environ, mark: value}
    )
    try:
        yield {"python": python.pid, "shell": shell.pid, "other_capture": other_capture.pid}
    finally:
        for process in (python, shell, other_capture):
            process.kill()
            process.wait()


def fake_tools(directory: Path, listing: str, py_spy: str | None) -> None:
    """An scontrol whose listpids prints ``listing``, and (unless None) a py-spy running ``py_spy``."""
    directory.mkdir(exist_ok=True)
    (directory / "scontrol").write_text(f'#!/bin/sh\n[ "$1" = listpids ] || exit 9\ncat <<"EOF"\n{listing}EOF\n')
    (directory / "scontrol").chmod(0o755)
    if py_spy is not None:
        (directory / "py-spy").write_text(f"#!/bin/sh\n{py_spy}\n")
        (directory / "py-spy").chmod(0o755)


def run_node_dump(directory: Path, monkeypatch: pytest.MonkeyPatch, seconds: float = 5) -> tuple[str, str]:
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    monkeypatch.setenv("SLURM_STEP_ID", "7")
    return node_dump.dump("1001", "py-spy", str(directory / "scontrol"), seconds, "ip-10-1-0-1")


def listing_of(pids: dict[str, int], own: int = 999_999) -> str:
    return (
        "PID      JOBID    STEPID   LOCALID GLOBALID\n"
        f"{pids['shell']}    1001     batch    0       0\n"
        f"{pids['python']}    1001     0        0       0\n"
        f"{pids['other_capture']}    1001     9        0       0\n"
        f"{own}    1001     7        0       0\n"
    )


def test_listpids_output_is_read_without_the_evidence_steps_own_processes() -> None:
    listing = "PID JOBID STEPID LOCALID GLOBALID\n4100  1001  batch  0  0\n4117  1001  0  0  0\n4200  1001  7  0  0\n"
    assert node_dump.listed_pids(listing, "7") == [4100, 4117]


def test_on_a_node_only_the_jobs_python_processes_are_dumped_never_an_evidence_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: dict[str, int]
) -> None:
    # Given a py-spy that prints a dump for the pid it is given (a real dump's text)
    fake_tools(tmp_path, listing_of(processes), py_spy=f'[ "$3" = {processes["python"]} ] || exit 5\ncat <<"EOF"\n{PY_SPY_DUMP}EOF')
    outcome, text = run_node_dump(tmp_path, monkeypatch)
    assert (outcome, text) == ("captured", PY_SPY_DUMP.rstrip("\n"))


def test_on_a_node_without_py_spy_the_answer_says_so_and_names_the_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: dict[str, int]
) -> None:
    fake_tools(tmp_path, listing_of(processes), py_spy=None)
    outcome, text = run_node_dump(tmp_path, monkeypatch)
    assert outcome == "tool_absent" and "py-spy is not installed on ip-10-1-0-1" in text and f"({processes['python']})" in text


def test_on_a_node_a_dump_that_does_not_answer_in_time_is_killed_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: dict[str, int]
) -> None:
    fake_tools(tmp_path, listing_of(processes), py_spy="exec sleep 30")
    outcome, text = run_node_dump(tmp_path, monkeypatch, seconds=0.7)
    assert outcome == "timed_out" and f"py-spy dump --pid {processes['python']} did not answer" in text


def test_on_a_node_py_spys_own_error_is_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: dict[str, int]) -> None:
    fake_tools(tmp_path, listing_of(processes), py_spy='echo "Error: Permission Denied (os error 13)" >&2; exit 1')
    outcome, text = run_node_dump(tmp_path, monkeypatch)
    assert outcome == "failed" and "exited 1: Error: Permission Denied (os error 13)" in text


def test_on_a_node_a_dump_that_fails_once_is_tried_again_and_its_error_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: dict[str, int]
) -> None:
    # Given a py-spy whose first dump fails as py-spy can, transiently, and whose second succeeds
    marker = tmp_path / "tried"
    script = (
        f'if [ ! -e {marker} ]; then touch {marker}; echo "Error: Failed to get stack traces" >&2; exit 1; fi\n'
        f'cat <<"EOF"\n{PY_SPY_DUMP}EOF'
    )
    fake_tools(tmp_path, listing_of(processes), py_spy=script)
    # When the node's stacks are dumped
    outcome, text = run_node_dump(tmp_path, monkeypatch)
    # Then the second try's dump is the answer, and the first try's error is not said as if it stood
    assert (outcome, text) == ("captured", PY_SPY_DUMP.rstrip("\n"))


@pytest.mark.parametrize(
    ("listing", "outcome", "said"),
    [
        ("PID JOBID STEPID LOCALID GLOBALID\n999999  1001  7  0  0\n", "no_process", "has no process on ip-10-1-0-1"),
        ("SHELL", "no_process", "no Python process of job 1001 on ip-10-1-0-1: cat("),
    ],
)
def test_on_a_node_without_a_python_process_of_the_job_there_is_nothing_to_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: dict[str, int], listing: str, outcome: str, said: str
) -> None:
    if listing == "SHELL":
        listing = f"PID      JOBID    STEPID   LOCALID GLOBALID\n{processes['shell']}    1001     batch    0       0\n"
    fake_tools(tmp_path, listing, py_spy="exit 7")
    assert run_node_dump(tmp_path, monkeypatch)[0] == outcome
    assert said in run_node_dump(tmp_path, monkeypatch)[1]


def fake_srun(directory: Path, body: str) -> SlurmCli:
    """A bin_dir whose srun records its arguments and does ``body``; scontrol beside it."""
    directory.mkdir(exist_ok=True)
    (directory / "srun").write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" > {directory}/srun.args\n{body}\n')
    (directory / "srun").chmod(0o755)
    (directory / "scontrol").write_text("#!/bin/sh\nexit 0\n")
    (directory / "scontrol").chmod(0o755)
    return SlurmCli(bin_dir=str(directory), env={"PATH": "/usr/bin:/bin"}, py_spy="/opt/py-spy/bin/py-spy")


def test_the_dump_runs_as_a_step_of_the_job_itself_on_the_one_node(tmp_path: Path) -> None:
    (tmp_path / "answer.json").write_text(json.dumps({"outcome": "captured", "text": PY_SPY_DUMP}) + "\n")
    cli = fake_srun(tmp_path, f"cat {tmp_path}/answer.json")
    dump = cli.dump_stacks("1001", "ip-10-1-0-2", 60)
    assert dump == StackDump("captured", PY_SPY_DUMP)
    args = (tmp_path / "srun.args").read_text().split("\0")
    step, program = args[: args.index("--")], args[args.index("--") + 1 :]
    assert {"--overlap", "--jobid=1001", "--nodelist=ip-10-1-0-2", "--nodes=1", "--ntasks=1", "--time=1"} <= set(step)
    # node_dump.py's own text, with the job, the configured py-spy, the controller's scontrol and the node's deadline
    assert program[:2] == ["python3", "-c"] and "def listed_pids" in program[2]
    assert program[3:] == ["1001", "/opt/py-spy/bin/py-spy", str(tmp_path / "scontrol"), "48", ""]


def test_an_srun_that_fails_is_answered_failed_with_its_message(tmp_path: Path) -> None:
    cli = fake_srun(tmp_path, 'echo "srun: error: Unable to create step for job 1001: Invalid job id specified" >&2; exit 1')
    dump = cli.dump_stacks("1001", "ip-10-1-0-2", 60)
    assert dump == StackDump("failed", "srun exited 1: srun: error: Unable to create step for job 1001: Invalid job id specified")


def test_an_srun_past_the_deadline_is_stopped_and_answered_timed_out(tmp_path: Path) -> None:
    # (srun forwards SIGTERM to this step's task only; the fake ends on it)
    cli = fake_srun(tmp_path, 'echo "srun: Job 1001 step creation temporarily disabled, retrying" >&2; exec sleep 30')
    dump = cli.dump_stacks("1001", "ip-10-1-0-2", 0.5)
    assert dump.outcome == "timed_out" and "did not end in 0.5 s: srun: Job 1001 step creation temporarily disabled" in dump.text


def test_node_dump_runs_as_python3_c_with_nothing_but_the_standard_library(tmp_path: Path, processes: dict[str, int]) -> None:
    # Given node_dump.py's text run the way srun runs it, in an environment without our packages
    fake_tools(tmp_path, listing_of(processes), py_spy=None)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "SLURM_STEP_ID": "7", "SLURMD_NODENAME": "ip-10-1-0-3"}
    text = Path(node_dump.__file__).read_text()
    done = subprocess.run(
        [sys.executable, "-I", "-c", text, "1001", "py-spy", str(tmp_path / "scontrol"), "5"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=os.sep,
    )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["outcome"] == "tool_absent" and "not installed on ip-10-1-0-3" in answer["text"]


# --- the sandbox's controller: the wait is virtual, and Slurm stays unlocked meanwhile ------------
def test_in_a_drill_the_agent_waits_on_the_virtual_clock_with_slurm_unlocked() -> None:
    # Given the sandbox's controller, whose job 1001 takes 30 s of drill time to end after scancel
    clock = VirtualClock()
    controller = SimulatedController(clock, EPOCH, agent_seconds=0.0, agent_down=False)
    for name in NODES:
        controller.slurm.add_node(name)
    controller.slurm.add_job(SlurmJob(job_id="1001", name="llama", nodes=NODES[:2], state="RUNNING", checkpoint_uri="s3://ckpt/llama"))
    controller.slurm.slow_to_stop("1001", 30)
    unlocked: list[bool] = []
    sleep = clock.sleep

    def observed(seconds: float, timeline: str | None = None, reason: str | None = None) -> None:
        # another execution's command could take Slurm's lock while this one waits
        def take_and_give_back() -> None:
            taken = controller.executor.lock.acquire(timeout=1)
            unlocked.append(taken)
            if taken:
                controller.executor.lock.release()

        other = threading.Thread(target=take_and_give_back)
        other.start()
        other.join()
        sleep(seconds, timeline, reason)

    clock.sleep = observed  # type: ignore[method-assign]
    controller.executor.catching_up = True  # on the runner's thread: the driver's present moves, nothing parks
    # When the agent resubmits it
    reply = controller.executor.execute(envelope(ResubmitJob(job_id="1001", checkpoint=CheckpointRef(uri="s3://ckpt/llama/s/", step=1))))
    # Then the copy was submitted after 30 s of drill time, never beside the old job, and Slurm was unlocked while it waited
    assert reply.result.new_job_id == "1002" and reply.result.cancelled_old
    assert clock.now(DRIVER) == 30.0 and unlocked == [True] * 6
    assert controller.slurm.second_copies() == []
    controller.close()
