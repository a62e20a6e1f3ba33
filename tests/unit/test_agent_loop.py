"""The agent's loop: command queue on moto's SQS, Slurm simulated (sandbox/slurm/), and the
three Step Functions task calls recorded by a double that can refuse them like the service does."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from hyperpod_recovery.models.commands import CheckpointRef, CommandEnvelope, DrainNodes, ResubmitJob
from hyperpod_recovery_agent.agent import Agent, ReplyJournal
from hyperpod_recovery_agent.config import RetryPolicy
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.slurm import SlurmUnreachable
from sandbox.slurm import SimulatedSlurm, SlurmJob
from tests.fakes import T0

TAG = "hyperpod-recovery:inc-1"
NODES = ["ip-10-3-0-4", "ip-10-3-0-5"]


class StepFunctionsDouble:
    """SendTaskSuccess/Failure/Heartbeat, recorded; ``refuse`` makes the next answer fail with a code."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.refuse: str | None = None
        self.refuse_heartbeat: str | None = None
        # Tokens Step Functions no longer waits for (or never issued), and the error it answers.
        self.dead: dict[str, str] = {}
        self.heartbeat_seen = threading.Event()

    def _call(self, name: str, **kwargs: Any) -> dict[str, Any]:
        if kwargs.get("taskToken") in self.dead:
            code = self.dead[kwargs["taskToken"]]
            raise ClientError({"Error": {"Code": code, "Message": code}}, name)
        if name == "heartbeat" and self.refuse_heartbeat:
            code, self.refuse_heartbeat = self.refuse_heartbeat, None
            raise ClientError({"Error": {"Code": code, "Message": code}}, name)
        if self.refuse and name != "heartbeat":
            code, self.refuse = self.refuse, None
            raise ClientError({"Error": {"Code": code, "Message": code}}, name)
        self.calls.append((name, kwargs))
        return {}

    def send_task_success(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("success", **kwargs)

    def send_task_failure(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("failure", **kwargs)

    def send_task_heartbeat(self, **kwargs: Any) -> dict[str, Any]:
        result = self._call("heartbeat", **kwargs)
        if sum(1 for name, _ in self.calls if name == "heartbeat") >= 2:
            self.heartbeat_seen.set()
        return result

    def answers(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, kwargs) for name, kwargs in self.calls if name != "heartbeat"]


class CountingSlurm(SimulatedSlurm):
    """Simulated slurmctld that counts mutating calls and can be unreachable for a while."""

    def __init__(self) -> None:
        super().__init__()
        self.drains = 0
        self.submits = 0
        self.unreachable_for = 0
        for name in NODES:
            self.add_node(name)
        self.add_job(SlurmJob(job_id="1001", name="llama", nodes=list(NODES), state="RUNNING", checkpoint_uri="s3://ckpt/llama"))

    def node_states(self, nodes: Any) -> Any:
        if self.unreachable_for:
            self.unreachable_for -= 1
            raise SlurmUnreachable("squeue: Unable to contact slurm controller (connect failure)")
        return super().node_states(nodes)

    def drain(self, nodes: Any, reason: str) -> None:
        self.drains += 1
        super().drain(nodes, reason)

    def submit_as_owner(self, capture: Any, how: Any) -> str:
        self.submits += 1
        return super().submit_as_owner(capture, how)


@pytest.fixture
def world(tmp_path: Path) -> Any:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-west-2")
        url = sqs.create_queue(QueueName="commands", Attributes={"VisibilityTimeout": "900"})["QueueUrl"]
        slurm = CountingSlurm()
        sleeps: list[float] = []
        waits: list[float] = []  # the executor's own (a cancelled job's end), never on real time
        sfn = StepFunctionsDouble()

        received: list[dict[str, Any]] = []

        def make_agent() -> Agent:  # a fresh process: same state dir, nothing in memory
            agent = Agent(
                executor=CommandExecutor(slurm, now=lambda: T0, sleep=waits.append),
                sqs=sqs,
                stepfunctions=sfn,
                queue_url=url,
                journal=ReplyJournal(tmp_path / "replies"),
                retry=RetryPolicy(),
                sleep=sleeps.append,
                # Beat every 10 ms of real time, not in a tight loop: commands here take milliseconds.
                keepalive_wait=lambda stop, seconds: stop.wait(0.01),
            )
            receive = agent.receive

            def recording_receive(wait_seconds: int = 20) -> list[dict[str, Any]]:
                messages = receive(wait_seconds)
                received.extend(messages)  # the receipt handles, to play the visibility timeout
                return messages

            agent.receive = recording_receive  # type: ignore[method-assign]
            return agent

        yield type(
            "World",
            (),
            {
                "sqs": sqs,
                "url": url,
                "slurm": slurm,
                "sleeps": sleeps,
                "waits": waits,
                "sfn": sfn,
                "make_agent": staticmethod(make_agent),
                "received": received,
            },
        )


def put(world: Any, body: str) -> None:
    world.sqs.send_message(QueueUrl=world.url, MessageBody=body)


def drain_envelope(
    token: str = "token-1",  # noqa: S107 - a task token, not a secret
    command_id: str = "inc-1:drain",
) -> str:
    return CommandEnvelope(
        command_id=command_id,
        incident_id="inc-1",
        execution_name="inc-1",
        task_token=token,
        requested_at=T0,
        command=DrainNodes(nodes=[NODES[0]], reason=f"{TAG} NvidiaErrorTerminate"),
    ).model_dump_json()


def queue_depth(world: Any) -> int:
    attributes = world.sqs.get_queue_attributes(
        QueueUrl=world.url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def make_visible_again(world: Any) -> None:
    """What the visibility timeout does after a crash: the message in flight comes back."""
    world.sqs.change_message_visibility(QueueUrl=world.url, ReceiptHandle=world.received[-1]["ReceiptHandle"], VisibilityTimeout=0)


def kill_agent_after(world: Any, slurm_call: str) -> None:
    """Run one agent that dies right after Slurm did ``slurm_call`` (before it could answer)."""
    original = getattr(world.slurm, slurm_call)

    def then_die(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        raise SystemExit("killed")

    setattr(world.slurm, slurm_call, then_die)
    with pytest.raises(SystemExit):
        world.make_agent().poll_once(0)
    setattr(world.slurm, slurm_call, original)


def test_a_command_is_executed_answered_and_removed(world: Any) -> None:
    # Given a drain command on the queue
    put(world, drain_envelope())
    # When the agent polls
    [outcome] = world.make_agent().poll_once(0)
    # Then Slurm drained the node, the workflow got the reply, and the message is gone
    assert outcome.status == "succeeded" and world.slurm.drains == 1
    [(name, kwargs)] = world.sfn.answers()
    assert name == "success" and kwargs["taskToken"] == "token-1"
    assert json.loads(kwargs["output"])["result"] == {"drained": [NODES[0]], "already_drained": []}
    assert queue_depth(world) == 0


def test_a_redelivered_command_is_answered_from_the_journal_without_running_it_again(world: Any) -> None:
    # Given a drain already done and answered
    put(world, drain_envelope("token-1"))
    world.make_agent().poll_once(0)
    # When the same command comes again with a new token (the controller Lambda was retried)
    put(world, drain_envelope("token-2"))
    [outcome] = world.make_agent().poll_once(0)
    # Then the new token gets the same reply and Slurm is not touched again
    assert outcome.status == "replayed" and world.slurm.drains == 1
    first, second = world.sfn.answers()
    assert second[1]["taskToken"] == "token-2" and second[1]["output"] == first[1]["output"]


def test_an_agent_restarted_mid_command_does_not_do_it_twice(world: Any) -> None:
    # Given an agent that dies after Slurm drained the node but before it answered
    put(world, drain_envelope())
    kill_agent_after(world, "drain")
    # When its message comes back and a restarted agent handles it
    make_visible_again(world)
    [outcome] = world.make_agent().poll_once(0)
    # Then the node was drained once and the workflow is answered: drained already, and ours (our tag is on it)
    assert outcome.status == "succeeded" and world.slurm.drains == 1
    [(_, kwargs)] = world.sfn.answers()
    assert json.loads(kwargs["output"])["result"] == {"drained": [], "already_drained": [NODES[0]], "ours_already": [NODES[0]]}


def test_a_resubmission_interrupted_after_sbatch_is_not_submitted_twice(world: Any) -> None:
    # Given an agent that dies right after sbatch
    spec = world.slurm.job("1001")
    body = CommandEnvelope(
        command_id="inc-1:resubmit:1001",
        incident_id="inc-1",
        execution_name="inc-1",
        task_token="tok",
        requested_at=T0,
        command=ResubmitJob(job_id=spec.job_id, checkpoint=CheckpointRef(uri="s3://ckpt/llama/step-000002000/", step=2000)),
    ).model_dump_json()
    put(world, body)
    kill_agent_after(world, "submit_as_owner")
    # When the restarted agent handles the message again
    make_visible_again(world)
    [outcome] = world.make_agent().poll_once(0)
    # Then there is still one resubmission, and the reply names it
    assert outcome.status == "succeeded" and world.slurm.submits == 1
    reply = json.loads(world.sfn.answers()[0][1]["output"])["result"]
    # (it is this incident's own copy, found by its comment: not "already submitted" by someone else)
    assert "already_submitted" not in reply and reply["new_job_id"] == world.slurm.submissions[0].new_job_id


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda e: e["command"].pop("nodes"), "command.drain_nodes.nodes"),
        (lambda e: e["command"].update(nodes=["ip-1;reboot"]), "command.drain_nodes.nodes.0"),
        (lambda e: e["command"].update(type="format_disks"), "command"),
        (lambda e: e.pop("command_id"), "command_id"),
    ],
)
def test_a_malformed_command_fails_its_task_naming_the_field_and_is_removed(world: Any, mutate: Any, field: str) -> None:
    envelope = json.loads(drain_envelope())
    mutate(envelope)
    put(world, json.dumps(envelope))
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "invalid" and world.slurm.drains == 0
    [(name, kwargs)] = world.sfn.answers()
    assert name == "failure" and kwargs["error"] == "InvalidCommand" and kwargs["cause"].startswith(field)
    assert queue_depth(world) == 0


def test_a_message_without_a_token_is_removed_unanswered(world: Any) -> None:
    put(world, "not json at all")
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "invalid" and world.sfn.answers() == [] and queue_depth(world) == 0


def test_an_unknown_node_is_answered_node_not_found(world: Any) -> None:
    envelope = json.loads(drain_envelope())
    envelope["command"]["nodes"] = ["ip-10-9-9-9"]
    put(world, json.dumps(envelope))
    [outcome] = world.make_agent().poll_once(0)
    assert (outcome.status, outcome.error) == ("failed", "NodeNotFound")
    assert world.sfn.answers()[0][1]["error"] == "NodeNotFound" and "ip-10-9-9-9" in world.sfn.answers()[0][1]["cause"]


def test_a_briefly_unreachable_slurmctld_is_retried_with_backoff(world: Any) -> None:
    world.slurm.unreachable_for = 2
    put(world, drain_envelope())
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "succeeded" and world.sleeps == [2.0, 4.0]


def test_a_slurmctld_that_stays_down_is_answered_controller_unavailable(world: Any) -> None:
    world.slurm.unreachable_for = 100
    put(world, drain_envelope())
    [outcome] = world.make_agent().poll_once(0)
    assert (outcome.status, outcome.error) == ("failed", "ControllerUnavailable")
    assert world.sleeps == [2.0, 4.0, 8.0, 16.0, 30.0]
    assert "after 6 attempts" in world.sfn.answers()[0][1]["cause"] and queue_depth(world) == 0


def test_an_answer_the_workflow_no_longer_waits_for_is_dropped(world: Any) -> None:
    world.sfn.refuse = "TaskTimedOut"
    put(world, drain_envelope())
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "dropped" and queue_depth(world) == 0


def test_an_answer_that_fails_for_another_reason_comes_back_and_is_replayed(world: Any) -> None:
    # Given Step Functions throttles the first answer
    world.sfn.refuse = "ThrottlingException"
    put(world, drain_envelope())
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "unanswered" and queue_depth(world) == 1
    # When the message comes back
    make_visible_again(world)
    [outcome] = world.make_agent().poll_once(0)
    # Then it is answered from the journal, Slurm untouched
    assert outcome.status == "replayed" and world.slurm.drains == 1 and queue_depth(world) == 0


def test_a_long_command_heartbeats_and_keeps_its_message_invisible(world: Any) -> None:
    # Given a drain that takes until two heartbeats were sent
    original = world.slurm.drain

    def slow_drain(nodes: Any, reason: str) -> None:
        assert world.sfn.heartbeat_seen.wait(timeout=10), "no heartbeats while the command ran"
        original(nodes, reason)

    world.slurm.drain = slow_drain
    put(world, drain_envelope("tok-long"))
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "succeeded"
    beats = [kwargs for name, kwargs in world.sfn.calls if name == "heartbeat"]
    assert len(beats) >= 2 and all(b == {"taskToken": "tok-long"} for b in beats)


def test_commands_waiting_behind_a_long_one_are_heartbeated_and_a_dead_ones_is_never_run(world: Any) -> None:
    # Given a long drain, a command queued behind it, and one whose task no longer waits (its
    # execution escalated); and a third that arrives only while the drain runs
    original = world.slurm.drain
    beats: dict[str, int] = {}

    def slow_drain(nodes: Any, reason: str) -> None:
        put(world, drain_envelope("tok-later", command_id="inc-4:drain"))  # arrives mid-command
        deadline = threading.Event()
        while not deadline.wait(0.01):  # until both live waiting commands were beaten twice
            counts = [kwargs["taskToken"] for name, kwargs in world.sfn.calls if name == "heartbeat"]
            beats.update({t: counts.count(t) for t in set(counts)})
            if beats.get("tok-queued", 0) >= 2 and beats.get("tok-later", 0) >= 2:
                break
        original(nodes, reason)

    world.slurm.drain = slow_drain
    put(world, drain_envelope("tok-long", command_id="inc-1:drain"))
    put(world, drain_envelope("tok-queued", command_id="inc-2:drain"))
    put(world, drain_envelope("tok-dead", command_id="inc-3:drain"))
    world.sfn.dead["tok-dead"] = "TaskTimedOut"
    # When the agent takes them
    outcomes = world.make_agent().poll_once(0)
    # Then every live one waiting its turn was heartbeated while the drain ran (the workflow's
    # HeartbeatSeconds would otherwise fail a command of a living agent), the dead one was dropped
    # without running, and the live ones were executed oldest first
    assert beats["tok-queued"] >= 2 and beats["tok-later"] >= 2
    assert [(o.command_id, o.status) for o in outcomes] == [
        ("inc-1:drain", "succeeded"),
        ("inc-2:drain", "succeeded"),
        ("inc-4:drain", "succeeded"),
    ]
    assert not any(kwargs.get("taskToken") == "tok-dead" for _, kwargs in world.sfn.answers())
    assert queue_depth(world) == 0


def test_the_agent_refuses_a_heartbeat_slower_than_half_the_workflows_deadline() -> None:
    from pydantic import ValidationError

    from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_DEADLINE_SECONDS
    from hyperpod_recovery_agent.config import AgentConfig

    base = {"command_queue_url": "https://sqs.us-west-2.amazonaws.com/111122223333/q", "cluster_name": "c", "visibility_seconds": 900}
    assert AgentConfig.model_validate({**base, "heartbeat_seconds": AGENT_HEARTBEAT_DEADLINE_SECONDS / 2})
    with pytest.raises(ValidationError, match="heartbeat_seconds must be at most"):
        AgentConfig.model_validate({**base, "heartbeat_seconds": AGENT_HEARTBEAT_DEADLINE_SECONDS / 2 + 1})


def test_an_unexpected_error_is_answered_not_retried_forever(world: Any) -> None:
    def broken(nodes: Any, reason: str) -> None:
        raise KeyError("state_flags")

    world.slurm.drain = broken
    put(world, drain_envelope())
    [outcome] = world.make_agent().poll_once(0)
    assert (outcome.status, outcome.error) == ("failed", "ControllerAgentError") and queue_depth(world) == 0


def test_the_run_loop_stops_when_asked(world: Any) -> None:
    put(world, drain_envelope())
    stop = threading.Event()
    world.make_agent().run(stop, wait_seconds=0, between_polls=stop.set)
    assert world.slurm.drains == 1


@pytest.mark.parametrize("code", ["TaskTimedOut", "TaskDoesNotExist", "InvalidToken"])
def test_a_command_whose_task_is_no_longer_awaited_is_never_executed(world: Any, code: str) -> None:
    # Given a drain whose state timed out while the agent was down (or a token nobody issued)
    world.sfn.dead["token-1"] = code
    put(world, drain_envelope())
    # When the agent comes back and polls
    [outcome] = world.make_agent().poll_once(0)
    # Then Slurm is not touched, nothing is answered, and the message is gone for good (not redelivered)
    assert (outcome.status, outcome.error) == ("expired", code)
    assert world.slurm.drains == 0 and world.sfn.answers() == [] and queue_depth(world) == 0


def test_a_forged_resubmission_runs_nothing(world: Any) -> None:
    # Given a resubmit command put on the queue by someone who is not a running execution of the stack
    spec = world.slurm.job("1001")
    forged = CommandEnvelope(
        command_id="x:resubmit:1001",
        incident_id="x",
        execution_name="x",
        task_token="made-up",
        requested_at=T0,
        command=ResubmitJob(job_id=spec.job_id, checkpoint=CheckpointRef(uri="s3://ckpt/llama/step-000002000/", step=2000)),
    ).model_dump_json()
    world.sfn.dead["made-up"] = "InvalidToken"
    put(world, forged)
    # When the agent polls
    [outcome] = world.make_agent().poll_once(0)
    # Then nothing is submitted or cancelled, and the message is dropped
    assert outcome.status == "expired" and world.slurm.submits == 0 and world.slurm.job("1001").state == "RUNNING"
    assert queue_depth(world) == 0


def test_a_command_whose_task_cannot_be_checked_comes_back_later(world: Any) -> None:
    # Given Step Functions throttles the liveness check
    world.sfn.refuse_heartbeat = "ThrottlingException"
    put(world, drain_envelope())
    [outcome] = world.make_agent().poll_once(0)
    # Then nothing ran, and the message stays for another try
    assert outcome.status == "unverified" and world.slurm.drains == 0 and queue_depth(world) == 1
    make_visible_again(world)
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "succeeded" and world.slurm.drains == 1


def malformed_envelope(token: str = "token-1") -> str:  # noqa: S107 - a task token, not a secret
    """A drain whose node list is missing: readable token, invalid command."""
    envelope = json.loads(drain_envelope(token))
    envelope["command"].pop("nodes")
    return json.dumps(envelope)


@pytest.mark.parametrize("code", ["TaskTimedOut", "TaskDoesNotExist", "InvalidToken"])
def test_a_malformed_command_whose_task_is_gone_is_removed_not_retried(world: Any, code: str, caplog: pytest.LogCaptureFixture) -> None:
    # Given a malformed command whose task no longer waits (its state timed out, or the token was never issued)
    world.sfn.dead["token-1"] = code
    put(world, malformed_envelope())
    # When the agent polls (it tries to fail the task InvalidCommand, which Step Functions refuses)
    [outcome] = world.make_agent().poll_once(0)
    # Then the message is deleted (never redelivered into the command DLQ), with a log line saying why
    assert (outcome.status, outcome.error) == ("invalid", "InvalidCommand") and queue_depth(world) == 0
    assert world.slurm.drains == 0 and world.sfn.answers() == []
    assert any(code in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("refusal", ["ThrottlingException", "connection"])
def test_a_malformed_commands_failure_that_could_not_be_sent_comes_back_and_is_sent(world: Any, refusal: str) -> None:
    # Given Step Functions throttles (or the network drops) the InvalidCommand answer of a malformed command
    put(world, malformed_envelope())
    agent = world.make_agent()
    if refusal == "connection":
        from botocore.exceptions import EndpointConnectionError

        send = world.sfn.send_task_failure

        def unreachable(**kwargs: Any) -> dict[str, Any]:
            world.sfn.send_task_failure = send
            raise EndpointConnectionError(endpoint_url="https://states.us-west-2.amazonaws.com")

        world.sfn.send_task_failure = unreachable
    else:
        world.sfn.refuse = refusal
    # When the agent polls: the loop goes on (no exception out of it), and the message stays
    [outcome] = agent.poll_once(0)
    assert outcome.status == "unanswered" and queue_depth(world) == 1
    # Then when it comes back, the task is failed InvalidCommand and the message removed
    make_visible_again(world)
    [outcome] = world.make_agent().poll_once(0)
    assert outcome.status == "invalid" and queue_depth(world) == 0
    [(name, kwargs)] = world.sfn.answers()
    assert name == "failure" and kwargs["error"] == "InvalidCommand"


def test_a_resubmission_beside_a_job_that_never_stops_is_answered_old_job_not_stopped_and_submits_nothing(world: Any) -> None:
    # Given job 1001 still running with a process SIGKILL does not end
    world.slurm.slow_to_stop("1001", None)
    body = CommandEnvelope(
        command_id="inc-1:resubmit:1001",
        incident_id="inc-1",
        execution_name="inc-1",
        task_token="tok",
        requested_at=T0,
        command=ResubmitJob(job_id="1001", checkpoint=CheckpointRef(uri="s3://ckpt/llama/step-000002000/", step=2000)),
    ).model_dump_json()
    put(world, body)
    # When the agent handles its resubmission (a clock that never moves: the wait is bounded by its polls)
    [outcome] = world.make_agent().poll_once(0)
    # Then the workflow is told OldJobNotStopped, nothing was submitted, and the message is gone
    assert (outcome.status, outcome.error) == ("failed", "OldJobNotStopped")
    [(name, kwargs)] = world.sfn.answers()
    assert name == "failure" and kwargs["error"] == "OldJobNotStopped" and "still COMPLETING" in kwargs["cause"]
    assert world.slurm.submits == 0 and world.waits and queue_depth(world) == 0
