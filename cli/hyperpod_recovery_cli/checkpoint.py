"""``hyperpod-recovery checkpoint commit|latest|verify``: a job's checkpoint manifests in S3
(docs/checkpoint-manifest.md). Imported only when a checkpoint command runs (commands.py)."""

from __future__ import annotations

import argparse
import functools
import json
import shlex
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from hyperpod_recovery.checkpointing import Checkpoints, check_bucket_of, job_name
from hyperpod_recovery.domain.checkpoints.discovery import schema_problem
from hyperpod_recovery.models.manifest import MAX_STEP, CheckpointLayout, manifest_job, step_of_folder
from hyperpod_recovery_cli import PROG
from hyperpod_recovery_cli.inputs import one_line
from hyperpod_recovery_cli.invocation import EXIT_NO, EXIT_OK, UsageError

if TYPE_CHECKING:
    from hyperpod_recovery_cli.invocation import Invocation

_ANY_JOB = "default: $SLURM_JOB_NAME; without either, any job's, and the writer is named"


def register(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    """``checkpoint`` and its commands on the CLI's subparsers."""
    checkpoint = groups.add_parser("checkpoint", help="checkpoint manifests (docs/checkpoint-manifest.md)")
    checkpoint.set_defaults(usage=checkpoint)
    commands = checkpoint.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    commit = commands.add_parser(
        "commit", parents=[aws_options], help="write the manifest of a step's folder, then move the latest pointer forward"
    )
    commit.add_argument("uri", help="the job's checkpoint prefix, s3://bucket/prefix")
    commit.add_argument("--step", type=_step, required=True)
    commit.add_argument("--job", help="job name recorded in the manifest (default: $SLURM_JOB_NAME; one of them is required)")
    commit.add_argument("--framework", default=None, help="e.g. pytorch-dcp; recorded in the manifest")
    commit.add_argument("--checksums", action="store_true", help="read every shard back and record its sha256 (slow)")
    layout = commit.add_argument_group(
        "layout", "the size it was written at (manifest v1.1: upgrade the pipeline before scripts write one; none given: v1)"
    )
    for option, name, text in _LAYOUT_OPTIONS:
        layout.add_argument(option, dest=name, type=_positive, metavar="N", help=text)
    layout.add_argument("--reshardable", action="store_true", help="it loads at another data-parallel degree (PyTorch DCP does)")
    commit.set_defaults(run=_commit)

    latest = commands.add_parser("latest", parents=[aws_options], help="print the newest verified checkpoint of a prefix")
    latest.add_argument("uri", help="the job's checkpoint prefix, s3://bucket/prefix")
    latest.add_argument("--job", help=f"only this job's checkpoints ({_ANY_JOB})")
    latest.add_argument("--json", action="store_true", help="print the whole discovery as JSON")
    latest.set_defaults(run=_latest)

    verify = commands.add_parser("verify", parents=[aws_options], help="check one step and explain what is wrong")
    verify.add_argument("uri", help="a step folder (s3://bucket/prefix/step-000012000/) or a prefix with --step")
    verify.add_argument("--step", type=_step)
    verify.add_argument("--job", help=f"the job that must have written it ({_ANY_JOB})")
    verify.add_argument(
        "--deep",
        action="store_true",
        help="also hash every shard that has a checksum (reads every byte); without any checksum, not verified (exit 1)",
    )
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=_verify)


def _step(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_STEP:
        raise argparse.ArgumentTypeError(f"a step is a whole number from 0 to {MAX_STEP}, not {text!r}")
    return int(text)


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number from 1 up, not {text!r}")
    return int(text)


# commit's layout options (manifest v1.1): argument name, CheckpointLayout field, help.
_LAYOUT_OPTIONS = (
    ("--world-size", "world_size", "ranks the checkpoint was written by (default: tensor x pipeline x data)"),
    ("--tensor-parallel", "tensor", "tensor-parallel degree, with any other model-parallel degree folded in (default 1)"),
    ("--pipeline-parallel", "pipeline", "pipeline-parallel degree (default 1)"),
    ("--data-parallel", "data", "data-parallel degree (default: world size / (tensor x pipeline))"),
    ("--nodes", "nodes", "the job's node count when it wrote the checkpoint"),
)


def _layout(args: argparse.Namespace) -> CheckpointLayout | None:
    """The layout commit's options describe (manifest v1.1), or None when none was given (v1).

    The world size or the data-parallel degree may be left out: it follows from the others."""
    given = {name: getattr(args, name) for _, name, _ in _LAYOUT_OPTIONS if getattr(args, name) is not None}
    if not given and not args.reshardable:
        return None
    tensor, pipeline = given.get("tensor", 1), given.get("pipeline", 1)
    if "world_size" not in given and "data" not in given:
        raise UsageError("a layout needs --world-size or --data-parallel (the other follows from tensor x pipeline x data)")
    if "world_size" not in given:
        given["world_size"] = tensor * pipeline * given["data"]
    if "data" not in given:
        data, left = divmod(given["world_size"], tensor * pipeline)
        if left:
            raise UsageError(f"world size {given['world_size']} is not a multiple of tensor {tensor} x pipeline {pipeline}")
        given["data"] = data
    try:
        return CheckpointLayout(**given, reshardable=args.reshardable)
    except ValidationError as exc:
        raise UsageError(f"the layout is not consistent: {schema_problem(exc).replace('Value error, ', '')}") from exc


def _malformed_is_usage(command: Callable[[Invocation], int]) -> Callable[[Invocation], int]:
    """A malformed s3:// URI or step folder (ValueError) is bad usage."""

    @functools.wraps(command)
    def run(invocation: Invocation) -> int:
        try:
            return command(invocation)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    return run


def _checkpoints(invocation: Invocation, uri: str) -> Checkpoints:
    return Checkpoints(uri, job=invocation.args.job, s3=invocation.client("s3"))


@_malformed_is_usage
def _commit(invocation: Invocation) -> int:
    args, out = invocation.args, invocation.out
    check_bucket_of(args.uri)
    if job_name(args.job)[0] is None:  # checked before AWS: an unnamed manifest is one the job never resumes
        raise UsageError(
            "checkpoint commit needs the job's name: give --job NAME (the Slurm job's name, as `squeue -o %j` shows it) "
            "or run it inside the job, where $SLURM_JOB_NAME is set; the job's recovery resumes only checkpoints "
            "committed under its name"
        )
    layout = _layout(args)
    result = _checkpoints(invocation, args.uri).commit(args.step, framework=args.framework, compute_checksums=args.checksums, layout=layout)
    pointer = "moved to this step" if result.pointer == "moved" else f"kept at step {result.pointer_step}"
    described = f"; layout: {layout.summary()}" if layout is not None else ""
    said = f"{result.uri}: {result.manifest}, {result.shards} shards, {result.total_bytes} bytes; latest pointer {pointer}"
    print(said + described, file=out)
    return EXIT_OK


@_malformed_is_usage
def _latest(invocation: Invocation) -> int:
    args, out, err = invocation.args, invocation.out, invocation.err
    checkpoints = _checkpoints(invocation, args.uri)
    discovery = checkpoints.discover()
    if args.json:
        print(
            json.dumps(
                asdict(discovery)
                | {
                    "checkpoint": discovery.checkpoint and discovery.checkpoint.model_dump(),
                    # (when its manifest says it was committed; None for a checkpoint verified by a marker)
                    "committed_at": discovery.committed_at and discovery.committed_at.isoformat(),
                },
                indent=2,
            ),
            file=out,
        )
    elif discovery.checkpoint:
        print(discovery.checkpoint.uri, file=out)
    for reason in discovery.rejected:
        print(f"rejected: {reason}", file=err)
    if discovery.checkpoint is None:  # said with --json too: stdout stays the document
        print(one_line(_none_verified(checkpoints, args.uri)), file=err)
        return EXIT_NO
    return EXIT_OK


def _none_verified(checkpoints: Checkpoints, uri: str) -> str:
    """Why ``latest`` found nothing under ``uri`` (as given), and when only the job name stood in the
    way, whose checkpoint there is."""
    if checkpoints.job is None:
        return f"no verified checkpoint under {uri}"
    # The name came from the environment: inside `salloc` $SLURM_JOB_NAME is its command's ("bash", "interactive").
    named = "--job" if checkpoints.job_from_env is None else f"from ${checkpoints.job_from_env}"
    nothing = f"no verified checkpoint of job {checkpoints.job!r} ({named}) under {uri}"
    other = checkpoints.other_jobs()
    if other is None:
        return f"{nothing}, nor of any other job"
    if other.job == manifest_job(checkpoints.job):  # past the verifications discovery makes: the rejections say why
        return nothing
    writer = f"job {other.job!r}" if other.job else "a job its checkpoint does not name"
    again = f": {PROG} checkpoint latest {shlex.quote(uri)} --job {shlex.quote(other.job)}" if other.job else ""
    return f"{nothing}; its newest verified checkpoint is step {other.checkpoint.step}, written by {writer}{again}"


@_malformed_is_usage
def _verify(invocation: Invocation) -> int:
    args, out = invocation.args, invocation.out
    uri, step = args.uri, args.step
    if step is None:
        head, _, folder = uri.rstrip("/").rpartition("/")
        step = step_of_folder(folder + "/")
        if step is None or not head.startswith("s3://"):
            raise ValueError(f"{uri!r} is not a step folder (…/step-<9 digits>/); give the prefix and --step")
        uri = head
    checkpoints = _checkpoints(invocation, uri)
    verdict = checkpoints.verify(step, deep=args.deep)
    if args.json:
        # (a v1 answer keeps its shape: the manifest's own time is in the manifest)
        found = {name: value for name, value in asdict(verdict).items() if name not in ("layout", "created_at")}
        if verdict.layout is not None:  # a v1.1 manifest's; a v1 answer keeps its shape
            found["layout"] = verdict.layout.model_dump(exclude_none=True)
        print(json.dumps({"uri": checkpoints.step_uri(step), "step": step} | found, indent=2), file=out)
    else:
        state = "verified" if verdict.verified else "NOT verified"
        print(f"{checkpoints.step_uri(step)}: {state}: {verdict.reason}", file=out)
    return EXIT_OK if verdict.verified else EXIT_NO
