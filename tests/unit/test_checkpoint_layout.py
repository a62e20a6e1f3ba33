"""Manifest v1.1's layout (issue 33, shrink-and-continue): written by the training library, carried by
discovery to the pipeline, refused when inconsistent; and the size a resubmitted copy is told to run at."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.checkpointing import Checkpoints, ResumePoint, gradient_accumulation, resume_size
from hyperpod_recovery.checkpointing.commit import commit_checkpoint
from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified, schema_problem, verify_checkpoint
from hyperpod_recovery.domain.checkpoints.resharding import reshardable
from hyperpod_recovery.errors import CheckpointCommitRefused
from hyperpod_recovery.models.commands import CheckpointRef
from hyperpod_recovery.models.manifest import (
    JOB_NAME_ENV,
    MANIFEST_SCHEMA_V1_1,
    RESUME_DATA_PARALLEL_ENV,
    RESUME_FROM_ENV,
    RESUME_NODES_ENV,
    RESUME_STEP_ENV,
    CheckpointLayout,
    step_dir,
)
from tests.fakes import T0, FakeCheckpointStore

BUCKET = "ckpt-bucket"
BASE = "runs/llama/"
URI = f"s3://{BUCKET}/{BASE}"
JOB = "llama"
LAYOUT = CheckpointLayout(world_size=16, nodes=2, tensor=2, pipeline=1, data=8, reshardable=True)


@pytest.fixture(autouse=True)
def _outside_a_job(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for variable in ("SLURM_JOB_NAME", JOB_NAME_ENV, RESUME_FROM_ENV, RESUME_STEP_ENV, RESUME_NODES_ENV, RESUME_DATA_PARALLEL_ENV):
        monkeypatch.delenv(variable, raising=False)
    yield


def shards(store: FakeCheckpointStore, step: int, count: int = 2) -> None:
    for rank in range(count):
        store.put_object(BUCKET, f"{BASE}{step_dir(step)}/__{rank}_0.distcp", b"x" * 10)


def manifest_body(store: FakeCheckpointStore, step: int) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(store.objects[BUCKET][f"{BASE}{step_dir(step)}/manifest.json"])
    return loaded


# --- v1.1 through the real writer and discovery -----------------------------------------------------
@pytest.mark.parametrize("pointer", [True, False], ids=["pointer", "search"])
def test_given_a_step_committed_with_a_layout_when_discovery_chooses_it_then_the_checkpoint_carries_the_layout(pointer: bool) -> None:
    # Given a step committed with the layout it was written at (and, for the search, no pointer)
    store = FakeCheckpointStore()
    shards(store, 1000)
    Checkpoints(URI, job=JOB, store=store).commit(1000, layout=LAYOUT)
    if not pointer:
        store.delete_object(BUCKET, BASE + "latest")
    # When discovery looks for the job's newest checkpoint
    discovery = find_newest_verified(store, URI, job=JOB)
    # Then it is chosen, as manifest v1.1, with the layout and the framework recorded
    assert discovery.found_by == ("pointer" if pointer else "search")
    assert discovery.checkpoint == CheckpointRef(uri=f"{URI}{step_dir(1000)}/", step=1000, framework="pytorch-dcp", layout=LAYOUT)
    assert manifest_body(store, 1000)["schema"] == MANIFEST_SCHEMA_V1_1
    assert reshardable(discovery.checkpoint)


def test_given_a_v1_1_step_when_verified_then_the_reason_names_the_version_and_the_layout() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    commit_checkpoint(store, URI, 1000, job=JOB, now=T0, layout=LAYOUT)
    verdict = verify_checkpoint(store, URI, 1000, job=JOB)
    assert verdict.verified and verdict.layout == LAYOUT
    assert verdict.reason == (
        "manifest v1.1, 2 shards, written by job 'llama'; world size 16 = tensor 2 x pipeline 1 x data 8 on 2 nodes, reshardable"
    )


def test_given_the_checkpoint_in_a_resubmissions_environment_when_the_script_asks_then_it_carries_its_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given two v1.1 steps and a resubmission naming the older
    store = FakeCheckpointStore()
    checkpoints = Checkpoints(URI, job=JOB, store=store)
    for step in (1000, 2000):
        shards(store, step)
        checkpoints.commit(step, layout=LAYOUT)
    monkeypatch.setenv(RESUME_FROM_ENV, checkpoints.step_uri(1000))
    monkeypatch.setenv(RESUME_STEP_ENV, "1000")
    # When the script asks where it resumes
    resume = checkpoints.resume_point()
    # Then the named checkpoint comes with the size it was written at
    assert resume == CheckpointRef(uri=checkpoints.step_uri(1000), step=1000, framework="pytorch-dcp", layout=LAYOUT)


def test_given_a_step_committed_without_a_layout_then_it_is_v1_and_its_checkpoint_has_none() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    Checkpoints(URI, job=JOB, store=store).commit(1000, framework="megatron-core")
    discovery = find_newest_verified(store, URI, job=JOB)
    assert discovery.checkpoint is not None and discovery.checkpoint.layout is None
    assert manifest_body(store, 1000)["schema"] == "hyperpod-recovery/checkpoint-manifest/v1"
    assert not reshardable(discovery.checkpoint)


def test_given_a_dcp_checkpoint_without_our_manifest_when_found_then_it_is_reshardable_with_an_unknown_layout() -> None:
    # Given a PyTorch DCP save in a folder named by its step: shards and the coordinator's .metadata, no manifest
    store = FakeCheckpointStore()
    for key in ("__0_0.distcp", "__1_0.distcp", ".metadata"):
        store.put_object(BUCKET, f"{BASE}checkpoint-1000/{key}", b"x" * 10)
    # When discovery finds it
    discovery = find_newest_verified(store, URI, job=JOB)
    # Then it is known by its framework only: no layout, and DCP loads at any data-parallel width
    assert discovery.checkpoint == CheckpointRef(uri=f"{URI}checkpoint-1000/", step=1000, framework="pytorch-dcp")
    assert discovery.checkpoint.model_dump(mode="json") == {"uri": f"{URI}checkpoint-1000/", "step": 1000, "framework": "pytorch-dcp"}
    assert reshardable(discovery.checkpoint)


@pytest.mark.parametrize(
    ("checkpoint", "loads_elsewhere"),
    [
        (CheckpointRef(uri=URI, step=1, framework="pytorch-dcp", layout=LAYOUT.model_copy(update={"reshardable": False})), False),
        (CheckpointRef(uri=URI, step=1, framework="orbax", layout=LAYOUT), True),
        (CheckpointRef(uri=URI, step=1, framework="megatron"), False),
        (CheckpointRef(uri=URI, step=1, framework="orbax"), False),
        (CheckpointRef(uri=URI, step=1), False),
    ],
    ids=["layout-says-no", "layout-says-yes", "megatron-no-layout", "orbax-no-layout", "nothing-known"],
)
def test_a_layout_decides_whether_a_checkpoint_reshards_and_without_one_only_dcp_does(
    checkpoint: CheckpointRef, loads_elsewhere: bool
) -> None:
    assert reshardable(checkpoint) is loads_elsewhere


def test_given_a_step_committed_with_a_layout_when_committed_again_then_the_same_layout_is_a_no_op_and_another_is_refused() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    commit_checkpoint(store, URI, 1000, job=JOB, now=T0, layout=LAYOUT)
    assert commit_checkpoint(store, URI, 1000, job=JOB, now=T0, layout=LAYOUT).manifest == "already committed"
    other = CheckpointLayout(world_size=16, nodes=4, tensor=2, data=8, reshardable=True)
    for layout in (other, None):
        with pytest.raises(CheckpointCommitRefused, match=r"records another layout \(world size 16 = .* on 2 nodes, reshardable\)"):
            commit_checkpoint(store, URI, 1000, job=JOB, now=T0, layout=layout)


# --- inconsistent layouts ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ({"world_size": 16, "tensor": 2, "data": 4}, "tensor 2 x pipeline 1 x data 4 is 8, not the world size 16"),
        ({"world_size": 12, "nodes": 5, "tensor": 3, "data": 4}, "world size 12 is not a whole number of ranks on each of 5 node(s)"),
        ({"world_size": 8, "data": 0}, "data: Input should be greater than or equal to 1"),
        ({"world_size": 8}, "data: Field required"),
        ({"world_size": 8, "data": 8, "reshardable": "yes"}, "reshardable: Input should be a valid boolean"),
        ({"world_size": 8, "data": 8.0}, "data: Input should be a valid integer"),
        ({"world_size": "8", "data": 8}, "world_size: Input should be a valid integer"),
        ({"world_size": 8, "data": 8, "nodes": True}, "nodes: Input should be a valid integer"),
    ],
    ids=["product", "nodes", "zero", "missing", "string-flag", "float", "string-number", "bool-number"],
)
def test_an_inconsistent_or_mistyped_layout_is_refused_naming_why(layout: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        CheckpointLayout.model_validate_json(json.dumps(layout))
    # as discovery's rejection says it
    assert why in schema_problem(refused.value)


def test_given_a_newer_manifest_with_an_inconsistent_layout_then_discovery_rejects_it_naming_v1_1_and_uses_the_older() -> None:
    # Given step 1000 committed, and step 2000's manifest claiming 16 ranks of 2 x 1 x 4
    store = FakeCheckpointStore()
    for step in (1000, 2000):
        shards(store, step)
        commit_checkpoint(store, URI, step, job=JOB, now=T0, layout=LAYOUT)
    key = f"{BASE}{step_dir(2000)}/manifest.json"
    body = json.loads(store.objects[BUCKET][key])
    body["layout"]["data"] = 4
    store.put_object(BUCKET, key, json.dumps(body).encode())
    # When discovery looks
    discovery = find_newest_verified(store, URI, job=JOB)
    # Then the torn manifest is rejected with the rule it breaks, and the older step chosen
    assert discovery.checkpoint is not None and discovery.checkpoint.step == 1000
    assert discovery.rejected[0] == (
        "step 2000: manifest.json does not match schema v1.1: layout: Value error, "
        "tensor 2 x pipeline 1 x data 4 is 8, not the world size 16 (named by the latest pointer)"
    )


def test_a_commit_given_an_inconsistent_layout_cannot_be_made() -> None:
    # The model refuses it before the writer is reached: nothing inconsistent is ever written
    with pytest.raises(ValidationError, match="not the world size"):
        CheckpointLayout(world_size=10, tensor=4, data=2)


# --- property: every valid layout round-trips --------------------------------------------------------
@st.composite
def layouts(draw: st.DrawFn) -> CheckpointLayout:
    tensor = draw(st.sampled_from([1, 2, 4, 8, 1_000_000]) | st.integers(1, 64))
    pipeline = draw(st.integers(1, min(1_000_000, 10_000_000 // tensor)) | st.just(1))
    data = draw(st.integers(1, 10_000_000 // (tensor * pipeline)))
    world = tensor * pipeline * data
    divisors = [n for n in (1, 2, 4, 8, 16, tensor, pipeline, data, world) if n <= 100_000 and world % n == 0]
    nodes = draw(st.none() | st.sampled_from(divisors))
    return CheckpointLayout(world_size=world, nodes=nodes, tensor=tensor, pipeline=pipeline, data=data, reshardable=draw(st.booleans()))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts(), framework=st.none() | st.sampled_from(["pytorch-dcp", "megatron-core"]))
def test_any_valid_layout_committed_by_the_writer_is_the_layout_discovery_carries(layout: CheckpointLayout, framework: str | None) -> None:
    # Given a step committed with any consistent layout
    store = FakeCheckpointStore()
    shards(store, 7)
    commit_checkpoint(store, URI, 7, job=JOB, now=T0, framework=framework, layout=layout)
    # When discovery chooses it
    discovery = find_newest_verified(store, URI, job=JOB)
    # Then the checkpoint carries exactly that layout, which survives the workflow's JSON too
    assert discovery.checkpoint is not None and discovery.checkpoint.layout == layout
    assert CheckpointRef.model_validate_json(discovery.checkpoint.model_dump_json()) == discovery.checkpoint


# --- the size a resubmitted copy runs at -------------------------------------------------------------
def test_given_no_resume_size_in_the_environment_then_the_plan_says_none() -> None:
    assert resume_size({}) == (None, None)
    assert Checkpoints(URI, store=FakeCheckpointStore()).resume_plan() == ResumePoint(None, nodes=None, data_parallel=None)


def test_given_a_shrunk_resubmission_when_the_script_asks_its_plan_then_it_gets_the_checkpoint_and_the_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a v1.1 step written on 2 nodes at data-parallel 8, resubmitted on 1 node at data-parallel 4
    store = FakeCheckpointStore()
    checkpoints = Checkpoints(URI, job=JOB, store=store)
    shards(store, 1000)
    checkpoints.commit(1000, layout=LAYOUT)
    monkeypatch.setenv(RESUME_FROM_ENV, checkpoints.step_uri(1000))
    monkeypatch.setenv(RESUME_STEP_ENV, "1000")
    monkeypatch.setenv(RESUME_NODES_ENV, "1")
    monkeypatch.setenv(RESUME_DATA_PARALLEL_ENV, "4")
    # When the script reads its resume plan
    plan = checkpoints.resume_plan()
    # Then it has the checkpoint (with the size it was written at) and the size to run at now
    assert plan == ResumePoint(checkpoints.resume_point(), nodes=1, data_parallel=4)
    assert plan.checkpoint is not None and plan.checkpoint.layout == LAYOUT
    # And resume_point() still answers what it always did
    assert checkpoints.resume_point() == plan.checkpoint


@pytest.mark.parametrize("value", ["", "0", "-2", "+2", " 2", "2 ", "2.0", "two", "²", "١", "100001", "9" * 40])
def test_a_resume_node_count_that_is_not_a_positive_integer_is_ignored(value: str) -> None:
    assert resume_size({RESUME_NODES_ENV: value, RESUME_DATA_PARALLEL_ENV: "4"}) == (None, 4)


@pytest.mark.parametrize("value", ["", "0", "-8", "8.5", "eight", "10000001"])
def test_a_resume_data_parallel_degree_that_is_not_a_positive_integer_is_ignored(value: str) -> None:
    assert resume_size({RESUME_NODES_ENV: "2", RESUME_DATA_PARALLEL_ENV: value}) == (2, None)


def test_the_resume_size_is_read_from_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RESUME_NODES_ENV, "0012")
    monkeypatch.setenv(RESUME_DATA_PARALLEL_ENV, "96")
    assert resume_size() == (12, 96)


# --- keeping the global batch ------------------------------------------------------------------------
@pytest.mark.parametrize(("global_batch", "micro", "dp", "steps"), [(1024, 4, 32, 8), (1024, 4, 16, 16), (1024, 1, 1024, 1)])
def test_gradient_accumulation_keeps_the_global_batch_at_any_data_parallel_degree(
    global_batch: int, micro: int, dp: int, steps: int
) -> None:
    assert gradient_accumulation(global_batch, micro, dp) == steps
    assert steps * micro * dp == global_batch


@pytest.mark.parametrize(("global_batch", "micro", "dp"), [(1024, 4, 24), (1024, 4, 512), (1024, 0, 8)])
def test_a_data_parallel_degree_that_would_change_the_global_batch_is_refused(global_batch: int, micro: int, dp: int) -> None:
    with pytest.raises(ValueError, match=r"global batch|positive"):
        gradient_accumulation(global_batch, micro, dp)
