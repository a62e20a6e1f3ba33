"""``hyperpod-recovery``: the command line for people and job scripts.

    hyperpod-recovery checkpoint commit s3://bucket/prefix --step 12000 [--job NAME] [--checksums]
    hyperpod-recovery checkpoint latest s3://bucket/prefix [--job NAME] [--json]
    hyperpod-recovery checkpoint verify s3://bucket/prefix/step-000012000/ [--job NAME] [--deep] [--json]
    hyperpod-recovery breaker status --cluster NAME [--table LEDGER] [--json]
    hyperpod-recovery breaker reset  --cluster NAME [--table LEDGER] --reason TEXT [--by WHO]
    hyperpod-recovery drill --stack NAME (--scenario FILE | --input FILE | --node ID | --job ID) [--live --yes]

Exit codes: 0 done / found / verified / breaker closed / drill execution succeeded; 1 the answer is
no (nothing verified, commit refused, breaker open, drill execution failed: escalated or capped);
2 bad usage or input; 3 AWS could not be read or written
(credentials, bucket, table, throttling). Uses the standard AWS credential chain and region.
The ledger table is the stack's LedgerTableName output (or $LEDGER_TABLE).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TextIO

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.checkpointing import Checkpoints
from hyperpod_recovery.drill import add_arguments as add_drill_arguments
from hyperpod_recovery.drill import run_drill
from hyperpod_recovery.errors import (
    CheckpointCommitRefused,
    CheckpointStoreUnavailable,
    CheckpointUnreadable,
    CheckpointWriteConflict,
    LedgerError,
    LedgerUnavailable,
)
from hyperpod_recovery.models.manifest import MAX_STEP, step_of_folder

EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_S3 = 0, 1, 2, 3
_ANY_JOB = "default: $SLURM_JOB_NAME; without either, any job's, and the writer is named"


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
    latest.add_argument("--job", help=f"only this job's checkpoints ({_ANY_JOB})")
    latest.add_argument("--json", action="store_true", help="print the whole discovery as JSON")

    verify = commands.add_parser("verify", help="check one step and explain what is wrong")
    verify.add_argument("uri", help="a step folder (s3://bucket/prefix/step-000012000/) or a prefix with --step")
    verify.add_argument("--step", type=_step)
    verify.add_argument("--job", help=f"the job that must have written it ({_ANY_JOB})")
    verify.add_argument("--deep", action="store_true", help="also hash every shard that has a checksum (reads every byte)")
    verify.add_argument("--json", action="store_true")

    breaker = groups.add_parser("breaker", help="the cluster's circuit breaker (docs/runbook.md)")
    actions = breaker.add_subparsers(dest="command", required=True)
    for name, text in (
        ("status", "show whether automation is stopped, why and since when"),
        ("reset", "close the breaker (a human's call)"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("--cluster", required=True, help="the guarded cluster's name (the stack's ClusterName)")
        action.add_argument("--table", default=os.environ.get("LEDGER_TABLE"), help="the ledger table (default: $LEDGER_TABLE)")
        if name == "status":
            action.add_argument("--json", action="store_true")
        else:
            action.add_argument("--reason", required=True, help="what was checked or fixed (kept in the breaker's history)")
            action.add_argument("--by", default=None, help="who resets it (default: the login name)")
    drill = groups.add_parser("drill", help="a recovery drill on the deployed stack, dry-run by default (hyperpod_recovery/drill.py)")
    add_drill_arguments(drill)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    s3: Any = None,
    dynamodb: Any = None,
    drill_clients: dict[str, Any] | None = None,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = _parser().parse_args(argv)
    if args.group == "drill":
        return run_drill(args, out=out, err=err, **(drill_clients or _drill_clients()))
    if args.group == "breaker":
        return _breaker(args, out, err, dynamodb)
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


def _drill_clients() -> dict[str, Any]:
    import boto3

    return {"sfn": boto3.client("stepfunctions"), "sagemaker": boto3.client("sagemaker"), "cloudformation": boto3.client("cloudformation")}


def _commit(args: argparse.Namespace, out: TextIO, s3: Any) -> int:
    result = Checkpoints(args.uri, job=args.job, s3=s3).commit(args.step, framework=args.framework, compute_checksums=args.checksums)
    pointer = "moved to this step" if result.pointer == "moved" else f"kept at step {result.pointer_step}"
    print(f"{result.uri}: {result.manifest}, {result.shards} shards, {result.total_bytes} bytes; latest pointer {pointer}", file=out)
    return EXIT_OK


def _latest(args: argparse.Namespace, out: TextIO, err: TextIO, s3: Any) -> int:
    discovery = Checkpoints(args.uri, job=args.job, s3=s3).discover()
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
    checkpoints = Checkpoints(uri, job=args.job, s3=s3)
    verdict = checkpoints.verify(step, deep=args.deep)
    if args.json:
        print(json.dumps({"uri": checkpoints.step_uri(step), "step": step} | asdict(verdict), indent=2), file=out)
    else:
        state = "verified" if verdict.verified else "NOT verified"
        print(f"{checkpoints.step_uri(step)}: {state}: {verdict.reason}", file=out)
    return EXIT_OK if verdict.verified else EXIT_NO


def _breaker(args: argparse.Namespace, out: TextIO, err: TextIO, dynamodb: Any) -> int:
    if not args.table:
        print("hyperpod-recovery: --table (or $LEDGER_TABLE) is required: the stack's LedgerTableName output", file=err)
        return EXIT_USAGE
    ledger = DynamoLedger(args.table, dynamodb=dynamodb)
    try:
        state = ledger.breaker(args.cluster)
        if args.command == "status":
            if args.json:
                print(state.model_dump_json(indent=2), file=out)
            else:
                since = f" since {state.changed_at.isoformat()} by {state.changed_by}" if state.changed_at else ""
                print(f"{args.cluster}: breaker {state.state.upper()}{since}" + (f": {state.reason}" if state.reason else ""), file=out)
            return EXIT_NO if state.state == "open" else EXIT_OK
        who = args.by or getpass.getuser()
        now = datetime.now(UTC)
        if state.state == "closed":
            print(f"{args.cluster}: breaker already closed; nothing changed", file=out)
            return EXIT_OK
        ledger.save_breaker(args.cluster, state.changed_to("closed", reason=args.reason, by=who, at=now))
        print(f"{args.cluster}: breaker closed by {who} (was open since {state.changed_at}: {state.reason})", file=out)
        return EXIT_OK
    except (LedgerError, LedgerUnavailable) as exc:
        print(f"hyperpod-recovery: ledger error: {exc}", file=err)
        return EXIT_S3


if __name__ == "__main__":
    sys.exit(main())
