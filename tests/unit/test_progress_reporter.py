"""The training scripts' progress reporter (hyperpod_recovery.checkpointing.Progress): what it
reports (the node's step, pace, baseline, waits, declared pauses), that the training loop never
waits on it, and that nothing it meets (a disabled table, a failing network) reaches the job."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery.checkpointing import Checkpoints, Progress
from hyperpod_recovery.checkpointing.progress import WARMUP_INTERVALS, DynamoProgressWriter
from hyperpod_recovery.models.progress import (
    KUBE_JOB_ENV,
    KUBE_NAMESPACE_ENV,
    NODE_NAME_ENV,
    PROGRESS_IDLE_WRITE_SECONDS,
    PROGRESS_TABLE_ENV,
    PROGRESS_WRITE_SECONDS,
    RECENT_INTERVALS,
    ProgressReport,
)


class Clock:
    """Wall and monotonic time the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1_790_000_000.0

    def wall(self) -> float:
        return self.t

    def mono(self) -> float:
        return self.t - 1_700_000_000.0


class Recorder:
    def __init__(self, fail: Exception | None = None) -> None:
        self.reports: list[ProgressReport] = []
        self.fail = fail

    def write(self, report: ProgressReport) -> None:
        if self.fail is not None:
            raise self.fail
        self.reports.append(report)


def reporter(writer: Recorder | None = None, clock: Clock | None = None) -> tuple[Progress, Recorder, Clock]:
    writer, clock = writer or Recorder(), clock or Clock()
    return Progress("1001", "ip-10-1-0-1", writer, wall=clock.wall, monotonic=clock.mono, start_thread=False, ranks=8), writer, clock


def run_steps(progress: Progress, clock: Clock, steps: range, seconds: float, wait: float | None = None) -> None:
    for step in steps:
        clock.t += seconds
        progress.progress(step, wait_seconds=wait)


def test_given_steps_every_2s_then_the_report_has_the_pace_the_baseline_and_the_waits() -> None:
    progress, writer, clock = reporter()
    # When the job steps every 2 s for 60 steps, waiting 0.1 s a step on the others
    run_steps(progress, clock, range(1, 61), 2.0, wait=0.1)
    # Then one write carries the node's newest step, when it got there, its pace and its baseline
    assert progress.flush()
    (report,) = writer.reports
    assert (report.job, report.node, report.ranks, report.step) == ("1001", "ip-10-1-0-1", 8, 60)
    assert report.step_seconds == 2.0 and report.baseline_step_seconds == 2.0 and report.wait_seconds == 0.1
    assert report.intervals_seen == 59 and report.step_at.timestamp() == clock.t and not report.ended


def test_given_a_slowdown_after_the_baseline_then_the_recent_pace_shows_it_and_the_baseline_does_not() -> None:
    progress, _, clock = reporter()
    run_steps(progress, clock, range(1, 1 + WARMUP_INTERVALS + RECENT_INTERVALS + 1), 2.0)
    run_steps(progress, clock, range(100, 100 + RECENT_INTERVALS), 2.6)  # (a jump in steps: one interval divided)
    report = progress.report()
    assert report is not None and report.baseline_step_seconds == 2.0 and report.step_seconds == 2.6


def test_given_no_baseline_yet_then_none_is_reported() -> None:
    progress, _, clock = reporter()
    run_steps(progress, clock, range(1, WARMUP_INTERVALS + 3), 2.0)
    report = progress.report()
    assert report is not None and report.baseline_step_seconds is None and report.step_seconds == 2.0


def test_given_a_step_that_goes_backwards_then_the_statistics_start_again() -> None:
    # Given a job at step 100 resumed from step 50 (a resubmission from an earlier checkpoint)
    progress, _, clock = reporter()
    run_steps(progress, clock, range(1, 101), 2.0)
    clock.t += 30
    progress.progress(50)
    report = progress.report()
    assert report is not None and report.step == 50 and report.intervals_seen == 0 and report.step_seconds is None


def test_given_a_declared_save_then_it_is_reported_and_its_time_is_no_step_interval() -> None:
    progress, _, clock = reporter()
    run_steps(progress, clock, range(1, 11), 2.0)
    # When the script saves a checkpoint for 20 minutes, declared
    with progress.paused("checkpoint", limit_seconds=3600):
        clock.t += 600
        during = progress.report()
        clock.t += 600
    clock.t += 2
    progress.progress(11)
    after = progress.report()
    # Then the pause is reported while it lasts, its end afterwards, and the pace is untouched
    assert during is not None and during.pause is not None and during.pause.kind == "checkpoint" and during.pause.limit_seconds == 3600
    assert after is not None and after.pause is None and after.pause_ended_at is not None
    assert after.pause_ended_at.timestamp() == clock.t - 2 and after.step_seconds == 2.0


def test_given_no_table_in_the_environment_then_every_call_is_a_no_op() -> None:
    progress = Progress.from_environment({"SLURM_JOB_ID": "1001"})
    progress.progress(1)
    with progress.paused("evaluation"):
        pass
    assert not progress.enabled and progress.report() is None and not progress.flush()
    progress.close()


def test_given_a_rank_other_than_the_nodes_first_then_it_does_not_report() -> None:
    env = {PROGRESS_TABLE_ENV: "t", "SLURM_JOB_ID": "1001", "LOCAL_RANK": "3"}
    assert not Progress.from_environment(env, writer=Recorder(), start_thread=False).enabled
    env["LOCAL_RANK"] = "0"
    first = Progress.from_environment(
        {**env, "SLURMD_NODENAME": "ip-10-1-0-7", "SLURM_NTASKS_PER_NODE": "8"}, writer=Recorder(), start_thread=False
    )
    assert first.enabled and (first.job, first.node, first.ranks) == ("1001", "ip-10-1-0-7", 8)
    # (outside Slurm there is no job to name: disabled, said in the log)
    assert not Progress.from_environment({PROGRESS_TABLE_ENV: "t"}, writer=Recorder(), start_thread=False).enabled


def test_given_an_eks_pod_then_its_job_is_namespace_and_name_and_its_node_the_one_the_downward_api_names() -> None:
    # Given the environment a PyTorchJob's pod template gives through the downward API (docs/progress.md)
    env = {
        PROGRESS_TABLE_ENV: "t",
        KUBE_NAMESPACE_ENV: "kubeflow",
        KUBE_JOB_ENV: "llama-70b-pretrain-r1",
        NODE_NAME_ENV: "hyperpod-i-0123456789abcdef0",
        "LOCAL_RANK": "0",
    }
    # When the reporter is made from it
    progress = Progress.from_environment(env, writer=Recorder(), start_thread=False)
    # Then it reports the job as namespace/name from the node Kubernetes scheduled it on (a pod's
    # hostname is the pod's own name)
    assert progress.enabled and (progress.job, progress.node) == ("kubeflow/llama-70b-pretrain-r1", "hyperpod-i-0123456789abcdef0")
    # And without the node, or with a name Kubernetes could not hold, it reports nothing (said in the log)
    assert not Progress.from_environment({**env, NODE_NAME_ENV: ""}, writer=Recorder(), start_thread=False).enabled
    assert not Progress.from_environment({**env, KUBE_JOB_ENV: "Not_A_Name"}, writer=Recorder(), start_thread=False).enabled
    assert not Progress.from_environment({**env, KUBE_NAMESPACE_ENV: ""}, writer=Recorder(), start_thread=False).enabled


def test_given_the_network_failing_then_the_training_loop_never_sees_it() -> None:
    progress, _, clock = reporter(Recorder(fail=ConnectionError("endpoint unreachable")))
    run_steps(progress, clock, range(1, 5), 2.0)
    assert progress.flush() is False and progress.write_errors == 1
    progress.close()  # (and the last write, failing too, raises nothing)
    assert progress.write_errors == 2


def test_given_the_job_ends_cleanly_then_the_last_write_says_ended() -> None:
    progress, writer, clock = reporter()
    run_steps(progress, clock, range(1, 5), 2.0)
    progress.close()
    assert writer.reports[-1].ended and writer.reports[-1].step == 4


def test_given_a_writer_that_blocks_then_progress_never_waits_on_it() -> None:
    # Given the reporter thread stuck in a write (a network that does not answer)
    entered, release = threading.Event(), threading.Event()

    class Blocking:
        def write(self, report: ProgressReport) -> None:
            entered.set()
            release.wait()

    progress = Progress("1001", "ip-10-1-0-1", Blocking(), heartbeat_seconds=0.01)
    progress.progress(1)
    progress.pause("data")  # (wakes the thread: it writes, and blocks)
    assert entered.wait(timeout=10)
    # When the loop goes on stepping
    done = threading.Event()

    def loop() -> None:
        for step in range(2, 10_000):
            progress.progress(step)
        done.set()

    threading.Thread(target=loop, daemon=True).start()
    # Then it finishes while the write still blocks
    assert done.wait(timeout=30)
    release.set()
    progress.close()


def test_given_steps_again_after_a_silence_then_the_reporter_is_woken_at_once() -> None:
    progress, _, clock = reporter()
    progress.progress(1)
    clock.t += 120  # (a silence longer than a heartbeat)
    progress.progress(2)
    assert progress._wake.is_set()


def test_given_a_checkpoint_saved_inside_saving_then_it_is_a_declared_pause() -> None:
    progress, _, _ = reporter()
    progress.progress(1)
    checkpoints = Checkpoints("s3://bucket/prefix", job="llama", store=object(), progress=progress)  # type: ignore[arg-type]
    with checkpoints.saving():
        inside = progress.report()
    after = progress.report()
    assert inside is not None and inside.pause is not None and inside.pause.kind == "checkpoint"
    assert after is not None and after.pause is None and after.pause_ended_at is not None


@pytest.fixture
def table() -> Iterator[object]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(
            TableName="progress",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield dynamodb


def test_given_the_real_writer_then_the_pipelines_reader_reads_what_it_wrote(table: object) -> None:
    from hyperpod_recovery.adapters.progress import ProgressTable

    clock = Clock()
    progress = Progress(
        "1001", "ip-10-1-0-1", DynamoProgressWriter("progress", client=table), wall=clock.wall, monotonic=clock.mono, start_thread=False
    )
    run_steps(progress, clock, range(1, 40), 2.0)
    assert progress.flush()
    (read,) = ProgressTable("progress", dynamodb=table).job("1001")
    assert read == progress.report().model_copy(update={"heartbeat_at": read.heartbeat_at})  # type: ignore[union-attr]
    item = table.get_item(TableName="progress", Key={"pk": {"S": "JOB#1001"}, "sk": {"S": "NODE#ip-10-1-0-1"}})["Item"]  # type: ignore[attr-defined]
    assert int(item["expires_at"]["N"]) == int(read.heartbeat_at.timestamp()) + 86_400


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.floats(0.01, 500)), min_size=1, max_size=80))
def test_property_the_reported_pace_is_a_median_of_per_step_intervals(moves: list[tuple[int, float]]) -> None:
    progress, _, clock = reporter()
    step = 0
    intervals: list[float] = []
    progress.progress(step)
    for advance, seconds in moves:
        step += advance
        clock.t += seconds
        intervals.append(seconds / advance)
        progress.progress(step)
    report = progress.report()
    assert report is not None and report.step == step and report.intervals_seen == len(intervals)
    recent = sorted(intervals[-RECENT_INTERVALS:])
    assert report.step_seconds is not None and recent[0] - 1e-3 <= report.step_seconds <= recent[-1] + 1e-3


# --- when it writes: a newer step within 5 s, the same step every 10 s (issue 50) -------------------
def test_given_a_write_then_a_newer_step_is_due_5s_after_it_and_no_newer_step_10s_after_it() -> None:
    progress, _, clock = reporter()
    run_steps(progress, clock, range(1, 3), 2.0)
    assert progress.flush()
    # Then with nothing newer the next write (a heartbeat) is due 10 s after this one
    assert progress._next_write_in() == PROGRESS_IDLE_WRITE_SECONDS
    # And once a newer step comes, 5 s after the write
    run_steps(progress, clock, range(3, 4), 2.0)
    assert progress._next_write_in() == PROGRESS_WRITE_SECONDS - 2.0


def test_given_a_step_when_the_last_write_is_5s_old_then_the_writer_is_woken_at_once() -> None:
    progress, _, clock = reporter()
    run_steps(progress, clock, range(1, 2), 2.0)
    assert progress.flush()
    progress._wake.clear()
    # When a step comes 4 s after the write, Then nothing wakes (the timer writes it at 5 s)
    run_steps(progress, clock, range(2, 3), 4.0)
    assert not progress._wake.is_set()
    # When the next comes 6 s after the write, Then the writer is woken for it now
    run_steps(progress, clock, range(3, 4), 2.0)
    assert progress._wake.is_set()


def test_given_a_failed_write_of_a_newer_step_then_it_is_tried_again_5s_on_not_at_the_heartbeat() -> None:
    writer = Recorder(fail=OSError("connection reset"))
    progress, _, clock = reporter(writer)
    run_steps(progress, clock, range(1, 3), 2.0)
    assert not progress.flush()
    # Then the step it could not write is due again a write's interval on
    assert progress._next_write_in() == PROGRESS_WRITE_SECONDS
