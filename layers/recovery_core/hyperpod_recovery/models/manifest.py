"""Checkpoint manifest v1: the contract with training scripts (see docs/checkpoint-manifest.md).

A job writes ``<prefix>/step-<zero-padded step>/`` shards, then ``manifest.json`` listing every
shard (relative key, size, optional checksum) only after all shards are durable. "Verified" means
the manifest parses and every listed shard exists with the listed size.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

MANIFEST_SCHEMA = "hyperpod-recovery/checkpoint-manifest/v1"
MANIFEST_NAME = "manifest.json"
STEP_DIR_PREFIX = "step-"
STEP_DIGITS = 9


def step_dir(step: int) -> str:
    return f"{STEP_DIR_PREFIX}{step:0{STEP_DIGITS}d}"


class Shard(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=1024)  # relative to the step folder
    size: int = Field(ge=0)
    checksum: str | None = Field(default=None, max_length=256)

    @field_validator("key")
    @classmethod
    def _relative_and_inside(cls, key: str) -> str:
        # A manifest may only point inside its own step folder.
        if key.startswith("/") or key.startswith("s3:") or ".." in key.split("/"):
            raise ValueError(f"shard key {key!r} must be relative to its step folder")
        return key


class CheckpointManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: Literal["hyperpod-recovery/checkpoint-manifest/v1"] = Field(alias="schema")
    job: str = Field(min_length=1, max_length=256)
    step: int = Field(ge=0)
    created_at: AwareDatetime
    framework: str | None = Field(default=None, max_length=64)
    shards: list[Shard] = Field(min_length=1)
