"""Check Swap Checkpoint (steps/check_swap_checkpoint.py) one look at a time, on the fakes: the commit
waited for is a newer verified step than the first look's (a torn one never counts), the node is the
reactive path's once it failed or another incident holds it, the cap and the breaker make the swap
wait (bounded), the wait ends at its bound, and the move's request names the job and the repair."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.checkpointing.commit import commit_checkpoint
from hyperpod_recovery.domain.planned_swap.repair import repair_for
from hyperpod_recovery.domain.planned_swap.wait import POLL_SECONDS, Reading, is_next_commit, next_wait_seconds
from hyperpod_recovery.domain.policy.safety import SafetyPolicy
from hyperpod_recovery.models.at_risk import AtRiskVerdict, PlannedSwapRequest
from hyperpod_recovery.models.commands import CommandReply, JobSpec, JobSpecResult
from hyperpod_recovery.models.manifest import step_dir
from hyperpod_recovery.models.planned_swap import CheckSwapCheckpointInput, SwapTarget, SwapWatch, WatchedSwap
from hyperpod_recovery.models.records import BreakerState
from hyperpod_recovery.steps.check_swap_checkpoint import SwapSettings, check_swap_checkpoint
from tests.fakes import CLUSTER, T0, FakeCheckpointStore, FakeCluster, FakeJobNodes, FakeLedger, compute_node

URI = "s3://ckpt/llama"
NODE = compute_node(7)
NAME = "ip-10-1-0-7"
POLICY = SafetyPolicy(
    max_percent=50,
    max_nodes=8,
    breaker_max_recoveries=10,
    breaker_max_failures=5,
    breaker_window_seconds=3600,
    offender_max_recoveries=3,
    offender_window_seconds=86400,
)
SETTINGS = SwapSettings(
    cluster=CLUSTER,
    controller_groups=(),
    login_groups=(),
    expected_replacement_seconds=600,
    grow_back_seconds=300,
    node_timeout_seconds=7200,
)


def _target(signal: str = "row_remap_failure", failure_chance: float = 0.9, job: bool = True) -> SwapTarget:
    verdict = AtRiskVerdict(
        verdict_id="v-1",
        signal=signal,
        source="alertmanager",
        mode="enforce",
        cluster=CLUSTER,
        instance_id=NODE.node_id,
        observed_at=T0,
        horizon_seconds=86400,
        failure_chance=failure_chance,
        failure_chance_from="prior",
        summary="row remap",
    )
    repair, why = repair_for(signal)
    return SwapTarget(
        at=T0,
        request=PlannedSwapRequest(verdict=verdict),
        node_id=NODE.node_id,
        node=NAME,
        instance_group="workers",
        repair=repair,
        repair_why=why,
        job_id="1001" if job else None,
        wait_until=T0 + timedelta(hours=1),
        said="job 1001 runs there",
    )


def _inspection() -> CommandReply[JobSpecResult]:
    job = JobSpec(
        job_id="1001", name="llama", num_nodes=4, nodes=[f"ip-10-1-0-{n}" for n in range(4, 8)], state="RUNNING", checkpoint_uri=URI
    )
    return CommandReply[JobSpecResult](requested_at=T0, completed_at=T0, result=JobSpecResult(job=job))


class World:
    """The fakes one look reads, and the look itself."""

    def __init__(self) -> None:
        self.store = FakeCheckpointStore()
        self.cluster = FakeCluster([compute_node(n) for n in range(1, 10)])
        self.ledger = FakeLedger()
        self.target = _target()
        self.watch: SwapWatch | None = None

    def commit(self, step: int, at: datetime) -> None:
        folder = f"llama/{step_dir(step)}/"
        self.store.put_object("ckpt", f"{folder}__0_0.distcp", b"x" * 10)
        commit_checkpoint(self.store, URI, step, job="llama", now=at)

    def look(self, now: datetime, **fakes: Any) -> SwapWatch:
        nodes = FakeJobNodes.of(now, **{"1001": [f"ip-10-1-0-{n}" for n in range(4, 8)]})
        step = CheckSwapCheckpointInput(
            execution_name="hps-v-1", state=WatchedSwap(swap=self.target, inspection=_inspection(), watch=self.watch)
        )
        self.watch = check_swap_checkpoint(
            step,
            reader=self.store,
            cluster=self.cluster,
            ledger=self.ledger,
            job_nodes=fakes.get("job_nodes", nodes),
            policy=POLICY,
            settings=SETTINGS,
            now=now,
        )
        return self.watch


@pytest.fixture
def world() -> World:
    w = World()
    w.commit(3000, T0 - timedelta(minutes=10))
    return w


def test_the_first_look_waits_for_a_commit_newer_than_the_one_it_sees(world: World) -> None:
    watch = world.look(T0 + timedelta(seconds=1))
    assert not watch.done and watch.baseline_step == 3000 and watch.next_wait_seconds == POLL_SECONDS


def test_the_next_verified_commit_moves_the_job_with_the_nested_recovery_s_request(world: World) -> None:
    world.look(T0 + timedelta(seconds=1))
    world.commit(3100, T0 + timedelta(minutes=10))
    watch = world.look(T0 + timedelta(minutes=10, seconds=3))
    assert watch.done and watch.ending == "move" and watch.committed_step == 3100
    assert watch.interval_seconds == 1200  # measured from the two manifests
    request = watch.node_request
    assert request is not None and request.swapped_job == "1001" and request.node_ids == [NODE.node_id]
    assert [t.source for t in request.triggers] == ["at_risk"] and request.triggers[0].recommends == "replace"
    assert watch.node_execution_name == "hps-v-1-nodes"


def test_a_save_in_progress_is_not_the_commit(world: World) -> None:
    world.look(T0 + timedelta(seconds=1))
    # (step 3100's shards, no manifest: the save has not committed)
    world.store.put_object("ckpt", f"llama/{step_dir(3100)}/__0_0.distcp", b"x" * 10)
    assert not world.look(T0 + timedelta(seconds=6)).done


def test_a_commit_dated_after_the_verdict_at_the_first_look_is_the_commit(world: World) -> None:
    world.commit(3100, T0 + timedelta(seconds=2))
    watch = world.look(T0 + timedelta(seconds=4))
    assert watch.ending == "move" and watch.committed_step == 3100


def test_a_node_another_incident_holds_is_left_to_it(world: World) -> None:
    world.ledger.acquire_locks("hpr-other", CLUSTER, [NODE.node_id], T0, timedelta(hours=1))
    watch = world.look(T0 + timedelta(seconds=1))
    assert watch.ending == "node_failed" and "hpr-other" in watch.reason


def test_a_node_no_longer_running_is_left_to_the_reactive_path(world: World) -> None:
    world.cluster.nodes = [compute_node(n, status="Running" if n != 7 else "ShuttingDown") for n in range(1, 10)]
    assert world.look(T0 + timedelta(seconds=1)).ending == "node_failed"


def test_a_job_that_left_the_node_is_not_moved(world: World) -> None:
    watch = world.look(T0 + timedelta(seconds=1), job_nodes=FakeJobNodes.of(T0, **{"1001": ["ip-10-1-0-4"]}))
    assert watch.ending == "job_gone"


def test_no_commit_by_the_bound_ends_the_wait_and_moves_nothing(world: World) -> None:
    world.look(T0 + timedelta(seconds=1))
    watch = world.look(T0 + timedelta(hours=1))
    assert watch.ending == "no_commit" and watch.node_request is None


def test_an_open_breaker_makes_the_swap_wait_for_the_next_commit(world: World) -> None:
    world.ledger.save_breaker(CLUSTER, BreakerState(state="open", reason="tripped"))
    world.look(T0 + timedelta(seconds=1))
    world.commit(3100, T0 + timedelta(minutes=10))
    watch = world.look(T0 + timedelta(minutes=10, seconds=3))
    assert not watch.done and "breaker" in watch.reason and watch.baseline_step == 3100


def test_a_full_cap_past_the_bound_gives_up_and_says_so(world: World) -> None:
    world.ledger.reserve_capacity(CLUSTER, "hpr-a", [compute_node(n).node_id for n in (1, 2, 3, 4)], 99, T0, timedelta(days=1))
    world.look(T0 + timedelta(seconds=1))
    world.commit(3100, T0 + timedelta(minutes=59))
    watch = world.look(T0 + timedelta(hours=1))
    assert watch.ending == "cap_full" and "cap" in watch.reason


def test_a_low_failure_chance_leaves_the_job_with_both_costs(world: World) -> None:
    world.target = _target(failure_chance=0.01)
    world.look(T0 + timedelta(seconds=1))
    world.commit(3100, T0 + timedelta(minutes=10))
    watch = world.look(T0 + timedelta(minutes=10, seconds=3))
    assert watch.ending == "leave" and watch.cost is not None
    assert watch.cost.swap_node_seconds > watch.cost.keep_node_seconds


@pytest.mark.parametrize(
    ("signal", "repair"),
    [("row_remap_pending", "reboot"), ("recovery_action", "reboot"), ("row_remap_failure", "replace"), ("ecc_sbe_rate", "replace")],
)
def test_the_repair_follows_the_signal(signal: str, repair: str) -> None:
    assert repair_for(signal)[0] == repair


@given(
    baseline=st.integers(0, 10**6),
    step=st.one_of(st.none(), st.integers(0, 10**6)),
    offset=st.integers(-86400, 86400),
    first=st.booleans(),
)
def test_only_a_newer_step_or_a_first_look_dated_after_the_verdict_is_the_commit(
    baseline: int, step: int | None, offset: int, first: bool
) -> None:
    reading = Reading(step, T0 + timedelta(seconds=offset) if step is not None else None)
    taken = is_next_commit(baseline, reading, T0, first)
    if step is None:
        assert not taken
    elif first:
        assert taken == (offset >= 0)
    else:
        assert taken == (step > baseline)


@given(left=st.integers(-100, 10**5))
def test_the_next_look_is_never_past_the_bound_nor_later_than_the_poll(left: int) -> None:
    wait = next_wait_seconds(T0, T0 + timedelta(seconds=left))
    assert 1 <= wait <= POLL_SECONDS and (left < 1 or wait <= left)
