"""The checkpoint writer (hyperpod_recovery.checkpointing and its commit.py): manifest from
what is in the folder, written once; the pointer moves forward only, and never loses a race backwards;
and nothing is written that discovery would not read (the writer's limits are the reader's)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.checkpointing import Checkpoints, JobNameRequired
from hyperpod_recovery.checkpointing.commit import advance_pointer, commit_checkpoint, encode_manifest
from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified, verify_checkpoint
from hyperpod_recovery.errors import CheckpointCommitRefused, CheckpointWriteConflict
from hyperpod_recovery.models.manifest import (
    JOB_NAME_ENV,
    MAX_FRAMEWORK_CHARS,
    MAX_JOB_CHARS,
    MAX_MANIFEST_BYTES,
    MAX_POINTER_BYTES,
    MAX_STEP,
    RESUME_FROM_ENV,
    RESUME_STEP_ENV,
    CheckpointManifest,
    CheckpointPointer,
    Shard,
    step_dir,
)
from tests.fakes import T0, FakeCheckpointStore

BUCKET = "ckpt-bucket"
BASE = "runs/llama/"
URI = f"s3://{BUCKET}/{BASE}"


@pytest.fixture(autouse=True)
def _outside_slurm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Checkpoints() reads $SLURM_JOB_NAME; these tests must not depend on where they run.
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)
    monkeypatch.delenv(JOB_NAME_ENV, raising=False)
    yield


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


def test_a_pointer_nested_too_deeply_to_parse_is_replaced_by_the_next_commit() -> None:
    store = FakeCheckpointStore()
    store.put_object(BUCKET, BASE + "latest", b"[" * 30_000 + b"]" * 30_000)
    shards(store, 1000)
    assert commit_checkpoint(store, URI, 1000, job="llama", now=T0).pointer == "moved"
    assert pointer_step(store) == 1000


def test_a_manifest_another_job_committed_is_not_taken_for_our_own() -> None:
    # Given mistral committed step 1000 of this prefix (the same shards)
    store = FakeCheckpointStore()
    shards(store, 1000)
    commit_checkpoint(store, URI, 1000, job="mistral", now=T0)
    # When llama commits the same step, then it is refused: llama's discovery would reject that manifest
    with pytest.raises(CheckpointCommitRefused, match=r"written by job 'mistral', not 'llama'.*never overwritten"):
        commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    assert manifest(store, 1000).job == "mistral"


def test_folder_marker_objects_are_not_listed_as_shards() -> None:
    # Given shards written through a tool that creates zero-byte "folder/" objects (S3 console, s3fs)
    store = FakeCheckpointStore()
    shards(store, 1000)
    store.put_object(BUCKET, f"{BASE}{step_dir(1000)}/", b"")
    store.put_object(BUCKET, f"{BASE}{step_dir(1000)}/model/", b"")
    store.put_object(BUCKET, f"{BASE}{step_dir(1000)}/model/rank-0.pt", b"w" * 10)
    # When committing, then the markers are left out (a shard key names an object) and the step verifies
    result = commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    assert [s.key for s in manifest(store, 1000).shards] == ["__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "model/rank-0.pt"]
    assert result.shards == 4 and verify_checkpoint(store, URI, 1000, job="llama").verified


def test_a_pointer_that_stays_contended_gives_up_with_a_conflict() -> None:
    class AlwaysContended(FakeCheckpointStore):
        def put(self, bucket: str, key: str, body: bytes, **conditions: object) -> None:
            raise CheckpointWriteConflict("PreconditionFailed")

    with pytest.raises(CheckpointWriteConflict, match="still contended"):
        advance_pointer(AlwaysContended(), BUCKET, BASE, 1000, T0)


# --- the writer's limits are the reader's ---------------------------------------------------------
def folder_of_manifest_size(store: FakeCheckpointStore, step: int, size: int) -> None:
    """Empty shards under ``step`` whose manifest, as the writer encodes it, is exactly ``size`` bytes."""
    keys = [f"{n:06d}-" + "k" * 900 for n in range(size // 950)]

    def encoded() -> int:
        return len(encode_manifest(CheckpointManifest(job="llama", step=step, created_at=T0, shards=[Shard(key=k, size=0) for k in keys])))

    while encoded() > size:
        keys.pop()
    missing = size - encoded()  # one more character in a key is one more byte
    for n in range(len(keys)):
        grow = min(missing, 1024 - len(keys[n]))
        keys[n], missing = keys[n] + "k" * grow, missing - grow
    assert missing == 0, "not enough keys to grow"
    for key in keys:
        store.objects.setdefault(BUCKET, {})[f"{BASE}{step_dir(step)}/{key}"] = b""


def test_a_manifest_of_exactly_the_readers_limit_is_written_and_read() -> None:
    # Given a folder whose manifest is exactly the 16 MiB discovery reads
    store = FakeCheckpointStore()
    folder_of_manifest_size(store, 1000, MAX_MANIFEST_BYTES)
    # When committing, then it is written and discovery chooses it through the pointer
    commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    assert len(store.objects[BUCKET][f"{BASE}{step_dir(1000)}/manifest.json"]) == MAX_MANIFEST_BYTES
    discovery = find_newest_verified(store, URI, job="llama")
    assert discovery.checkpoint is not None and (discovery.checkpoint.step, discovery.found_by) == (1000, "pointer")


def test_a_manifest_one_byte_over_the_readers_limit_is_refused_and_nothing_is_written() -> None:
    # Given an older committed step, then a folder whose manifest would be one byte over 16 MiB
    store = FakeCheckpointStore()
    shards(store, 500)
    commit_checkpoint(store, URI, 500, job="llama", now=T0)
    folder_of_manifest_size(store, 1000, MAX_MANIFEST_BYTES + 1)
    # When committing, then it is refused with the reason, and neither the manifest nor the pointer moved
    with pytest.raises(CheckpointCommitRefused, match=r"manifest.json is larger than 16 MiB \(16,777,217 bytes for .* objects\)"):
        commit_checkpoint(store, URI, 1000, job="llama", now=T0)
    assert f"{BASE}{step_dir(1000)}/manifest.json" not in store.objects[BUCKET]
    assert pointer_step(store) == 500


def test_the_largest_step_the_writer_accepts_is_found_through_its_pointer() -> None:
    store = FakeCheckpointStore()
    shards(store, MAX_STEP)
    commit_checkpoint(store, URI, MAX_STEP, job="llama", now=T0)
    assert len(store.objects[BUCKET][BASE + "latest"]) <= MAX_POINTER_BYTES
    discovery = find_newest_verified(store, URI, job="llama")
    assert discovery.checkpoint is not None and (discovery.checkpoint.step, discovery.found_by) == (MAX_STEP, "pointer")


# Relative keys as a training script may leave them: nested, unicode, at S3's 1,024-byte key limit,
# folder markers, and ones no manifest may list ("..", empty segments, control characters).
RELATIVE_KEYS = st.one_of(
    st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=40),
    st.lists(st.sampled_from(["model", "optim", "..", ".", "", "rank-0.pt", "manifest.json", "\x01"]), min_size=1, max_size=4).map(
        "/".join
    ),
    st.integers(min_value=990, max_value=1_024 - len(f"{BASE}{step_dir(0)}/")).map(lambda n: "k" * n),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.dictionaries(RELATIVE_KEYS, st.sampled_from([b"", b"x" * 10]), min_size=1, max_size=6),
    job=st.text(st.characters(blacklist_categories=[]), min_size=1, max_size=MAX_JOB_CHARS + 60),  # incl. undecodable $SLURM_JOB_NAME
    framework=st.none() | st.text(max_size=80),
    step=st.sampled_from([0, MAX_STEP]) | st.integers(min_value=0, max_value=MAX_STEP),
)
def test_whatever_the_writer_commits_the_reader_verifies_for_the_same_job(
    keys: dict[str, bytes], job: str, framework: str | None, step: int
) -> None:
    # Given whatever a job left under a step folder
    store = FakeCheckpointStore()
    folder = f"{BASE}{step_dir(step)}/"
    for key, body in keys.items():
        if len((folder + key).encode()) <= 1_024:  # S3 refuses longer keys
            store.put_object(BUCKET, folder + key, body)
    # When that job commits it
    try:
        commit_checkpoint(store, URI, step, job=job, now=T0, framework=framework)
    except CheckpointCommitRefused:
        # Then either the writer refuses, by name, and writes nothing
        assert folder + "manifest.json" not in store.objects.get(BUCKET, {}) or "manifest.json" in keys
        assert BASE + "latest" not in store.objects.get(BUCKET, {})
        return
    # Or what it wrote verifies for the same job, and discovery chooses it
    assert verify_checkpoint(store, URI, step, job=job).verified
    discovery = find_newest_verified(store, URI, job=job)
    assert discovery.checkpoint is not None and discovery.checkpoint.step == step


def test_given_a_manifest_naming_the_longest_framework_allowed_then_discovery_carries_it() -> None:
    # Given a commit whose framework is as long as a manifest allows (it once crashed discovery:
    # the workflow's CheckpointRef allowed only 32 characters)
    store = FakeCheckpointStore()
    store.put_object(BUCKET, f"{BASE}{step_dir(7)}/shard-0", b"x")
    framework = "f" * MAX_FRAMEWORK_CHARS
    commit_checkpoint(store, URI, 7, job="train", now=T0, framework=framework)
    # When discovery chooses it
    discovery = find_newest_verified(store, URI, job="train")
    # Then the checkpoint carries the framework whole
    assert discovery.checkpoint is not None and discovery.checkpoint.framework == framework


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


@pytest.mark.parametrize("step", ["²", "1000000000", "-5", " 1000"])
def test_a_resume_step_that_is_not_a_step_is_ignored_for_the_newest_verified(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    # Given a committed step, and a resubmission environment whose step is no step of the manifest's range
    store = FakeCheckpointStore()
    checkpoints = Checkpoints(URI, job="llama", store=store)
    shards(store, 2000)
    checkpoints.commit(2000)
    monkeypatch.setenv(RESUME_FROM_ENV, checkpoints.step_uri(2000))
    monkeypatch.setenv(RESUME_STEP_ENV, step)
    # Then the run still starts from the newest verified step instead of failing
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


def test_inside_slurm_the_newest_checkpoint_is_this_jobs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given llama's step 1000, then mistral's step 2000 in the same prefix
    store = FakeCheckpointStore()
    for step, job in ((1000, "llama"), (2000, "mistral")):
        shards(store, step)
        Checkpoints(URI, job=job, store=store).commit(step)
    # When llama's job script asks where to resume (Slurm sets the job name)
    monkeypatch.setenv("SLURM_JOB_NAME", "llama")
    checkpoints = Checkpoints(URI, store=store)
    # Then mistral's step is rejected, by name, and not even verified as llama's
    discovery = checkpoints.discover()
    assert discovery.checkpoint is not None and discovery.checkpoint.step == 1000
    assert "written by job 'mistral', not 'llama'" in discovery.rejected[0]
    assert not checkpoints.verify(2000).verified and not checkpoints.verify(2000, deep=True).verified


def test_given_no_job_name_outside_slurm_when_reading_and_committing_then_any_jobs_checkpoint_is_read_and_the_commit_is_refused() -> None:
    # Given mistral's committed step 1000, and the shards of step 2000
    store = FakeCheckpointStore()
    shards(store, 1000)
    Checkpoints(URI, job="mistral", store=store).commit(1000)
    shards(store, 2000)
    # When a script with no job name (none given, no $SLURM_JOB_NAME) reads, then commits
    unnamed = Checkpoints(URI, store=store)
    # Then it reads any job's checkpoint
    assert unnamed.job is None and unnamed.latest() == Checkpoints(URI, job="mistral", store=store).latest()
    # And its commit is refused before anything is written: a manifest naming no job is one the job's
    # recovery passes over, and it could never be committed again under the right name
    with pytest.raises(JobNameRequired, match=r"give job= .*\$SLURM_JOB_NAME"):
        unnamed.commit(2000)
    assert f"{BASE}{step_dir(2000)}/manifest.json" not in store.objects[BUCKET]
    assert pointer_step(store) == 1000


def test_given_a_re_created_eks_job_when_it_commits_without_a_name_then_its_lineage_name_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(JOB_NAME_ENV, "llama")
    shards(store := FakeCheckpointStore(), 1000)
    checkpoints = Checkpoints(URI, store=store)
    checkpoints.commit(1000)
    assert (checkpoints.job, checkpoints.job_from_env, manifest(store, 1000).job) == ("llama", JOB_NAME_ENV, "llama")


def test_a_resume_location_another_job_committed_is_not_resumed_from(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the resubmission names step 2000, which mistral committed into llama's prefix
    store = FakeCheckpointStore()
    for step, job in ((1000, "llama"), (2000, "mistral")):
        shards(store, step)
        Checkpoints(URI, job=job, store=store).commit(step)
    monkeypatch.setenv(RESUME_FROM_ENV, Checkpoints(URI, store=store).step_uri(2000))
    monkeypatch.setenv(RESUME_STEP_ENV, "2000")
    # Then llama resumes from its own newest step instead
    resume = Checkpoints(URI, job="llama", store=store).resume_point()
    assert resume is not None and resume.step == 1000
