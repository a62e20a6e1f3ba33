"""Newest verified checkpoint discovery (domain/checkpoints/discovery.py): a torn checkpoint or another job's is
never chosen, a pointer is verified before it is trusted, nothing outside the job's prefix is followed,
look-alike folders never hide a step, and the search costs O(log N) requests."""

from __future__ import annotations

import json
import math
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.checkpointing.commit import commit_checkpoint
from hyperpod_recovery.domain.checkpoints.discovery import (
    INCOMPLETE,
    MAX_VERIFICATIONS,
    Listing,
    find_newest_verified,
    split_s3_uri,
    verify_checkpoint,
)
from hyperpod_recovery.models.commands import JobSpec
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA, POINTER_SCHEMA, step_dir
from hyperpod_recovery.models.node_recovery import FindNewestCheckpointInput
from hyperpod_recovery.steps.find_newest_checkpoint import find_newest_checkpoint
from tests.fakes import T0, FakeCheckpointStore, FakeLedger

BUCKET = "ckpt-bucket"
BASE = "runs/llama/"
URI = f"s3://{BUCKET}/{BASE}"
JOB = "llama"  # the Slurm job name of the job being resumed, and of the job that writes its checkpoints
OTHER_JOB = "mistral"
DAMAGE = (
    "missing_shard",
    "truncated_shard",
    "no_manifest",
    "bad_json",
    "bad_schema",
    "wrong_step",
    "empty_folder",
    "foreign_job",
    "duplicate_shard",
    "duplicate_field",
    "deep_nesting",
)


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
    writer = OTHER_JOB if damage == "foreign_job" else JOB  # another job sharing (or pointed at) the prefix
    if pointer:
        commit_checkpoint(store, URI, step, job=writer, now=T0)
    else:
        manifest = {"schema": MANIFEST_SCHEMA, "job": writer, "step": step, "created_at": "2026-03-14T09:00:00Z"}
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
    elif damage == "duplicate_shard":  # a buggy tool listed a shard twice
        body = json.loads(store.objects[BUCKET][manifest_key])
        body["shards"].append(body["shards"][0])
        store.put_object(BUCKET, manifest_key, json.dumps(body).encode())
    elif damage == "duplicate_field":  # JSON keeps the last of two equal names: which job wrote it?
        text = json.dumps(json.loads(store.objects[BUCKET][manifest_key]))
        store.put_object(BUCKET, manifest_key, f'{text[:-1]}, "job": "{OTHER_JOB}"}}'.encode())
    elif damage == "deep_nesting":  # valid JSON that no parser's stack holds
        store.put_object(BUCKET, manifest_key, b"[" * 100_000 + b"]" * 100_000)


def write_pointer(store: FakeCheckpointStore, body: object) -> None:
    store.put_object(BUCKET, BASE + "latest", body if isinstance(body, bytes) else json.dumps(body).encode())


def pointer_to(step: int, checkpoint: str | None = None) -> dict[str, object]:
    return {"schema": POINTER_SCHEMA, "step": step, "checkpoint": checkpoint or f"{step_dir(step)}/", "updated_at": "2026-03-14T09:00:00Z"}


def discover(store: FakeCheckpointStore, job: str | None = JOB) -> tuple[int | None, list[str], str]:
    store.requests.clear()
    discovery = find_newest_verified(store, URI, job=job)
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
        ("foreign_job", "manifest.json was written by job 'mistral', not 'llama': another job's checkpoint"),
        ("duplicate_shard", "shards list a key more than once: __0_0.distcp"),
        ("duplicate_field", "manifest.json names the field 'job' more than once"),
        ("deep_nesting", "manifest.json is not valid JSON (nested too deeply)"),
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


# --- whose checkpoint: the manifest's job ---------------------------------------------------------
@pytest.mark.parametrize("pointer", [True, False], ids=["pointer", "no-pointer"])
def test_a_newer_checkpoint_another_job_wrote_is_rejected_naming_both_jobs(pointer: bool) -> None:
    # Given llama's checkpoints, then a newer one that mistral committed into the same prefix
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, pointer=pointer)
    write_checkpoint(store, 2000, damage="foreign_job", pointer=pointer)
    # When llama is resumed
    step, rejected, _ = discover(store, job=JOB)
    # Then mistral's checkpoint is rejected, with both names, and llama's own is used
    assert step == 1000
    assert rejected[0].startswith("step 2000: manifest.json was written by job 'mistral', not 'llama'")


def test_without_a_job_name_any_jobs_checkpoint_is_accepted_and_its_writer_named() -> None:
    # Given a checkpoint mistral wrote
    store = FakeCheckpointStore()
    write_checkpoint(store, 2000, damage="foreign_job")
    # When nobody says which job is resumed (`checkpoint verify` run by a human without --job)
    verdict = verify_checkpoint(store, URI, 2000)
    # Then it verifies, and says whose it is and that the name was not compared
    assert verdict.verified and verdict.job == OTHER_JOB
    assert verdict.reason == "manifest v1, 3 shards, written by job 'mistral' (not compared with a job name: none given)"
    assert discover(store, job=None)[0] == 2000


def test_a_job_verifying_its_own_checkpoint_is_told_it_is_its_own() -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 2000)
    assert verify_checkpoint(store, URI, 2000, job=JOB).reason == "manifest v1, 3 shards, written by job 'llama'"
    assert not verify_checkpoint(store, URI, 2000, job=OTHER_JOB).verified


def test_a_slurm_job_name_longer_than_the_manifest_holds_still_finds_its_own_checkpoints() -> None:
    # Given a Slurm job name of 300 characters (Slurm allows it; the manifest holds 256)
    long_name = "pretrain-" + "x" * 291
    store = FakeCheckpointStore()
    store.put_object(BUCKET, f"{BASE}{step_dir(1000)}/__0_0.distcp", b"x")
    # When that job commits and is later resumed under the same name
    commit_checkpoint(store, URI, 1000, job=long_name, now=T0)
    # Then the manifest records the first 256 characters, and the same name finds it; another does not
    assert json.loads(store.objects[BUCKET][f"{BASE}{step_dir(1000)}/manifest.json"])["job"] == long_name[:256]
    assert discover(store, job=long_name)[0] == 1000
    other = long_name[:100] + "y" + long_name[101:]
    step, rejected, _ = discover(store, job=other)
    assert step is None and f"not {other[:256]!r}" in rejected[0]


def test_the_find_newest_checkpoint_step_resumes_a_job_only_from_its_own_checkpoints() -> None:
    # Given llama's checkpoint, then a newer one mistral wrote into llama's prefix
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000)
    write_checkpoint(store, 2000, damage="foreign_job")
    job = JobSpec(job_id="1001", name=JOB, num_nodes=2, state="RUNNING", checkpoint_uri=URI.rstrip("/"))
    # When the step plans the resubmission of llama (Slurm job name "llama")
    plan = find_newest_checkpoint(FindNewestCheckpointInput(execution_name="inc-1", jobs=[job]), reader=store, ledger=FakeLedger(), now=T0)
    # Then it resumes from llama's own checkpoint and says why not from mistral's
    assert [p.checkpoint.step for p in plan.resumable] == [1000]
    assert plan.resumable[0].rejected[0].startswith("step 2000: manifest.json was written by job 'mistral', not 'llama'")


# --- manifests at the size limits: reject fast, explain briefly ------------------------------------
class CpuBudgetExceeded(Exception):
    pass


@contextmanager
def cpu_budget(seconds: float) -> Iterator[None]:
    """Fail, rather than hang, when the block burns more CPU than ``seconds`` (a generous multiple of a
    linear run's cost; a quadratic one takes minutes). CPU time, so a loaded machine does not trip it."""

    def exceeded(signum: int, frame: object) -> None:
        raise CpuBudgetExceeded(f"more than {seconds} s of CPU: not linear in the manifest's size")

    previous = signal.signal(signal.SIGPROF, exceeded)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def write_many_shards(store: FakeCheckpointStore, step: int, shards: list[dict[str, object]], count: int) -> None:
    """A committed step of ``count`` one-byte shards whose manifest lists ``shards``, the pointer at it."""
    folder = f"{BASE}{step_dir(step)}/"
    for rank in range(count):
        store.objects.setdefault(BUCKET, {})[f"{folder}__{rank}_0.distcp"] = b"x"
    body = {"schema": MANIFEST_SCHEMA, "job": JOB, "step": step, "created_at": "2026-03-14T09:00:00Z", "shards": shards}
    store.put_object(BUCKET, folder + "manifest.json", json.dumps(body).encode())
    write_pointer(store, pointer_to(step))


def test_a_100k_shard_manifest_listing_a_key_twice_is_rejected_in_linear_time_and_the_older_step_used() -> None:
    # Given an older complete step, then a step of 100,000 shards whose manifest lists one key twice
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, pointer=False)
    shards: list[dict[str, object]] = [{"key": f"__{rank}_0.distcp", "size": 1} for rank in range(100_000)]
    write_many_shards(store, 2000, [*shards, shards[50_000]], 100_000)
    # When discovering, within a CPU budget about 20 times what a linear check needs
    with cpu_budget(30):
        step, rejected, _ = discover(store)
    # Then the manifest is rejected, naming the key, before any of its 100 listings, and the older step is used
    assert step == 1000
    assert rejected[0] == (
        "step 2000: manifest.json does not match schema v1: Value error, shards list a key more than once: __50000_0.distcp "
        "(named by the latest pointer)"
    )


def test_a_manifest_with_100k_bad_shards_is_rejected_with_a_reason_that_fits_a_step_functions_payload() -> None:
    # Given a newest step whose manifest gives every one of its 100,000 shards a negative size
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, pointer=False)
    write_many_shards(store, 2000, [{"key": f"__{rank}_0.distcp", "size": -1} for rank in range(100_000)], 1)
    # When discovering
    step, rejected, _ = discover(store)
    # Then the reason names the first errors and counts the rest, instead of listing 100,000 of them
    assert step == 1000
    assert rejected[0].startswith("step 2000: manifest.json does not match schema v1: shards.0.size: Input should be greater than")
    assert "(and 99997 more)" in rejected[0] and len(rejected[0]) < 1_000


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
        (b"[" * 30_000 + b"]" * 30_000, "not valid JSON (nested too deeply)"),
        (json.dumps(pointer_to(1000)).encode()[:-1] + b', "step": 2000}', "names the field 'step' more than once"),
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


def test_a_temporary_folder_ending_a_listing_page_does_not_hide_the_step_right_after_it() -> None:
    # Given pages of two folders: [step-000001000/, step-000002000.tmp/] then [step-000002000/]
    store = FakeCheckpointStore(page_limit=2)
    write_checkpoint(store, 1000, pointer=False)
    write_checkpoint(store, 2000, pointer=False)
    store.put_object(BUCKET, f"{BASE}step-000002000.tmp/partial", b"x")
    # Then the page after the look-alike is read from where the last page ended, not from step 2001
    assert discover(store)[0] == 2000


def test_pages_of_look_alikes_above_the_newest_step_do_not_hide_the_steps_below_them() -> None:
    # Given steps 1000 and 2000, then leftover temporary folders of later steps, one folder per page
    store = FakeCheckpointStore(page_limit=1)
    write_checkpoint(store, 1000, pointer=False)
    write_checkpoint(store, 2000, pointer=False)
    for step in (3000, 4000):
        store.put_object(BUCKET, f"{BASE}step-{step:09d}.tmp/partial", b"x")
    # Then a page holding only look-alikes does not count as "the newest steps are up here"
    assert discover(store)[0] == 2000


# Leftovers that look like step folders of step s (or are objects beside them), each sorting at a
# different place around step-<s>/: just before it, just after it, among other steps, or elsewhere.
LOOK_ALIKES: dict[str, Callable[[int], str]] = {
    "temporary upload": lambda s: f"step-{s:09d}.tmp/",
    "renamed copy": lambda s: f"step-{s:09d}-old/",
    "suffixed": lambda s: f"step-{s:09d}x/",
    "eight digits": lambda s: f"step-{s:08d}/",
    "ten digits": lambda s: f"step-{s:010d}/",
    "other prefix": lambda s: f"tmp-step-{s:09d}/",
    "object named like the folder": lambda s: f"step-{s:09d}",
    "object beside the folder": lambda s: f"step-{s:09d}.json",
    "another script's digits": lambda s: "step-" + f"{s:09d}".translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")) + "/",
}
TORN = ("no_manifest", "missing_shard", "foreign_job", "duplicate_shard")


class SearchRunsAway(Exception):
    pass


class RequestCapped(FakeCheckpointStore):
    """Turns a search that never ends into a failure instead of a hung test."""

    def list(self, bucket: str, prefix: str, **options: object) -> Listing:
        if self.requests["ListObjectsV2"] >= 5_000:
            raise SearchRunsAway(f"more than 5,000 listings of {prefix}")
        return super().list(bucket, prefix, **options)  # type: ignore[arg-type]


@st.composite
def prefixes_with_look_alikes(draw: st.DrawFn) -> tuple[int, dict[int, str | None], list[str], int | None]:
    """(page size, {step: damage or None}, look-alike names, pointer step or None)."""
    page = draw(st.integers(min_value=1, max_value=6))
    steps = sorted(draw(st.sets(st.integers(min_value=0, max_value=3_000), max_size=40)))
    damage: dict[int, str | None] = dict.fromkeys(steps)
    if steps:  # at most 20 unverifiable: the verification budget never decides the answer
        damage |= draw(st.dictionaries(st.sampled_from(steps), st.sampled_from(TORN), max_size=20))
    near = st.sampled_from(steps) if steps else st.nothing()
    placed = draw(st.lists(st.tuples(st.sampled_from(sorted(LOOK_ALIKES)), near | st.integers(0, 4_000)), max_size=30))
    names = [LOOK_ALIKES[kind](s) for kind, s in placed]
    # On page boundaries: a temporary folder as the last entry of a page, its step the first of the next
    # (for the listing from the start; probes from elsewhere cut pages elsewhere, which the random ones cover).
    if draw(st.booleans()):
        listing = sorted({*(f"step-{s:09d}/" for s in steps), *names})
        for s in steps:
            if listing.index(f"step-{s:09d}/") % page == page - 1:
                listing.insert(listing.index(f"step-{s:09d}/"), LOOK_ALIKES["temporary upload"](s))
                names.append(LOOK_ALIKES["temporary upload"](s))
    pointer = draw(st.none() | near | st.integers(0, 4_000))
    return page, damage, names, pointer


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=prefixes_with_look_alikes())
@example(prefix=(2, {1000: None, 2000: None}, ["step-000002000.tmp/"], None))
@example(prefix=(1, {1000: None, 2000: None}, ["step-000003000.tmp/", "step-000004000.tmp/"], None))
@example(prefix=(2, {2725: None, 6087: None}, [LOOK_ALIKES["another script's digits"](s) for s in (6915, 8318, 3110, 4970)], None))
def test_look_alikes_at_page_boundaries_never_hide_the_newest_verified_step(
    prefix: tuple[int, dict[int, str | None], list[str], int | None],
) -> None:
    # Given step folders (some torn or another job's), look-alike leftovers and objects, maybe a pointer
    page, damage, names, pointer = prefix
    store = RequestCapped(page_limit=page)
    for step, torn in sorted(damage.items()):
        write_checkpoint(store, step, damage=torn, shards=1, pointer=False)
    for name in names:
        # A look-alike folder holds what a complete checkpoint would, had it been renamed or copied.
        if name.endswith("/"):
            store.put_object(BUCKET, f"{BASE}{name}__0_0.distcp", b"x" * 100)
            if damage:
                manifest = {"schema": MANIFEST_SCHEMA, "job": JOB, "step": 0, "created_at": "2026-03-14T09:00:00Z"}
                store.put_object(
                    BUCKET, f"{BASE}{name}manifest.json", json.dumps(manifest | {"shards": [{"key": "__0_0.distcp", "size": 100}]}).encode()
                )
        else:
            store.put_object(BUCKET, BASE + name, b"{}")
    if pointer is not None:
        write_pointer(store, pointer_to(pointer))
    # When discovering
    found, _, _ = discover(store)
    # Then the answer is exactly the newest step that is complete and this job's
    verified = [step for step, torn in damage.items() if torn is None]
    assert found == (max(verified) if verified else None)
    # And within its request bounds: one manifest read per candidate, at most MAX_VERIFICATIONS of them;
    # per candidate (and for the pointer, and the last search that finds nothing older) one search that
    # gallops then bisects up to the largest number in the prefix, plus at most two passes over its keys
    # (pages of look-alikes, the last pages of the search, the candidate's own listing)
    candidates = len([key for key in store.keys_read if key.endswith("/manifest.json")])
    keys = len(store.objects.get(BUCKET, {}))
    top = max([pointer or 0, *damage, *(int(digits) for name in names for digits in re.findall(r"[0-9]+", name))])
    per_candidate = 2 * math.ceil(math.log2(top + 2)) + 6 + 2 * math.ceil(keys / page)
    assert candidates <= MAX_VERIFICATIONS
    assert store.requests["GetObject"] <= candidates + 2  # + the pointer, + the Megatron tracker
    assert store.requests["HeadObject"] <= 3 * candidates  # completion markers past a truncated page
    assert store.requests["ListObjectsV2"] <= (candidates + 2) * per_candidate


def test_a_manifest_over_the_size_limit_is_rejected_unread() -> None:
    store = FakeCheckpointStore()
    write_checkpoint(store, 1000, pointer=False)
    write_checkpoint(store, 2000, pointer=False)
    store.put_object(BUCKET, f"{BASE}{step_dir(2000)}/manifest.json", b" " * (16 * 1024 * 1024 + 1))
    step, rejected, _ = discover(store)
    assert step == 1000 and rejected == ["step 2000: manifest.json is larger than 16 MiB"]
