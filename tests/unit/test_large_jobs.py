"""A job on more nodes than a workflow carries the names of (MAX_JOB_NODES_CARRIED, 1,000): the agent
holds every name (a cordon counts the ones it takes, a grow-back the ones the copy keeps), and what
travels through the queue and the state is bounded. Found by the fleet drill: one 2,048-node job made
every cordon fail validation in the agent, and every node incident escalated."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hyperpod_recovery.models.commands import (
    CaptureJobSpec,
    CommandEnvelope,
    CordonNodes,
    CordonResult,
    JobSpec,
    JobSpecResult,
    carried,
    owner_tag,
)
from hyperpod_recovery.models.common import MAX_JOB_NODES_CARRIED
from hyperpod_recovery_agent.executor import CommandExecutor
from sandbox.slurm import SimulatedSlurm, SlurmJob
from tests.fakes import T0
from tests.unit.test_hang_classify import _classify, _setup

NODES = [f"ip-10-2-{n // 256}-{n % 256}" for n in range(2048)]


def _slurm() -> SimulatedSlurm:
    slurm = SimulatedSlurm()
    for name in NODES:
        slurm.add_node(name)
    slurm.add_job(SlurmJob(job_id="1001", name="pretrain", nodes=NODES, state="RUNNING", checkpoint_uri="s3://ckpt/pretrain"))
    return slurm


def _execute(executor: CommandExecutor, command: object) -> object:
    envelope = CommandEnvelope.model_validate(
        {
            "command_id": "inc-1:c",
            "incident_id": "inc-1",
            "execution_name": "inc-1",
            "task_token": "t",
            "requested_at": T0,
            "command": command,
        }
    )
    reply = executor.execute(envelope)
    # (what the workflow receives: the reply as it crosses the queue)
    return type(reply).model_validate_json(reply.model_dump_json()).result


def test_a_cordon_on_a_2048_node_job_answers_the_job_without_its_names() -> None:
    # Given one job on 2,048 nodes, two of which fail
    executor = CommandExecutor(_slurm(), now=lambda: T0)
    # When the incident cordons them
    result = _execute(executor, CordonNodes(nodes=NODES[:2], reason=f"{owner_tag('inc-1')} fault"))
    # Then both are drained and the job is answered: its size, the nodes it loses, no names
    assert isinstance(result, CordonResult)
    (job,) = result.jobs
    assert (job.job_id, job.num_nodes, job.lost_nodes, job.nodes) == ("1001", 2048, 2, [])


def test_capture_job_spec_of_a_2048_node_job_carries_its_size_not_its_names() -> None:
    executor = CommandExecutor(_slurm(), now=lambda: T0)
    result = _execute(executor, CaptureJobSpec(job_id="1001"))
    assert isinstance(result, JobSpecResult) and result.job is not None
    assert (result.job.num_nodes, result.job.nodes) == (2048, [])


@pytest.mark.parametrize("count", [1, MAX_JOB_NODES_CARRIED, MAX_JOB_NODES_CARRIED + 1, 2048])
def test_what_travels_never_holds_more_names_than_the_state_carries(count: int) -> None:
    spec = JobSpec(job_id="1001", name="j", num_nodes=count, nodes=NODES[:count], state="RUNNING")
    sent = carried(spec)
    assert sent.nodes == (NODES[:count] if count <= MAX_JOB_NODES_CARRIED else [])
    JobSpecResult(job=sent)
    if count > MAX_JOB_NODES_CARRIED:
        # (and a receiver refuses an answer that carries more)
        with pytest.raises(ValidationError, match="more than a workflow carries"):
            JobSpecResult(job=spec)


def test_a_hang_of_a_job_whose_names_were_not_carried_is_left_alone_saying_why() -> None:
    # Given a hang verdict on a job whose spec came without its node list (2,048 nodes)
    request, job, cluster = _setup(num_nodes=2048, nodes=[])
    # When it is classified
    c = _classify(request, job, cluster)
    # Then nothing is done, and the reason says it is the job's size, not its reports
    assert c.kind == "left_alone" and c.node_request is None
    assert "runs on 2048 nodes, more than a workflow carries the names of (1000)" in c.reason
