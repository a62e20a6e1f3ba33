"""Write a job's checkpoints to (moto) S3 the way a training script following manifest v1 does,
then damage them as the scenario says, to prove a torn checkpoint is never chosen."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.domain.checkpoints import split_s3_uri
from hyperpod_recovery.models.manifest import MANIFEST_NAME, MANIFEST_SCHEMA, step_dir
from sandbox.scenario import CheckpointSpec, JobSpec

SHARD_BYTES = 4096


def write_checkpoints(s3: Any, job: JobSpec, epoch: datetime) -> None:
    if not job.checkpoint_uri:
        return
    bucket, prefix = split_s3_uri(job.checkpoint_uri)
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": s3.meta.region_name})
    for index, checkpoint in enumerate(sorted(job.checkpoints, key=lambda c: c.step)):
        _write_one(s3, bucket, prefix, job, checkpoint, epoch - timedelta(minutes=30 * (len(job.checkpoints) - index)))


def _write_one(s3: Any, bucket: str, prefix: str, job: JobSpec, checkpoint: CheckpointSpec, created: datetime) -> None:
    folder = f"{prefix}{step_dir(checkpoint.step)}/"
    shards = [{"key": f"model-rank{rank:05d}.distcp", "size": SHARD_BYTES} for rank in range(checkpoint.shards)]
    for shard in shards:  # shards first, manifest last: the write order the contract requires
        size = shard["size"]
        if checkpoint.damage == "truncated_shard" and shard is shards[-1]:
            size = SHARD_BYTES // 2
        if checkpoint.damage == "missing_shard" and shard is shards[-1]:
            continue
        s3.put_object(Bucket=bucket, Key=folder + shard["key"], Body=b"\0" * size)
    if checkpoint.damage == "no_manifest":
        return
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "job": job.name,
        "step": checkpoint.step,
        "created_at": created.isoformat(),
        "framework": "pytorch-dcp",
        "shards": shards,
    }
    body = json.dumps(manifest)
    if checkpoint.damage == "bad_json":
        body = body[: len(body) // 2]
    s3.put_object(Bucket=bucket, Key=folder + MANIFEST_NAME, Body=body.encode())
