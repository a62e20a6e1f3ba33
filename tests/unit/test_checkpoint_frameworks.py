"""Checkpoints written without our manifest: each framework's own completion marker decides
(PyTorch DCP `.metadata`, Megatron-LM tracker + `iter_NNNNNNN/`, Orbax `commit_success.txt`,
torchsnapshot `.snapshot_metadata`)."""

from __future__ import annotations

import pytest

from hyperpod_recovery.domain.checkpoints.discovery import INCOMPLETE, find_newest_verified
from tests.fakes import FakeCheckpointStore

BUCKET = "ckpt-bucket"
BASE = "runs/llama/"
URI = f"s3://{BUCKET}/{BASE}"


def put(store: FakeCheckpointStore, key: str, body: bytes = b"x" * 10) -> None:
    store.put_object(BUCKET, BASE + key, body)


def discover(store: FakeCheckpointStore) -> tuple[int | None, str | None, list[str], str]:
    discovery = find_newest_verified(store, URI)
    ref = discovery.checkpoint
    return (ref.step if ref else None), (ref.framework if ref else None), discovery.rejected, discovery.found_by


def dcp(store: FakeCheckpointStore, folder: str, *, complete: bool = True, ranks: int = 2) -> None:
    for rank in range(ranks):
        put(store, f"{folder}__{rank}_0.distcp")
    if complete:  # the coordinator writes .metadata last, after every rank's data
        put(store, f"{folder}.metadata")


# --- PyTorch DCP ------------------------------------------------------------------------------
def test_dcp_checkpoints_are_complete_only_with_their_metadata_file() -> None:
    store = FakeCheckpointStore()
    dcp(store, "checkpoint-1000/")
    dcp(store, "checkpoint-2000/")
    dcp(store, "checkpoint-3000/", complete=False)
    step, framework, rejected, found_by = discover(store)
    assert (step, framework, found_by) == (2000, "pytorch-dcp", "full listing")
    assert rejected == [f"checkpoint-3000/ (step 3000): {INCOMPLETE}"]


def test_an_empty_dcp_metadata_file_is_not_a_completion_marker() -> None:
    store = FakeCheckpointStore()
    dcp(store, "epoch_0_step_1000/")
    dcp(store, "epoch_1_step_2000/", complete=False)
    put(store, "epoch_1_step_2000/.metadata", b"")
    step, _, rejected, _ = discover(store)
    assert step == 1000 and "is empty" in rejected[0]


def test_dcp_written_into_our_step_folders_without_a_manifest_is_recognised() -> None:
    # Given a script that saves DCP into step-<9 digits>/ but never ran commit
    store = FakeCheckpointStore()
    dcp(store, "step-000001000/")
    dcp(store, "step-000002000/", complete=False)
    step, framework, _, found_by = discover(store)
    assert (step, framework, found_by) == (1000, "pytorch-dcp", "search")


def test_a_marker_past_a_truncated_listing_page_is_checked_with_a_head_request() -> None:
    # Given an Orbax-style marker that sorts after 30 top-level files and a listing page of 5
    store = FakeCheckpointStore(page_limit=5)
    for n in range(30):
        put(store, f"1000/_shard_{n:03d}")
    put(store, "1000/commit_success.txt")
    step, framework, _, _ = discover(store)
    assert (step, framework) == (1000, "orbax")
    assert store.requests["HeadObject"] >= 1


# --- Orbax and torchsnapshot --------------------------------------------------------------------
def test_orbax_steps_are_compared_as_numbers_and_temporary_folders_are_ignored() -> None:
    # Given unpadded Orbax step folders ("900/" sorts after "1000/") and an uncommitted temporary one
    store = FakeCheckpointStore()
    for step in (900, 1000):
        put(store, f"{step}/default/array")
        put(store, f"{step}/commit_success.txt")
    put(store, "1100/default/array")  # no commit_success.txt yet
    put(store, "1200.orbax-checkpoint-tmp-1742/default/array")
    step, framework, rejected, _ = discover(store)
    assert (step, framework) == (1000, "orbax")
    assert [r.split(":")[0] for r in rejected] == ["1100/ (step 1100)"]


def test_torchsnapshot_is_complete_with_its_snapshot_metadata() -> None:
    store = FakeCheckpointStore()
    put(store, "epoch_0_step_500/0/model")
    put(store, "epoch_0_step_500/.snapshot_metadata")
    assert discover(store)[:2] == (500, "torchsnapshot")


# --- Megatron-LM ---------------------------------------------------------------------------------
def megatron(store: FakeCheckpointStore, iteration: int, *, dist: bool = True, complete: bool = True) -> None:
    folder = f"iter_{iteration:07d}/"
    if dist:  # torch_dist format: DCP inside the iteration folder
        dcp(store, folder, complete=complete)
    else:  # legacy format: one file per model-parallel rank
        put(store, f"{folder}mp_rank_00/model_optim_rng.pt")


def tracker(store: FakeCheckpointStore, text: str) -> None:
    put(store, "latest_checkpointed_iteration.txt", text.encode())


def test_megatron_tracker_names_the_newest_iteration() -> None:
    store = FakeCheckpointStore()
    for iteration in (1000, 2000):
        megatron(store, iteration)
    tracker(store, "2000\n")
    step, framework, rejected, found_by = discover(store)
    assert (step, framework, rejected, found_by) == (2000, "megatron", [], "megatron tracker")


def test_megatron_legacy_checkpoints_count_only_up_to_the_tracker() -> None:
    # Given legacy-format iterations 1000 and 2000, the tracker at 1000 (2000 still being saved)
    store = FakeCheckpointStore()
    megatron(store, 1000, dist=False)
    megatron(store, 2000, dist=False)
    tracker(store, "1000")
    step, _, rejected, _ = discover(store)
    assert step == 1000
    assert rejected[0].startswith("iter_0002000 (step 2000): no manifest.json and no completion marker")


def test_a_complete_dcp_iteration_newer_than_the_tracker_is_chosen() -> None:
    # Rank 0 writes the tracker after the save and a barrier; .metadata already proves completeness.
    store = FakeCheckpointStore()
    megatron(store, 1000)
    megatron(store, 2000)
    tracker(store, "1000")
    assert discover(store)[::3] == (2000, "megatron tracker, then search")


def test_a_tracker_naming_a_deleted_iteration_falls_back_to_an_older_one() -> None:
    store = FakeCheckpointStore()
    megatron(store, 1000)
    tracker(store, "3000")
    step, _, rejected, found_by = discover(store)
    assert (step, found_by) == (1000, "search (tracker target torn)")
    assert rejected[0] == "iter_0003000 (step 3000): the folder is empty (named by latest_checkpointed_iteration.txt)"


@pytest.mark.parametrize("text", ["release", "../../etc", "12abc", ""])
def test_a_tracker_that_is_not_an_iteration_number_is_ignored_and_iterations_are_searched(text: str) -> None:
    store = FakeCheckpointStore()
    megatron(store, 1000)
    megatron(store, 2000, complete=False)
    tracker(store, text)
    step, _, rejected, found_by = discover(store)
    assert (step, found_by) == (1000, "search")
    assert "not an iteration number" in rejected[0]
    assert all(key.startswith(URI) for key in store.keys_read)


def test_a_prefix_in_our_layout_is_not_also_listed_as_another_framework() -> None:
    # Given only torn step folders: the answer is "none", without a full listing of the prefix
    store = FakeCheckpointStore()
    dcp(store, "step-000001000/", complete=False)
    step, _, _, _ = discover(store)
    assert step is None
    assert store.requests["ListObjectsV2"] <= 3
