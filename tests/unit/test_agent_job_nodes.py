"""The agent's job nodes duty: slurmctld's running jobs and their nodes (as Slurm 22.05 and 24.11
print them), written to the ledger every 30 s beside the command loop, never in its way."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.models.job_nodes_item import SORT_KEY, partition_key, read_item
from hyperpod_recovery_agent.agent import Agent, ReplyJournal
from hyperpod_recovery_agent.config import AgentConfig
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.job_nodes import MAX_BACKOFF_SECONDS, SNAPSHOT_SECONDS, JobNodesReporter
from hyperpod_recovery_agent.slurm import SlurmUnreachable
from tests.fakes import T0
from tests.unit.test_agent_loop import CountingSlurm, StepFunctionsDouble, drain_envelope
from tests.unit.test_slurm_json import FIXTURES, FixtureSlurm

CLUSTER = "llm-train"
TABLE = "ledger"


class RecordingTable:
    """PutItem recorded; ``refuse`` makes the next calls fail."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.refuse = 0

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        if self.refuse:
            self.refuse -= 1
            raise SlurmUnreachable("stand-in failure")
        self.items.append(kwargs)
        return {}


class Clock:
    def __init__(self) -> None:
        self.now = T0.timestamp()

    def __call__(self) -> float:
        return self.now


def _reporter(slurm: Any, table: Any, clock: Clock) -> JobNodesReporter:
    return JobNodesReporter(slurm=slurm, dynamodb=table, table_name=TABLE, cluster=CLUSTER, clock=clock)


# --- what slurmctld says -----------------------------------------------------------------------
@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_the_running_jobs_nodes_are_read_from_squeue_as_each_release_prints_them(version: str) -> None:
    # Given a real squeue answer: two running jobs, pending ones, ended ones on ip-10-1-0-5
    slurm = FixtureSlurm(version)
    # When the duty reads it
    jobs = slurm.running_job_nodes()
    # Then only the running jobs are there, each with its nodes, from one squeue and no expansion
    assert jobs == {"1": ["ip-10-1-0-1"], "2": ["ip-10-1-0-2"]}
    assert [argv[0] for argv in slurm.asked] == ["squeue"]


def _fixture_with(version: str, edit: Any) -> FixtureSlurm:
    """The version's squeue answer with its running job 1 edited (a copy in a temporary folder)."""
    data = json.loads((FIXTURES / version / "squeue.json").read_text())
    edit(next(job for job in data["jobs"] if job["job_id"] == 1))
    slurm = FixtureSlurm(version)
    answers = {("squeue", "--json", "--states=all"): json.dumps(data)}
    run = slurm._run

    def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if tuple(argv) in answers:
            slurm.asked.append(argv)
            return subprocess.CompletedProcess(argv, 0, answers[tuple(argv)], "")
        return run(argv, **kwargs)

    slurm._run = _run  # type: ignore[method-assign]
    return slurm


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_a_job_whose_record_names_no_nodes_one_by_one_is_expanded_by_scontrol(version: str) -> None:
    # Given running job 1 on two nodes, its record without job_resources (only the hostlist expression)
    def edit(job: dict[str, Any]) -> None:
        job["nodes"] = "ip-10-1-0-1,ip-10-1-0-3"
        job.pop("job_resources", None)

    slurm = _fixture_with(version, edit)
    # When the duty reads it
    jobs = slurm.running_job_nodes()
    # Then scontrol show hostnames expanded it
    assert jobs["1"] == ["ip-10-1-0-1", "ip-10-1-0-3"]
    assert ["scontrol", "show", "hostnames", "ip-10-1-0-1,ip-10-1-0-3"] in slurm.asked


def test_an_array_task_is_known_by_both_its_ids() -> None:
    # Given running job 1 is task 3 of array 900 (24.11's numbers)
    def edit(job: dict[str, Any]) -> None:
        job["array_job_id"] = {"set": True, "infinite": False, "number": 900}
        job["array_task_id"] = {"set": True, "infinite": False, "number": 3}

    jobs = _fixture_with("24.11", edit).running_job_nodes()
    # Then its progress reports count under either id
    assert jobs["1"] == jobs["900_3"] == ["ip-10-1-0-1"]
    assert "0" not in jobs  # (0: "not an array, not heterogeneous", never a job)


# --- the item written --------------------------------------------------------------------------
def test_a_snapshot_is_written_as_the_clusters_one_item_and_reads_back() -> None:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        clock = Clock()
        # When the duty runs twice, 30 s apart
        reporter = _reporter(FixtureSlurm("24.11"), dynamodb, clock)
        reporter.tick()
        clock.now += SNAPSHOT_SECONDS
        reporter.tick()
        # Then there is one item, the newest, under the cluster's own partition
        items = dynamodb.scan(TableName=TABLE)["Items"]
        assert [(i["pk"]["S"], i["sk"]["S"]) for i in items] == [(partition_key(CLUSTER), SORT_KEY)]
        snapshot = read_item(items[0], CLUSTER)
        assert snapshot.jobs == {"1": ["ip-10-1-0-1"], "2": ["ip-10-1-0-2"]}
        assert snapshot.taken_at.timestamp() == clock.now


# --- cadence and failures ----------------------------------------------------------------------
def test_a_snapshot_is_written_at_once_then_every_30_seconds() -> None:
    table, clock = RecordingTable(), Clock()
    reporter = _reporter(FixtureSlurm("22.05"), table, clock)
    # When the loop ticks every 5 s for 95 s
    written_at = []
    for second in range(0, 95, 5):
        clock.now = T0.timestamp() + second
        before = len(table.items)
        reporter.tick()
        if len(table.items) > before:
            written_at.append(second)
    # Then it wrote at start and every 30 s, no more
    assert written_at == [0, 30, 60, 90]


def test_failures_back_off_up_to_a_bound_and_a_success_restores_the_cadence() -> None:
    # Given a table that refuses four writes
    table, clock = RecordingTable(), Clock()
    table.refuse = 4
    reporter = _reporter(FixtureSlurm("22.05"), table, clock)
    delays = []
    for _ in range(6):
        delays.append(reporter.tick())
        clock.now += delays[-1]
    # Then the waits double from 60 s, never past the bound, and return to 30 s once it writes
    assert delays == [60, 120, MAX_BACKOFF_SECONDS, MAX_BACKOFF_SECONDS, SNAPSHOT_SECONDS, SNAPSHOT_SECONDS]
    assert MAX_BACKOFF_SECONDS < 180  # inside JOB_NODES_STALE_SECONDS
    assert len(table.items) == 2


def test_an_unreachable_slurmctld_is_a_logged_failure_not_the_duty_s_end(caplog: pytest.LogCaptureFixture) -> None:
    class Away:
        def running_job_nodes(self) -> dict[str, list[str]]:
            raise SlurmUnreachable("squeue: Unable to contact slurm controller (connect failure)")

    table, clock = RecordingTable(), Clock()
    delay = _reporter(Away(), table, clock).tick()
    assert delay == 60 and table.items == []
    assert "job nodes snapshot failed" in caplog.text and "Unable to contact" in caplog.text


class BlockedSlurm:
    """A squeue that does not return until released (slurmctld busy for minutes)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def running_job_nodes(self) -> dict[str, list[str]]:
        self.entered.set()
        self.release.wait(30)
        return {}


def test_a_snapshot_in_progress_never_delays_a_command(tmp_path: Path) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-west-2")
        url = sqs.create_queue(QueueName="commands")["QueueUrl"]
        sfn, slurm, blocked = StepFunctionsDouble(), CountingSlurm(), BlockedSlurm()
        reporter = _reporter(blocked, RecordingTable(), Clock())
        agent = Agent(
            executor=CommandExecutor(slurm, now=lambda: T0, sleep=lambda s: None),
            sqs=sqs,
            stepfunctions=sfn,
            queue_url=url,
            journal=ReplyJournal(tmp_path / "replies"),
            keepalive_wait=lambda stop, seconds: stop.wait(0.01),
            job_nodes=reporter,
        )
        sqs.send_message(QueueUrl=url, MessageBody=drain_envelope())
        stop = threading.Event()

        def once_the_snapshot_hangs() -> None:
            stop.set()

        # When the loop runs while the snapshot's squeue hangs
        runner = threading.Thread(target=agent.run, args=(stop, 0, once_the_snapshot_hangs))
        runner.start()
        assert blocked.entered.wait(10)
        runner.join(10)
        # Then the command was drained and answered, the snapshot still waiting on slurmctld
        assert not runner.is_alive() and slurm.drains == 1
        assert [name for name, _ in sfn.answers()] == ["success"] and not blocked.release.is_set()
        blocked.release.set()


def test_the_loop_runs_the_duty_on_its_own_timer() -> None:
    # Given the loop's snapshot thread, its waits recorded
    table, clock, waits = RecordingTable(), Clock(), []
    reporter = _reporter(FixtureSlurm("22.05"), table, clock)
    stop = threading.Event()

    def wait(event: threading.Event, seconds: float) -> bool:
        waits.append(seconds)
        clock.now += seconds
        return len(waits) >= 3

    reporter.run(stop, wait)
    assert waits == [SNAPSHOT_SECONDS] * 3 and len(table.items) == 3


def test_the_ledger_table_is_part_of_the_agent_s_configuration() -> None:
    config = AgentConfig.model_validate({"cluster_name": CLUSTER, "ledger_table": "stack-LedgerTable-ABC"})
    assert config.ledger_table == "stack-LedgerTable-ABC"
    assert AgentConfig.model_validate({"cluster_name": CLUSTER}).ledger_table is None  # (an upgrade without it still starts)
    with pytest.raises(ValueError, match="ledger_table"):
        AgentConfig.model_validate({"cluster_name": CLUSTER, "ledger_table": "no spaces"})


def test_the_sample_configuration_has_the_line_the_installer_fills_in() -> None:
    text = (Path(__file__).resolve().parents[2] / "agent" / "install" / "agent.toml").read_text()
    assert "\n# ledger_table = " in text  # install_agent.sh: s|^# ledger_table = .*|...|


def test_check_writes_a_snapshot_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_recovery_agent import cli

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        config = tmp_path / "agent.toml"
        config.write_text(f'cluster_name = "{CLUSTER}"\nregion = "us-west-2"\nledger_table = "{TABLE}"\nstate_dir = "{tmp_path}"\n')
        monkeypatch.setattr(cli, "_slurm", lambda config: FixtureSlurm("24.11"))
        cli.main(["--config", str(config), "check"])
        assert "ok   job nodes snapshot: 2 running jobs written to ledger" in capsys.readouterr().out.splitlines()
        assert len(dynamodb.scan(TableName=TABLE)["Items"]) == 1
