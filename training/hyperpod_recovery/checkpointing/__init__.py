"""Checkpoint manifests from a training script (docs/checkpoint-manifest.md).

    from hyperpod_recovery.checkpointing import Checkpoints

    checkpoints = Checkpoints("s3://my-bucket/llama-70b/checkpoints", job="llama-70b")
    resume = checkpoints.resume_point()          # where a resubmitted job starts, or None
    plan = checkpoints.resume_plan()             # the same, and the node count / data-parallel degree to run at
    ...
    dcp.save(state, storage_writer=S3StorageWriter(region, checkpoints.step_uri(step)))
    if rank == 0:
        checkpoints.commit(step, layout=CheckpointLayout(world_size=16, nodes=2, tensor=2, data=8, reshardable=True))

``job`` defaults to ``$SLURM_JOB_NAME`` (then ``$HYPERPOD_RECOVERY_JOB_NAME``, which a re-created EKS
job carries). It is recorded in every manifest committed, and checkpoints another job committed are
not resumed from; without any, any job's checkpoint is read, and ``commit`` refuses (JobNameRequired):
a manifest must name the job whose recovery will look for it.

Installed on its own as the ``hyperpod-recovery-checkpoints`` wheel (``python tools/build_dists.py
checkpoints``): this library and the few modules of the core it reads with (manifest model,
discovery, the S3 store), boto3 and pydantic; none of the Lambda functions' code. Lives outside the
Lambda layer (no function commits a checkpoint). The shell equivalent is
``hyperpod-recovery checkpoint commit|latest|verify``.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.checkpointing.commit import CommitResult, commit_checkpoint, verify_checksums
from hyperpod_recovery.checkpointing.progress import Progress
from hyperpod_recovery.domain.checkpoints.discovery import Discovery, Verdict, find_newest_verified, split_s3_uri, verify_checkpoint
from hyperpod_recovery.models.commands import CheckpointRef
from hyperpod_recovery.models.manifest import (
    JOB_NAME_ENV,
    MAX_LAYOUT_NODES,
    MAX_STEP,
    MAX_WORLD_SIZE,
    RESUME_DATA_PARALLEL_ENV,
    RESUME_FROM_ENV,
    RESUME_NODES_ENV,
    RESUME_STEP_ENV,
    CheckpointLayout,
    step_dir,
)
from hyperpod_recovery.ports import CheckpointWriter

__all__ = [
    "CheckpointLayout",
    "CheckpointRef",
    "Checkpoints",
    "CommitResult",
    "Discovery",
    "JobNameRequired",
    "OtherJobs",
    "Progress",
    "ResumePoint",
    "Verdict",
    "gradient_accumulation",
    "resume_size",
]

# Where the job's name is read from when none is given, in this order.
JOB_NAME_SOURCES = ("SLURM_JOB_NAME", JOB_NAME_ENV)


# S3's naming rules for general purpose buckets
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3 to 63 characters;
# lowercase letters, digits, periods and hyphens; a letter or digit first and last; no two adjacent
# periods; not formatted as an IP address. A name that breaks one names no bucket: refused before any
# request, naming the rule. The reserved prefixes and suffixes (xn--, -s3alias, --x-s3, ...) only keep
# names from being created, and access point aliases and directory buckets, which a job may read and
# write through, carry exactly those suffixes: they are taken.
BUCKET_MIN_CHARS, BUCKET_MAX_CHARS = 3, 63
_BUCKET_CHARS = frozenset(string.ascii_lowercase + string.digits + ".-")
_IP_ADDRESS = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$")


def bucket_name_problem(bucket: str) -> str | None:
    """Which of S3's bucket naming rules ``bucket`` breaks, or None when it could name a bucket."""
    if not BUCKET_MIN_CHARS <= len(bucket) <= BUCKET_MAX_CHARS:
        return f"is {len(bucket)} characters: S3 bucket names are {BUCKET_MIN_CHARS} to {BUCKET_MAX_CHARS} characters long"
    others = sorted(set(bucket) - _BUCKET_CHARS)
    if others:
        shown = ", ".join(repr(c) for c in others[:5])
        return f"holds {shown}: S3 bucket names hold only lowercase letters, digits, '.' and '-'"
    if not (bucket[0].isalnum() and bucket[-1].isalnum()):
        return "does not begin and end with a letter or digit, as S3 bucket names do"
    if ".." in bucket:
        return "holds two adjacent periods, which S3 bucket names never do"
    if _IP_ADDRESS.match(bucket):
        return "is formatted as an IP address, which S3 bucket names never are"
    return None


def check_bucket_of(uri: str) -> None:
    """Raise ValueError naming the rule when ``uri`` is an ``s3://`` URI whose bucket name S3 refuses.

    Anything that is not an ``s3://`` URI at all is left to the URI parser, which says so."""
    if not uri.startswith("s3://"):
        return
    bucket = uri.removeprefix("s3://").partition("/")[0]
    problem = bucket_name_problem(bucket)
    if problem:
        raise ValueError(f"{uri!r}: the bucket name {bucket!r} {problem}")


class JobNameRequired(ValueError):
    """A commit with no job name: its manifest would name no job, and the job's recovery, which looks
    for checkpoints under the job's name, would pass it over (and it could never be committed again)."""


def job_name(given: str | None) -> tuple[str | None, str | None]:
    """(the job's name, the environment variable it came from: None when given or when there is none)."""
    if given:
        return given, None
    for variable in JOB_NAME_SOURCES:
        if os.environ.get(variable):
            return os.environ[variable], variable
    return None, None


@dataclass(frozen=True)
class OtherJobs:
    """What a prefix holds when the job has no verified checkpoint there: the newest verified checkpoint
    of any job, and the job its manifest names (None for a framework's marker, which names none)."""

    checkpoint: CheckpointRef
    job: str | None


def _positive(text: str | None, largest: int) -> int | None:
    # ASCII digits only, as for the resume step ("²", " 8", "+8", "8.0" name no size): the run then
    # keeps its own size instead of failing.
    if text is None or not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if 1 <= value <= largest else None


def resume_size(environ: Mapping[str, str] | None = None) -> tuple[int | None, int | None]:
    """(nodes, data-parallel degree) a resubmitted copy runs at, from ``$HYPERPOD_RECOVERY_RESUME_NODES``
    and ``$HYPERPOD_RECOVERY_RESUME_DATA_PARALLEL``; each None when absent or not a positive integer."""
    env = os.environ if environ is None else environ
    return _positive(env.get(RESUME_NODES_ENV), MAX_LAYOUT_NODES), _positive(env.get(RESUME_DATA_PARALLEL_ENV), MAX_WORLD_SIZE)


@dataclass(frozen=True)
class ResumePoint:
    """Where a run starts and at what size. ``checkpoint``: as ``resume_point()`` returns it (its
    ``layout`` is the size it was written at, when its manifest is v1.1). ``nodes``,
    ``data_parallel``: what the recovery pipeline resubmitted the job to run at (shrunk onto fewer
    nodes, or grown back); None: not said, run at the size the job was submitted with."""

    checkpoint: CheckpointRef | None
    nodes: int | None = None
    data_parallel: int | None = None


def gradient_accumulation(global_batch: int, micro_batch: int, data_parallel: int) -> int:
    """Micro-batches each data-parallel rank accumulates per step so that a run at ``data_parallel``
    keeps ``global_batch`` samples per step: ``global_batch / (micro_batch x data_parallel)``.
    Raises ValueError when that is not a whole number (the global batch would change)."""
    if min(global_batch, micro_batch, data_parallel) < 1:
        raise ValueError("global batch, micro batch and data-parallel degree are positive integers")
    steps, left = divmod(global_batch, micro_batch * data_parallel)
    if left or not steps:
        raise ValueError(
            f"a global batch of {global_batch} is not a whole number of micro-batches of {micro_batch} "
            f"on each of {data_parallel} data-parallel ranks"
        )
    return steps


class Checkpoints:
    """One job's checkpoint prefix: where to write a step, how to commit it, where to resume from."""

    def __init__(
        self, uri: str, *, job: str | None = None, s3: Any = None, store: CheckpointWriter | None = None, progress: Progress | None = None
    ) -> None:
        check_bucket_of(uri)
        self.bucket, self.prefix = split_s3_uri(uri)
        self.uri = f"s3://{self.bucket}/{self.prefix}"
        # The Slurm job name; None (outside Slurm, none given): checkpoints of any job are read.
        # (On EKS, HYPERPOD_RECOVERY_JOB_NAME: a re-created job gets its lineage's name in it.)
        # job_from_env: the variable it was read from, to say so when it matches nothing (salloc
        # names its job after the command it runs: "interactive", "bash").
        self.job, self.job_from_env = job_name(job)
        self.store: CheckpointWriter = store or S3CheckpointStore(s3=s3)
        # The job's progress reporter: a commit is a declared pause ("checkpoint"), and so is a save
        # inside ``saving()``; a long one is not a hang.
        self.progress = progress

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
        layout: CheckpointLayout | None = None,
    ) -> CommitResult:
        """After every shard of ``step`` is durable: write its manifest, then move ``latest`` forward.

        ``checksums``: ``{relative key: "sha256:<hex>"}`` computed while writing (free);
        ``compute_checksums`` re-reads every shard from S3 instead (slow for large checkpoints).
        ``layout``: the world size and parallel degrees it was written at, and whether it reshards
        (manifest v1.1, read only by a pipeline that knows v1.1: upgrade the pipeline first).
        Raises JobNameRequired when no job name is known (nothing is read or written then).
        """
        if self.job is None:
            raise JobNameRequired(
                "no job name to commit the checkpoint under: give job= (the Slurm job's name; on EKS the job's "
                f"metadata.name), or run inside the job (${JOB_NAME_SOURCES[0]}, ${JOB_NAME_SOURCES[1]}): "
                "the job's recovery resumes only checkpoints committed under its name"
            )
        with self.saving():
            return commit_checkpoint(
                self.store,
                self.uri,
                step,
                job=self.job,
                now=datetime.now(UTC),
                framework=framework,
                checksums=checksums,
                compute_checksums=compute_checksums,
                layout=layout,
            )

    @contextmanager
    def saving(self, limit_seconds: int | None = None) -> Iterator[None]:
        """A checkpoint being written, declared to the progress reporter (when one was given) as a
        pause of at most ``limit_seconds`` (default two hours): ``with checkpoints.saving(): dcp.save(...)``."""
        if self.progress is None:
            yield
            return
        with self.progress.paused("checkpoint", limit_seconds):
            yield

    def latest(self) -> CheckpointRef | None:
        """The newest checkpoint of this job that verifies complete, or None."""
        return self.discover().checkpoint

    def discover(self) -> Discovery:
        """``latest()`` with the reasons newer checkpoints were rejected."""
        return find_newest_verified(self.store, self.uri, job=self.job)

    def other_jobs(self) -> OtherJobs | None:
        """When this job has no verified checkpoint here: the newest verified one of any job (who wrote
        it, to say so), or None when there is none at all. Never resumed from: it is for telling."""
        found = find_newest_verified(self.store, self.uri, job=None).checkpoint
        if found is None:
            return None
        return OtherJobs(found, verify_checkpoint(self.store, self.uri, found.step).job)

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
        if step is not None and given.rstrip("/") + "/" == self.step_uri(step):
            verdict = self.verify(step)
            if verdict.verified:
                return CheckpointRef(uri=self.step_uri(step), step=step, framework=verdict.framework, layout=verdict.layout)
        return self.latest()

    def resume_plan(self) -> ResumePoint:
        """``resume_point()``, and the node count and data-parallel degree the recovery pipeline
        resubmitted this run to use (``resume_size()``: None when not said or malformed)."""
        nodes, data_parallel = resume_size()
        return ResumePoint(self.resume_point(), nodes=nodes, data_parallel=data_parallel)
