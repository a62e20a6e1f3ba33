"""Newest verified checkpoint: a torn checkpoint is never chosen (domain/checkpoints.py)."""

from __future__ import annotations

import json

import pytest

from hyperpod_recovery.domain.checkpoints import find_newest_verified, split_s3_uri
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA, step_dir
from tests.fakes import FakeCheckpointReader

URI = "s3://ckpt-bucket/runs/llama"


def _write(reader: FakeCheckpointReader, step: int, damage: str | None = None, shards: int = 3) -> None:
    folder = f"runs/llama/{step_dir(step)}/"
    listed = [{"key": f"rank{r}.distcp", "size": 100} for r in range(shards)]
    for shard in listed:
        size = 50 if damage == "truncated_shard" and shard is listed[-1] else 100
        if damage == "missing_shard" and shard is listed[-1]:
            continue
        reader.put("ckpt-bucket", folder + shard["key"], b"x" * size)
    if damage == "no_manifest":
        return
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "job": "llama",
        "step": step if damage != "wrong_step" else step + 1,
        "created_at": "2026-03-14T09:00:00Z",
        "shards": listed,
    }
    body = json.dumps(manifest)
    if damage == "bad_json":
        body = body[:20]
    if damage == "bad_schema":
        body = json.dumps({**manifest, "schema": "something/else"})
    reader.put("ckpt-bucket", folder + "manifest.json", body.encode())


def test_newest_complete_checkpoint_is_chosen() -> None:
    reader = FakeCheckpointReader()
    for step in (1000, 2000, 3000):
        _write(reader, step)
    discovery = find_newest_verified(reader, URI)
    assert discovery.checkpoint is not None
    assert (discovery.checkpoint.step, discovery.checkpoint.uri) == (3000, "s3://ckpt-bucket/runs/llama/step-000003000/")
    assert discovery.rejected == []


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("missing_shard", "is missing"),
        ("truncated_shard", "is 50 bytes, manifest says 100"),
        ("no_manifest", "no manifest.json"),
        ("bad_json", "not valid JSON"),
        ("bad_schema", "schema v1"),
        ("wrong_step", "manifest says step 3001"),
    ],
)
def test_torn_newest_checkpoint_falls_back_to_the_previous_complete_one(damage: str, why: str) -> None:
    # Given two complete checkpoints and a damaged newest one
    reader = FakeCheckpointReader()
    _write(reader, 1000)
    _write(reader, 2000)
    _write(reader, 3000, damage=damage)
    # When discovering
    discovery = find_newest_verified(reader, URI)
    # Then the previous complete step is chosen and the damage is explained
    assert discovery.checkpoint is not None and discovery.checkpoint.step == 2000
    assert len(discovery.rejected) == 1 and discovery.rejected[0].startswith("step 3000:") and why in discovery.rejected[0]


def test_no_complete_checkpoint_means_none() -> None:
    reader = FakeCheckpointReader()
    _write(reader, 1000, damage="no_manifest")
    discovery = find_newest_verified(reader, URI)
    assert discovery.checkpoint is None and len(discovery.rejected) == 1


def test_empty_prefix_means_none() -> None:
    assert find_newest_verified(FakeCheckpointReader(), URI).checkpoint is None


def test_steps_are_ordered_numerically_even_with_unpadded_folder_names() -> None:
    reader = FakeCheckpointReader()
    for step in (9, 10):
        folder = f"runs/llama/step-{step}/"
        reader.put("ckpt-bucket", folder + "a", b"x")
        reader.put(
            "ckpt-bucket",
            folder + "manifest.json",
            json.dumps(
                {
                    "schema": MANIFEST_SCHEMA,
                    "job": "llama",
                    "step": step,
                    "created_at": "2026-03-14T09:00:00Z",
                    "shards": [{"key": "a", "size": 1}],
                }
            ).encode(),
        )
    assert find_newest_verified(reader, URI).checkpoint.step == 10  # type: ignore[union-attr]


def test_other_folders_under_the_prefix_are_ignored() -> None:
    reader = FakeCheckpointReader()
    _write(reader, 1000)
    reader.put("ckpt-bucket", "runs/llama/tensorboard/events.out", b"x")
    reader.put("ckpt-bucket", "runs/llama/step-000002000.tmp/partial", b"x")
    assert find_newest_verified(reader, URI).checkpoint.step == 1000  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("uri", "expected"),
    [("s3://b-1/a/b", ("b-1", "a/b/")), ("s3://b-1/a/b/", ("b-1", "a/b/")), ("s3://b-1", ("b-1", ""))],
)
def test_s3_uris_split_into_bucket_and_folder_prefix(uri: str, expected: tuple[str, str]) -> None:
    assert split_s3_uri(uri) == expected


def test_non_s3_uri_is_refused() -> None:
    with pytest.raises(ValueError, match="not an s3://"):
        split_s3_uri("gs://bucket/x")
