"""``hyperpod-recovery``: the command line for people and job scripts.

    hyperpod-recovery checkpoint commit s3://bucket/prefix --step 12000 [--job NAME] [--checksums]
    hyperpod-recovery checkpoint latest s3://bucket/prefix [--json]
    hyperpod-recovery checkpoint verify s3://bucket/prefix/step-000012000/ [--deep] [--json]

Exit codes: 0 done / found / verified; 1 the answer is no (nothing verified, commit refused);
2 bad usage or input; 3 S3 could not be read or written (credentials, bucket, throttling).
Uses the standard AWS credential chain and region.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, TextIO

from hyperpod_recovery.checkpointing import Checkpoints
from hyperpod_recovery.errors import CheckpointCommitRefused, CheckpointStoreUnavailable, CheckpointUnreadable, CheckpointWriteConflict
from hyperpod_recovery.models.manifest import MAX_STEP, step_of_folder

EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_S3 = 0, 1, 2, 3


def _step(text: str) -> int:
    if not text.isdigit() or int(text) > MAX_STEP:
        raise argparse.ArgumentTypeError(f"a step is a whole number from 0 to {MAX_STEP}, not {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hyperpod-recovery", description="HyperPod recovery tools.")
    groups = parser.add_subparsers(dest="group", required=True)
    checkpoint = groups.add_parser("checkpoint", help="checkpoint manifests (docs/checkpoint-manifest.md)")
    commands = checkpoint.add_subparsers(dest="command", required=True)

    commit = commands.add_parser("commit", help="write the manifest of a step's folder, then move the latest pointer forward")
    commit.add_argument("uri", help="the job's checkpoint prefix, s3://bucket/prefix")
    commit.add_argument("--step", type=_step, required=True)
    commit.add_argument("--job", help="job name recorded in the manifest (default: $SLURM_JOB_NAME)")
    commit.add_argument("--framework", default=None, help="e.g. pytorch-dcp; recorded in the manifest")
    commit.add_argument("--checksums", action="store_true", help="read every shard back and record its sha256 (slow)")

    latest = commands.add_parser("latest", help="print the newest verified checkpoint of a prefix")
    latest.add_argument("uri", help="the job's checkpoint prefix, s3://bucket/prefix")
    latest.add_argument("--json", action="store_true", help="print the whole discovery as JSON")

    verify = commands.add_parser("verify", help="check one step and explain what is wrong")
    verify.add_argument("uri", help="a step folder (s3://bucket/prefix/step-000012000/) or a prefix with --step")
    verify.add_argument("--step", type=_step)
    verify.add_argument("--deep", action="store_true", help="also hash every shard that has a checksum (reads every byte)")
    verify.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None, s3: Any = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = _parser().parse_args(argv)
    try:
        if args.command == "commit":
            return _commit(args, out, s3)
        if args.command == "latest":
            return _latest(args, out, err, s3)
        return _verify(args, out, s3)
    except ValueError as exc:  # a malformed s3:// URI or step
        print(f"hyperpod-recovery: {exc}", file=err)
        return EXIT_USAGE
    except (CheckpointCommitRefused, CheckpointWriteConflict) as exc:
        print(f"hyperpod-recovery: commit refused: {exc}", file=err)
        return EXIT_NO
    except (CheckpointUnreadable, CheckpointStoreUnavailable) as exc:
        print(f"hyperpod-recovery: S3 error: {exc}", file=err)
        return EXIT_S3


def _commit(args: argparse.Namespace, out: TextIO, s3: Any) -> int:
    result = Checkpoints(args.uri, job=args.job, s3=s3).commit(args.step, framework=args.framework, compute_checksums=args.checksums)
    pointer = "moved to this step" if result.pointer == "moved" else f"kept at step {result.pointer_step}"
    print(f"{result.uri}: {result.manifest}, {result.shards} shards, {result.total_bytes} bytes; latest pointer {pointer}", file=out)
    return EXIT_OK


def _latest(args: argparse.Namespace, out: TextIO, err: TextIO, s3: Any) -> int:
    discovery = Checkpoints(args.uri, s3=s3).discover()
    if args.json:
        print(
            json.dumps(asdict(discovery) | {"checkpoint": discovery.checkpoint and discovery.checkpoint.model_dump()}, indent=2), file=out
        )
    elif discovery.checkpoint:
        print(discovery.checkpoint.uri, file=out)
    for reason in discovery.rejected:
        print(f"rejected: {reason}", file=err)
    if discovery.checkpoint is None:
        if not args.json:
            print(f"no verified checkpoint under {args.uri}", file=err)
        return EXIT_NO
    return EXIT_OK


def _verify(args: argparse.Namespace, out: TextIO, s3: Any) -> int:
    uri, step = args.uri, args.step
    if step is None:
        head, _, folder = uri.rstrip("/").rpartition("/")
        step = step_of_folder(folder + "/")
        if step is None or not head.startswith("s3://"):
            raise ValueError(f"{uri!r} is not a step folder (…/step-<9 digits>/); give the prefix and --step")
        uri = head
    checkpoints = Checkpoints(uri, s3=s3)
    verdict = checkpoints.verify(step, deep=args.deep)
    if args.json:
        print(json.dumps({"uri": checkpoints.step_uri(step), "step": step} | asdict(verdict), indent=2), file=out)
    else:
        state = "verified" if verdict.verified else "NOT verified"
        print(f"{checkpoints.step_uri(step)}: {state}: {verdict.reason}", file=out)
    return EXIT_OK if verdict.verified else EXIT_NO


if __name__ == "__main__":
    sys.exit(main())
