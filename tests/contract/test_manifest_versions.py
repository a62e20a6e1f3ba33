"""Manifest v1.1 is backward compatible (docs/checkpoint-manifest.md, "Versions").

A v1 manifest, as scripts wrote it before v1.1 existed, verifies exactly as it did; the writer, given no
layout, writes the same bytes it always wrote (so a pipeline not yet upgraded reads every manifest an
un-upgraded script commits); only a layout makes it write v1.1. The bodies below are frozen: they were
produced by the writer of f729df4, the last one before v1.1.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from hyperpod_recovery.checkpointing.commit import commit_checkpoint
from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified, verify_checkpoint
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA, MANIFEST_SCHEMA_V1_1, CheckpointLayout, CheckpointManifest
from tests.fakes import FakeCheckpointStore

BUCKET = "llm-train-checkpoints"
URI = f"s3://{BUCKET}/llama-70b"
FOLDER = "llama-70b/step-000012000/"
NOW = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)

# What commit_checkpoint wrote for these shards before v1.1 (framework and one checksum given).
FROZEN_V1_BODY = (
    b'{\n "schema": "hyperpod-recovery/checkpoint-manifest/v1",\n "job": "llama-70b",\n "step": 12000,\n'
    b' "created_at": "2026-03-14T09:00:00Z",\n "framework": "pytorch-dcp",\n "shards": [\n  {\n   "key": ".metadata",\n'
    b'   "size": 2311\n  },\n  {\n   "key": "__0_0.distcp",\n   "size": 1024,\n'
    b'   "checksum": "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"\n  },\n'
    b'  {\n   "key": "__1_0.distcp",\n   "size": 1024\n  }\n ]\n}'
)
# A v1 manifest as the docs' worked example writes it by hand: one line, no framework, no checksum.
FROZEN_V1_BY_HAND = (
    b'{"schema": "hyperpod-recovery/checkpoint-manifest/v1", "job": "llama-70b", "step": 12000,'
    b' "created_at": "2026-03-14T09:00:00Z", "shards": [{"key": ".metadata", "size": 2311},'
    b' {"key": "__0_0.distcp", "size": 1024}, {"key": "__1_0.distcp", "size": 1024}]}'
)


def _shards(store: FakeCheckpointStore) -> None:
    store.put_object(BUCKET, FOLDER + ".metadata", b"m" * 2311)
    for rank in range(2):
        store.put_object(BUCKET, f"{FOLDER}__{rank}_0.distcp", b"w" * 1024)


@pytest.mark.parametrize("body", [FROZEN_V1_BODY, FROZEN_V1_BY_HAND], ids=["written-by-the-v1-writer", "written-by-hand"])
def test_given_a_frozen_v1_manifest_when_discovery_reads_it_then_it_verifies_as_before_without_a_layout(body: bytes) -> None:
    # Given a step committed with a manifest v1 written before v1.1 existed
    store = FakeCheckpointStore()
    _shards(store)
    store.put_object(BUCKET, FOLDER + "manifest.json", body)
    # When discovery and verification read it
    discovery = find_newest_verified(store, URI, job="llama-70b")
    verdict = verify_checkpoint(store, URI, 12000, job="llama-70b")
    # Then it verifies with the same words as before, and the checkpoint carries no layout
    assert verdict.verified and verdict.reason == "manifest v1, 3 shards, written by job 'llama-70b'"
    assert verdict.layout is None
    assert discovery.checkpoint is not None and discovery.checkpoint.layout is None
    assert "layout" not in discovery.checkpoint.model_dump(mode="json")


def test_given_no_layout_when_the_writer_commits_then_it_writes_the_v1_bytes_it_always_wrote() -> None:
    # Given the shards the frozen body lists
    store = FakeCheckpointStore()
    _shards(store)
    # When committing without a layout
    commit_checkpoint(
        store, URI, 12000, job="llama-70b", now=NOW, framework="pytorch-dcp", checksums={"__0_0.distcp": "sha256:" + "a" * 64}
    )
    # Then the manifest is byte for byte the v1 writer's
    assert store.objects[BUCKET][FOLDER + "manifest.json"] == FROZEN_V1_BODY


def test_given_a_layout_when_the_writer_commits_then_it_writes_v1_1_with_the_layout_before_the_shards() -> None:
    store = FakeCheckpointStore()
    _shards(store)
    layout = CheckpointLayout(world_size=16, nodes=2, tensor=2, data=8, reshardable=True)
    commit_checkpoint(store, URI, 12000, job="llama-70b", now=NOW, framework="pytorch-dcp", layout=layout)
    body = json.loads(store.objects[BUCKET][FOLDER + "manifest.json"])
    assert list(body) == ["schema", "job", "step", "created_at", "framework", "layout", "shards"]
    assert body["schema"] == MANIFEST_SCHEMA_V1_1
    assert body["layout"] == {"world_size": 16, "nodes": 2, "tensor": 2, "pipeline": 1, "data": 8, "reshardable": True}


def _manifest(schema: str, **fields: object) -> dict[str, object]:
    return {"schema": schema, "job": "j", "step": 1, "created_at": "2026-03-14T09:00:00Z", "shards": [{"key": "a", "size": 1}]} | fields


def test_given_a_v1_1_manifest_without_a_layout_then_it_is_read() -> None:
    # Layout is optional in v1.1: the version is the contract a reader must know, not a promise of a layout
    assert CheckpointManifest.model_validate(_manifest(MANIFEST_SCHEMA_V1_1)).layout is None


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        # v1 stays v1: its readers refuse the field, so a v1 manifest never carries it
        (
            _manifest(MANIFEST_SCHEMA, layout={"world_size": 8, "data": 8}),
            "a layout needs schema 'hyperpod-recovery/checkpoint-manifest/v1.1'",
        ),
        (_manifest("hyperpod-recovery/checkpoint-manifest/v1.2"), "Input should be 'hyperpod-recovery/checkpoint-manifest/v1' or"),
        (_manifest(MANIFEST_SCHEMA_V1_1, layout={"world_size": 8, "data": 8, "expert": 2}), "layout.expert"),
        (_manifest(MANIFEST_SCHEMA_V1_1, topology={}), "topology"),
    ],
    ids=["layout-in-v1", "unknown-version", "unknown-layout-field", "unknown-field"],
)
def test_given_a_manifest_outside_both_versions_then_it_is_refused_naming_why(manifest: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        CheckpointManifest.model_validate(manifest)
    assert why in str(refused.value)
