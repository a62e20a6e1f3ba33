"""`hyperpod-recovery checkpoint commit|latest|verify` against moto's S3, as a job script would run it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery_cli.main import EXIT_NO, EXIT_OK, EXIT_S3, EXIT_USAGE, main

BUCKET = "llm-train-checkpoints"
URI = f"s3://{BUCKET}/llama-70b"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)  # the commands default --job to it
    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield client


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def write_shards(s3: Any, step: int, ranks: int = 4) -> None:
    for rank in range(ranks):
        s3.put_object(Bucket=BUCKET, Key=f"llama-70b/step-{step:09d}/__{rank}_0.distcp", Body=b"w" * 1024)


def test_commit_then_latest_prints_the_newest_verified_checkpoint(s3: Any) -> None:
    # Given two steps written and committed from the shell
    for step in (1000, 2000):
        write_shards(s3, step)
        code, out, _ = run("checkpoint", "commit", URI, "--step", str(step), "--job", "llama-70b", "--framework", "pytorch-dcp")
        assert code == EXIT_OK
        assert out == f"{URI}/step-{step:09d}/: written, 4 shards, 4096 bytes; latest pointer moved to this step\n"
    # When asking for the latest
    code, out, err = run("checkpoint", "latest", URI)
    # Then stdout is just the URI, for $(...) in a job script
    assert (code, out, err) == (EXIT_OK, f"{URI}/step-000002000/\n", "")


def test_latest_explains_a_torn_newest_checkpoint_and_json_tells_everything(s3: Any) -> None:
    write_shards(s3, 1000)
    run("checkpoint", "commit", URI, "--step", "1000", "--job", "llama-70b")
    write_shards(s3, 2000)  # never committed
    code, out, err = run("checkpoint", "latest", URI, "--json")
    assert code == EXIT_OK
    discovery = json.loads(out)
    assert discovery["checkpoint"]["step"] == 1000 and discovery["found_by"] == "pointer (newer checkpoints torn)"
    assert datetime.fromisoformat(discovery["committed_at"]).tzinfo is not None  # its manifest's commit time
    assert err.startswith("rejected: step 2000: no manifest.json")


def test_latest_of_an_empty_prefix_says_so_and_exits_1(s3: Any) -> None:
    code, out, err = run("checkpoint", "latest", URI)
    assert (code, out, err) == (EXIT_NO, "", f"no verified checkpoint under {URI}\n")


def test_verify_explains_what_is_wrong(s3: Any) -> None:
    # Given a committed step whose shard is later truncated
    write_shards(s3, 1000)
    run("checkpoint", "commit", URI, "--step", "1000", "--job", "llama-70b")
    assert run("checkpoint", "verify", f"{URI}/step-000001000/")[0] == EXIT_OK
    s3.put_object(Bucket=BUCKET, Key="llama-70b/step-000001000/__3_0.distcp", Body=b"w")
    # When verifying it, by folder or by prefix and step
    by_folder = run("checkpoint", "verify", f"{URI}/step-000001000/")
    by_step = run("checkpoint", "verify", URI, "--step", "1000", "--json")
    # Then both say which shard and how
    assert by_folder == (EXIT_NO, f"{URI}/step-000001000/: NOT verified: shard __3_0.distcp is 1 bytes, manifest says 1024\n", "")
    assert by_step[0] == EXIT_NO and json.loads(by_step[1])["reason"] == "shard __3_0.distcp is 1 bytes, manifest says 1024"


def test_deep_verify_reads_the_checksums_commit_recorded(s3: Any) -> None:
    write_shards(s3, 1000)
    assert run("checkpoint", "commit", URI, "--step", "1000", "--job", "llama-70b", "--checksums")[0] == EXIT_OK
    s3.put_object(Bucket=BUCKET, Key="llama-70b/step-000001000/__0_0.distcp", Body=b"x" * 1024)  # same size, other bytes
    assert run("checkpoint", "verify", URI, "--step", "1000")[0] == EXIT_OK
    code, out, _ = run("checkpoint", "verify", URI, "--step", "1000", "--deep")
    assert code == EXIT_NO and "shard __0_0.distcp hashes to sha256:" in out


def test_latest_in_a_job_script_passes_over_a_newer_checkpoint_another_job_wrote(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given llama-70b's step 1000, then a step 2000 that mistral committed into the same prefix
    for step, job in ((1000, "llama-70b"), (2000, "mistral")):
        write_shards(s3, step)
        assert run("checkpoint", "commit", URI, "--step", str(step), "--job", job)[0] == EXIT_OK
    # When llama-70b's job script asks for the latest (Slurm sets $SLURM_JOB_NAME)
    monkeypatch.setenv("SLURM_JOB_NAME", "llama-70b")
    code, out, err = run("checkpoint", "latest", URI)
    # Then it gets its own step, and stderr says why not the newer one
    assert (code, out) == (EXIT_OK, f"{URI}/step-000001000/\n")
    why = "manifest.json was written by job 'mistral', not 'llama-70b': another job's checkpoint"
    assert err == f"rejected: step 2000: {why} (named by the latest pointer)\n"
    assert run("checkpoint", "latest", URI, "--job", "mistral")[1] == f"{URI}/step-000002000/\n"


def test_verify_without_a_job_name_names_the_writer_and_with_one_rejects_another_jobs_checkpoint(s3: Any) -> None:
    write_shards(s3, 1000)
    run("checkpoint", "commit", URI, "--step", "1000", "--job", "mistral")
    # Without --job (and outside Slurm): verified, and whose it is
    code, out, _ = run("checkpoint", "verify", f"{URI}/step-000001000/")
    assert (code, out) == (
        EXIT_OK,
        f"{URI}/step-000001000/: verified: manifest v1, 4 shards, written by job 'mistral' (not compared with a job name: none given)\n",
    )
    assert json.loads(run("checkpoint", "verify", URI, "--step", "1000", "--json")[1])["job"] == "mistral"
    # With --job of another job: not verified, both names given
    code, out, _ = run("checkpoint", "verify", f"{URI}/step-000001000/", "--job", "llama-70b")
    assert code == EXIT_NO
    assert out.endswith("NOT verified: manifest.json was written by job 'mistral', not 'llama-70b': another job's checkpoint\n")


def test_commit_records_the_slurm_job_name_by_default(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_NAME", "llama-70b")
    write_shards(s3, 1000)
    assert run("checkpoint", "commit", URI, "--step", "1000")[0] == EXIT_OK
    body = s3.get_object(Bucket=BUCKET, Key="llama-70b/step-000001000/manifest.json")["Body"].read()
    assert json.loads(body)["job"] == "llama-70b"


def test_commit_of_an_empty_step_is_refused(s3: Any) -> None:
    code, _, err = run("checkpoint", "commit", URI, "--step", "5", "--job", "x")
    assert code == EXIT_NO and "write the shards first" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("checkpoint", "latest", "not-an-s3-uri"),
        ("checkpoint", "verify", f"{URI}/not-a-step-folder/"),
        ("checkpoint", "verify", f"{URI}/../other/step-000001000/"),
    ],
)
def test_bad_input_is_a_usage_error(s3: Any, argv: tuple[str, ...]) -> None:
    code, _, err = run(*argv)
    assert code == EXIT_USAGE and err.startswith("hyperpod-recovery: ")


@pytest.mark.parametrize("step", ["-1", "1e3", "1000000000"])
def test_a_step_outside_the_manifest_range_is_refused_by_the_parser(s3: Any, step: str) -> None:
    with pytest.raises(SystemExit) as exc:
        run("checkpoint", "commit", URI, "--step", step)
    assert exc.value.code == EXIT_USAGE


def test_a_missing_bucket_is_an_s3_error(s3: Any) -> None:
    code, _, err = run("checkpoint", "latest", "s3://no-such-bucket/x")
    assert code == EXIT_S3 and "NoSuchBucket" in err


def test_the_module_runs_as_a_program() -> None:
    # The console script `hyperpod-recovery` (pyproject.toml) calls the same main().
    done = subprocess.run(
        [sys.executable, "-m", "hyperpod_recovery_cli.main", "checkpoint", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "commit" in done.stdout and "latest" in done.stdout and "verify" in done.stdout
