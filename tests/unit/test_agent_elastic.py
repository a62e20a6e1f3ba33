"""Shrink-and-continue on the controller: how the agent reads a job's elastic opt-in (its comment, its
script's own node range), counts the nodes free to take it, resubmits it at another size, and grows a
shrunk copy back only when enough nodes can take it at once. On the simulated slurmctld (the drills'),
and on SlurmCli with Slurm's answers given (against a real slurmctld: tests/slurm/test_agent_on_real_slurm.py)."""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models.commands import (
    CheckpointRef,
    CommandEnvelope,
    CordonNodes,
    CordonResult,
    JobsOnNodesResult,
    ResubmitJob,
    ResubmitResult,
)
from hyperpod_recovery.models.elastic import ElasticOptInUnreadable, ElasticPolicy, elastic_choice_in_comment
from hyperpod_recovery.models.manifest import RESUME_DATA_PARALLEL_ENV, RESUME_FROM_ENV, RESUME_NODES_ENV, RESUME_STEP_ENV
from hyperpod_recovery_agent.capture import JobCapture, SubmitAs, resubmitted_from
from hyperpod_recovery_agent.elastic import elastic_opt_in, node_range_in_script
from hyperpod_recovery_agent.executor import CaptureStore, CommandExecutor, _spare_for
from hyperpod_recovery_agent.sbatch_options import SbatchOptions, Unresumable
from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, FreeNode, SlurmCli, constraint_features
from hyperpod_recovery_agent.slurm_json import SlurmJob as SlurmRecord
from hyperpod_recovery_agent.slurm_json import SlurmNode, read_jobs, read_node, read_nodes
from sandbox.real_slurm import seed_script
from sandbox.slurm import SimulatedSlurm, SlurmJob
from tests.fakes import T0

TAG = "hyperpod-recovery:inc-1"
NODES = ["ip-10-1-0-1", "ip-10-1-0-2", "ip-10-1-0-3"]
SHRINK_FROM = CheckpointRef(uri="s3://ckpt/llama/step-000002000/", step=2000)
GROW_FROM = CheckpointRef(uri="s3://ckpt/llama/step-000002500/", step=2500)


# --- the script's own node range ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("#!/bin/bash\n#SBATCH --nodes=12-16\nsrun train.py\n", (12, 16)),
        ("#!/bin/bash\n#SBATCH -N 1-2\n", (1, 2)),
        ("#!/bin/bash\n#SBATCH -N1-2 --time=30\n", (1, 2)),
        ("#!/bin/bash\n#SBATCH --exclusive --nodes 2-4 # may shrink to 2\n", (2, 4)),
        ("#!/bin/bash\n\n# a comment\n   # an indented comment\n#SBATCH --nodes=1-2\n", (1, 2)),
        ("#!/bin/bash\n#SBATCH --nodes=1-2\n#SBATCH --nodes=2\n", None),  # a later directive wins, as in sbatch
        ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --nodes=1-2\n", (1, 2)),
        ("#!/bin/bash\nsrun true\n#SBATCH --nodes=1-2\n", None),  # after the first command: sbatch reads no more
        ("#!/bin/bash\n#SBATCHX --nodes=1-2\n", None),
        ("#!/bin/bash\n #SBATCH --nodes=1-2\n", None),  # a directive starts its line
        ("#!/bin/bash\n#SBATCH --comment='-N 1-2' --nodes=3\n", None),  # quoted: the comment's, not an option
        ("#!/bin/bash\n#SBATCH --nodes=2\n", None),
        ("#!/bin/bash\n#SBATCH --nodes=1-2k\n", None),
        ("#!/bin/bash\n#SBATCH --nodelist=ip-10-1-0-[1-2]\n", None),
        ("", None),
    ],
)
def test_the_scripts_node_range_is_read_as_sbatch_reads_its_directives(script: str, expected: tuple[int, int] | None) -> None:
    assert node_range_in_script(script) == expected


@pytest.mark.parametrize("value", ["0-2", "3-1", "1-99999"])
def test_a_node_range_no_job_can_have_is_unreadable(value: str) -> None:
    with pytest.raises(ElasticOptInUnreadable, match=f"--nodes={value}"):
        node_range_in_script(f"#!/bin/bash\n#SBATCH --nodes={value}\n")


_WORDS = st.sampled_from(["#SBATCH", "--nodes", "--nodes=", "-N", "-N1-", "1-2", "3-1", "0-0", "#", "'", '"', "\\", "srun", "12", "-"])


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(max_size=300), st.lists(st.lists(_WORDS, max_size=6).map(" ".join), max_size=8).map("\n".join)))
def test_any_script_is_read_without_an_error_but_the_documented_one(text: str) -> None:
    # Given any text as a batch script (directives, quotes, comments in any order)
    # When its node range is read, Then it is a range within bounds, none, or ElasticOptInUnreadable
    try:
        found = node_range_in_script(text)
    except ElasticOptInUnreadable:
        return
    assert found is None or 1 <= found[0] <= found[1]


@settings(max_examples=300, deadline=None)
@given(low=st.integers(1, 10_000), extra=st.integers(0, 100), spelling=st.sampled_from(["--nodes={}", "--nodes {}", "-N {}", "-N{}"]))
def test_a_written_range_is_read_back_in_every_spelling(low: int, extra: int, spelling: str) -> None:
    high = min(10_000, low + extra)
    script = f"#!/bin/bash\n#SBATCH --job-name=llama {spelling.format(f'{low}-{high}')} --exclusive\nsrun train.py\n"
    assert node_range_in_script(script) == (low, high)


# --- the comment, and which opt-in counts ------------------------------------------------------------
@settings(max_examples=500, deadline=None)
@given(
    comment=st.one_of(
        st.text(max_size=200), st.lists(st.sampled_from(["resume=elastic", ",min=", "2", ",max=", "x", ",", "=", " "])).map("".join)
    )
)
def test_any_comment_is_read_without_an_error_but_the_documented_one(comment: str) -> None:
    with contextlib.suppress(ElasticOptInUnreadable):
        elastic_choice_in_comment(comment)


@settings(max_examples=300, deadline=None)
@given(comment=st.text(max_size=120), script=st.text(max_size=200), num_nodes=st.integers(1, 10_000))
def test_describing_a_job_never_fails_on_its_opt_in(comment: str, script: str, num_nodes: int) -> None:
    # Whatever the owner wrote, the job is described: an opt-in that cannot be read is a problem said, not an error
    policy, problem = elastic_opt_in(comment, script, num_nodes)
    assert policy is None or problem is None


def test_the_comments_opt_in_wins_over_the_scripts_range() -> None:
    policy, problem = elastic_opt_in("checkpoint=s3://b/c resume=elastic,min=4,multiple=2", "#!/bin/bash\n#SBATCH -N 1-8\n", 8)
    assert policy == ElasticPolicy(min_nodes=4, multiple=2, source="comment") and problem is None


def test_an_unreadable_comment_makes_the_job_rigid_and_says_why_even_with_a_range() -> None:
    policy, problem = elastic_opt_in("resume=elastic,min=two", "#!/bin/bash\n#SBATCH -N 1-8\n", 8)
    assert policy is None and problem is not None
    assert problem.startswith("its comment's resume=elastic… cannot be read: ") and "min='two'" in problem


@pytest.mark.parametrize(("num_nodes", "elastic"), [(2, True), (1, True), (4, False)])
def test_the_scripts_range_counts_only_when_the_job_runs_within_it(num_nodes: int, elastic: bool) -> None:
    # (a job running outside its script's range was given its size on the command line, which wins)
    policy, problem = elastic_opt_in("", "#!/bin/bash\n#SBATCH --nodes=1-2\n", num_nodes)
    assert problem is None
    assert policy == (ElasticPolicy(min_nodes=1, max_nodes=2, source="node_range") if elastic else None)


# --- the job as the agent describes it ---------------------------------------------------------------
class _Squeue(SlurmCli):
    """SlurmCli with slurmctld's answers given: squeue's jobs, sinfo's nodes, each batch script."""

    def __init__(self, jobs: list[dict[str, Any]], nodes: list[dict[str, Any]], scripts: Mapping[str, str]) -> None:
        super().__init__(env={})
        self.jobs, self.sinfo, self.scripts = jobs, nodes, scripts
        self.sinfo_reads = 0

    def queue(self) -> list[SlurmRecord]:
        return read_jobs({"jobs": self.jobs})

    def nodes(self) -> list[SlurmNode]:
        self.sinfo_reads += 1
        return read_nodes({"nodes": self.sinfo})

    def batch_script(self, job_id: str) -> str | None:
        return self.scripts.get(job_id)

    def submission_environment(self, job_id: str) -> dict[str, str]:
        return {}

    def hostnames(self, nodelist: str) -> list[str]:
        return {"a[1-2]": ["a1", "a2"], "b1": ["b1"]}.get(nodelist, [nodelist] if nodelist else [])

    def capture(self, job_id: str) -> JobCapture | None:
        return JobCapture(job_id=job_id, user="root", uid=0, group="root", gid=0, name="x", script=self.scripts.get(job_id))


def _node(name: str, state: str = "idle", flags: tuple[str, ...] = (), partitions: tuple[str, ...] = ("dev",)) -> dict[str, Any]:
    return {"name": name, "state": state, "state_flags": list(flags), "partitions": list(partitions), "reason": ""}


def _record(job_id: int, nodes: str, count: int, comment: str = "", partition: str = "dev") -> dict[str, Any]:
    return {"job_id": job_id, "name": "llama", "job_state": "RUNNING", "batch_flag": True, "nodes": nodes, "node_count": count,
            "comment": comment, "partition": partition}  # fmt: skip


def test_slurm_clis_job_spec_carries_the_scripts_range_and_a_comment_it_cannot_read() -> None:
    # Given a 2-node job whose script asks for 1-2 nodes, and a 1-node job whose comment opts in wrongly
    slurm = _Squeue(
        [_record(7, "a[1-2]", 2), _record(8, "b1", 1, comment="resume=elastic,multiple=2")],
        [],
        {"7": "#!/bin/bash\n#SBATCH --nodes=1-2\nsrun train.py\n", "8": "#!/bin/bash\nsrun train.py\n"},
    )
    # When the agent describes them
    ranged, unreadable = (slurm._job_spec(job) for job in slurm.queue())
    # Then the first may shrink to 1 node (its script's own range), the second is rigid and says why
    assert ranged.elastic == ElasticPolicy(min_nodes=1, max_nodes=2, source="node_range") and ranged.elastic_problem is None
    assert unreadable.elastic is None and unreadable.elastic_problem is not None and "min=N is required" in unreadable.elastic_problem


def test_the_simulated_slurmctld_describes_the_opt_in_the_same_way() -> None:
    slurm = SimulatedSlurm()
    for name in NODES:
        slurm.add_node(name)
    slurm.add_job(SlurmJob(job_id="1001", name="llama", nodes=NODES[:2], state="RUNNING", checkpoint_uri=None, node_range="1-2"))
    slurm.add_job(
        SlurmJob(job_id="1002", name="other", nodes=NODES[2:], state="RUNNING", checkpoint_uri=None, comment="resume=elastic,min=0")
    )
    ranged, unreadable = slurm.job("1001"), slurm.job("1002")
    assert ranged is not None and ranged.elastic == ElasticPolicy(min_nodes=1, max_nodes=2, source="node_range")
    assert unreadable is not None and unreadable.elastic is None and unreadable.elastic_problem is not None
    assert unreadable.elastic_problem.startswith("its comment's resume=elastic… cannot be read:")


# --- the nodes free to take a job ----------------------------------------------------------------------
def test_only_idle_nodes_without_a_flag_that_keeps_jobs_off_them_are_free() -> None:
    slurm = _Squeue(
        [],
        [
            _node("n1"),
            _node("n2", flags=("DRAIN",)),
            _node("n3", state="allocated"),
            _node("n4", state="mixed"),
            _node("n5", flags=("RESERVED",)),
            _node("n6", flags=("MAINTENANCE", "RESERVED")),
            _node("n7", flags=("NOT_RESPONDING",)),
            _node("n8", state="down"),
            _node("n9", flags=("POWERED_DOWN",)),
            _node("n10", flags=("COMPLETING",)),
            _node("n11", flags=("CLOUD",)),
            _node("n12", partitions=("cpu",)),
            {"name": "n13", "state": ["IDLE", "DRAIN"], "partitions": ["dev"]},  # 23.02's form
            {"name": "n14", "state": ["IDLE"], "partitions": ["dev"]},
        ],
        {},
    )
    assert {name: node.partitions for name, node in slurm.free_nodes().items()} == {
        "n1": ("dev",),
        "n11": ("dev",),
        "n12": ("cpu",),
        "n14": ("dev",),
    }


def test_each_job_on_the_nodes_gets_the_free_nodes_of_its_partition_from_one_read_of_sinfo() -> None:
    # Given two jobs in partition dev and one in cpu on the failed nodes, two free dev nodes and one free cpu node
    slurm = _Squeue(
        [_record(7, "a[1-2]", 2), _record(8, "b1", 1), _record(9, "c1", 1, partition="cpu,dev")],
        [_node("d1"), _node("d2"), _node("c2", partitions=("cpu",)), _node("d3", flags=("DRAIN",))],
        {"7": "#!/bin/bash\n", "8": "#!/bin/bash\n", "9": "#!/bin/bash\n"},
    )
    # When the workflow asks for the jobs on them
    result = CommandExecutor(slurm, now=lambda: T0).jobs_on(["a1", "b1", "c1"])
    # Then each job counts the free nodes of its own partition(s), and sinfo was read once for all
    assert [(j.job_id, j.spare_nodes) for j in result.jobs] == [("7", 2), ("8", 2), ("9", 3)]
    assert slurm.sinfo_reads == 1


@pytest.mark.parametrize(
    ("constraint", "required"),
    [
        (None, frozenset()),
        ("", frozenset()),
        ("a100", frozenset({"a100"})),
        ("a100&efa", frozenset({"a100", "efa"})),
        ("a100|h100", None),  # OR: which nodes fit depends on the others chosen
        ("[rack1|rack2]", None),  # matching OR
        ("a100*4", None),  # a count
        ("(a100&efa)|h100", None),
    ],
)
def test_only_a_plain_and_of_features_is_matched_to_idle_nodes(constraint: str | None, required: frozenset[str] | None) -> None:
    assert constraint_features(constraint) == required


def test_a_nodes_features_are_its_active_ones_in_either_form_slurm_gives() -> None:
    assert read_node({"name": "a", "active_features": "a100,efa", "features": "a100,efa,spare"}).features == {"a100", "efa"}
    assert read_node({"name": "a", "features": ["a100", "efa"]}).features == {"a100", "efa"}
    assert read_node({"name": "a"}).features == frozenset()


def test_a_job_with_a_constraint_counts_only_the_idle_nodes_that_have_its_features() -> None:
    # Given idle nodes of partition dev: one with a100 and efa, one with a100 only, one unlabelled, and one of cpu
    free = {
        "d1": FreeNode(("dev",), frozenset({"a100", "efa"})),
        "d2": FreeNode(("dev",), frozenset({"a100"})),
        "d3": FreeNode(("dev",)),
        "c1": FreeNode(("cpu",), frozenset({"a100", "efa"})),
    }
    # Then a job asking for a100&efa counts the one that fits; one without a constraint, all three of its
    # partition; one whose OR the agent cannot place, none (a grow-back then never stops its copy)
    assert (_spare_for("dev", free, "a100&efa"), _spare_for("dev", free, None), _spare_for("dev", free, "a100|h100")) == (1, 3, 0)


def test_no_job_on_the_nodes_reads_no_free_nodes() -> None:
    slurm = _Squeue([], [_node("d1")], {})
    assert CommandExecutor(slurm, now=lambda: T0).jobs_on(["a1"]).jobs == [] and slurm.sinfo_reads == 0


def _cluster(nodes: int = 3, job_nodes: int = 2) -> SimulatedSlurm:
    slurm = SimulatedSlurm(now=lambda: T0)  # (a clock: second_copies() compares when copies lived)
    for n in range(nodes):
        slurm.add_node(f"ip-10-1-0-{n + 1}")
    job = SlurmJob(job_id="1001", name="llama", nodes=[f"ip-10-1-0-{n + 1}" for n in range(job_nodes)], state="RUNNING",
                   checkpoint_uri="s3://ckpt/llama", node_range="1-2")  # fmt: skip
    slurm.add_job(job)
    return slurm


def envelope(command: object, incident: str = "inc-1", command_id: str = "cmd") -> CommandEnvelope:
    return CommandEnvelope(
        command_id=f"{incident}:{command_id}",
        incident_id=incident,
        execution_name=incident,
        task_token="t",
        requested_at=T0,
        command=command,
    )


def test_a_cordon_counts_the_free_nodes_after_its_drain() -> None:
    # Given a 2-node job on a 4-node cluster, one spare reserved for root (a health gate), one idle
    slurm = _cluster(nodes=4)
    slurm.reserve("hpr-x", "ip-10-1-0-3")
    # When its first node is cordoned
    result = CommandExecutor(slurm, now=lambda: T0).execute(envelope(CordonNodes(nodes=["ip-10-1-0-1"], reason=f"{TAG} xid"))).result
    # Then the job may shrink (its script's range), with one node free to take it: not the drained one, not the reserved one
    assert isinstance(result, CordonResult)
    [job] = result.jobs
    assert job.elastic is not None and job.elastic.min_nodes == 1 and job.spare_nodes == 1


# --- resubmitting at a size, and growing back -----------------------------------------------------------
def resubmit(slurm: SimulatedSlurm, command: ResubmitJob, incident: str = "inc-1", command_id: str = "cmd") -> ResubmitResult:
    result = CommandExecutor(slurm, now=lambda: T0).execute(envelope(command, incident, command_id)).result
    assert isinstance(result, ResubmitResult)
    return result


def _shrunk() -> tuple[SimulatedSlurm, str]:
    """Job 1001 on 2 of 2 nodes, its second node failed and drained, shrunk to a 1-node copy running."""
    slurm = _cluster(nodes=2)
    executor = CommandExecutor(slurm, now=lambda: T0)
    cordon = executor.execute(envelope(CordonNodes(nodes=["ip-10-1-0-2"], reason=f"{TAG} xid"))).result
    assert isinstance(cordon, JobsOnNodesResult) and cordon.jobs[0].spare_nodes == 0
    shrink = resubmit(slurm, ResubmitJob(job_id="1001", checkpoint=SHRINK_FROM, nodes=1, data_parallel=8), command_id="shrink")
    assert shrink.new_job_id is not None
    return slurm, shrink.new_job_id


def test_a_shrink_submits_the_copy_at_its_size_with_the_size_in_its_environment() -> None:
    slurm, copy_id = _shrunk()
    copy = slurm.jobs[copy_id]
    # Then the copy runs now on the one healthy node, the old job cancelled first, never two at once
    assert (copy.state, copy.nodes, copy.node_count) == ("RUNNING", ["ip-10-1-0-1"], 1)
    assert slurm.jobs["1001"].state == "CANCELLED" and slurm.second_copies() == []
    assert {k: copy.environment[k] for k in (RESUME_FROM_ENV, RESUME_STEP_ENV, RESUME_NODES_ENV, RESUME_DATA_PARALLEL_ENV)} == {
        RESUME_FROM_ENV: SHRINK_FROM.uri,
        RESUME_STEP_ENV: "2000",
        RESUME_NODES_ENV: "1",
        RESUME_DATA_PARALLEL_ENV: "8",
    }
    # And the copy is still elastic (its script's range holds 1), and says whose copy it is
    spec = slurm.job(copy_id)
    assert spec is not None and spec.elastic is not None and spec.num_nodes == 1
    assert slurm.capture(copy_id).resubmitted_from == "1001"  # type: ignore[union-attr]


def test_the_answer_says_the_size_submitted_at() -> None:
    slurm = _cluster(nodes=3)
    result = resubmit(slurm, ResubmitJob(job_id="1001", checkpoint=SHRINK_FROM, nodes=1))
    assert result.nodes == 1 and result.cancelled_old and slurm.jobs[result.new_job_id or ""].node_count == 1


def test_a_grow_back_with_too_few_nodes_is_declined_and_touches_nothing() -> None:
    # Given the shrunk copy running on 1 node, its partner still drained
    slurm, copy_id = _shrunk()
    before = len(slurm.jobs)
    # When a grow-back to 2 nodes asks for 2 nodes able to take it at once
    result = resubmit(slurm, ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, nodes=2, require_free_nodes=2), command_id="grow")
    # Then it is declined, saying why, and the copy runs on: nothing cancelled, nothing submitted
    assert result.new_job_id is None and not result.cancelled_old
    assert result.declined == f"only 1 node(s) could take it at once, 2 needed: job {copy_id} keeps running on 1 node(s)"
    assert slurm.jobs[copy_id].state == "RUNNING" and len(slurm.jobs) == before


def test_a_grow_back_once_the_replacement_is_back_stops_the_copy_and_submits_the_full_size() -> None:
    # Given the shrunk copy, and the failed node's replacement back in service
    slurm, copy_id = _shrunk()
    slurm.resume(["ip-10-1-0-2"])
    # When it is grown back to 2 nodes
    command = ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, nodes=2, data_parallel=16, require_free_nodes=2)
    result = resubmit(slurm, command, command_id="grow")
    # Then the 1-node copy was cancelled before the 2-node one was submitted, which runs on both nodes
    grown = slurm.jobs[result.new_job_id or ""]
    assert result.cancelled_old and result.nodes == 2 and result.declined is None
    assert slurm.jobs[copy_id].state == "CANCELLED" and slurm.second_copies() == []
    assert (grown.state, sorted(grown.nodes)) == ("RUNNING", ["ip-10-1-0-1", "ip-10-1-0-2"])
    # And it resumes from the grow-back's checkpoint, at its own size: nothing of the shrink's is left
    assert (grown.environment[RESUME_FROM_ENV], grown.environment[RESUME_STEP_ENV]) == (GROW_FROM.uri, "2500")
    assert (grown.environment[RESUME_NODES_ENV], grown.environment[RESUME_DATA_PARALLEL_ENV]) == ("2", "16")
    assert grown.comment.startswith(f"{RESUBMISSION_MARK}{copy_id} incident=inc-1") and grown.comment.count(RESUBMISSION_MARK) == 1


def test_a_grow_back_that_gives_no_size_leaves_none_of_the_shrinks_in_the_environment() -> None:
    slurm, copy_id = _shrunk()
    slurm.resume(["ip-10-1-0-2"])
    result = resubmit(slurm, ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, require_free_nodes=1), command_id="grow")
    grown = slurm.jobs[result.new_job_id or ""]
    assert RESUME_NODES_ENV not in grown.environment and RESUME_DATA_PARALLEL_ENV not in grown.environment
    assert grown.environment[RESUME_STEP_ENV] == "2500"


def test_a_grow_back_retried_after_a_lost_answer_answers_its_copy_and_stops_nothing_more() -> None:
    # Given a grow-back that stopped the shrunk copy and submitted the full-size one, whose answer was lost
    slurm, copy_id = _shrunk()
    slurm.resume(["ip-10-1-0-2"])
    command = ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, nodes=2, require_free_nodes=2)
    first = resubmit(slurm, command, command_id="grow")
    states = {job_id: job.state for job_id, job in slurm.jobs.items()}
    # When the same command comes again (no node is free now: the full-size copy holds both)
    again = resubmit(slurm, command, command_id="grow")
    # Then it answers the same copy, not declined, with nothing cancelled or submitted
    assert (again.new_job_id, again.declined, again.nodes, again.cancelled_old) == (first.new_job_id, None, 2, False)
    assert {job_id: job.state for job_id, job in slurm.jobs.items()} == states and states[first.new_job_id or ""] == "RUNNING"


def test_a_grow_back_that_stopped_its_copy_and_crashed_submits_the_successor_when_retried() -> None:
    # Given a grow-back that stopped the shrunk copy and then crashed before sbatch
    slurm, copy_id = _shrunk()
    executor = CommandExecutor(slurm, now=lambda: T0, captures=CaptureStore())
    grow = ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, nodes=2, require_free_nodes=1)
    submit = slurm.submit_as_owner
    slurm.submit_as_owner = mock.Mock(side_effect=RuntimeError("the controller rebooted"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        executor.execute(envelope(grow, "inc-1", "grow"))
    slurm.submit_as_owner = submit  # type: ignore[method-assign]
    assert slurm.jobs[copy_id].state not in ("RUNNING", "PENDING")
    # When the workflow retries it (its partner node still drained: the successor must wait)
    result = executor.execute(envelope(grow.model_copy(update={"require_free_nodes": 2}), "inc-1", "grow")).result
    # Then it is not declined (that would leave no copy at all): the 2-node copy is submitted, and waits for its nodes
    assert isinstance(result, ResubmitResult)
    assert result.declined is None and result.new_job_id is not None and not result.cancelled_old
    assert slurm.jobs[result.new_job_id].state == "PENDING" and slurm.second_copies() == []


@pytest.mark.parametrize("ended_by", ["its own end", "a human's scancel"])
def test_a_grow_back_never_starts_again_a_copy_that_ended_without_it(ended_by: str) -> None:
    # Given a shrunk copy that ended without the grow-back (its training done, or stopped by a human)
    slurm, copy_id = _shrunk()
    if ended_by == "its own end":
        slurm.jobs[copy_id].state = "COMPLETED"
    else:
        slurm.cancel(copy_id)
    # When its grow-back comes
    result = resubmit(slurm, ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, nodes=2, require_free_nodes=2), command_id="grow")
    # Then nothing is submitted, and the answer says why
    assert result.new_job_id is None and result.declined is not None and "no grow-back of this incident stopped it" in result.declined
    assert [j for j in slurm.jobs.values() if j.resubmission_of == copy_id] == []


def test_a_grow_back_never_stops_a_job_we_did_not_submit() -> None:
    slurm = _cluster(nodes=3)
    with pytest.raises(InvalidCommand, match="job 1001 is no copy of ours"):
        resubmit(slurm, ResubmitJob(job_id="1001", checkpoint=GROW_FROM, nodes=2, require_free_nodes=1))
    assert slurm.jobs["1001"].state == "RUNNING" and len(slurm.jobs) == 1


@pytest.mark.parametrize("excluded", ["ip-10-1-0-1", "ip-10-1-0-2"])
def test_a_grow_back_does_not_count_the_nodes_it_is_told_to_keep_the_job_off(excluded: str) -> None:
    # Given the shrunk copy on node 1 and node 2 free again; When the grow-back excludes one of them (its own, or the free one)
    slurm, copy_id = _shrunk()
    slurm.resume(["ip-10-1-0-2"])
    command = ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, nodes=2, require_free_nodes=2, exclude_nodes=[excluded])
    result = resubmit(slurm, command, command_id="grow")
    # Then only the other one counts: declined, the copy running on
    assert result.declined is not None and result.declined.startswith("only 1 node(s)") and slurm.jobs[copy_id].state == "RUNNING"


# --- SlurmCli's sbatch at a size -----------------------------------------------------------------------------
class _Sbatch(SlurmCli):
    """SlurmCli whose sbatch is recorded, and answers job 42."""

    def __init__(self) -> None:
        super().__init__(env={"PATH": "/usr/bin"}, bin_dir="/opt/slurm/bin")
        self.argv: list[str] = []
        self.environment: dict[str, str] = {}

    def _run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.argv, self.environment = argv, kwargs["owner"].environment
        return subprocess.CompletedProcess(argv, 0, "42\n", "")


def test_slurm_cli_submits_the_copy_at_its_size_its_per_job_totals_kept_per_node() -> None:
    # Given a job that ran on 4 nodes with --ntasks=32 and --gpus=h100:32 (8 per node)
    options = SbatchOptions(partition="dev", nodes="4", ntasks=32, gpus="h100:32")
    capture = JobCapture(job_id="7", user="root", uid=0, group="root", gid=0, name="llama", script="#!/bin/bash\n", options=options)
    slurm = _Sbatch()
    # When it is submitted again at 2 nodes
    assert slurm.submit_as_owner(capture, SubmitAs(comment="c", extra_environment={RESUME_NODES_ENV: "2"}, nodes=2)) == "42"
    # Then sbatch is asked for 2 nodes, 16 tasks and 16 GPUs, and the copy finds its size in its environment
    assert {"--nodes=2", "--ntasks=16", "--gpus=h100:16"} <= set(slurm.argv) and "--nodes=4" not in slurm.argv
    assert slurm.environment[RESUME_NODES_ENV] == "2"


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (SbatchOptions(nodes="3", ntasks=4), "its --ntasks 4 on 3 node(s) is no whole number per node at 2 node(s)"),
        (SbatchOptions(nodes="1-4", gpus="8"), "totals for a node count Slurm did not record (1-4)"),
        (SbatchOptions(nodes="2", nodelist="ip-10-1-0-[1-2]"), "it is pinned to nodes ip-10-1-0-[1-2] (--nodelist)"),
    ],
)
def test_per_job_totals_that_do_not_divide_at_the_new_size_refuse_the_resize(options: SbatchOptions, reason: str) -> None:
    with pytest.raises(Unresumable, match=re.escape(reason)):
        options.arguments(nodes=1 if options.nodes == "2" else 2, now=0)


def test_the_same_size_or_no_totals_leave_the_options_as_they_were() -> None:
    assert SbatchOptions(nodes="3", ntasks=4).arguments(nodes=3, now=0) == ["--nodes=3", "--ntasks=4"]
    assert SbatchOptions(nodes="3", ntasks_per_node=8).arguments(nodes=2, now=0) == ["--nodes=2", "--ntasks-per-node=8"]


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        (f"{RESUBMISSION_MARK}1001 incident=inc-1 team=llm", "1001"),
        (f"team=llm {RESUBMISSION_MARK}1001 incident=inc-1", None),  # ours starts the comment
        ("team=llm", None),
    ],
)
def test_whose_copy_a_job_is_is_read_from_our_mark_at_the_start_of_its_comment(comment: str, expected: str | None) -> None:
    assert resubmitted_from(comment) == expected


def test_a_real_slurm_drills_seeded_job_asks_for_its_node_range_in_its_script_as_the_simulated_one_does(tmp_path: Path) -> None:
    ranged = SlurmJob(job_id="1001", name="llama", nodes=NODES[:2], state="RUNNING", checkpoint_uri=None, node_range="1-2")
    assert node_range_in_script(seed_script(ranged, tmp_path)) == node_range_in_script(ranged.script) == (1, 2)
    rigid = SlurmJob(job_id="1002", name="llama", nodes=NODES[:2], state="RUNNING", checkpoint_uri=None)
    assert node_range_in_script(seed_script(rigid, tmp_path)) is None


def test_a_shrink_the_jobs_own_options_forbid_submits_it_as_it_ran_and_says_no_size() -> None:
    # Given a job whose second node failed, pinned to its nodes (--nodelist): it cannot run on fewer
    slurm = _cluster(nodes=2)
    executor = CommandExecutor(slurm, now=lambda: T0)
    executor.execute(envelope(CordonNodes(nodes=["ip-10-1-0-2"], reason=f"{TAG} xid")))
    capture = slurm.capture
    pinned = mock.Mock(side_effect=lambda job_id: _pinned(capture(job_id)))
    with mock.patch.object(slurm, "capture", pinned), mock.patch.object(executor.captures, "get", return_value=None):
        # When the workflow asks for a shrink to 1 node
        result = executor.execute(
            envelope(ResubmitJob(job_id="1001", checkpoint=SHRINK_FROM, nodes=1, data_parallel=8), "inc-1", "s")
        ).result
    # Then it is submitted at the size it ran at (it waits for its node, as a rigid job does), and the answer has no size
    assert isinstance(result, ResubmitResult) and result.new_job_id is not None and result.nodes is None
    copy = slurm.jobs[result.new_job_id]
    assert copy.node_count == 2 and copy.state == "PENDING" and RESUME_NODES_ENV not in copy.environment


def test_a_grow_back_the_copys_options_forbid_is_declined_and_stops_nothing() -> None:
    slurm, copy_id = _shrunk()
    capture = slurm.capture
    with mock.patch.object(slurm, "capture", side_effect=lambda job_id: _pinned(capture(job_id))):
        result = resubmit(slurm, ResubmitJob(job_id=copy_id, checkpoint=GROW_FROM, nodes=2, require_free_nodes=2), command_id="g")
    assert result.new_job_id is None and result.declined is not None and result.declined.startswith("not resized: it is pinned")
    assert slurm.jobs[copy_id].state == "RUNNING"


def _pinned(capture: JobCapture | None) -> JobCapture | None:
    if capture is None:
        return None
    return capture.model_copy(update={"options": capture.options.model_copy(update={"nodelist": "ip-10-1-0-[1-2]"})})
