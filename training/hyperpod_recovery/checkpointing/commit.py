"""Commit a checkpoint the manifest-v1 way (docs/checkpoint-manifest.md): list what the job wrote under
the step folder, write ``manifest.json`` once, then move ``<prefix>/latest`` forward only. Given the
layout it was written at, the manifest is v1.1; without, v1, byte for byte what it always was.

Both writes are conditional, so two writers (a retried rank 0, a zombie from before a restart) can
neither overwrite a committed manifest nor move the pointer backwards. Nothing is written that
discovery would not read: the writer's limits are the reader's (the same model and constants).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import ValidationError

from hyperpod_recovery.domain.checkpoints.discovery import (
    Verdict,
    check_shards,
    folder_sizes,
    parse_manifest,
    schema_problem,
    split_s3_uri,
    verified_by_manifest,
)
from hyperpod_recovery.errors import CheckpointCommitRefused, CheckpointWriteConflict
from hyperpod_recovery.models.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    MAX_POINTER_BYTES,
    POINTER_NAME,
    CheckpointLayout,
    CheckpointManifest,
    CheckpointPointer,
    Shard,
    checkpoint_manifest,
    load_json,
    manifest_job,
    manifest_size_problem,
    step_dir,
)
from hyperpod_recovery.ports import CheckpointWriter

# Each lost race means another writer moved the pointer; a handful of rounds settles any real contention.
POINTER_ATTEMPTS = 5
# Where checksums come from: a manifest is written once, so only a checkpoint committed with them has any.
NO_CHECKSUMS_FIX = "a step committed with --checksums, or checksums= from Python, has them"


@dataclass(frozen=True)
class CommitResult:
    uri: str  # the step folder
    step: int
    shards: int
    total_bytes: int
    manifest: Literal["written", "already committed"]
    pointer: Literal["moved", "kept"]
    pointer_step: int  # where `latest` points now


def commit_checkpoint(
    store: CheckpointWriter,
    uri: str,
    step: int,
    *,
    job: str,
    now: datetime,
    framework: str | None = None,
    checksums: Mapping[str, str] | None = None,
    compute_checksums: bool = False,
    layout: CheckpointLayout | None = None,
) -> CommitResult:
    """Write the manifest of ``step`` from what is under its folder, then move the pointer forward.

    Call it after every shard is durable (e.g. after ``torch.distributed.checkpoint.save`` returned on
    every rank). Safe to repeat: an identical manifest is left as it is. ``job`` is the Slurm job name;
    the manifest records ``manifest_job(job)``, what discovery compares the resumed job's name with.
    ``layout``: the world size and parallel degrees the checkpoint was written at (manifest v1.1; a
    pipeline older than v1.1 does not read it, so upgrade the pipeline first).
    """
    bucket, base = split_s3_uri(uri)
    folder = f"{base}{step_dir(step)}/"
    sizes = {
        key: size for key, size in folder_sizes(store, bucket, folder).items() if key != MANIFEST_NAME and not _folder_marker(key, size)
    }
    if not sizes:
        raise CheckpointCommitRefused(f"nothing under s3://{bucket}/{folder}: write the shards first, then commit")
    given = dict(checksums or {})
    unknown = sorted(set(given) - set(sizes))
    if unknown:
        raise CheckpointCommitRefused(f"checksums given for keys that are not in the folder: {', '.join(unknown[:5])}")
    if compute_checksums:
        given = {key: given.get(key) or store.sha256(bucket, folder + key) or "" for key in sizes}
    try:
        manifest = checkpoint_manifest(
            job=manifest_job(job),
            step=step,
            created_at=now,
            framework=framework,
            layout=layout,
            shards=[Shard(key=key, size=size, checksum=given.get(key) or None) for key, size in sorted(sizes.items())],
        )
    except ValidationError as exc:
        raise CheckpointCommitRefused(f"cannot describe s3://{bucket}/{folder}: {schema_problem(exc)}") from exc
    body = encode_manifest(manifest)
    too_large = manifest_size_problem(len(body))
    if too_large:
        raise CheckpointCommitRefused(
            f"cannot commit s3://{bucket}/{folder}: {too_large} ({len(body):,} bytes for {len(manifest.shards):,} objects), "
            "so discovery would never read it; write fewer, larger shards"
        )

    written = _write_manifest_once(store, bucket, folder, manifest, body)
    pointer, pointer_step = advance_pointer(store, bucket, base, step, now)
    return CommitResult(
        uri=f"s3://{bucket}/{folder}",
        step=step,
        shards=len(manifest.shards),
        total_bytes=sum(sizes.values()),
        manifest=written,
        pointer=pointer,
        pointer_step=pointer_step,
    )


def _folder_marker(key: str, size: int) -> bool:
    # A zero-byte "folder/" object (the S3 console's "Create folder", s3fs) holds no data and cannot be a
    # shard (a shard key names an object); discovery ignores it like any object the manifest does not list.
    return size == 0 and (key == "" or key.endswith("/"))


def encode_manifest(manifest: CheckpointManifest) -> bytes:
    """The bytes the writer puts in ``manifest.json``."""
    return manifest.model_dump_json(by_alias=True, exclude_none=True, indent=1).encode()


def _write_manifest_once(
    store: CheckpointWriter, bucket: str, folder: str, manifest: CheckpointManifest, body: bytes
) -> Literal["written", "already committed"]:
    key = folder + MANIFEST_NAME
    try:
        store.put(bucket, key, body, if_none_match=True)
        return "written"
    except CheckpointWriteConflict:
        existing = store.get(bucket, key, MAX_MANIFEST_BYTES + 1)
    # Another job's manifest with the same shards is not "already committed": its discovery rejects it.
    committed, problem = parse_manifest(manifest.step, existing or b"", manifest.job)
    if committed is not None and _same_shards(committed, manifest) and committed.layout == manifest.layout:
        return "already committed"
    why = problem or "its shards differ from what is in the folder now"
    if committed is not None and _same_shards(committed, manifest):
        recorded = committed.layout.summary() if committed.layout else "no layout"
        why = f"records another layout ({recorded})"
    raise CheckpointCommitRefused(f"s3://{bucket}/{key} already exists and {why}; a committed checkpoint is never overwritten")


def _same_shards(a: CheckpointManifest, b: CheckpointManifest) -> bool:
    return {(s.key, s.size) for s in a.shards} == {(s.key, s.size) for s in b.shards}


def advance_pointer(store: CheckpointWriter, bucket: str, base: str, step: int, now: datetime) -> tuple[Literal["moved", "kept"], int]:
    """Point ``<base>latest`` at ``step`` unless it already points at a newer one (compare-and-swap)."""
    key = base + POINTER_NAME
    body = CheckpointPointer(step=step, checkpoint=f"{step_dir(step)}/", updated_at=now).model_dump_json(by_alias=True).encode()
    for _ in range(POINTER_ATTEMPTS):
        current = store.get_with_etag(bucket, key, MAX_POINTER_BYTES + 1)
        if current is not None:
            current_step = _pointer_step(current[0])
            if current_step is not None and current_step >= step:
                return "kept", current_step
        try:
            # A corrupt pointer is replaced too, but only the exact version we read (If-Match).
            if current is None:
                store.put(bucket, key, body, if_none_match=True)
            else:
                store.put(bucket, key, body, if_match=current[1])
            return "moved", step
        except CheckpointWriteConflict:
            continue  # another writer moved it between our read and our write: read again
    raise CheckpointWriteConflict(f"s3://{bucket}/{key}: still contended after {POINTER_ATTEMPTS} attempts")


def _pointer_step(body: bytes) -> int | None:
    try:
        return CheckpointPointer.model_validate(load_json(body)).step
    except (ValueError, ValidationError):
        return None


def verify_checksums(store: CheckpointWriter, uri: str, step: int, *, job: str | None = None) -> Verdict:
    """Deep verification: the manifest checks out (written by ``job``, any when None) AND every shard with a
    checksum hashes to it (reads every byte). A manifest with no checksum at all is not verified: there is
    nothing to hash, and the reason says so (and what the shallow check found)."""
    bucket, base = split_s3_uri(uri)
    folder = f"{base}{step_dir(step)}/"
    body = store.get(bucket, folder + MANIFEST_NAME, MAX_MANIFEST_BYTES + 1)
    if body is None:
        return Verdict(False, reason="no manifest.json (checkpoint incomplete or still being written)")
    manifest, problem = parse_manifest(step, body, job)
    if manifest is None:
        return Verdict(False, reason=problem)
    problem = check_shards(manifest, folder_sizes(store, bucket, folder))
    if problem:
        return Verdict(False, reason=problem, job=manifest.job)
    with_checksum = [s for s in manifest.shards if s.checksum]
    if not with_checksum:
        # Nothing to hash: "verified deeply" would claim a check that was never made.
        shallow = verified_by_manifest(manifest, job).reason
        return Verdict(
            False,
            framework=manifest.framework,
            reason=f"cannot verify deeply: the manifest records no checksums ({NO_CHECKSUMS_FIX}); without --deep: {shallow}",
            job=manifest.job,
        )
    for shard in with_checksum:
        actual = store.sha256(bucket, folder + shard.key)
        if actual != shard.checksum:
            return Verdict(False, reason=f"shard {shard.key} hashes to {actual}, manifest says {shard.checksum}", job=manifest.job)
    unhashed = len(manifest.shards) - len(with_checksum)
    checked = f", {len(with_checksum)} checksums match" + (f" ({unhashed} shards have none: sizes only)" if unhashed else "")
    return verified_by_manifest(manifest, job, checked=checked)
