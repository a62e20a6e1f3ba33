"""Checkpoint manifests from a training script (docs/checkpoint-manifest.md).

    from hyperpod_recovery.checkpointing import Checkpoints

    checkpoints = Checkpoints("s3://my-bucket/llama-70b/checkpoints", job="llama-70b")
    resume = checkpoints.resume_point()          # where a resubmitted job starts, or None
    ...
    dcp.save(state, storage_writer=S3StorageWriter(region, checkpoints.step_uri(step)))
    if rank == 0:
        checkpoints.commit(step)                 # manifest.json, then the `latest` pointer

``job`` defaults to ``$SLURM_JOB_NAME``. It is recorded in every manifest committed, and checkpoints
another job committed are not resumed from; without either, any job's checkpoint is accepted.

Installed on its own as the ``hyperpod-recovery-checkpoints`` wheel (``python tools/build_dists.py
checkpoints``): this library and the few modules of the core it reads with (manifest model,
discovery, the S3 store), boto3 and pydantic; none of the Lambda functions' code. Lives outside the
Lambda layer (no function commits a checkpoint). The shell equivalent is
``hyperpod-recovery checkpoint commit|latest|verify``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.checkpointing.commit import CommitResult, commit_checkpoint, verify_checksums
from hyperpod_recovery.domain.checkpoints import Discovery, Verdict, find_newest_verified, split_s3_uri, verify_checkpoint
from hyperpod_recovery.models.commands import CheckpointRef
from hyperpod_recovery.models.manifest import JOB_NAME_ENV, MAX_STEP, RESUME_FROM_ENV, RESUME_STEP_ENV, step_dir
from hyperpod_recovery.ports import CheckpointWriter

__all__ = ["CheckpointRef", "Checkpoints", "CommitResult", "Discovery", "Verdict"]

# Recorded by a commit outside Slurm without a job name: the manifest's `job` may not be empty.
UNNAMED_JOB = "unnamed-job"


class Checkpoints:
    """One job's checkpoint prefix: where to write a step, how to commit it, where to resume from."""

    def __init__(self, uri: str, *, job: str | None = None, s3: Any = None, store: CheckpointWriter | None = None) -> None:
        self.bucket, self.prefix = split_s3_uri(uri)
        self.uri = f"s3://{self.bucket}/{self.prefix}"
        # The Slurm job name; None (outside Slurm, none given): checkpoints of any job are read.
        # (On EKS, HYPERPOD_RECOVERY_JOB_NAME: a re-created job gets its lineage's name in it.)
        self.job: str | None = job or os.environ.get("SLURM_JOB_NAME") or os.environ.get(JOB_NAME_ENV) or None
        self.store: CheckpointWriter = store or S3CheckpointStore(s3=s3)

    def step_uri(self, step: int) -> str:
        """``s3://bucket/prefix/step-000012000/``: where the shards of ``step`` go."""
        return f"{self.uri}{step_dir(step)}/"

    def commit(
        self,
        step: int,
        *,
        framework: str | None = "pytorch-dcp",
        checksums: Mapping[str, str] | None = None,
        compute_checksums: bool = False,
    ) -> CommitResult:
        """After every shard of ``step`` is durable: write its manifest, then move ``latest`` forward.

        ``checksums``: ``{relative key: "sha256:<hex>"}`` computed while writing (free);
        ``compute_checksums`` re-reads every shard from S3 instead (slow for large checkpoints).
        """
        return commit_checkpoint(
            self.store,
            self.uri,
            step,
            job=self.job or UNNAMED_JOB,
            now=datetime.now(UTC),
            framework=framework,
            checksums=checksums,
            compute_checksums=compute_checksums,
        )

    def latest(self) -> CheckpointRef | None:
        """The newest checkpoint of this job that verifies complete, or None."""
        return self.discover().checkpoint

    def discover(self) -> Discovery:
        """``latest()`` with the reasons newer checkpoints were rejected."""
        return find_newest_verified(self.store, self.uri, job=self.job)

    def verify(self, step: int, *, deep: bool = False) -> Verdict:
        """Is ``step`` complete and this job's? ``deep`` also hashes every shard that has a checksum."""
        if deep:
            return verify_checksums(self.store, self.uri, step, job=self.job)
        return verify_checkpoint(self.store, self.uri, step, job=self.job)

    def resume_point(self) -> CheckpointRef | None:
        """Where this run starts: the checkpoint the recovery pipeline resubmitted it from (verified
        again, and only if it lies under this prefix), else the newest verified one, else None."""
        given = os.environ.get(RESUME_FROM_ENV, "")
        text = os.environ.get(RESUME_STEP_ENV, "")
        # Anything but a step of the manifest's range ("²", ten digits) names no checkpoint: look for one.
        step = int(text) if text.isascii() and text.isdigit() and int(text) <= MAX_STEP else None
        if step is not None and given.rstrip("/") + "/" == self.step_uri(step) and self.verify(step).verified:
            return CheckpointRef(uri=self.step_uri(step), step=step)
        return self.latest()
