"""The checkpoint writer (domain/checkpoint_commit.py, hyperpod_recovery.checkpointing): manifest from
what is in the folder, written once; the pointer moves forward only, and never loses a race backwards."""

from __future__ import annotations

import hashlib
import json

import pytest

from hyperpod_recovery.checkpointing import Checkpoints
from hyperpod_recovery.domain.checkpoint_commit import advance_pointer, commit_checkpoint
from hyperpod_recovery.errors import CheckpointCommitRefused, CheckpointWriteConflict
from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV, CheckpointManifest, CheckpointPointer, step_dir
from tests.fakes import T0, FakeCheckpointStore

BUCKET = "ckpt-bucket"
BASE = "runs/llama/"
URI = f"s3://{BUCKET}/{BASE}"


def shards(store: FakeCheckpointStore, step: int, count: int = 3, size: int = 100) -> None:
    for rank in range(count):
        store.put_object(BUCKET, f"{BASE}{step_dir(step)}/__{rank}_0.distcp", bytes([rank]) * size)


def pointer_step(store: FakeCheckpointStore) -> int:
    return CheckpointPointer.model_validate_json(store.objects[BUCKET][BASE + "latest"]).step


def manifest(store: FakeCheckpointStore, step: int) -> CheckpointManifest:
    return CheckpointManifest.model_validate_json(store.objects[BUCKET][f"{BASE}{step_dir(step)}/manifest.json"])


def test_commit_lists_the_folder_writes_the_manifest_then_moves_the_pointer() -> None:
    # Given the shards of step 1000
    store = FakeCheckpointStore()
    shards(store, 1000)
    # When committing
    result = commit_checkpoint(store, URI, 1000, job="llama", now=T0, framework="pytorch-dcp")
    # Then the manifest lists every shard with its size, and the pointer names the step
    assert (result.manifest, result.pointer, result.shards, result.total_bytes) == ("written", "moved", 3, 300)
    written = manifest(store, 1000)
    assert [(s.key, s.size) for s in written.shards] == [(f"__{r}_0.distcp", 100) for r in range(3)]
    assert (written.job, written.step, written.framework, written.created_at) == ("llama", 1000, "pytorch-dcp", T0)
    assert pointer_step(store) == 1000
    assert json.loads(store.objects[BUCKET][BASE + "latest"])["checkpoint"] == "step-000001000/"


def test_commit_of_an_empty_folder_is_refused() -> None:
    with pytest.raises(CheckpointCommitRefused, match="write the shards first"):
        commit_checkpoint(FakeCheckpointStore(), URI, 1000, job="llama", now=T0)


def test_committing_twice_is_the_same_as_once() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    again = commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    assert (again.manifest, again.pointer, again.pointer_step) == ("already committed", "kept", 1000)


def test_a_committed_manifest_is_never_overwritten_with_different_shards() -> None:
    # Given a committed step, then a stray writer adds a shard to the folder
    store = FakeCheckpointStore()
    shards(store, 1000)
    commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    store.put_object(BUCKET, f"{BASE}{step_dir(1000)}/__9_0.distcp", b"late")
    with pytest.raises(CheckpointCommitRefused, match="never overwritten"):
        commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    assert len(manifest(store, 1000).shards) == 3


def test_the_pointer_never_moves_backwards() -> None:
    # Given step 3000 committed, then a slow writer commits step 2000
    store = FakeCheckpointStore()
    shards(store, 3000)
    shards(store, 2000)
    commit_checkpoint(store, URI, 3000, job="llama", now=T0)
    late = commit_checkpoint(store, URI, 2000, job="llama", now=T0)
    # Then 2000 gets its manifest but the pointer stays at 3000
    assert (late.manifest, late.pointer, late.pointer_step) == ("written", "kept", 3000)
    assert pointer_step(store) == 3000


def test_a_writer_that_loses_the_race_reads_again_and_does_not_roll_the_pointer_back() -> None:
    # Given a competing writer that moves the pointer to 5000 between our read and our write
    store = FakeCheckpointStore()
    shards(store, 2000)
    shards(store, 5000)
    commit_checkpoint(store, URI, 2000, job="llama", now=T0)

    class Racing(FakeCheckpointStore):
        raced = False

        def put(self, bucket: str, key: str, body: bytes, **conditions: object) -> None:
            if key.endswith("latest") and not self.raced:
                self.raced = True
                advance_pointer(store, BUCKET, BASE, 5000, T0)  # the other writer wins
            store.put(bucket, key, body, **conditions)  # type: ignore[arg-type]

    racing = Racing()
    racing.objects, racing.etags = store.objects, store.etags
    # When we try to move the pointer to 4000
    outcome = advance_pointer(racing, BUCKET, BASE, 4000, T0)
    # Then our conditional write fails, we re-read, and keep the newer pointer
    assert outcome == ("kept", 5000)
    assert pointer_step(store) == 5000


def test_a_corrupt_pointer_is_replaced_by_the_next_commit() -> None:
    store = FakeCheckpointStore()
    store.put_object(BUCKET, BASE + "latest", b"garbage")
    shards(store, 1000)
    assert commit_checkpoint(store, URI, 1000, job="llama", now=T0).pointer == "moved"
    assert pointer_step(store) == 1000


def test_a_pointer_that_stays_contended_gives_up_with_a_conflict() -> None:
    class AlwaysContended(FakeCheckpointStore):
        def put(self, bucket: str, key: str, body: bytes, **conditions: object) -> None:
            raise CheckpointWriteConflict("PreconditionFailed")

    with pytest.raises(CheckpointWriteConflict, match="still contended"):
        advance_pointer(AlwaysContended(), BUCKET, BASE, 1000, T0)


# --- checksums ------------------------------------------------------------------------------
def test_checksums_are_recorded_and_deep_verification_catches_a_same_size_corruption() -> None:
    # Given a step committed with checksums computed from S3
    store = FakeCheckpointStore()
    shards(store, 1000)
    checkpoints = Checkpoints(URI, job="llama", store=store)
    checkpoints.commit(1000, compute_checksums=True)
    expected = "sha256:" + hashlib.sha256(bytes([0]) * 100).hexdigest()
    assert manifest(store, 1000).shards[0].checksum == expected
    assert checkpoints.verify(1000, deep=True).verified
    # When one shard is overwritten with different bytes of the same size
    store.put_object(BUCKET, f"{BASE}{step_dir(1000)}/__1_0.distcp", b"\xff" * 100)
    # Then the size check still passes but the deep check names the shard
    assert checkpoints.verify(1000).verified
    deep = checkpoints.verify(1000, deep=True)
    assert not deep.verified and deep.reason.startswith("shard __1_0.distcp hashes to sha256:")


def test_checksums_for_keys_not_in_the_folder_are_refused() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    with pytest.raises(CheckpointCommitRefused, match="not in the folder: nope"):
        commit_checkpoint(store, URI, 1000, job="llama", now=T0, checksums={"nope": "sha256:" + "0" * 64})


def test_a_malformed_checksum_is_refused() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    with pytest.raises(CheckpointCommitRefused, match="checksum"):
        commit_checkpoint(store, URI, 1000, job="llama", now=T0, checksums={"__0_0.distcp": "md5:abc"})


def test_deep_verification_of_an_uncommitted_step_says_so() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    verdict = Checkpoints(URI, store=store).verify(1000, deep=True)
    assert not verdict.verified and "no manifest.json" in verdict.reason


# --- the training-script API -------------------------------------------------------------------
def test_a_resubmitted_job_resumes_from_the_checkpoint_in_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given two committed steps, and a resubmission that names the older one (the newer is being judged)
    store = FakeCheckpointStore()
    checkpoints = Checkpoints(URI, job="llama", store=store)
    for step in (1000, 2000):
        shards(store, step)
        checkpoints.commit(step)
    monkeypatch.setenv(RESUME_FROM_ENV, checkpoints.step_uri(1000))
    monkeypatch.setenv(RESUME_STEP_ENV, "1000")
    resume = checkpoints.resume_point()
    assert resume is not None and resume.step == 1000


def test_a_resume_location_outside_the_prefix_is_ignored_for_the_newest_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    store = FakeCheckpointStore()
    checkpoints = Checkpoints(URI, job="llama", store=store)
    shards(store, 2000)
    checkpoints.commit(2000)
    monkeypatch.setenv(RESUME_FROM_ENV, "s3://elsewhere/x/step-000001000/")
    monkeypatch.setenv(RESUME_STEP_ENV, "1000")
    resume = checkpoints.resume_point()
    assert resume is not None and resume.step == 2000


def test_without_checkpoints_there_is_no_resume_point(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RESUME_FROM_ENV, raising=False)
    assert Checkpoints(URI, store=FakeCheckpointStore()).resume_point() is None


def test_the_job_name_defaults_to_slurms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_NAME", "llama-70b")
    store = FakeCheckpointStore()
    shards(store, 10)
    Checkpoints(URI, store=store).commit(10)
    assert manifest(store, 10).job == "llama-70b"
