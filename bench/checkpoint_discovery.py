"""S3 requests (by operation) and wall time of one checkpoint discovery, at N = 10, 1,000 and 100,000
checkpoints, on moto's S3, for the cases docs/checkpoint-manifest.md describes:

    fresh pointer   `latest` names the newest step
    stale pointer   `latest` names the step in the middle (the writer died before moving it, many times)
    no pointer      no `latest` object
    newest torn     `latest` names the newest step, whose last shard was truncated after the commit

and, at the end, the verification of one step with 100,000 shards when its manifest is sound and when
it lists one key twice (rejected, and the older step chosen: the cost of rejecting must not grow with
the square of the shard count).

Requests are counted on the client (one per API call; the same code runs in the Find Newest Checkpoint
Lambda). Wall time on moto is dominated by moto itself, whose every listing walks the whole bucket
(O(N) per request); on real S3 a request costs about the same at any N, so the request count is the
figure to read. Checkpoints are placed straight into moto's backend (writing 200,000 objects through
HTTP would take minutes); every one is a committed manifest-v1 step.

    python bench/checkpoint_discovery.py [--sizes 10,1000,100000] [--shards 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "layers" / "recovery_core")]
os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-west-2"})

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402
from moto.core import DEFAULT_ACCOUNT_ID  # noqa: E402
from moto.s3.models import s3_backends  # noqa: E402

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore  # noqa: E402
from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified, parse_manifest  # noqa: E402
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA, POINTER_SCHEMA, step_dir  # noqa: E402

BUCKET = "bench-checkpoints"
PREFIX = "llama-70b/"
URI = f"s3://{BUCKET}/{PREFIX}"
STEP_EVERY = 1000  # a checkpoint every 1,000 training steps
SHARDS = 8
SHARD_BYTES = 64
CASES = ("fresh pointer", "stale pointer", "no pointer", "newest torn")
TARGET_FRESH = 3
TARGET_SEARCH_AT_100K = 64


def _manifest(step: int, shards: int) -> bytes:
    return json.dumps(
        {
            "schema": MANIFEST_SCHEMA,
            "job": "llama-70b",
            "step": step,
            "created_at": "2026-03-14T09:00:00Z",
            "shards": [{"key": f"__{r}_0.distcp", "size": SHARD_BYTES} for r in range(shards)],
        }
    ).encode()


def _pointer(step: int) -> bytes:
    return json.dumps(
        {"schema": POINTER_SCHEMA, "step": step, "checkpoint": f"{step_dir(step)}/", "updated_at": "2026-03-14T09:00:00Z"}
    ).encode()


def populate(count: int, shards_of_newest: int = SHARDS) -> list[int]:
    """``count`` committed checkpoints; older ones with one shard (keeps 100,000 of them cheap to build)."""
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    steps = [STEP_EVERY * (i + 1) for i in range(count)]
    for step in steps:
        shards = shards_of_newest if step >= steps[-3] else 1
        folder = f"{PREFIX}{step_dir(step)}/"
        for rank in range(shards):
            backend.put_object(BUCKET, f"{folder}__{rank}_0.distcp", b"\0" * SHARD_BYTES, disable_notification=True)
        backend.put_object(BUCKET, folder + "manifest.json", _manifest(step, shards), disable_notification=True)
    return steps


def arrange(case: str, steps: list[int]) -> None:
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    newest = steps[-1]
    pointer = {"fresh pointer": newest, "stale pointer": steps[len(steps) // 2], "no pointer": None, "newest torn": newest}[case]
    if pointer is None:
        backend.delete_object(BUCKET, PREFIX + "latest")
    else:
        backend.put_object(BUCKET, PREFIX + "latest", _pointer(pointer), disable_notification=True)
    last_shard = f"{PREFIX}{step_dir(newest)}/__{SHARDS - 1}_0.distcp"
    size = SHARD_BYTES // 2 if case == "newest torn" else SHARD_BYTES
    backend.put_object(BUCKET, last_shard, b"\0" * size, disable_notification=True)


def discover(s3: Any) -> tuple[int | None, Counter[str], float]:
    chosen, _, requests, elapsed = discover_with_reasons(s3)
    return chosen, requests, elapsed


def discover_with_reasons(s3: Any) -> tuple[int | None, list[str], Counter[str], float]:
    requests: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        requests[model.name] += 1

    s3.meta.events.register("before-call.s3", count)
    try:
        started = time.perf_counter()
        discovery = find_newest_verified(S3CheckpointStore(s3=s3), URI, job="llama-70b")
        elapsed = time.perf_counter() - started
    finally:
        s3.meta.events.unregister("before-call.s3", count)
    return (discovery.checkpoint.step if discovery.checkpoint else None), discovery.rejected, requests, elapsed


def run(sizes: list[int], shard_count: int) -> int:
    rows, failures = [], []
    for count in sizes:
        with mock_aws():
            s3 = boto3.client("s3", region_name="us-west-2")
            s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
            build_started = time.perf_counter()
            steps = populate(count)
            build = time.perf_counter() - build_started
            for case in CASES:
                arrange(case, steps)
                chosen, requests, elapsed = discover(s3)
                expected = steps[-2] if case == "newest torn" else steps[-1]
                total = sum(requests.values())
                rows.append((count, case, total, requests, chosen, expected, elapsed))
                if chosen != expected:
                    failures.append(f"N={count} {case}: chose {chosen}, expected {expected}")
                if case == "fresh pointer" and total > TARGET_FRESH:
                    failures.append(f"N={count} fresh pointer: {total} requests > {TARGET_FRESH}")
                if count >= 100_000 and case != "fresh pointer" and total > TARGET_SEARCH_AT_100K:
                    failures.append(f"N={count} {case}: {total} requests > {TARGET_SEARCH_AT_100K}")
            print(f"# N={count:,}: {count * 2 + 3 * (SHARDS - 1):,} objects placed in {build:.1f} s", file=sys.stderr)

    print(f"checkpoint discovery on moto S3 (a checkpoint every {STEP_EVERY:,} steps; newest three have {SHARDS} shards)")
    print()
    print("| N | case | S3 requests | GetObject | ListObjectsV2 | HeadObject | chosen step | wall time (moto) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for count, case, total, requests, chosen, expected, elapsed in rows:
        mark = "" if chosen == expected else f" (expected {expected})"
        print(
            f"| {count:,} | {case} | {total} | {requests['GetObject']} | {requests['ListObjectsV2']} | {requests['HeadObject']} "
            f"| {chosen}{mark} | {elapsed * 1000:.0f} ms |"
        )
    print()
    print(f"targets: fresh pointer <= {TARGET_FRESH} requests at every N; other cases <= {TARGET_SEARCH_AT_100K} at N = 100,000")
    print("and growing with log N; a torn newest checkpoint never chosen.")
    big_shards(sys.stdout)
    failures += many_shards(sys.stdout, shard_count)
    for failure in failures:
        print(f"TARGET MISSED: {failure}")
    return 1 if failures else 0


def big_shards(out: Any) -> None:
    """The fresh-pointer cost for a step with many shards: one more listing per 1,000 of them."""
    print(file=out)
    print("| shards in the chosen step | S3 requests (fresh pointer, N = 10) |", file=out)
    print("|---:|---:|", file=out)
    for shards in (8, 1_000, 2_500):
        with mock_aws():
            s3 = boto3.client("s3", region_name="us-west-2")
            s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
            steps = populate(10, shards_of_newest=shards)
            s3_backends[DEFAULT_ACCOUNT_ID]["aws"].put_object(BUCKET, PREFIX + "latest", _pointer(steps[-1]), disable_notification=True)
            chosen, requests, _ = discover(s3)
            assert chosen == steps[-1], chosen
            print(f"| {shards:,} | {sum(requests.values())} |", file=out)


def many_shards(out: Any, count: int) -> list[str]:
    """Discovery when the pointer names a step of ``count`` shards, its manifest sound or listing a key twice."""
    print(file=out)
    print(
        f"| step with {count:,} shards (pointer at it, one older step) | S3 requests | chosen step | wall time (moto) "
        "| parse + check of manifest.json alone |",
        file=out,
    )
    print("|---|---:|---:|---:|---:|", file=out)
    failures = []
    for duplicate in (False, True):
        with mock_aws():
            s3 = boto3.client("s3", region_name="us-west-2")
            s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
            backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
            older, newest = STEP_EVERY, 2 * STEP_EVERY
            backend.put_object(BUCKET, f"{PREFIX}{step_dir(older)}/__0_0.distcp", b"\0" * SHARD_BYTES, disable_notification=True)
            backend.put_object(BUCKET, f"{PREFIX}{step_dir(older)}/manifest.json", _manifest(older, 1), disable_notification=True)
            folder = f"{PREFIX}{step_dir(newest)}/"
            keys = [f"__{rank}_0.distcp" for rank in range(count)]
            for key in keys:
                backend.put_object(BUCKET, folder + key, b"\0" * SHARD_BYTES, disable_notification=True)
            listed = keys + keys[count // 2 : count // 2 + 1] if duplicate else keys  # the middle key twice
            body = json.loads(_manifest(newest, 1)) | {"shards": [{"key": key, "size": SHARD_BYTES} for key in listed]}
            manifest = json.dumps(body).encode()
            backend.put_object(BUCKET, folder + "manifest.json", manifest, disable_notification=True)
            backend.put_object(BUCKET, PREFIX + "latest", _pointer(newest), disable_notification=True)
            started = time.perf_counter()
            _, problem = parse_manifest(newest, manifest, "llama-70b")
            parsed = time.perf_counter() - started
            chosen, rejected, requests, elapsed = discover_with_reasons(s3)
            expected = older if duplicate else newest
            case = "one key listed twice" if duplicate else "sound manifest"
            print(
                f"| {case} | {sum(requests.values())} ({requests['GetObject']} GET, {requests['ListObjectsV2']} LIST) "
                f"| {chosen} | {elapsed * 1000:.0f} ms | {parsed * 1000:.0f} ms |",
                file=out,
            )
            if duplicate:
                print(f"\nrejected: {rejected[0] if rejected else '(nothing)'}", file=out)
            if chosen != expected or bool(problem) != duplicate:
                failures.append(f"{count:,} shards, {case}: chose {chosen}, expected {expected} ({problem or 'manifest accepted'})")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10,1000,100000", help="comma-separated checkpoint counts")
    parser.add_argument("--shards", type=int, default=100_000, help="shards of the step whose manifest lists a key twice")
    args = parser.parse_args()
    return run([int(size) for size in args.sizes.split(",")], args.shards)


if __name__ == "__main__":
    sys.exit(main())
