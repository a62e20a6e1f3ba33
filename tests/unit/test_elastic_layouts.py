"""A layout is a claim (issue 47 item 5): the data-parallel degree a shrunk (or grown-back) copy is told
comes from its checkpoint's recorded layout and the copy's node count, and a layout that contradicts
itself, or cannot describe the job or the copy, refuses the shrink: the job waits for its replacement,
and the record says why (docs/checkpoint-manifest.md, "Running at another size")."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.elastic.decide import Estimate, decide_elastic, elastic_reason
from hyperpod_recovery.domain.elastic.grow_back import Reading, advance
from hyperpod_recovery.domain.elastic.sizes import MAX_RANKS_PER_NODE
from hyperpod_recovery.domain.jobs.eks_jobs import recreated_job
from hyperpod_recovery.models.commands import (
    MAX_RESUME_DATA_PARALLEL,
    CheckpointRef,
    CommandReply,
    JobRef,
    JobSpec,
    ResubmitJob,
    ResubmitResult,
)
from hyperpod_recovery.models.elastic import ElasticPolicy
from hyperpod_recovery.models.manifest import RESUME_DATA_PARALLEL_ENV, RESUME_NODES_ENV, CheckpointLayout
from hyperpod_recovery.models.node_recovery import ElasticDecision, GrowBackState, ResumePlan
from hyperpod_recovery.steps.resubmit_job import sized
from tests.fakes import T0

TEN_MIN, FIVE_MIN = Estimate(600, "measured"), Estimate(300, "parameter")
URI = "s3://ckpt/llama/step-000003000/"


def _job(nodes: int = 16, *, minimum: int = 1, multiple: int = 1) -> JobSpec:
    return JobSpec(
        job_id="1001",
        name="llama",
        num_nodes=nodes,
        state="RUNNING",
        checkpoint_uri="s3://ckpt/llama",
        elastic=ElasticPolicy(min_nodes=minimum, multiple=multiple, source="comment"),
        spare_nodes=0,
    )


def _checkpoint(layout: CheckpointLayout | None, step: int = 3000) -> CheckpointRef:
    return CheckpointRef(uri=f"s3://ckpt/llama/step-{step:09d}/", step=step, framework="pytorch-dcp", layout=layout)


def _layout(world: int, nodes: int | None, tensor: int, pipeline: int = 1) -> CheckpointLayout:
    return CheckpointLayout(
        world_size=world, nodes=nodes, tensor=tensor, pipeline=pipeline, data=world // (tensor * pipeline), reshardable=True
    )


def _decide(job: JobSpec, checkpoint: CheckpointRef, lost: int = 1) -> ElasticDecision:
    decision = decide_elastic(job, checkpoint, lost=lost, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None
    return decision


# --- the layout-mismatch cases ---------------------------------------------------------------------
def test_given_a_checkpoint_written_on_12_nodes_when_the_16_node_job_shrinks_to_15_then_the_copy_is_told_the_layouts_degree() -> None:
    # Given the newest checkpoint written while the job ran on 12 nodes (96 ranks, tensor 8: dp 12)
    checkpoint = _checkpoint(_layout(96, 12, tensor=8))
    # When the 16-node job loses a node
    decision = _decide(_job(16), checkpoint)
    # Then its copy runs on 15 nodes at the layout's 8 ranks a node: 120 ranks, dp 120 / 8 = 15
    assert (decision.action, decision.nodes, decision.data_parallel, decision.full_data_parallel) == ("shrink", 15, 15, 16)
    # And that is what reaches the copy's environment (here the EKS job builder's)
    command = ResubmitJob(
        job_id="1001",
        checkpoint=checkpoint,
        **sized(ResumePlan(job=JobRef(job_id="1001", name="llama"), checkpoint=checkpoint, elastic=decision)),
    )
    env = _container_env(command)
    assert (env[RESUME_NODES_ENV], env[RESUME_DATA_PARALLEL_ENV]) == ("15", "15")


def test_given_a_layout_whose_ranks_per_node_do_not_hold_the_jobs_replicas_when_a_node_is_lost_then_it_waits_and_says_why() -> None:
    # Given a checkpoint written on 2 nodes of 6 ranks with replicas of tensor 4, and the job now on 15 nodes
    # (15 x 6 = 90 ranks are no whole number of 4-rank replicas: the layout cannot be this job's)
    checkpoint = _checkpoint(_layout(12, 2, tensor=4))
    # When a node is lost
    decision = _decide(_job(15), checkpoint)
    # Then it does not shrink (today: 14 nodes told dp 21), and the record says why in words
    assert (decision.action, decision.why, decision.data_parallel) == ("wait", "layout_refused", None)
    assert "does not fit the job's 15 node(s)" in elastic_reason(decision, checkpoint)


def test_given_a_layout_without_its_node_count_when_a_node_is_lost_then_it_waits_rather_than_leave_the_degree_to_the_script() -> None:
    checkpoint = _checkpoint(_layout(128, None, tensor=8))
    decision = _decide(_job(16), checkpoint)
    assert (decision.action, decision.why) == ("wait", "layout_refused")
    assert "does not say how many nodes wrote it" in elastic_reason(decision, checkpoint)


def test_given_a_reshardable_checkpoint_with_no_layout_when_a_node_is_lost_then_it_waits_and_says_no_degree_follows() -> None:
    checkpoint = _checkpoint(None)
    decision = _decide(_job(16), checkpoint)
    assert (decision.action, decision.why) == ("wait", "layout_refused")
    assert "records no layout" in elastic_reason(decision, checkpoint)


def test_given_a_layout_claiming_more_ranks_on_a_node_than_any_node_holds_then_it_waits() -> None:
    # Given a layout claiming 10,000,000 ranks on one node (today: a copy told dp 150,000,000, which no resubmission carries)
    checkpoint = _checkpoint(_layout(10_000_000, 1, tensor=1))
    decision = _decide(_job(16), checkpoint)
    assert (decision.action, decision.why) == ("wait", "layout_refused")
    assert f"no node holds more than {MAX_RANKS_PER_NODE}" in elastic_reason(decision, checkpoint)


def test_given_a_layout_that_contradicts_itself_in_the_state_then_it_waits_and_names_the_contradiction() -> None:
    # (the manifest model refuses it; one built past the model stands for a state read back wrong)
    layout = CheckpointLayout.model_construct(world_size=128, nodes=16, tensor=8, pipeline=1, data=12, reshardable=True)
    checkpoint = _checkpoint(None).model_copy(update={"layout": layout})
    decision = _decide(_job(16), checkpoint)
    assert (decision.action, decision.why) == ("wait", "layout_refused")
    assert "inconsistent: tensor 8 x pipeline 1 x data 12 is not the world size 128" in elastic_reason(decision, checkpoint)


# --- growing back: the degree is the grow-back checkpoint's own ------------------------------------------
def _shrunk(checkpoint: CheckpointRef) -> ResumePlan:
    return ResumePlan(job=JobRef(job_id="1001", name="llama"), checkpoint=checkpoint, elastic=_decide(_job(16), checkpoint))


def _grow_from(newest: CheckpointRef) -> GrowBackState:
    plan = _shrunk(_checkpoint(_layout(128, 16, tensor=8)))
    reply = CommandReply[ResubmitResult](
        requested_at=T0, completed_at=T0, result=ResubmitResult(old_job_id="1001", new_job_id="1002", nodes=15)
    )
    return advance(
        None,
        replies=[reply.model_dump(mode="json")],
        plans=[plan],
        resume=None,
        newest_of=lambda job: Reading(newest, T0 + timedelta(seconds=60)),
        grace_seconds=0,
        now=T0 + timedelta(seconds=120),
    )


def test_given_the_shrunk_copy_wrote_another_layout_when_it_grows_back_then_the_full_copy_is_told_that_layouts_degree() -> None:
    # Given the 15-node copy's checkpoint written with tensor 4 (120 ranks: dp 30)
    state = _grow_from(_checkpoint(_layout(120, 15, tensor=4), step=3100))
    # Then the 16-node copy loads it at 128 / 4 = 32, not the 16 of the layout it shrank from
    assert state.action == "grow" and state.next is not None and state.next.elastic is not None
    assert (state.next.elastic.nodes, state.next.elastic.data_parallel) == (16, 32)


def test_given_the_shrunk_copys_checkpoint_has_no_layout_when_it_would_grow_back_then_it_stays_shrunk_and_says_why() -> None:
    state = _grow_from(_checkpoint(None, step=3100))
    (job,) = state.jobs
    assert (state.action, job.status) == ("done", "stays") and "records no layout" in job.reason


# --- properties over layouts ---------------------------------------------------------------------------
def _consistent(layout: CheckpointLayout) -> bool:
    return (
        layout.nodes is not None
        and layout.tensor * layout.pipeline * layout.data == layout.world_size
        and layout.world_size % layout.nodes == 0
        and layout.world_size // layout.nodes <= MAX_RANKS_PER_NODE
    )


LAYOUTS = st.builds(
    CheckpointLayout.model_construct,  # past the model: inconsistent layouts too
    world_size=st.integers(1, 2048) | st.sampled_from([10_000_000]),
    nodes=st.none() | st.integers(1, 64),
    tensor=st.sampled_from([1, 2, 3, 4, 8, 16]),
    pipeline=st.sampled_from([1, 2, 4]),
    data=st.integers(1, 512),
    reshardable=st.just(True),
)
# Layouts as a job writes them: whole replicas on whole nodes, any node count and ranks per node.
WRITTEN = st.builds(
    lambda nodes, per_node, tensor, pipeline: CheckpointLayout.model_construct(
        world_size=nodes * per_node,
        nodes=nodes,
        tensor=tensor,
        pipeline=pipeline,
        data=nodes * per_node // (tensor * pipeline),
        reshardable=True,
    ),
    nodes=st.integers(1, 64),
    per_node=st.sampled_from([1, 2, 4, 8, 16, 32]),
    tensor=st.sampled_from([1, 2, 4, 8]),
    pipeline=st.sampled_from([1, 2, 4]),
).filter(lambda layout: layout.world_size % (layout.tensor * layout.pipeline) == 0)


@settings(max_examples=400, deadline=None)
@given(layout=LAYOUTS | WRITTEN, full=st.integers(1, 64), lost=st.integers(1, 64), minimum=st.integers(1, 64), multiple=st.integers(1, 8))
def test_given_any_layout_when_decided_then_a_shrink_only_on_a_consistent_one_with_the_degree_it_gives_else_a_wait_that_says_why(
    layout: CheckpointLayout, full: int, lost: int, minimum: int, multiple: int
) -> None:
    checkpoint = _checkpoint(None).model_copy(update={"layout": layout})
    decision = _decide(_job(full, minimum=min(minimum, full), multiple=multiple), checkpoint, lost=lost)
    reason = elastic_reason(decision, checkpoint)  # (never raises; always words)
    assert reason
    if decision.action == "shrink":
        assert _consistent(layout) and layout.nodes is not None
        per_node, replica = layout.world_size // layout.nodes, layout.tensor * layout.pipeline
        # The copy's ranks are whole replicas, and the degree it is told is theirs
        assert decision.data_parallel is not None and decision.data_parallel * replica == decision.nodes * per_node
        assert (full * per_node) % replica == 0 and 1 <= decision.data_parallel <= MAX_RESUME_DATA_PARALLEL
        assert decision.full_data_parallel is not None and decision.full_data_parallel * replica == full * per_node
        ResubmitJob(job_id="1001", checkpoint=checkpoint, nodes=decision.nodes, data_parallel=decision.data_parallel)
    elif not _consistent(layout) or (full * (layout.world_size // (layout.nodes or 1))) % (layout.tensor * layout.pipeline):
        assert decision.why == "layout_refused" and "layout" in reason


@settings(max_examples=200, deadline=None)
@given(layout=WRITTEN, full=st.integers(2, 64))
def test_given_a_layout_as_a_job_writes_it_when_it_fits_the_job_then_the_degree_scales_its_data_degree_by_the_node_count(
    layout: CheckpointLayout, full: int
) -> None:
    # The layout's own words: data-parallel degree ``data`` on ``nodes`` nodes; at n nodes, data x n / nodes.
    checkpoint = _checkpoint(None).model_copy(update={"layout": layout})
    decision = _decide(_job(full), checkpoint)
    assert layout.nodes is not None
    if decision.action == "shrink":
        assert decision.data_parallel is not None and decision.data_parallel * layout.nodes == layout.data * decision.nodes


def _container_env(command: ResubmitJob) -> dict[str, str]:
    job = {
        "metadata": {"name": "llama", "namespace": "kubeflow", "uid": "u-1"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 16, "template": {"spec": {"containers": [{"name": "t"}]}}}}},
    }
    new = recreated_job(
        job,
        "PyTorchJob",
        name="llama-r1",
        resume_from=command.checkpoint.uri,
        step=command.checkpoint.step,
        incident="hpr-a",
        token="t" * 32,
        nodes=command.nodes,
        data_parallel=command.data_parallel,
    )
    (container,) = new["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"]}
