"""The checkpoint library's traps (issue 31, section 7): a bucket name S3 could not hold, a deep
verification with nothing to hash, and a job name that matches nothing under a healthy prefix."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.checkpointing import Checkpoints, OtherJobs, bucket_name_problem, job_name
from hyperpod_recovery.domain.checkpoints.discovery import split_s3_uri
from hyperpod_recovery.models.manifest import JOB_NAME_ENV, step_dir
from tests.fakes import FakeCheckpointStore

BUCKET = "ckpt-bucket"
BASE = "runs/llama/"
URI = f"s3://{BUCKET}/{BASE}"


@pytest.fixture(autouse=True)
def _outside_slurm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)
    monkeypatch.delenv(JOB_NAME_ENV, raising=False)
    yield


def shards(store: FakeCheckpointStore, step: int, count: int = 3) -> None:
    for rank in range(count):
        store.put_object(BUCKET, f"{BASE}{step_dir(step)}/__{rank}_0.distcp", bytes([rank]) * 100)


# --- bucket names -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bucket", "rule"),
    [
        ("bb", "is 2 characters: S3 bucket names are 3 to 63 characters long"),
        ("b" * 64, "is 64 characters: S3 bucket names are 3 to 63 characters long"),
        ("My-bucket", "holds 'M': S3 bucket names hold only lowercase letters, digits, '.' and '-'"),
        ("my_bucket", "holds '_'"),
        ("-bucket", "does not begin and end with a letter or digit"),
        ("bucket.", "does not begin and end with a letter or digit"),
        ("my..bucket", "holds two adjacent periods"),
        ("192.168.5.4", "is formatted as an IP address"),
    ],
)
def test_given_a_bucket_name_s3_refuses_when_a_prefix_is_opened_then_the_refusal_names_the_rule(bucket: str, rule: str) -> None:
    with pytest.raises(ValueError, match="the bucket name") as refused:
        Checkpoints(f"s3://{bucket}/p", job="llama", store=FakeCheckpointStore())
    assert rule in str(refused.value)


@pytest.mark.parametrize(
    "bucket",
    ["abc", "b" * 63, "my.bucket-1", "192.168.5.4x", "my-ap-abcdefghijklmnopqrstuvwxyz012-s3alias", "ckpt--usw2-az1--x-s3"],
)
def test_given_a_bucket_name_s3_can_hold_or_address_when_a_prefix_is_opened_then_it_is_taken(bucket: str) -> None:
    # Access point aliases (-s3alias) and directory buckets (--x-s3) are addressed like buckets.
    checkpoints = Checkpoints(f"s3://{bucket}/p", job="llama", store=FakeCheckpointStore())
    assert (checkpoints.bucket, checkpoints.prefix) == (bucket, "p/")


@given(st.text(alphabet="abc.-_A1", min_size=0, max_size=70))
def test_given_any_name_the_library_takes_when_the_pipeline_parses_its_uri_then_it_takes_it_too(bucket: str) -> None:
    # The library is at least as strict as the pipeline's parser: nothing a job commits is unreadable to it.
    if bucket_name_problem(bucket) is None:
        assert split_s3_uri(f"s3://{bucket}/p")[0] == bucket


# --- deep verification ----------------------------------------------------------------------------
def test_given_a_step_committed_without_checksums_when_verified_deeply_then_it_is_not_verified_and_says_why() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    checkpoints = Checkpoints(URI, job="llama", store=store)
    checkpoints.commit(1000)
    deep = checkpoints.verify(1000, deep=True)
    assert not deep.verified
    assert deep.reason.startswith("cannot verify deeply: the manifest records no checksums (a step committed with --checksums")
    assert deep.reason.endswith("without --deep: manifest v1, 3 shards, written by job 'llama'")
    assert checkpoints.verify(1000).verified


def test_given_checksums_for_some_shards_when_verified_deeply_then_it_says_which_were_only_sized() -> None:
    store = FakeCheckpointStore()
    shards(store, 1000)
    checkpoints = Checkpoints(URI, job="llama", store=store)
    checksum = store.sha256(BUCKET, f"{BASE}{step_dir(1000)}/__0_0.distcp")
    assert checksum is not None
    checkpoints.commit(1000, checksums={"__0_0.distcp": checksum})
    deep = checkpoints.verify(1000, deep=True)
    assert deep.verified and "1 checksums match (2 shards have none: sizes only)" in deep.reason


# --- job names --------------------------------------------------------------------------------------
def test_given_no_name_when_slurm_and_eks_name_the_job_then_slurms_comes_first_and_where_it_came_from_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert job_name(None) == (None, None)
    monkeypatch.setenv(JOB_NAME_ENV, "llama-lineage")
    assert job_name(None) == ("llama-lineage", JOB_NAME_ENV)
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")
    assert job_name(None) == ("interactive", "SLURM_JOB_NAME")
    assert job_name("llama") == ("llama", None)


def test_given_a_prefix_another_job_wrote_when_this_job_has_none_then_the_newest_of_any_job_and_its_writer_are_told() -> None:
    store = FakeCheckpointStore()
    for step in (1000, 2000):
        shards(store, step)
        Checkpoints(URI, job="llama-70b", store=store).commit(step)
    interactive = Checkpoints(URI, job="interactive", store=store)
    assert interactive.latest() is None
    other = interactive.other_jobs()
    assert other == OtherJobs(checkpoint=Checkpoints(URI, job="llama-70b", store=store).latest(), job="llama-70b")  # type: ignore[arg-type]
    assert other is not None and other.checkpoint.step == 2000


def test_given_an_empty_prefix_when_asked_for_other_jobs_then_there_are_none() -> None:
    assert Checkpoints(URI, job="llama", store=FakeCheckpointStore()).other_jobs() is None
