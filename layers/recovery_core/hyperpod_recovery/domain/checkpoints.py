"""Find the newest *verified* checkpoint under a job's prefix (manifest v1).

Verified = manifest.json parses, names the step of its folder, and every shard it lists exists
with the listed size. A torn newest checkpoint (missing or short shard, no manifest, bad JSON)
falls back to the next older one. This first version lists the step folders with a delimiter
(one request per 1,000 steps); the pointer fast path and log-N search come with issue 3.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import ValidationError

from hyperpod_recovery.models.commands import CheckpointRef
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.manifest import MANIFEST_NAME, CheckpointManifest

_STEP_DIR = re.compile(r"^step-(\d{1,18})/$")
_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(?:/(?P<prefix>.*))?$")
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


class CheckpointReader(Protocol):
    """The read-only S3 calls discovery needs (adapters/checkpoints.py; tests/fakes.py)."""

    def list_folders(self, bucket: str, prefix: str) -> list[str]:
        """Immediate sub-folder names under ``prefix`` (e.g. ``step-000001000/``), in key order."""
        ...

    def read(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        """The object's bytes, or None if it does not exist."""
        ...

    def sizes(self, bucket: str, prefix: str) -> dict[str, int]:
        """Every object under ``prefix``: key relative to the prefix -> size in bytes."""
        ...


@dataclass
class Discovery:
    checkpoint: CheckpointRef | None
    rejected: list[str] = field(default_factory=list)  # "step 1300: shard x truncated (..)"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b/``); the prefix always ends with a slash."""
    match = _S3_URI.match(uri)
    if not match:
        raise ValueError(f"not an s3:// URI: {uri!r}")
    prefix = (match.group("prefix") or "").strip("/")
    return match.group("bucket"), f"{prefix}/" if prefix else ""


def verify_step(step: int, manifest_bytes: bytes | None, sizes: dict[str, int]) -> tuple[CheckpointManifest | None, str]:
    """(manifest, "") when the step verifies, else (None, reason)."""
    if manifest_bytes is None:
        return None, "no manifest.json (checkpoint incomplete or still being written)"
    try:
        manifest = CheckpointManifest.model_validate(json.loads(manifest_bytes))
    except json.JSONDecodeError as exc:
        return None, f"manifest.json is not valid JSON ({exc.msg})"
    except ValidationError as exc:
        return None, f"manifest.json does not match schema v1: {format_validation_error(exc)}"
    if manifest.step != step:
        return None, f"manifest says step {manifest.step} but lives in the folder of step {step}"
    for shard in manifest.shards:
        actual = sizes.get(shard.key)
        if actual is None:
            return None, f"shard {shard.key} is missing"
        if actual != shard.size:
            return None, f"shard {shard.key} is {actual} bytes, manifest says {shard.size}"
    return manifest, ""


def find_newest_verified(reader: CheckpointReader, uri: str) -> Discovery:
    bucket, prefix = split_s3_uri(uri)
    steps: list[tuple[int, str]] = []
    for folder_name in reader.list_folders(bucket, prefix):
        match = _STEP_DIR.match(folder_name)
        if match:
            steps.append((int(match.group(1)), folder_name))
    discovery = Discovery(checkpoint=None)
    for step, folder_name in sorted(steps, reverse=True):
        folder = prefix + folder_name
        sizes = reader.sizes(bucket, folder)
        manifest, problem = verify_step(step, reader.read(bucket, folder + MANIFEST_NAME, MAX_MANIFEST_BYTES), sizes)
        if manifest is None:
            discovery.rejected.append(f"step {step}: {problem}")
            continue
        discovery.checkpoint = CheckpointRef(uri=f"s3://{bucket}/{folder}", step=step, framework=manifest.framework)
        break
    return discovery
