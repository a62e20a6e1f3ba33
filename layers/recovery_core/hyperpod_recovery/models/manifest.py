"""Checkpoint manifest v1 and the ``latest`` pointer: the contract with training scripts
(docs/checkpoint-manifest.md is the spec; this module is its executable form).

A job writes ``<prefix>/step-<9-digit step>/`` shards, then ``manifest.json`` listing every shard
(relative key, size, optional checksum) only after all shards are durable, then moves
``<prefix>/latest`` forward with a conditional write. "Verified" means the manifest parses, names the
step of its folder, and every listed shard exists with the listed size.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

MANIFEST_SCHEMA: Final = "hyperpod-recovery/checkpoint-manifest/v1"
POINTER_SCHEMA: Final = "hyperpod-recovery/checkpoint-pointer/v1"
MANIFEST_NAME = "manifest.json"
POINTER_NAME = "latest"
STEP_DIR_PREFIX = "step-"
STEP_DIGITS = 9
# Zero padding is what makes S3's lexicographic listing order the numeric order; a tenth digit would
# break it, so steps stop at 999,999,999 (Llama 3 405B pre-trained for about 1.2 million steps).
MAX_STEP = 10**STEP_DIGITS - 1
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_POINTER_BYTES = 64 * 1024
# What a resubmitted job finds in its environment (exported by the controller agent's sbatch).
RESUME_FROM_ENV = "HYPERPOD_RECOVERY_RESUME_FROM"  # s3://bucket/prefix/step-000012000/
RESUME_STEP_ENV = "HYPERPOD_RECOVERY_RESUME_STEP"  # 12000
# sha256:<64 hex>, what `hyperpod-recovery checkpoint commit --checksums` writes and `verify --deep` checks.
CHECKSUM_PATTERN = r"^sha256:[0-9a-f]{64}$"

_STEP_FOLDER = re.compile(rf"^{STEP_DIR_PREFIX}(\d{{{STEP_DIGITS}}})/$")


def step_dir(step: int) -> str:
    """``12000`` -> ``step-000012000`` (no trailing slash)."""
    if not 0 <= step <= MAX_STEP:
        raise ValueError(f"step {step} is outside 0..{MAX_STEP}")
    return f"{STEP_DIR_PREFIX}{step:0{STEP_DIGITS}d}"


def step_of_folder(folder_name: str) -> int | None:
    """``step-000012000/`` -> 12000; anything else -> None."""
    match = _STEP_FOLDER.match(folder_name)
    return int(match.group(1)) if match else None


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
    if "\\" in key or any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        return f"contains a backslash or control character ({key!r})"
    segments = key.rstrip("/").split("/")
    if ".." in segments:
        return f"climbs out of the job's prefix with '..' ({key!r})"
    if "" in segments or "." in segments:
        return f"has an empty or '.' path segment ({key!r})"
    return None


class Shard(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=1024)  # relative to the step folder
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


class CheckpointManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["hyperpod-recovery/checkpoint-manifest/v1"] = Field(default=MANIFEST_SCHEMA, alias="schema")
    job: str = Field(min_length=1, max_length=256)
    step: int = Field(ge=0, le=MAX_STEP)
    created_at: AwareDatetime
    framework: str | None = Field(default=None, max_length=64)
    shards: list[Shard] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_shards(self) -> CheckpointManifest:
        keys = [s.key for s in self.shards]
        if len(keys) != len(set(keys)):
            duplicated = sorted({k for k in keys if keys.count(k) > 1})
            raise ValueError(f"shards list a key more than once: {', '.join(duplicated[:5])}")
        return self


class CheckpointPointer(BaseModel):
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
    def _folder_matches_step(self) -> CheckpointPointer:
        if step_of_folder(self.checkpoint) != self.step:
            raise ValueError(f"checkpoint {self.checkpoint!r} does not hold step {self.step}")
        return self
