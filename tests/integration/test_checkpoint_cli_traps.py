"""`hyperpod-recovery checkpoint` where it used to mislead (issue 31, section 7), against moto's S3:
an unnamed commit, `latest` inside an `salloc` shell, a deep verification with nothing to hash, a
bucket name S3 could not hold."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.models.manifest import JOB_NAME_ENV
from hyperpod_recovery_cli.main import EXIT_NO, EXIT_OK, EXIT_USAGE, main

BUCKET = "llm-train-checkpoints"
URI = f"s3://{BUCKET}/llama-70b"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)
    monkeypatch.delenv(JOB_NAME_ENV, raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield client


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def committed(s3: Any, step: int, job: str, *extra: str) -> None:
    for rank in range(4):
        s3.put_object(Bucket=BUCKET, Key=f"llama-70b/step-{step:09d}/__{rank}_0.distcp", Body=b"w" * 1024)
    assert run("checkpoint", "commit", URI, "--step", str(step), "--job", job, *extra)[0] == EXIT_OK


def keys(s3: Any) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


# --- commit needs the job's name ----------------------------------------------------------------------
def test_given_no_job_and_no_slurm_job_name_when_committing_then_it_is_a_one_line_usage_error_and_nothing_is_written(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="llama-70b/step-000001000/__0_0.distcp", Body=b"w")
    code, out, err = run("checkpoint", "commit", URI, "--step", "1000")
    assert (code, out) == (EXIT_USAGE, "")
    assert err.count("\n") == 1 and err.startswith("hyperpod-recovery: checkpoint commit needs the job's name: give --job NAME")
    assert "$SLURM_JOB_NAME" in err
    assert keys(s3) == ["llama-70b/step-000001000/__0_0.distcp"]


def test_given_slurm_job_name_when_committing_without_job_then_the_manifest_is_the_jobs(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_NAME", "llama-70b")
    s3.put_object(Bucket=BUCKET, Key="llama-70b/step-000001000/__0_0.distcp", Body=b"w")
    assert run("checkpoint", "commit", URI, "--step", "1000")[0] == EXIT_OK
    manifest = s3.get_object(Bucket=BUCKET, Key="llama-70b/step-000001000/manifest.json")["Body"].read()
    assert json.loads(manifest)["job"] == "llama-70b"


# --- latest in an salloc shell ----------------------------------------------------------------------------
def test_given_an_salloc_shell_when_asking_for_latest_of_a_healthy_prefix_then_it_names_the_job_whose_checkpoint_is_there(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given llama-70b's two committed steps, and an salloc shell (salloc names its job after its command)
    committed(s3, 1000, "llama-70b")
    committed(s3, 2000, "llama-70b")
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")
    # When asking for the latest without --job
    code, out, err = run("checkpoint", "latest", URI)
    # Then nothing on stdout (a script must not resume from another job's checkpoint), exit 1, and the
    # last line says where the name came from, which job's checkpoint is there, and the command to read it
    assert (code, out) == (EXIT_NO, "")
    last = err.splitlines()[-1]
    assert last == (
        f"no verified checkpoint of job 'interactive' (from $SLURM_JOB_NAME) under {URI}; its newest verified checkpoint "
        f"is step 2000, written by job 'llama-70b': hyperpod-recovery checkpoint latest {URI} --job llama-70b"
    )
    # And with --json, stdout is the document (nothing found) and stderr says the same
    json_code, json_out, json_err = run("checkpoint", "latest", URI, "--json")
    assert (json_code, json.loads(json_out)["checkpoint"], json_err.splitlines()[-1]) == (EXIT_NO, None, last)
    # And that command finds it
    assert run("checkpoint", "latest", URI, "--job", "llama-70b")[:2] == (EXIT_OK, f"{URI}/step-000002000/\n")


def test_given_a_mistyped_job_when_asking_for_latest_then_it_says_the_job_whose_checkpoint_is_there(s3: Any) -> None:
    committed(s3, 1000, "llama-70b")
    code, out, err = run("checkpoint", "latest", URI, "--job", "llama70b")
    assert (code, out) == (EXIT_NO, "")
    assert err.splitlines()[-1].startswith(f"no verified checkpoint of job 'llama70b' (--job) under {URI}; its newest verified")


def test_given_an_empty_prefix_and_a_job_when_asking_for_latest_then_it_says_no_job_has_one(s3: Any) -> None:
    code, out, err = run("checkpoint", "latest", URI, "--job", "llama-70b")
    assert (code, out, err) == (EXIT_NO, "", f"no verified checkpoint of job 'llama-70b' (--job) under {URI}, nor of any other job\n")


# --- verify --deep with nothing to hash -----------------------------------------------------------------
def test_given_a_step_committed_without_checksums_when_verified_deeply_then_it_is_unverifiable_and_exits_1(s3: Any) -> None:
    committed(s3, 1000, "llama-70b")
    code, out, _ = run("checkpoint", "verify", f"{URI}/step-000001000/", "--deep")
    assert code == EXIT_NO
    assert out.startswith(f"{URI}/step-000001000/: NOT verified: cannot verify deeply: the manifest records no checksums")
    assert "verified deep" not in out and "0 checksums match" not in out
    json_code, json_out, _ = run("checkpoint", "verify", URI, "--step", "1000", "--deep", "--json")
    assert json_code == EXIT_NO and json.loads(json_out)["verified"] is False


def test_given_a_step_committed_with_checksums_when_verified_deeply_then_it_is_verified(s3: Any) -> None:
    committed(s3, 1000, "llama-70b", "--checksums")
    code, out, _ = run("checkpoint", "verify", f"{URI}/step-000001000/", "--deep")
    verified = "verified: manifest v1, 4 shards, 4 checksums match, written by job 'llama-70b' (not compared with a job name: none given)"
    assert (code, out) == (EXIT_OK, f"{URI}/step-000001000/: {verified}\n")


# --- bucket names ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ("checkpoint", "commit", "s3://bb/p", "--step", "1", "--job", "llama-70b"),
        ("checkpoint", "latest", "s3://bb/p"),
        ("checkpoint", "verify", "s3://bb/p/step-000000001/"),
        ("checkpoint", "verify", "s3://bb/p", "--step", "1"),
    ],
    ids=["commit", "latest", "verify-folder", "verify-step"],
)
def test_given_a_two_character_bucket_when_any_checkpoint_command_runs_then_it_is_a_usage_error_naming_the_rule(
    s3: Any, argv: tuple[str, ...]
) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (EXIT_USAGE, "")
    assert err.count("\n") == 1
    assert "the bucket name 'bb' is 2 characters: S3 bucket names are 3 to 63 characters long" in err
