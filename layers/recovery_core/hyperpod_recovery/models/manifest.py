"""Checkpoint manifest v1 (and v1.1) and the ``latest`` pointer: the contract with training scripts
(docs/checkpoint-manifest.md is the spec; this module is its executable form).

A job writes ``<prefix>/step-<9-digit step>/`` shards, then ``manifest.json`` listing every shard
(relative key, size, optional checksum) only after all shards are durable, then moves
``<prefix>/latest`` forward with a conditional write. "Verified" means the manifest parses, names the
step of its folder, and every listed shard exists with the listed size.

v1.1 is v1 plus an optional ``layout`` (the world size and parallel degrees it was written at, and
whether it loads at another data-parallel width). Readers take both; the writer writes v1 (the same
bytes as before) unless given a layout, so an un-upgraded pipeline still reads what un-upgraded
scripts write: upgrade the pipeline before any script writes a layout.
"""

import json
import re
from collections import Counter
from datetime import datetime
from typing import Any, Final, Literal, Self

from pydantic import AwareDatetime, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

from hyperpod_recovery.models.common import Model

MANIFEST_SCHEMA: Final = "hyperpod-recovery/checkpoint-manifest/v1"
MANIFEST_SCHEMA_V1_1: Final = "hyperpod-recovery/checkpoint-manifest/v1.1"
# What a reader accepts; the version is the part after the last "/", as verdicts name it.
MANIFEST_SCHEMAS: Final = (MANIFEST_SCHEMA, MANIFEST_SCHEMA_V1_1)
POINTER_SCHEMA: Final = "hyperpod-recovery/checkpoint-pointer/v1"
MANIFEST_NAME = "manifest.json"
POINTER_NAME = "latest"
STEP_DIR_PREFIX = "step-"
STEP_DIGITS = 9
# Zero padding is what makes S3's lexicographic listing order the numeric order; a tenth digit would
# break it, so steps stop at 999,999,999 (Llama 3 405B pre-trained for about 1.2 million steps).
MAX_STEP = 10**STEP_DIGITS - 1
# Reader and writer limits: discovery reads at most this much of a manifest/pointer, and the writer
# refuses to write more (one constant each, so a commit can never produce what discovery will not read).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_POINTER_BYTES = 64 * 1024
MAX_JOB_CHARS = 256  # manifest `job`; Slurm job names may be longer, see manifest_job()
MAX_SHARD_KEY_CHARS = 1024  # S3's own key limit (bytes), so a listed relative key always fits
MAX_FRAMEWORK_CHARS = 64
# What a resubmitted job finds in its environment (exported by the controller agent's sbatch).
RESUME_FROM_ENV = "HYPERPOD_RECOVERY_RESUME_FROM"  # s3://bucket/prefix/step-000012000/
RESUME_STEP_ENV = "HYPERPOD_RECOVERY_RESUME_STEP"  # 12000
# The job name a checkpoint's manifest records where there is no SLURM_JOB_NAME (EKS: a re-created
# job carries its lineage's first name in it, so its manifests are its lineage's).
JOB_NAME_ENV = "HYPERPOD_RECOVERY_JOB_NAME"
# Shrink-and-continue: the node count and data-parallel degree a resubmitted copy runs at (set only
# when it differs from the size the job was written for, or on a grow-back), for resume_plan().
RESUME_NODES_ENV = "HYPERPOD_RECOVERY_RESUME_NODES"
RESUME_DATA_PARALLEL_ENV = "HYPERPOD_RECOVERY_RESUME_DATA_PARALLEL"
# A layout's largest values (v1.1), and so the largest resume size a script takes from its environment.
MAX_WORLD_SIZE = 10_000_000
MAX_LAYOUT_NODES = 100_000
MAX_MODEL_PARALLEL = 1_000_000
# sha256:<64 hex>, what `hyperpod-recovery checkpoint commit --checksums` writes and `verify --deep` checks.
CHECKSUM_PATTERN = r"^sha256:[0-9a-f]{64}$"

_STEP_FOLDER = re.compile(rf"^{STEP_DIR_PREFIX}([0-9]{{{STEP_DIGITS}}})/$")  # \d would take any script's digits
# One regex, not a Python loop per character: a 16 MiB manifest is 16 million characters of keys.
_BACKSLASH_OR_CONTROL = re.compile(r"[\\\x00-\x1f\x7f]")


def step_dir(step: int) -> str:
    """``12000`` -> ``step-000012000`` (no trailing slash)."""
    if not 0 <= step <= MAX_STEP:
        raise ValueError(f"step {step} is outside 0..{MAX_STEP}")
    return f"{STEP_DIR_PREFIX}{step:0{STEP_DIGITS}d}"


def step_of_folder(folder_name: str) -> int | None:
    """``step-000012000/`` -> 12000; anything else -> None."""
    match = _STEP_FOLDER.match(folder_name)
    return int(match.group(1)) if match else None


def manifest_job(slurm_job_name: str) -> str:
    """The ``job`` a manifest records for a Slurm job name, and what a reader compares it with.

    The first ``MAX_JOB_CHARS`` characters: Slurm accepts longer names than the manifest holds, and the
    writer and the reader must cut them the same way for a job to recognise its own checkpoints.
    """
    return slurm_job_name[:MAX_JOB_CHARS]


def manifest_size_problem(size: int) -> str | None:
    """Why a manifest of ``size`` bytes is not read by discovery (and so is never written), or None."""
    if size > MAX_MANIFEST_BYTES:
        return f"manifest.json is larger than {MAX_MANIFEST_BYTES // (1024 * 1024)} MiB"
    return None


class UnreadableJson(ValueError):
    """Why a manifest or pointer body is not one readable JSON document, phrased to follow its name."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # `json` keeps the last of two equal member names; which one a writer meant is anybody's guess.
    members = dict(pairs)
    if len(members) != len(pairs):
        duplicated = next(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
        raise UnreadableJson(f"names the field {duplicated!r} more than once")
    return members


def load_json(body: bytes) -> Any:
    """``json.loads`` for manifests and pointers; every way it can fail is an UnreadableJson with the reason."""
    try:
        return json.loads(body, object_pairs_hook=_unique_members)
    except json.JSONDecodeError as exc:
        raise UnreadableJson(f"is not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise UnreadableJson(f"is not valid JSON ({exc.reason})") from None
    except RecursionError:  # e.g. 16 MiB of "[": valid JSON that no parser should be asked to build
        raise UnreadableJson("is not valid JSON (nested too deeply)") from None


def relative_key_problem(key: str) -> str | None:
    """Why ``key`` may not be followed from inside a job's prefix, or None when it is a plain relative key.

    Pointers and manifests come from the training job's bucket, i.e. from whoever can write there:
    they may only name keys below the prefix they were found in.
    """
    if not key:
        return "is empty"
    if key.startswith("s3://") or "://" in key:
        return f"names another location ({key!r}); only keys relative to the job's prefix are followed"
    if key.startswith("/"):
        return f"is an absolute key ({key!r}); only keys relative to the job's prefix are followed"
    if _BACKSLASH_OR_CONTROL.search(key):
        return f"contains a backslash or control character ({key!r})"
    segments = key.rstrip("/").split("/")
    if ".." in segments:
        return f"climbs out of the job's prefix with '..' ({key!r})"
    if "" in segments or "." in segments:
        return f"has an empty or '.' path segment ({key!r})"
    return None


class Shard(Model):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=MAX_SHARD_KEY_CHARS)  # relative to the step folder
    size: int = Field(ge=0)
    checksum: str | None = Field(default=None, pattern=CHECKSUM_PATTERN)

    @field_validator("key")
    @classmethod
    def _relative_and_inside(cls, key: str) -> str:
        problem = relative_key_problem(key)
        if problem:
            raise ValueError(f"shard key {problem}")
        if key.endswith("/"):
            raise ValueError(f"shard key {key!r} names a folder, not an object")
        if key == MANIFEST_NAME:
            raise ValueError("the manifest cannot list itself as a shard")
        return key


class CheckpointLayout(Model):
    """Manifest v1.1's ``layout``: how the checkpoint was written, so the pipeline knows the sizes it
    can be loaded at. ``world_size`` = ``tensor`` x ``pipeline`` x ``data`` (x any other model-parallel
    degree the script folds into ``tensor``); ``nodes`` the job's node count then; ``reshardable``:
    it loads at another data-parallel degree (PyTorch DCP does).

    Strict types: it comes from the job's bucket, and ``"reshardable": "yes"`` or ``"data": 8.0`` is a
    writer's mistake to refuse, not to guess at (it decides whether a job is resumed on fewer nodes)."""

    model_config = ConfigDict(extra="forbid")

    world_size: StrictInt = Field(ge=1, le=MAX_WORLD_SIZE)
    nodes: StrictInt | None = Field(default=None, ge=1, le=MAX_LAYOUT_NODES)
    tensor: StrictInt = Field(default=1, ge=1, le=MAX_MODEL_PARALLEL)
    pipeline: StrictInt = Field(default=1, ge=1, le=MAX_MODEL_PARALLEL)
    data: StrictInt = Field(ge=1, le=MAX_WORLD_SIZE)
    reshardable: StrictBool = False

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.tensor * self.pipeline * self.data != self.world_size:
            raise ValueError(
                f"tensor {self.tensor} x pipeline {self.pipeline} x data {self.data} is "
                f"{self.tensor * self.pipeline * self.data}, not the world size {self.world_size}"
            )
        if self.nodes is not None and self.world_size % self.nodes:
            raise ValueError(f"world size {self.world_size} is not a whole number of ranks on each of {self.nodes} node(s)")
        return self

    def summary(self) -> str:
        """``world size 16 = tensor 2 x pipeline 1 x data 8 on 2 nodes, reshardable``: for verdicts and the CLI."""
        nodes = f" on {self.nodes} node{'s' if self.nodes != 1 else ''}" if self.nodes is not None else ""
        reshards = "reshardable" if self.reshardable else "not reshardable"
        return f"world size {self.world_size} = tensor {self.tensor} x pipeline {self.pipeline} x data {self.data}{nodes}, {reshards}"


def manifest_version(schema: str) -> str:
    """``hyperpod-recovery/checkpoint-manifest/v1.1`` -> ``v1.1``."""
    return schema.rsplit("/", 1)[-1]


class CheckpointManifest(Model):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # v1 without a layout, v1.1 with an optional one (checkpoint_manifest() picks the version).
    schema_: Literal["hyperpod-recovery/checkpoint-manifest/v1", "hyperpod-recovery/checkpoint-manifest/v1.1"] = Field(
        default=MANIFEST_SCHEMA, alias="schema"
    )
    job: str = Field(min_length=1, max_length=MAX_JOB_CHARS)  # manifest_job() of the Slurm job name
    step: int = Field(ge=0, le=MAX_STEP)
    created_at: AwareDatetime
    framework: str | None = Field(default=None, max_length=MAX_FRAMEWORK_CHARS)
    # Before the shards, which may run to 16 MiB: a person reading the file sees it at the top.
    layout: CheckpointLayout | None = None
    shards: list[Shard] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_shards(self) -> Self:
        # One pass: with a key listed twice, the old per-key count took minutes for 100,000 shards.
        counts = Counter(s.key for s in self.shards)
        if len(counts) != len(self.shards):
            duplicated = sorted(key for key, count in counts.items() if count > 1)
            raise ValueError(f"shards list a key more than once: {', '.join(duplicated[:5])}")
        return self

    @model_validator(mode="after")
    def _layout_needs_v1_1(self) -> Self:
        # A v1 reader refuses the field (extra="forbid"): a v1 manifest that carries it was written by
        # a writer that claims a version it does not follow.
        if self.layout is not None and self.schema_ == MANIFEST_SCHEMA:
            raise ValueError(f"a layout needs schema {MANIFEST_SCHEMA_V1_1!r}; v1 has no layout")
        return self

    @property
    def version(self) -> str:
        """``v1`` or ``v1.1``."""
        return manifest_version(self.schema_)


def checkpoint_manifest(
    *, job: str, step: int, created_at: datetime, shards: list[Shard], framework: str | None = None, layout: CheckpointLayout | None = None
) -> CheckpointManifest:
    """The manifest the writer commits: v1 without a layout (so a pipeline not yet upgraded reads it),
    v1.1 with one."""
    schema = MANIFEST_SCHEMA if layout is None else MANIFEST_SCHEMA_V1_1
    return CheckpointManifest(schema_=schema, job=job, step=step, created_at=created_at, framework=framework, layout=layout, shards=shards)


class CheckpointPointer(Model):
    """``<prefix>/latest``: a hint to the newest committed step, moved forward only, never trusted unverified."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["hyperpod-recovery/checkpoint-pointer/v1"] = Field(default=POINTER_SCHEMA, alias="schema")
    step: int = Field(ge=0, le=MAX_STEP)
    checkpoint: str = Field(min_length=1, max_length=1024)  # the step folder, relative to the prefix
    updated_at: AwareDatetime

    @field_validator("checkpoint")
    @classmethod
    def _inside_the_prefix(cls, checkpoint: str) -> str:
        problem = relative_key_problem(checkpoint)
        if problem:
            raise ValueError(f"checkpoint {problem}")
        if step_of_folder(checkpoint) is None:
            raise ValueError(f"checkpoint {checkpoint!r} is not a step folder of this prefix (step-<9 digits>/)")
        return checkpoint

    @model_validator(mode="after")
    def _folder_matches_step(self) -> Self:
        if step_of_folder(self.checkpoint) != self.step:
            raise ValueError(f"checkpoint {self.checkpoint!r} does not hold step {self.step}")
        return self
