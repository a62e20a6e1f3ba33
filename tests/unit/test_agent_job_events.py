"""The job-ended hook's decisions and its spool, and the agent's configuration file.
(The hook against a real slurmctld is tests/slurm/test_job_failed_events.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.models.job_events import JOB_EVENT_SOURCE, JobFailedDetail
from hyperpod_recovery_agent.config import AgentConfigError, RetryPolicy, load_config
from hyperpod_recovery_agent.job_ended import JobEventSender, ended_state, failed_job_detail
from hyperpod_recovery_agent.slurm_json import SlurmJob, read_job
from tests.conftest import ROOT, load_event


@pytest.mark.parametrize(
    ("job_state", "reason", "exit_code", "expected"),
    [
        # What squeue shows while EpilogSlurmctld runs (the job is COMPLETING), checked on Slurm 22.05
        ("COMPLETING", "NonZeroExitCode", 3, "FAILED"),
        ("COMPLETING", "NodeDown", 0, "NODE_FAIL"),
        ("COMPLETING", "TimeLimit", 0, "TIMEOUT"),
        ("COMPLETING", "RaisedSignal:9(Killed)", 0, "FAILED"),
        ("COMPLETING", "None", 0, None),  # cancelled (signal 15), or requeued by Slurm after a node failure
        ("COMPLETING", "None", 1, "FAILED"),
        # A slow epilog may see the final state
        ("FAILED", "NonZeroExitCode", 1, "FAILED"),
        ("NODE_FAIL", "NodeDown", 0, "NODE_FAIL"),
        ("COMPLETED", "None", 0, None),
        ("CANCELLED", "None", 0, None),
        ("PENDING", "BeginTime", 0, None),  # requeued: Slurm restarts it itself
    ],
)
def test_the_state_a_job_ends_in(job_state: str, reason: str, exit_code: int, expected: str | None) -> None:
    assert ended_state(job_state, reason, exit_code, 0) == expected


@pytest.mark.parametrize(
    ("base_state", "reason", "expected"),
    [
        ("FAILED", "None", "FAILED"),  # Slurm 23.11+ list the base state beside COMPLETING: a failure named there counts
        ("NODE_FAIL", "None", "NODE_FAIL"),
        ("COMPLETED", "NonZeroExitCode", "FAILED"),  # otherwise the reason decides, as on 22.05
        ("CANCELLED", "None", None),
        (None, "NodeDown", "NODE_FAIL"),
    ],
)
def test_a_completing_jobs_listed_base_state_names_its_failure(base_state: str | None, reason: str, expected: str | None) -> None:
    assert ended_state("COMPLETING", reason, 0, 0, base_state) == expected


class SlurmDouble:
    """squeue's record for one ending job, as Slurm 22.05 shows it during EpilogSlurmctld."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def job_record(self, job_id: str) -> SlurmJob | None:
        job = read_job(self.record)
        return job if job.job_id == job_id else None

    def job_spec_of(self, record: SlurmJob) -> Any:
        from hyperpod_recovery.models.commands import JobSpec, job_display_name

        return JobSpec(
            job_id=record.job_id,
            name=job_display_name(record.name),  # as SlurmCli does
            num_nodes=1,
            state=record.state,
            checkpoint_uri="s3://ckpt/llama",
            auto_resume=False,
        )

    def hostnames(self, nodelist: str) -> list[str]:
        return {"ip-10-1-0-[3-4]": ["ip-10-1-0-3", "ip-10-1-0-4"]}.get(nodelist, [nodelist] if nodelist else [])


EPILOG_ENV = {
    "SLURM_JOB_ID": "42",
    "SLURM_JOB_NAME": "llama",
    "SLURM_JOB_USER": "trainer",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURM_JOB_NODELIST": "ip-10-1-0-[3-4]",
    "SLURM_JOB_EXIT_CODE2": "0:15",
    "SLURM_JOB_COMMENT": "hyperpod-recovery:resubmission-of=41 incident=inc-1",
}


def record(**overrides: Any) -> dict[str, Any]:
    base = {
        "job_id": 42,
        "name": "llama",
        "job_state": "COMPLETING",
        "state_reason": "NodeDown",
        "nodes": "",
        "end_time": 1773478961,
        "restart_cnt": 0,
        "comment": EPILOG_ENV["SLURM_JOB_COMMENT"],
    }
    return base | overrides


def test_a_node_failure_becomes_a_job_failed_detail_with_the_nodes_from_the_environment() -> None:
    detail = failed_job_detail(EPILOG_ENV, SlurmDouble(record()), cluster_name="llm-train", report_timeout=False)  # type: ignore[arg-type]
    assert detail is not None
    assert (detail.state, detail.nodes, detail.signal, detail.resubmission_of) == ("NODE_FAIL", ["ip-10-1-0-3", "ip-10-1-0-4"], 15, "41")
    assert detail.event_key == "llm-train:42:1773478961" and detail.checkpoint_uri == "s3://ckpt/llama"


@pytest.mark.parametrize("length", [256, 257, 300, 1024])
def test_a_job_name_as_long_as_slurm_allows_never_silences_the_hook(length: int) -> None:
    # Given a job whose name is as long as Slurm takes (1024 bytes)
    long_name = "n" * length
    env = EPILOG_ENV | {"SLURM_JOB_NAME": long_name}
    detail = failed_job_detail(env, SlurmDouble(record(name=long_name)), cluster_name="llm-train", report_timeout=False)  # type: ignore[arg-type]
    # Then the failure is still reported, carrying the name's first 256 characters
    assert detail is not None and detail.name == long_name[:256]


def test_timeouts_are_reported_only_when_configured() -> None:
    timed_out = SlurmDouble(record(state_reason="TimeLimit"))
    assert failed_job_detail(EPILOG_ENV, timed_out, cluster_name="llm-train", report_timeout=False) is None  # type: ignore[arg-type]
    detail = failed_job_detail(EPILOG_ENV, timed_out, cluster_name="llm-train", report_timeout=True)  # type: ignore[arg-type]
    assert detail is not None and detail.state == "TIMEOUT"


def test_the_documented_sample_event_is_what_the_agent_sends() -> None:
    sample = load_event("agent/job-failed.json")
    assert sample["source"] == JOB_EVENT_SOURCE
    JobFailedDetail.model_validate(sample["detail"])


@pytest.fixture
def bus(tmp_path: Path) -> Any:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-west-2")
        events = boto3.client("events", region_name="us-west-2")
        url = sqs.create_queue(QueueName="inbox")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name="agent", EventPattern=json.dumps({"source": [JOB_EVENT_SOURCE]}))
        events.put_targets(Rule="agent", Targets=[{"Id": "inbox", "Arn": arn}])

        def inbox() -> list[dict[str, Any]]:
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            for m in messages:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            return [json.loads(m["Body"])["detail"] for m in messages]

        yield type("Bus", (), {"events": events, "inbox": staticmethod(inbox), "state_dir": tmp_path})


def sample_detail() -> JobFailedDetail:
    return JobFailedDetail.model_validate(load_event("agent/job-failed.json")["detail"])


def test_a_job_end_is_sent_once_however_often_the_hook_runs(bus: Any) -> None:
    sender = JobEventSender(bus.events, "default", bus.state_dir)
    assert [sender.send(sample_detail()) for _ in range(3)] == ["sent", "duplicate", "duplicate"]
    assert [d["job_id"] for d in bus.inbox()] == ["1001"]


def test_an_event_eventbridge_refused_is_spooled_and_sent_by_the_loop_later(bus: Any) -> None:
    # Given EventBridge unreachable when the job ended
    class Down:
        def put_events(self, **_: Any) -> Any:
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="https://events.us-west-2.amazonaws.com")

    assert JobEventSender(Down(), "default", bus.state_dir).send(sample_detail()) == "spooled"
    assert bus.inbox() == []
    # When the agent's loop flushes the spool
    sender = JobEventSender(bus.events, "default", bus.state_dir)
    assert sender.flush() == 1
    # Then the event arrives once, and a rerun of the hook does not send it again
    assert [d["event_key"] for d in bus.inbox()] == ["llm-train:1001:1773478961"]
    assert sender.send(sample_detail()) == "duplicate" and sender.flush() == 0


def test_sent_markers_are_forgotten_after_the_journal_period(bus: Any) -> None:
    sender = JobEventSender(bus.events, "default", bus.state_dir)
    sender.send(sample_detail())
    assert sender.prune(keep_seconds=86_400) == 0  # fresh: kept, still a duplicate
    assert sender.send(sample_detail()) == "duplicate"
    assert sender.prune(keep_seconds=86_400, now=time.time() + 2 * 86_400) == 1


# --- configuration ------------------------------------------------------------------------------
def test_the_shipped_example_configuration_is_valid() -> None:
    config = load_config(ROOT / "agent" / "install" / "agent.toml")
    assert config.aws_region == "us-west-2" and config.unreachable_retry.delays() == [2.0, 4.0, 8.0, 16.0, 30.0]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('cluster_name = "bad name!"', "cluster_name"),
        ('cluster_name = "c"\npoll_wait_seconds = 99', "poll_wait_seconds"),
        ('cluster_name = "c"\nqueue = "typo"', "queue"),
        ('cluster_name = "c"\nheartbeat_seconds = 90\nvisibility_seconds = 60', "heartbeat_seconds"),
        ("cluster_name = ", "agent.toml"),
    ],
)
def test_a_bad_configuration_names_the_key(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    with pytest.raises(AgentConfigError, match=named):
        load_config(path)


def test_a_missing_configuration_file_says_where_to_start(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError, match=r"agent/install/agent\.toml"):
        load_config(tmp_path / "nope.toml")


def test_backoff_is_capped() -> None:
    assert RetryPolicy(attempts=4, first_delay_seconds=10, max_delay_seconds=15).delays() == [10, 15, 15]


def test_check_reports_each_dependency_of_an_installed_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_recovery_agent.cli import main

    with mock_aws():
        url = boto3.client("sqs", region_name="us-west-2").create_queue(QueueName="commands")["QueueUrl"]
        config = tmp_path / "agent.toml"
        config.write_text(
            f'cluster_name = "llm-train"\ncommand_queue_url = "{url}"\nregion = "us-west-2"\n'
            f'state_dir = "{tmp_path / "state"}"\nslurm_bin_dir = "{tmp_path / "no-slurm-here"}"\n'
        )
        # Slurm is not installed where the configuration says: one failure, the rest reachable
        assert main(["--config", str(config), "check"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("FAIL slurm: scontrol is not installed")
    assert [line.split(":")[0] for line in lines[1:]] == [
        "ok   command queue",
        "ok   event bus",
        "warn job nodes snapshot",
        "ok   state dir",
        "ok   state dir",
    ]


def test_a_bad_configuration_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_recovery_agent.cli import main

    (tmp_path / "agent.toml").write_text('cluster_name = "llm-train"\n')
    assert main(["--config", str(tmp_path / "agent.toml"), "run"]) == 2
    assert "command_queue_url: required" in capsys.readouterr().err
