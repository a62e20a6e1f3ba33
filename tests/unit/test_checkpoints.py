"""Newest verified checkpoint discovery (domain/checkpoints.py): a torn checkpoint is never chosen,
a pointer is verified before it is trusted, nothing outside the job's prefix is followed, and the
search costs O(log N) requests."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.checkpoint_commit import commit_checkpoint
from hyperpod_recovery.domain.checkpoints import INCOMPLETE, MAX_VERIFICATIONS, find_newest_verified, split_s3_uri
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA, POINTER_SCHEMA, step_dir
from tests.fakes import T0, FakeCheckpointStore

BUCKET = "ckpt-bucket"
BASE = "runs/llama/"
URI = f"s3://{BUCKET}/{BASE}"
DAMAGE = ("missing_shard", "truncated_shard", "no_manifest", "bad_json", "bad_schema", "wrong_step", "empty_folder")


def write_checkpoint(store: FakeCheckpointStore, step: int, damage: str | None = None, shards: int = 3, pointer: bool = True) -> None:
    """What a training script does: shards, then commit (manifest, then pointer); then the damage."""
    folder = f"{BASE}{step_dir(step)}/"
    if damage == "empty_folder":  # only a placeholder object, as some tools create
        store.put_object(BUCKET, folder + ".keep", b"")
        return
    for rank in range(shards):
        store.put_object(BUCKET, f"{folder}__{rank}_0.distcp", b"x" * 100)
    if damage == "no_manifest":  # the job died before committing
        return
    if pointer:
        commit_checkpoint(store, URI, step, job="llama", now=T0)
    else:
        manifest = {"schema": MANIFEST_SCHEMA, "job": "llama", "step": step, "created_at": "2026-03-14T09:00:00Z"}
        manifest["shards"] = [{"key": f"__{r}_0.distcp", "size": 100} for r in range(shards)]
        store.put_object(BUCKET, folder + "manifest.json", json.dumps(manifest).encode())
    manifest_key = folder + "manifest.json"
    if damage == "missing_shard":
        store.delete_object(BUCKET, f"{folder}__{shards - 1}_0.distcp")
    elif damage == "truncated_shard":
        store.put_object(BUCKET, f"{folder}__{shards - 1}_0.distcp", b"x" * 50)
    elif damage == "bad_json":
        store.put_object(BUCKET, manifest_key, store.objects[BUCKET][manifest_key][:20])
    elif damage == "bad_schema":
        body = json.loads(store.objects[BUCKET][manifest_key]) | {"schema": "something/else"}
        store.put_object(BUCKET, manifest_key, json.dumps(body).encode())
    elif damage == "wrong_step":
        body = json.loads(store.objects[BUCKET][manifest_key]) | {"step": step + 1}
        store.put_object(BUCKET, manifest_key, json.dumps(body).encode())


def write_pointer(store: FakeCheckpointStore, body: object) -> None:
    store.put_object(BUCKET, BASE + "latest", body if isinstance(body, bytes) else json.dumps(body).encode())


def pointer_to(step: int, checkpoint: str | None = None) -> dict[str, object]:
    return {"schema": POINTER_SCHEMA, "step": step, "checkpoint": checkpoint or f"{step_dir(step)}/", "updated_at": "2026-03-14T09:00:00Z"}


def discover(store: FakeCheckpointStore) -> tuple[int | None, list[str], str]:
    store.requests.clear()
    discovery = find_newest_verified(store, URI)
    return (discovery.checkpoint.step if discovery.checkpoint else None), discovery.rejected, discovery.found_by


# --- the manifest layout ----------------------------------------------------------------------
def test_a_fresh_pointer_is_verified_and_costs_three_requests() -> None:
    # Given three committed checkpoints, the pointer at the newest
    store = FakeCheckpointStore()
    for step in (1000, 2000, 3000):
        write_checkpoint(store, step)
    # When discovering
    step, rejected, found_by = discover(store)
    # Then the newest is chosen through the pointer: GET pointer, GET manifest, one listing
    assert (step, rejected, found_by) == (3000, [], "pointer")
    assert store.requests == {"GetObject": 2, "ListObjectsV2": 1}


def test_the_chosen_checkpoint_names_its_folder() -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 3000)
    discovery = find_newest_verified(store, URI)
    assert discovery.checkpoint is not None
    assert discovery.checkpoint.uri == f"s3://{BUCKET}/{BASE}step-000003000/"
    assert discovery.checkpoint.framework is None


def test_without_a_pointer_the_newest_complete_checkpoint_is_found_by_search() -> None:
    store = FakeCheckpointStore()
    for step in (1000, 2000, 3000):
        write_checkpoint(store, step, pointer=False)
    assert discover(store)[::2] == (3000, "search")


def test_a_stale_pointer_is_passed_by_the_newer_complete_checkpoint() -> None:
    # Given a writer that committed step 3000's manifest but died before moving the pointer from 2000
    store = FakeCheckpointStore()
    for step in (1000, 2000):
        write_checkpoint(store, step)
    write_checkpoint(store, 3000, pointer=False)
    # Then step 3000 is found above the pointer
    assert discover(store) == (3000, [], "pointer, then search")


def test_a_checkpoint_still_being_written_above_the_pointer_leaves_the_pointer_in_charge() -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 2000)
    write_checkpoint(store, 3000, damage="no_manifest")
    step, rejected, found_by = discover(store)
    assert (step, found_by) == (2000, "pointer (newer checkpoints torn)")
    assert rejected == [f"step 3000: {INCOMPLETE}"]


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("pointer", [True, False], ids=["pointer", "no-pointer"])
def test_a_torn_newest_checkpoint_falls_back_to_the_previous_complete_one(damage: str, pointer: bool) -> None:
    # Given two complete checkpoints and a damaged newest one (the pointer moved to it if it was committed)
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, pointer=pointer)
    write_checkpoint(store, 2000, pointer=pointer)
    write_checkpoint(store, 3000, damage=damage, pointer=pointer)
    # When discovering
    step, rejected, _ = discover(store)
    # Then the previous complete step is chosen and the damage is explained
    assert step == 2000
    assert len(rejected) == 1 and rejected[0].startswith("step 3000:")


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("missing_shard", "shard __2_0.distcp is missing"),
        ("truncated_shard", "shard __2_0.distcp is 50 bytes, manifest says 100"),
        ("no_manifest", "no manifest.json and no completion marker"),
        ("bad_json", "manifest.json is not valid JSON"),
        ("bad_schema", "manifest.json does not match schema v1: schema:"),
        ("wrong_step", "manifest says step 3001 but lives in the folder of step 3000"),
        ("empty_folder", "no manifest.json and no completion marker"),
    ],
)
def test_each_kind_of_damage_is_named(damage: str, why: str) -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, pointer=False)
    write_checkpoint(store, 3000, damage=damage, pointer=False)
    assert why in discover(store)[1][0]


def test_no_complete_checkpoint_means_none_with_every_reason() -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, damage="no_manifest")
    write_checkpoint(store, 2000, damage="missing_shard")
    step, rejected, found_by = discover(store)
    assert (step, found_by) == (None, "nothing found")
    assert [r.split(":")[0] for r in rejected] == ["step 2000", "step 1000"]
    assert rejected[0].endswith("(named by the latest pointer)")


def test_an_empty_prefix_has_no_checkpoint() -> None:
    assert discover(FakeCheckpointStore()) == (None, [], "nothing found")


def test_a_look_alike_folder_beside_the_pointed_one_does_not_hide_its_shards() -> None:
    # Given a temporary upload folder that sorts just before the committed one
    store = FakeCheckpointStore()
    write_checkpoint(store, 3000)
    store.put_object(BUCKET, f"{BASE}step-000003000.tmp/partial", b"x")
    assert discover(store)[0] == 3000


def test_discovery_gives_up_after_too_many_torn_checkpoints() -> None:
    # Given one good checkpoint under 40 torn ones: a human should look, not an endless scan
    store = FakeCheckpointStore()
    write_checkpoint(store, 1, pointer=False)
    for step in range(100, 100 + 40):
        write_checkpoint(store, step, damage="no_manifest")
    step, rejected, _ = discover(store)
    assert step is None
    assert rejected[-1] == f"gave up after {MAX_VERIFICATIONS} checkpoints that do not verify"


# --- security: nothing outside the job's prefix ------------------------------------------------
@pytest.mark.parametrize(
    ("checkpoint", "why"),
    [
        ("s3://other-bucket/runs/llama/step-000002000/", "names another location"),
        ("../other-job/step-000002000/", "climbs out of the job's prefix"),
        ("/runs/other/step-000002000/", "is an absolute key"),
        ("step-000002000/../../x/", "climbs out of the job's prefix"),
        ("nested/step-000002000/", "is not a step folder of this prefix"),
    ],
)
def test_a_pointer_naming_a_key_outside_the_prefix_is_rejected_and_never_followed(checkpoint: str, why: str) -> None:
    # Given a real complete checkpoint and a pointer somebody aimed elsewhere
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000)
    write_pointer(store, pointer_to(2000, checkpoint))
    # When discovering
    step, rejected, found_by = discover(store)
    # Then the pointer is rejected with the reason, nothing outside the prefix is read, the search finds 1000
    assert (step, found_by) == (1000, "search")
    assert rejected[0].startswith(f"pointer {BASE}latest: rejected, never followed: checkpoint: Value error, checkpoint {why}"[:60])
    assert why in rejected[0]
    assert all(key.startswith(URI) for key in store.keys_read)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (json.dumps(pointer_to(2000) | {"step": 2001}).encode(), "does not hold step 2001"),
        (json.dumps(pointer_to(2000) | {"schema": "v0"}).encode(), "schema"),
        (b" " * (64 * 1024 + 1), "larger than 65536 bytes"),
    ],
)
def test_a_corrupt_pointer_falls_back_to_search(body: bytes, why: str) -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000)
    write_pointer(store, body)
    step, rejected, _ = discover(store)
    assert step == 1000 and why in rejected[0]


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("../../other-job/step-000002000/__0_0.distcp", "climbs out"),
        ("/etc/passwd", "absolute key"),
        ("s3://other-bucket/x", "names another location"),
        ("a//b", "empty or '.' path segment"),
    ],
)
def test_a_manifest_naming_a_shard_outside_its_folder_is_rejected(key: str, why: str) -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000)
    write_checkpoint(store, 2000)
    manifest_key = f"{BASE}{step_dir(2000)}/manifest.json"
    body = json.loads(store.objects[BUCKET][manifest_key])
    body["shards"].append({"key": key, "size": 1})
    store.put_object(BUCKET, manifest_key, json.dumps(body).encode())
    step, rejected, _ = discover(store)
    assert step == 1000 and why in rejected[0]
    assert all(read.startswith(URI) for read in store.keys_read)


@pytest.mark.parametrize("uri", ["s3://Bad_Bucket/x", "https://bucket/x", "s3://bucket/a/../b", "s3://bucket/a//b"])
def test_a_malformed_prefix_uri_is_refused(uri: str) -> None:
    with pytest.raises(ValueError):
        split_s3_uri(uri)


# --- the search is O(log N) and always right --------------------------------------------------
@pytest.mark.parametrize("count", [10, 1_000, 20_000])
def test_search_requests_grow_with_log_n(count: int) -> None:
    # Given N committed checkpoints without a pointer (cheap: manifests are written directly)
    store = FakeCheckpointStore()
    for step in range(1, count + 1):
        folder = f"{BASE}{step_dir(step * 100)}/"
        store.objects.setdefault(BUCKET, {})[folder + "manifest.json"] = b""
    write_checkpoint(store, (count + 1) * 100, pointer=False)
    # When searching
    step, _, _ = discover(store)
    # Then the newest is found with a number of listings that grows with log2(N / 1000), not N
    assert step == (count + 1) * 100
    bound = 2 * math.ceil(math.log2(max(2, count / 1000))) + 4
    assert store.requests["ListObjectsV2"] <= bound, store.requests


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.sets(st.integers(min_value=0, max_value=5_000), min_size=0, max_size=120),
    torn=st.sets(st.integers(min_value=0, max_value=5_000), max_size=20),
    page=st.integers(min_value=1, max_value=9),
    pointer_at=st.one_of(st.none(), st.integers(min_value=0, max_value=5_000)),
)
def test_search_always_finds_the_newest_verified_step(steps: set[int], torn: set[int], page: int, pointer_at: int | None) -> None:
    # Given any set of checkpoints, some torn, listed in pages of 1..9 entries, maybe a pointer anywhere
    store = FakeCheckpointStore(page_limit=page)
    for step in sorted(steps):
        write_checkpoint(store, step, damage="no_manifest" if step in torn else None, shards=1, pointer=False)
    if pointer_at is not None:
        write_pointer(store, pointer_to(pointer_at))
    # When discovering
    found, _, _ = discover(store)
    # Then the answer is the newest complete step (unless more than the verification budget is torn above it)
    complete = sorted(steps - torn)
    torn_above = len([s for s in steps & torn if not complete or s > complete[-1]])
    if torn_above < MAX_VERIFICATIONS - 1:
        assert found == (complete[-1] if complete else None)
    else:
        assert found in (None, complete[-1])


def test_look_alike_folders_that_fill_whole_pages_do_not_hide_the_newest() -> None:
    # Given folders like step-00000001x/ that sort among the steps but are not steps, pages of three
    store = FakeCheckpointStore(page_limit=3)
    write_checkpoint(store, 5, pointer=False)
    for i in range(1, 40):
        store.put_object(BUCKET, f"{BASE}step-{i:08d}x/partial", b"x")
    write_checkpoint(store, 500, pointer=False)
    # Then the search pages past them and still finds the newest
    assert discover(store)[0] == 500


def test_a_manifest_over_the_size_limit_is_rejected_unread() -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, pointer=False)
    write_checkpoint(store, 2000, pointer=False)
    store.put_object(BUCKET, f"{BASE}{step_dir(2000)}/manifest.json", b" " * (16 * 1024 * 1024 + 1))
    step, rejected, _ = discover(store)
    assert step == 1000 and rejected == ["step 2000: manifest.json is larger than 16 MiB"]
