"""Shrink-and-continue: which sizes a job may run at, shrink or wait, and when it grows back
(domain/elastic), as Find Newest Checkpoint and Check Grow-Back apply them."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.domain.elastic.decide import Estimate, decide_elastic, elastic_reason, shrink_wins
from hyperpod_recovery.domain.elastic.estimates import MIN_MEASURED_REPLACEMENTS, expected_wait, grow_back_cost, restart_seconds
from hyperpod_recovery.domain.elastic.grow_back import Reading, advance, grow_back_wait_seconds
from hyperpod_recovery.domain.elastic.sizes import Reshard, largest_size, reshard_of
from hyperpod_recovery.models.commands import CheckpointRef, CommandReply, CopyMark, JobRef, JobSpec, ResubmitResult
from hyperpod_recovery.models.elastic import ElasticOptInUnreadable, ElasticPolicy, elastic_choice_in_comment
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA_V1_1, CheckpointLayout
from hyperpod_recovery.models.node_recovery import (
    MAX_ELASTIC_DECISIONS,
    MAX_GROW_BACK_CHECKS,
    MAX_SHRUNK_JOBS_PER_INCIDENT,
    CheckShrunkJobsInput,
    FindNewestCheckpointInput,
    GrowBackState,
    ResumePlan,
)
from hyperpod_recovery.models.records import MeasuredRestart, RecoveryLogEntry
from hyperpod_recovery.models.requests import RecoveryRequest, Trigger
from hyperpod_recovery.steps.check_shrunk_jobs import check_shrunk_jobs
from hyperpod_recovery.steps.find_newest_checkpoint import ElasticSettings, find_newest_checkpoint, lineage_nodes
from tests.fakes import T0, FakeCheckpointStore, FakeLedger

NODE = "i-0123456789abcdef0"
TEN_MIN = Estimate(600, "measured")
FIVE_MIN = Estimate(300, "parameter")


def _layout(nodes: int, tensor: int, pipeline: int, gpus: int = 8, reshardable: bool = True) -> CheckpointLayout:
    world = nodes * gpus
    data = world // (tensor * pipeline)
    return CheckpointLayout(world_size=world, nodes=nodes, tensor=tensor, pipeline=pipeline, data=data, reshardable=reshardable)


# A reshardable checkpoint written by the 16-node job (8 ranks a node, tensor 8): dp 16 (manifest v1.1).
DCP = CheckpointRef(uri="s3://ckpt/llama/step-000003000/", step=3000, framework="pytorch-dcp", layout=_layout(16, 8, 1))
V1 = CheckpointRef(uri="s3://ckpt/llama/step-000003000/", step=3000)


def _elastic_job(nodes: int = 16, *, minimum: int = 12, multiple: int = 1, spare: int | None = 0, partition: str = "gpu") -> JobSpec:
    return JobSpec(
        job_id="1001",
        name="llama",
        num_nodes=nodes,
        state="RUNNING",
        partition=partition,
        checkpoint_uri="s3://ckpt/llama",
        elastic=ElasticPolicy(min_nodes=minimum, multiple=multiple, source="comment"),
        spare_nodes=spare,
    )


# --- the opt-in ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("comment", "minimum", "multiple"),
    [
        ("resume=elastic,min=12", 12, 1),
        ("checkpoint=s3://b/p resume=elastic,min=12,multiple=4", 12, 4),
        ("resume=elastic,multiple=4,min=8,max=16", 8, 4),
    ],
)
def test_given_a_comment_opting_in_when_read_then_its_minimum_and_multiple(comment: str, minimum: int, multiple: int) -> None:
    policy = elastic_choice_in_comment(comment)
    assert policy is not None and (policy.min_nodes, policy.multiple, policy.source) == (minimum, multiple, "comment")


@pytest.mark.parametrize(
    "comment",
    ["resume=elastic", "resume=elastic,min=x", "resume=elastic,min=4,min=5", "resume=elastic,min=9,max=4", "resume=elastic,size=3"],
)
def test_given_an_opt_in_that_cannot_be_read_when_read_then_it_says_why(comment: str) -> None:
    with pytest.raises(ElasticOptInUnreadable):
        elastic_choice_in_comment(comment)


@given(st.text(max_size=80))
def test_given_any_comment_when_read_then_a_policy_none_or_the_documented_error(comment: str) -> None:
    try:
        policy = elastic_choice_in_comment(comment)
    except ElasticOptInUnreadable:
        return
    assert policy is None or policy.min_nodes >= 1


@pytest.mark.parametrize(
    ("comment", "said"),
    [("resume=elastic,min=0", "min: Input should be greater than or equal to 1"), ("resume=elastic,min=9,max=4", "min 9 is above max 4")],
)
def test_given_an_out_of_range_opt_in_when_read_then_the_reason_names_the_field_not_a_url(comment: str, said: str) -> None:
    with pytest.raises(ElasticOptInUnreadable) as caught:
        elastic_choice_in_comment(comment)
    assert said in str(caught.value) and "http" not in str(caught.value)


def test_given_resume_immediate_when_read_then_no_elastic_opt_in() -> None:
    assert elastic_choice_in_comment("resume=immediate resume=elasticity") is None


# --- sizes -------------------------------------------------------------------------------------
@given(
    full=st.integers(1, 64),
    available=st.integers(0, 64),
    minimum=st.integers(1, 64),
    multiple=st.integers(1, 8),
    ranks_per_node=st.sampled_from([None, 1, 4, 8]),
    replica_ranks=st.sampled_from([1, 2, 8, 16, 32]),
)
def test_given_any_job_when_sized_then_the_largest_size_its_opt_in_and_checkpoint_allow(
    full: int, available: int, minimum: int, multiple: int, ranks_per_node: int | None, replica_ranks: int
) -> None:
    policy = ElasticPolicy(min_nodes=minimum, multiple=multiple, source="comment")
    reshard = Reshard(True, ranks_per_node=ranks_per_node, replica_ranks=replica_ranks if ranks_per_node else None)

    def allowed(nodes: int) -> bool:
        return minimum <= nodes < full and nodes <= available and (full - nodes) % multiple == 0 and reshard.loads_at(nodes)

    size = largest_size(full, available, policy, reshard)
    candidates = [n for n in range(1, full) if allowed(n)]
    assert size == (max(candidates) if candidates else None)


def test_given_a_layout_of_two_nodes_per_replica_when_one_node_is_lost_then_it_runs_on_14_with_dp_7() -> None:
    layout = _layout(16, tensor=8, pipeline=2)  # tp 8 x pp 2 = 16 ranks = 2 nodes per replica, dp 8
    checkpoint = DCP.model_copy(update={"layout": layout})
    decision = decide_elastic(_elastic_job(), checkpoint, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None
    assert (decision.action, decision.nodes, decision.data_parallel, decision.full_data_parallel) == ("shrink", 14, 7, 8)


def test_given_a_checkpoint_written_while_shrunk_when_its_layout_is_read_then_ranks_per_node_are_what_count() -> None:
    layout = _layout(12, tensor=8, pipeline=1)  # written on 12 nodes: dp 12
    assert reshard_of(DCP.model_copy(update={"layout": layout}), 16).data_parallel(16) == 16


# --- shrink or wait ----------------------------------------------------------------------------
def test_given_a_spare_that_fits_when_decided_then_full_size_at_once() -> None:
    decision = decide_elastic(_elastic_job(spare=2), DCP, lost=1, spare=2, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None and (decision.action, decision.nodes) == ("full_size", 16)


def test_given_no_spare_and_a_long_replacement_when_decided_then_it_shrinks_and_says_the_figures() -> None:
    decision = decide_elastic(_elastic_job(), DCP, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None and (decision.action, decision.nodes) == ("shrink", 15)
    assert elastic_reason(decision, DCP) == (
        "runs on 15 of 16 node(s): replacement expected in 10 min, growing back costs ~5 min (the stack parameter: nothing measured yet)"
    )


def test_given_multiple_4_when_one_node_is_lost_then_it_runs_on_12() -> None:
    decision = decide_elastic(_elastic_job(multiple=4), DCP, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None and (decision.action, decision.nodes) == ("shrink", 12)


def test_given_a_quick_replacement_when_decided_then_it_waits_and_says_why() -> None:
    decision = decide_elastic(_elastic_job(multiple=4), DCP, lost=1, spare=0, wait=Estimate(360, "measured"), grow_back=FIVE_MIN)
    assert decision is not None and decision.action == "wait"  # 6 min x 12/16 = 4.5 min < 5 min
    assert "gain less than growing back costs" in elastic_reason(decision, DCP)


def test_given_a_checkpoint_that_does_not_say_it_reshards_when_decided_then_it_waits_and_says_why() -> None:
    decision = decide_elastic(_elastic_job(), V1, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None and decision.action == "wait"
    assert "does not say it reshards" in elastic_reason(decision, V1)


def test_given_a_layout_saying_not_reshardable_when_decided_then_it_waits() -> None:
    checkpoint = DCP.model_copy(update={"layout": _layout(16, 8, 1, reshardable=False)})
    decision = decide_elastic(_elastic_job(), checkpoint, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None and decision.action == "wait" and "says it does not reshard" in elastic_reason(decision, checkpoint)


def test_given_the_job_at_its_minimum_when_a_node_is_lost_then_it_waits() -> None:
    decision = decide_elastic(_elastic_job(12, minimum=12), DCP, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None and decision.action == "wait" and "may not run on fewer than 12" in elastic_reason(decision, DCP)


def test_given_an_unreadable_opt_in_when_decided_then_it_waits_with_the_problem() -> None:
    problem = "its comment's resume=elastic cannot be read: min=N is required"
    job = _elastic_job().model_copy(update={"elastic": None, "elastic_problem": problem})
    decision = decide_elastic(job, DCP, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN)
    assert decision is not None and decision.action == "wait"
    assert "min=N is required" in elastic_reason(decision, DCP, problem=problem)


def test_given_a_rigid_job_when_decided_then_nothing_is_decided() -> None:
    job = _elastic_job().model_copy(update={"elastic": None})
    assert decide_elastic(job, DCP, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN) is None


@given(
    full=st.integers(1, 40),
    lost=st.integers(1, 40),
    spare=st.one_of(st.none(), st.integers(0, 40)),
    minimum=st.integers(1, 40),
    multiple=st.integers(1, 5),
    wait=st.integers(0, 7200),
    grow=st.integers(0, 3600),
)
def test_given_any_figures_when_decided_then_never_below_the_minimum_above_what_is_available_or_against_the_rule(
    full: int, lost: int, spare: int | None, minimum: int, multiple: int, wait: int, grow: int
) -> None:
    job = _elastic_job(full, minimum=min(minimum, full), multiple=multiple, spare=spare)
    decision = decide_elastic(job, DCP, lost=lost, spare=spare, wait=Estimate(wait, "measured"), grow_back=Estimate(grow, "parameter"))
    assert decision is not None
    kept = full - min(lost, full)
    if decision.action == "shrink":
        assert job.elastic is not None
        assert job.elastic.min_nodes <= decision.nodes < full
        assert decision.nodes <= kept + (spare or 0)
        assert shrink_wins(full, decision.nodes, Estimate(wait, "measured"), Estimate(grow, "parameter"))
    elif decision.action == "full_size":
        assert spare is not None and spare >= min(lost, full)
    else:
        assert decision.nodes == full


# --- the expected wait -------------------------------------------------------------------------
def test_given_fewer_measured_replacements_than_the_minimum_when_estimated_then_the_parameter() -> None:
    log = [RecoveryLogEntry(incident=f"i{n}", at=T0, hostnames=[], outcome="recovered", replaced_seconds=100, instance_groups=["workers"])
           for n in range(MIN_MEASURED_REPLACEMENTS - 1)]  # fmt: skip
    assert expected_wait(log, ["workers"], parameter_seconds=600) == Estimate(600, "parameter")


def test_given_measured_replacements_of_the_group_when_estimated_then_their_median() -> None:
    def entry(n: int, seconds: int, group: str) -> RecoveryLogEntry:
        return RecoveryLogEntry(
            incident=f"i{n}", at=T0, hostnames=[], outcome="recovered", replaced_seconds=seconds, instance_groups=[group]
        )

    log = [entry(1, 700, "workers"), entry(2, 900, "workers"), entry(3, 1100, "workers"), entry(4, 60, "other")]
    assert expected_wait(log, ["workers"], parameter_seconds=600) == Estimate(900, "measured")


# --- Find Newest Checkpoint -------------------------------------------------------------------
def _store(prefix: str = "llama", steps: tuple[int, ...] = (3000,), layout: dict | None = None) -> FakeCheckpointStore:
    store = FakeCheckpointStore()
    for step in steps:
        folder = f"{prefix}/step-{step:09d}"
        store.put_object("ckpt", f"{folder}/a", b"x")
        manifest = {"schema": MANIFEST_SCHEMA_V1_1, "job": "llama", "step": step, "created_at": "2026-03-14T09:00:00Z"}
        manifest["framework"] = "pytorch-dcp"
        manifest["layout"] = layout if layout is not None else _layout(16, 8, 1).model_dump()
        manifest["shards"] = [{"key": "a", "size": 1}]
        store.put_object("ckpt", f"{folder}/manifest.json", json.dumps(manifest).encode())
    return store


SETTINGS = ElasticSettings(cluster="llm-train", expected_replacement_seconds=600, grow_back_seconds=300)


def test_given_two_elastic_jobs_and_one_spare_when_planned_then_only_one_is_counted_on_it() -> None:
    first = _elastic_job(spare=1)
    second = first.model_copy(update={"job_id": "1002", "name": "llama"})
    step = FindNewestCheckpointInput(execution_name="hpr-x", jobs=[first, second], resume_now_allowed=True)
    plan = find_newest_checkpoint(step, reader=_store(), ledger=FakeLedger(), elastic=SETTINGS, now=T0)
    decisions = [(p.job.job_id, p.elastic.action, p.elastic.nodes) for p in plan.resume_now if p.elastic]
    assert decisions == [("1001", "full_size", 16), ("1002", "shrink", 15)]


def test_given_an_elastic_job_in_job_recovery_when_planned_then_no_shrink_where_the_workflow_cannot_resubmit_early() -> None:
    step = FindNewestCheckpointInput(execution_name="hpj-1001-1", jobs=[_elastic_job()], resume_now_allowed=False)
    plan = find_newest_checkpoint(step, reader=_store(), ledger=FakeLedger(), elastic=SETTINGS, now=T0)
    assert [p.elastic for p in plan.resumable] == [None]


def test_given_an_elastic_job_that_waits_when_planned_then_it_is_resubmitted_after_the_rejoin_with_why() -> None:
    step = FindNewestCheckpointInput(execution_name="hpr-x", jobs=[_elastic_job(16, minimum=16)], resume_now_allowed=True)
    plan = find_newest_checkpoint(step, reader=_store(), ledger=FakeLedger(), elastic=SETTINGS, now=T0)
    assert not plan.resume_now and plan.resumable[0].elastic is not None and plan.resumable[0].elastic.action == "wait"


# --- growing back ------------------------------------------------------------------------------
SHRINK_PLAN = ResumePlan(
    job=JobRef(job_id="1001", name="llama"),
    checkpoint=DCP,
    elastic=decide_elastic(_elastic_job(), DCP, lost=1, spare=0, wait=TEN_MIN, grow_back=FIVE_MIN),
)


def _ckpt(step: int) -> CheckpointRef:
    """A checkpoint the 15-node shrunk copy wrote (its layout says so)."""
    return CheckpointRef(uri=f"s3://ckpt/llama/step-{step:09d}/", step=step, framework="pytorch-dcp", layout=_layout(15, 8, 1))


def _reply(nodes: int | None = 15, old: str = "1001", new: str = "1002") -> dict:
    reply = CommandReply[ResubmitResult](
        requested_at=T0, completed_at=T0, result=ResubmitResult(old_job_id=old, new_job_id=new, nodes=nodes)
    )
    return reply.model_dump(mode="json")


def _advance(
    previous: GrowBackState | None,
    newest: CheckpointRef | str | None,
    *,
    at: int = 0,
    grace: int = 1800,
    committed: int | None = None,
    **kw,
) -> GrowBackState:
    """One pass; ``committed``: the newest checkpoint's manifest time, in seconds after T0."""
    reading = (
        Reading(newest, T0 + timedelta(seconds=committed) if committed is not None else None)
        if isinstance(newest, CheckpointRef)
        else newest
    )
    return advance(
        previous,
        replies=kw.get("replies", [_reply()]),
        plans=[SHRINK_PLAN],
        resume=kw.get("resume"),
        newest_of=lambda job: reading,
        grace_seconds=grace,
        now=T0 + timedelta(seconds=at),
    )


def test_given_a_shrunk_copy_and_no_new_checkpoint_when_checked_then_it_waits_and_remembers_where_it_started() -> None:
    state = _advance(None, _ckpt(3100))
    (job,) = state.jobs
    assert (state.action, job.status, job.copy_id, job.baseline_step, job.first_at) == ("wait", "waiting", "1002", 3100, T0)
    assert state.wait_seconds == grow_back_wait_seconds(1800) == 60


def test_given_the_next_checkpoint_when_checked_then_it_grows_back_to_full_size_from_it() -> None:
    state = _advance(_advance(None, _ckpt(3100)), _ckpt(3200), at=60)
    assert state.action == "grow" and state.next is not None
    assert (state.next.job.job_id, state.next.checkpoint.step, state.next.require_free_nodes) == ("1002", 3200, 16)
    assert state.next.elastic is not None and state.next.elastic.nodes == 16


def test_given_the_grace_passed_when_checked_then_it_grows_back_from_the_newest() -> None:
    state = _advance(_advance(None, _ckpt(3100), grace=120), _ckpt(3100), at=120, grace=120)
    assert state.action == "grow" and state.next is not None and state.next.checkpoint.step == 3100


def test_given_the_full_size_copy_answered_when_checked_again_then_the_job_is_grown_and_nothing_is_left() -> None:
    growing = _advance(_advance(None, _ckpt(3100)), _ckpt(3200), at=60)
    answer = CommandReply[ResubmitResult](
        requested_at=T0, completed_at=T0, result=ResubmitResult(old_job_id="1002", new_job_id="1003", nodes=16, cancelled_old=True)
    )
    state = _advance(growing.model_copy(update={"answer": answer}), _ckpt(3200), at=70)
    assert state.action == "done" and [(j.status, j.reply.result.new_job_id if j.reply else None) for j in state.jobs] == [
        ("grown", "1003")
    ]


def test_given_the_agent_declined_when_checked_again_then_it_stays_shrunk_and_says_why() -> None:
    growing = _advance(_advance(None, _ckpt(3100)), _ckpt(3200), at=60)
    declined = "only 15 node(s) could take it at once, 16 needed: job 1002 keeps running on 15 node(s)"
    answer = CommandReply[ResubmitResult](requested_at=T0, completed_at=T0, result=ResubmitResult(old_job_id="1002", declined=declined))
    state = _advance(growing.model_copy(update={"answer": answer}), _ckpt(3200), at=70)
    assert state.action == "done" and [(j.status, j.reason) for j in state.jobs] == [("stays", declined)]


def test_given_a_copy_the_agent_submitted_at_full_size_when_checked_then_nothing_to_grow_back() -> None:
    state = _advance(None, _ckpt(3100), replies=[_reply(nodes=None)])
    assert (state.action, state.jobs) == ("done", [])


def test_given_a_replacement_that_failed_the_gate_when_checked_then_it_stays_shrunk_and_says_why() -> None:
    resume = {"requested_at": T0.isoformat(), "completed_at": T0.isoformat(), "result": {"unhealthy": [{"node": "ip-10-1-0-7"}]}}
    state = _advance(None, _ckpt(3100), resume=resume)
    assert state.action == "done" and "failed the health gate (ip-10-1-0-7)" in state.jobs[0].reason


def test_given_only_checkpoints_older_than_the_shrink_when_checked_then_never_grown_back_from_an_older_step() -> None:
    state = _advance(None, _ckpt(2000), grace=0)
    assert state.action == "done" and "never grown back from an older step" in state.jobs[0].reason


@given(steps=st.lists(st.integers(2900, 3600), min_size=1, max_size=60), grace=st.integers(0, 7200))
def test_given_any_checkpoints_seen_when_checked_over_and_over_then_bounded_and_never_backwards(steps: list[int], grace: int) -> None:
    state: GrowBackState | None = None
    for index, step in enumerate(steps):
        state = _advance(state, _ckpt(step), at=index * grow_back_wait_seconds(grace), grace=grace)
        if state.action != "wait":
            break
    assert state is not None and state.checks <= MAX_GROW_BACK_CHECKS
    if state.action == "grow":
        assert state.next is not None and state.next.checkpoint.step >= SHRINK_PLAN.checkpoint.step


# --- the restart, measured ------------------------------------------------------------------------
def test_given_a_copy_that_checkpointed_twice_when_it_grows_back_then_its_restart_is_measured_from_its_commit_times() -> None:
    # Given the shrunk copy submitted at T0 from step 3000, its own checkpoints 3100 (T0+400 s) and 3200 (T0+700 s): 3 s a step
    first = _advance(None, _ckpt(3100), committed=400, at=600)
    # When its next checkpoint is read
    state = _advance(first, _ckpt(3200), committed=700, at=720)
    # Then the restart is what the 400 s to its first checkpoint held beyond its 100 steps: 100 s
    assert state.action == "grow" and state.jobs[0].restart_seconds == 100


def test_given_a_first_reading_still_at_the_step_it_restarted_from_when_it_grows_back_then_nothing_is_measured() -> None:
    state = _advance(_advance(None, _ckpt(3000), committed=-50), _ckpt(3100), committed=400, at=60)
    assert state.action == "grow" and state.jobs[0].restart_seconds is None


def test_given_a_checkpoint_committed_before_the_copy_started_when_measured_then_it_is_not_the_copys_own() -> None:
    # (the failed job committed 3100 after the shrink chose 3000, before it was stopped)
    state = _advance(_advance(None, _ckpt(3100), committed=-5), _ckpt(3200), committed=700, at=60)
    assert state.jobs[0].restart_seconds is None


@given(
    restart=st.integers(0, 3600),
    per_step=st.floats(0.1, 60),
    steps=st.integers(1, 5000),
    more=st.integers(1, 5000),
    late=st.integers(0, 120),
)
def test_given_any_steady_copy_when_its_restart_is_measured_then_it_is_the_restart_within_a_second(
    restart: int, per_step: float, steps: int, more: int, late: int
) -> None:
    from_step = 1000
    first_at = T0 + timedelta(seconds=restart + steps * per_step)
    second_at = first_at + timedelta(seconds=more * per_step)
    measured = restart_seconds(T0, from_step, (from_step + steps, first_at), (from_step + steps + more, second_at))
    assert measured is not None and abs(measured - restart) <= 1
    # and never from figures out of order
    assert restart_seconds(T0, from_step, (from_step + steps + more, second_at), (from_step + steps, first_at)) is None
    assert (
        restart_seconds(first_at + timedelta(seconds=late), from_step, (from_step + steps, first_at), (from_step + steps + more, second_at))
        is None
    )


def _logged(*restarts: tuple[str, int]) -> list[RecoveryLogEntry]:
    return [
        RecoveryLogEntry(
            incident=f"hpr-{n}",
            at=T0,
            hostnames=["n"],
            outcome="recovered",
            restarts=[MeasuredRestart(checkpoint_uri=f"s3://ckpt/{job}", seconds=secs)],
        )
        for n, (job, secs) in enumerate(restarts)
    ]


def test_given_the_jobs_own_measured_restarts_when_its_grow_back_cost_is_read_then_their_median_and_not_another_jobs() -> None:
    log = _logged(("llama", 200), ("other", 9000), ("llama", 240), ("llama", 100))
    assert grow_back_cost(log, "s3://ckpt/llama/", parameter_seconds=300) == Estimate(200, "measured")
    assert grow_back_cost(log, "s3://ckpt/mistral", parameter_seconds=300) == Estimate(300, "parameter")


def test_given_more_restarts_than_are_used_when_read_then_only_the_newest_count() -> None:
    log = _logged(*[("llama", 5000)] * 3, *[("llama", 60)] * 5)
    assert grow_back_cost(log, "s3://ckpt/llama", parameter_seconds=300).seconds == 60


def test_given_a_measured_restart_in_the_log_when_an_elastic_job_is_planned_then_the_decision_counts_the_jobs_own_figure() -> None:
    ledger = FakeLedger()
    ledger.log_recovery("llm-train", _logged(("llama", 120))[0], 86400)
    step = FindNewestCheckpointInput(execution_name="hpr-x", jobs=[_elastic_job(spare=0)], resume_now_allowed=True)
    plan = find_newest_checkpoint(step, reader=_store(), ledger=ledger, elastic=SETTINGS, now=T0)
    (decision,) = [p.elastic for p in plan.resume_now if p.elastic]
    assert (decision.grow_back_seconds, decision.grow_back_source) == (120, "measured")
    assert elastic_reason(decision, DCP).endswith("growing back costs ~2 min")


def test_given_a_waiting_job_when_the_step_reads_its_prefix_then_it_uses_the_incidents_record_of_the_job() -> None:
    ledger = FakeLedger()
    ledger.save_jobs("hpr-x", [_elastic_job()], T0)
    trigger = Trigger(source="hyperpod_node_health", node_ids=[NODE], reason="fault", detected_at=T0)
    request = RecoveryRequest(cluster="llm-train", node_ids=[NODE], detected_at=T0, incident_id="hpr-x", received_at=T0, triggers=[trigger])
    step = CheckShrunkJobsInput(execution_name="hpr-x", request=request, replies=[_reply()], plans=[SHRINK_PLAN], previous={"checks": 0})
    state = check_shrunk_jobs(step, reader=_store(steps=(3000, 3100)), ledger=ledger, grace_seconds=1800, now=T0)
    assert (state.action, state.jobs[0].baseline_step) == ("wait", 3100)


def test_given_more_elastic_jobs_than_one_incident_grows_back_when_planned_then_the_rest_wait_and_say_why() -> None:
    jobs = [_elastic_job(spare=0).model_copy(update={"job_id": str(1001 + n)}) for n in range(MAX_SHRUNK_JOBS_PER_INCIDENT + 1)]
    step = FindNewestCheckpointInput(execution_name="hpr-x", jobs=jobs, resume_now_allowed=True)
    plan = find_newest_checkpoint(step, reader=_store(), ledger=FakeLedger(), elastic=SETTINGS, now=T0)
    assert [p.elastic.action for p in plan.resume_now if p.elastic] == ["shrink"] * MAX_SHRUNK_JOBS_PER_INCIDENT
    (last,) = plan.resumable
    assert last.elastic is not None and last.elastic.why == "too_many_shrunk"
    assert "other job(s) of this incident run shrunk already" in elastic_reason(last.elastic, DCP)


def test_given_more_elastic_jobs_than_an_incident_carries_decisions_for_when_planned_then_the_rest_are_rigid() -> None:
    jobs = [_elastic_job(spare=100).model_copy(update={"job_id": str(1001 + n)}) for n in range(MAX_ELASTIC_DECISIONS + 2)]
    step = FindNewestCheckpointInput(execution_name="hpr-x", jobs=jobs, resume_now_allowed=True)
    plan = find_newest_checkpoint(step, reader=_store(), ledger=FakeLedger(), elastic=SETTINGS, now=T0)
    assert sum(p.elastic is not None for p in plan.planned) == MAX_ELASTIC_DECISIONS


# --- a copy's lineage ---------------------------------------------------------------------------
def _copy(job_id: str, nodes: int, of: str | None = None, by: str | None = None) -> JobSpec:
    mark = CopyMark(job_id=of, incident=by) if of and by else None
    return _elastic_job(nodes).model_copy(update={"job_id": job_id, "copy_of": mark})


def _ledger_with(*made: tuple[str, JobSpec]) -> FakeLedger:
    """Each (incident, job): the incident recorded the job and claimed its resubmission."""
    ledger = FakeLedger()
    for incident, job in made:
        ledger.save_jobs(incident, [job], T0)
        ledger.claim_resubmission("llm-train", job.job_id, incident, T0, timedelta(hours=1))
    return ledger


def test_given_a_copy_the_ledger_proves_when_its_lineage_is_read_then_the_size_its_lineage_ran_at() -> None:
    ledger = _ledger_with(("hpr-a", _copy("1001", 16)), ("hpr-b", _copy("1002", 15, of="1001", by="hpr-a")))
    assert lineage_nodes(ledger, "llm-train", _copy("1003", 14, of="1002", by="hpr-b")) == 16


@pytest.mark.parametrize(
    "mark",
    [("1001", "hpr-someone"), ("9999", "hpr-a"), ("1001", "hpr-a")],
    ids=["an incident that did not claim it", "a job nobody claimed", "a claim completed with another copy"],
)
def test_given_a_mark_the_ledger_does_not_confirm_when_its_lineage_is_read_then_nothing_is_proven(mark: tuple[str, str]) -> None:
    # The mark is the start of the job's comment: its owner may have written it
    ledger = _ledger_with(("hpr-a", _copy("1001", 64)))
    ledger.complete_resubmission("llm-train", "1001", "hpr-a", "2001")  # (hpr-a's copy of 1001 is job 2001)
    assert lineage_nodes(ledger, "llm-train", _copy("1002", 4, of=mark[0], by=mark[1])) is None


def test_given_a_shrunk_copy_with_a_proven_lineage_when_a_node_of_it_fails_then_it_grows_back_to_its_lineage() -> None:
    ledger = _ledger_with(("hpr-a", _copy("1001", 16)))
    copy = _copy("1002", 15, of="1001", by="hpr-a")
    step = FindNewestCheckpointInput(execution_name="hpr-b", jobs=[copy], resume_now_allowed=True)
    plan = find_newest_checkpoint(step, reader=_store(), ledger=ledger, elastic=SETTINGS, now=T0)
    (shrunk,) = plan.resume_now
    assert shrunk.elastic is not None and (shrunk.elastic.nodes, shrunk.elastic.full_nodes, shrunk.elastic.grow_to) == (14, 15, 16)
    assert "(its lineage's 16 when it grows back)" in elastic_reason(shrunk.elastic, DCP)


# --- how a grow-back ends -----------------------------------------------------------------------
def _growing() -> GrowBackState:
    return _advance(_advance(None, _ckpt(3100)), _ckpt(3200), at=60)


def test_given_a_declined_grow_back_when_checked_again_then_its_claim_on_the_copy_goes_back_at_once() -> None:
    # Given the grow-back claimed the shrunk copy, and the agent declined (its nodes were taken)
    ledger = FakeLedger()
    ledger.save_jobs("hpr-x", [_elastic_job()], T0)
    ledger.claim_resubmission("llm-train", "1002", "hpr-x", T0, timedelta(hours=1))
    declined = ResubmitResult(old_job_id="1002", declined="only 15 node(s) could take it at once, 16 needed")
    answer = CommandReply[ResubmitResult](requested_at=T0, completed_at=T0, result=declined)
    trigger = Trigger(source="hyperpod_node_health", node_ids=[NODE], reason="fault", detected_at=T0)
    request = RecoveryRequest(cluster="llm-train", node_ids=[NODE], detected_at=T0, incident_id="hpr-x", received_at=T0, triggers=[trigger])
    previous = _growing().model_copy(update={"answer": answer}).model_dump(mode="json")
    step = CheckShrunkJobsInput(execution_name="hpr-x", request=request, replies=[_reply()], plans=[SHRINK_PLAN], previous=previous)
    # When the next check folds the answer in
    state = check_shrunk_jobs(step, reader=_store(steps=(3000, 3200)), ledger=ledger, grace_seconds=1800, now=T0)
    # Then the job stays shrunk, and a fault on the copy meanwhile finds it unclaimed
    assert [j.status for j in state.jobs] == ["stays"] and ledger.resubmission_claim("llm-train", "1002") is None


def test_given_a_copy_that_ended_without_the_grow_back_when_told_then_never_said_to_run_on() -> None:
    ended = ResubmitResult(
        old_job_id="1002", declined="job 1002 is COMPLETED, and no grow-back of this incident stopped it", copy_ended=True
    )
    answer = CommandReply[ResubmitResult](requested_at=T0, completed_at=T0, result=ended)
    state = _advance(_growing().model_copy(update={"answer": answer}), _ckpt(3200), at=70)
    assert [j.status for j in state.jobs] == ["ended"]


def test_given_a_grow_back_that_failed_when_told_then_its_copy_is_unknown_never_running_on() -> None:
    from hyperpod_recovery.models.node_recovery import StepError

    failed = _growing().model_copy(update={"failure": StepError(Error="OldJobNotStopped", Cause="job 1002 is still COMPLETING")})
    state = _advance(failed, _ckpt(3200), at=70)
    assert [(j.status, j.failure) for j in state.jobs] == [("unknown", "OldJobNotStopped")]
