"""`hyperpod-recovery checkpoint commit` with a layout (manifest v1.1), against moto's S3, as a job script runs it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery_cli.main import EXIT_OK, EXIT_USAGE, main

BUCKET = "llm-train-checkpoints"
URI = f"s3://{BUCKET}/llama-70b"
MANIFEST_KEY = "llama-70b/step-000001000/manifest.json"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        for rank in range(2):
            client.put_object(Bucket=BUCKET, Key=f"llama-70b/step-000001000/__{rank}_0.distcp", Body=b"w" * 1024)
        yield client


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def commit(*layout: str) -> tuple[int, str, str]:
    return run("checkpoint", "commit", URI, "--step", "1000", "--job", "llama-70b", "--framework", "pytorch-dcp", *layout)


def written(s3: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(s3.get_object(Bucket=BUCKET, Key=MANIFEST_KEY)["Body"].read())
    return body


def test_given_layout_flags_when_committing_then_the_manifest_is_v1_1_and_latest_and_verify_show_the_layout(s3: Any) -> None:
    # When a job script commits with its world size, tensor-parallel degree and node count (data follows)
    code, out, err = commit("--world-size", "16", "--tensor-parallel", "2", "--nodes", "2", "--reshardable")
    # Then the manifest is v1.1 with the whole layout, and the command says what it recorded
    assert (code, err) == (EXIT_OK, "")
    assert out == (
        f"{URI}/step-000001000/: written, 2 shards, 2048 bytes; latest pointer moved to this step; "
        "layout: world size 16 = tensor 2 x pipeline 1 x data 8 on 2 nodes, reshardable\n"
    )
    body = written(s3)
    assert body["schema"] == "hyperpod-recovery/checkpoint-manifest/v1.1"
    assert body["layout"] == {"world_size": 16, "nodes": 2, "tensor": 2, "pipeline": 1, "data": 8, "reshardable": True}
    # And latest --json and verify --json carry it
    latest = json.loads(run("checkpoint", "latest", URI, "--json")[1])
    assert latest["checkpoint"]["layout"] == body["layout"]
    verified = json.loads(run("checkpoint", "verify", f"{URI}/step-000001000/", "--json")[1])
    assert verified["verified"] is True and verified["layout"] == body["layout"]


def test_given_the_data_parallel_degree_instead_of_the_world_size_then_the_world_size_follows(s3: Any) -> None:
    assert commit("--data-parallel", "4", "--pipeline-parallel", "2")[0] == EXIT_OK
    assert written(s3)["layout"] == {"world_size": 8, "tensor": 1, "pipeline": 2, "data": 4, "reshardable": False}


def test_given_no_layout_flag_then_the_manifest_is_v1_and_verify_answers_as_before(s3: Any) -> None:
    assert commit()[0] == EXIT_OK
    assert written(s3)["schema"] == "hyperpod-recovery/checkpoint-manifest/v1" and "layout" not in written(s3)
    verified = json.loads(run("checkpoint", "verify", f"{URI}/step-000001000/", "--json")[1])
    assert list(verified) == ["uri", "step", "verified", "framework", "reason", "job"]


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (
            ("--world-size", "16", "--tensor-parallel", "2", "--data-parallel", "4"),
            "the layout is not consistent: tensor 2 x pipeline 1 x data 4 is 8, not the world size 16",
        ),
        (("--world-size", "10", "--tensor-parallel", "4"), "world size 10 is not a multiple of tensor 4 x pipeline 1"),
        (("--world-size", "12", "--nodes", "5"), "world size 12 is not a whole number of ranks on each of 5 node(s)"),
        (("--nodes", "2", "--reshardable"), "a layout needs --world-size or --data-parallel"),
        (("--reshardable",), "a layout needs --world-size or --data-parallel"),
    ],
    ids=["product", "not-a-multiple", "nodes", "no-size", "flag-alone"],
)
def test_an_inconsistent_layout_is_bad_usage_and_nothing_is_written(s3: Any, flags: tuple[str, ...], why: str) -> None:
    code, out, err = commit(*flags)
    assert (code, out) == (EXIT_USAGE, "")
    assert why in err and err.count("\n") == 1
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=MANIFEST_KEY)["KeyCount"] == 0


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "two"])
def test_a_layout_degree_that_is_not_a_positive_whole_number_is_refused_by_the_parser(s3: Any, value: str) -> None:
    with pytest.raises(SystemExit) as exited:
        commit("--world-size", "8", "--tensor-parallel", value)
    assert exited.value.code == EXIT_USAGE
