"""Write a job's checkpoints to (moto) S3 the way a training script following manifest v1 does (with
the real writer), then damage them as the scenario says, to prove a torn checkpoint is never chosen."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.checkpointing.commit import commit_checkpoint
from hyperpod_recovery.domain.checkpoints.discovery import split_s3_uri
from hyperpod_recovery.models.manifest import MANIFEST_NAME, CheckpointLayout, step_dir
from sandbox.scenario import expand_range
from sandbox.scenario_jobs import CheckpointSpec, JobSpec

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


def write_checkpoint_step(s3: Any, job: JobSpec, step: int, created: datetime, nodes: int | None = None, shards: int | None = None) -> None:
    """A job's progress during the drill: one more complete checkpoint, committed by the real writer
    (by a copy running on ``nodes`` nodes: its layout says that size; of ``shards`` shards, default 4)."""
    assert job.checkpoint_uri, f"job {job.id} has no checkpoint_uri"
    bucket, prefix = split_s3_uri(job.checkpoint_uri)
    spec = CheckpointSpec(step=step) if shards is None else CheckpointSpec(step=step, shards=shards)
    _write_one(s3, bucket, prefix, job, spec, created, nodes=nodes)


def begin_checkpoint_step(s3: Any, job: JobSpec, step: int, at: datetime) -> None:
    """A save in progress: the step's shards, no manifest yet, the ``latest`` pointer not moved."""
    assert job.checkpoint_uri, f"job {job.id} has no checkpoint_uri"
    bucket, prefix = split_s3_uri(job.checkpoint_uri)
    _write_one(s3, bucket, prefix, job, CheckpointSpec(step=step, damage="no_manifest"), at)


def layout_of(job: JobSpec, nodes: int) -> CheckpointLayout | None:
    """Manifest v1.1's layout of a checkpoint the job writes on ``nodes`` nodes (None: v1, no layout)."""
    spec = job.checkpoint_layout
    if spec is None:
        return None
    world = nodes * spec.gpus_per_node
    replica = spec.tensor * spec.pipeline
    if world % replica:
        return None
    return CheckpointLayout(
        world_size=world, nodes=nodes, tensor=spec.tensor, pipeline=spec.pipeline, data=world // replica, reshardable=spec.reshardable
    )


def _write_one(
    s3: Any, bucket: str, prefix: str, job: JobSpec, checkpoint: CheckpointSpec, created: datetime, nodes: int | None = None
) -> None:
    """Shards, then the real writer's commit (manifest, then the ``latest`` pointer), then the damage."""
    folder = f"{prefix}{step_dir(checkpoint.step)}/"
    shard_keys = [f"{folder}__{rank}_0.distcp" for rank in range(checkpoint.shards)]
    for key in shard_keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"\0" * SHARD_BYTES)
    if checkpoint.damage == "no_manifest":  # the job died before committing: no manifest, pointer not moved
        return
    commit_checkpoint(
        S3CheckpointStore(s3=s3),
        f"s3://{bucket}/{prefix}",
        checkpoint.step,
        job=job.name,
        now=created,
        framework=job.checkpoint_framework,
        layout=layout_of(job, nodes or len(expand_range(job.nodes))),
    )
    # Damage after the commit: a shard lost or overwritten later, a manifest mangled by a buggy tool.
    if checkpoint.damage == "missing_shard":
        s3.delete_object(Bucket=bucket, Key=shard_keys[-1])
    elif checkpoint.damage == "truncated_shard":
        s3.put_object(Bucket=bucket, Key=shard_keys[-1], Body=b"\0" * (SHARD_BYTES // 2))
    elif checkpoint.damage == "bad_json":
        body = s3.get_object(Bucket=bucket, Key=folder + MANIFEST_NAME)["Body"].read()
        s3.put_object(Bucket=bucket, Key=folder + MANIFEST_NAME, Body=body[: len(body) // 2])
