"""``hyperpod-recovery``: the command line for people and job scripts, as a function of its
arguments, streams, clients and clock (``run``); main.py is the console script that calls it.

    hyperpod-recovery checkpoint commit s3://bucket/prefix --step 12000 [--job NAME] [--checksums]
        [--world-size N] [--tensor-parallel T] [--pipeline-parallel P] [--data-parallel D] [--nodes N] [--reshardable]
    hyperpod-recovery checkpoint latest s3://bucket/prefix [--job NAME] [--json]
    hyperpod-recovery checkpoint verify s3://bucket/prefix/step-000012000/ [--job NAME] [--deep] [--json]
    hyperpod-recovery breaker status (--stack NAME | --cluster NAME [--table LEDGER]) [--json]
    hyperpod-recovery breaker reset  (--stack NAME | --cluster NAME [--table LEDGER]) --reason TEXT [--by WHO] [--yes]
    hyperpod-recovery drill --stack NAME (--scenario FILE | --input FILE | --node ID | --job ID) [--live --yes]
    hyperpod-recovery preflight --stack NAME [--json]
    hyperpod-recovery drills DIR [--junit FILE]      (in a clone: the sandbox runs each scenario)
    hyperpod-recovery deploy --cluster ARN [--checkpoint-buckets PATTERN] [--email ADDR] [--stack NAME] [--param K=V] [--disarm] [--yes]
    hyperpod-recovery arm --stack NAME [--reason TEXT] [--yes]
    hyperpod-recovery incidents --stack NAME [--open] [--escalated] [--since 6h] [--json]
    hyperpod-recovery incidents show ID --stack NAME [--json]
    hyperpod-recovery locks --stack NAME [--json]
    hyperpod-recovery locks release NODE --stack NAME --reason TEXT [--yes]
    hyperpod-recovery stop INCIDENT --stack NAME --reason TEXT [--yes]
    hyperpod-recovery hold NODE --stack NAME --reason TEXT [--yes]
    hyperpod-recovery unhold NODE --stack NAME --reason TEXT [--yes]
    hyperpod-recovery verdicts list --stack NAME [--since 30d] [--rule stall|slow] [--open] [--json]
    hyperpod-recovery verdicts confirm|reject VERDICT --stack NAME --reason TEXT [--yes] [--force]
    hyperpod-recovery goodput [--stack NAME [--since 30d] | --from FILE] [--nodes N] [--failure-rate R] [--detect T ...]
        [--checkpoint-interval T | --checkpoint-prefix s3://...] [--checkpoint-cost T] [--json] [--html FILE]
    hyperpod-recovery --version

A command that changes something (changes.py declares which) asks at a terminal or takes ``--yes``;
with neither it is refused (exit 2) before any AWS call, and each change is kept in the ledger's
audit log. ``--json`` prints one document per command, its schema in cli_json.py (docs/cli-json.md).

Every command takes ``--region REGION`` and ``--profile NAME`` (before or after the command's name),
found as the AWS CLI v2 finds them (aws_session.py): AWS credentials from the standard chain
(environment, the profile, SSO, instance role); the region from ``--region``, else $AWS_REGION, else
$AWS_DEFAULT_REGION, else the profile's. The ledger table is the stack's
LedgerTableName output (or $LEDGER_TABLE).

Exit codes, for every command:
  0    done / found / verified / breaker closed / drill execution succeeded / preflight ready;
       --help, --version
  1    the answer is no: nothing verified (with --deep, also a manifest without any checksum),
       commit refused, breaker open, drill execution failed (escalated or capped), a preflight
       check failed or could not be made; an on-call change refused (a running incident holds
       the lock, no such node, incident or verdict, a verdict already reviewed or reviewed
       meanwhile) or not confirmed
  2    bad usage or input: no command, an unknown option, a missing or malformed argument (a
       blank reason, a control character in text kept and printed back, a bucket name S3's naming
       rules refuse, a checkpoint commit with no job name), an unreadable file or
       one whose fields are not what they must be, a stack that is not ours, a breaker reset of a
       cluster the ledger holds nothing of; a change with no --yes and no terminal to ask; a number
       that is not finite or out of its range; no AWS region configured; an AWS profile that does not
       exist; an SDK too old for the preflight
  3    AWS could not be read or written: no credentials, access denied, no such bucket, table or
       stack, throttling, no connection, no answer in time (aws_calls.py: a call unanswered after
       3 s is said on stderr first)
  130  interrupted (Ctrl-C)
Every failure is one line on stderr, never a traceback.

A command is a function ``(Invocation) -> int`` registered on its parser with
``set_defaults(run=...)``. It makes its AWS clients with ``invocation.client("service")`` when it
needs them, so a missing region or credentials reach run()'s one error handler; its arguments are
checked first, without AWS.
"""

from __future__ import annotations

import argparse
import functools
import getpass
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError, ProfileNotFound
from pydantic import ValidationError

import hyperpod_recovery
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.checkpointing import Checkpoints, check_bucket_of, job_name
from hyperpod_recovery.domain.checkpoints.discovery import schema_problem
from hyperpod_recovery.errors import (
    CheckpointCommitRefused,
    CheckpointStoreUnavailable,
    CheckpointUnreadable,
    CheckpointWriteConflict,
    LedgerError,
    LedgerUnavailable,
)
from hyperpod_recovery.models.common import CLUSTER_NAME_PATTERN
from hyperpod_recovery.models.manifest import MAX_STEP, CheckpointLayout, manifest_job, step_of_folder
from hyperpod_recovery.models.records import AuditEntry, BreakerState
from hyperpod_recovery_cli import PROG
from hyperpod_recovery_cli.aws_session import NO_CREDENTIALS, NO_REGION, AwsClients
from hyperpod_recovery_cli.changes import confirm, declare, refusal
from hyperpod_recovery_cli.deploy import add_arm_arguments, add_deploy_arguments, arm_command, deploy_command
from hyperpod_recovery_cli.drill import add_arguments as add_drill_arguments
from hyperpod_recovery_cli.drill import run_drill
from hyperpod_recovery_cli.drill_suite import SandboxMissing, run_drills
from hyperpod_recovery_cli.drill_suite import add_arguments as add_suite_arguments
from hyperpod_recovery_cli.goodput import add_arguments as add_goodput_arguments
from hyperpod_recovery_cli.goodput import run_goodput
from hyperpod_recovery_cli.inputs import InputRefused, OneLineParser, one_line, plain_text, shown
from hyperpod_recovery_cli.oncall import OnCallRefused
from hyperpod_recovery_cli.oncall import add_commands as add_oncall_commands
from hyperpod_recovery_cli.preflight import PreflightUsageError, run_preflight
from hyperpod_recovery_cli.preflight import add_arguments as add_preflight_arguments
from hyperpod_recovery_cli.stack import NotOurStack, StackTooOld, read_stack
from hyperpod_recovery_cli.verdicts import add_commands as add_verdict_commands

EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_AWS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_S3 = EXIT_AWS  # the checkpoint commands' name for it
_ANY_JOB = "default: $SLURM_JOB_NAME; without either, any job's, and the writer is named"


class UsageError(Exception):
    """The command cannot run with what it was given (exit code 2)."""


@dataclass
class Invocation:
    """What a command runs with: its parsed arguments, where to print, and AWS."""

    args: argparse.Namespace
    out: TextIO
    err: TextIO
    client: Callable[[str], Any] = field(default_factory=lambda: AwsClients(None))
    sleep: Callable[[float], None] = time.sleep
    stdin: TextIO = field(default_factory=lambda: sys.stdin)  # where a change is confirmed (a terminal)
    now: Callable[[], datetime] = field(default_factory=lambda: lambda: datetime.now(UTC))


def version() -> str:
    try:
        return metadata.version("hyperpod-recovery")
    except metadata.PackageNotFoundError:  # run from a checkout (PYTHONPATH), not an installed package
        return hyperpod_recovery.__version__


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


def _parser() -> argparse.ArgumentParser:
    # --region and --profile are accepted before or after the command's name; SUPPRESS keeps a subcommand's unset
    # default from overwriting a value given before it.
    aws_options = OneLineParser(add_help=False)
    aws_options.add_argument(
        "--region", default=argparse.SUPPRESS, help="AWS region (default: $AWS_REGION, $AWS_DEFAULT_REGION, or the profile's)"
    )
    aws_options.add_argument("--profile", default=argparse.SUPPRESS, help="AWS profile (default: $AWS_PROFILE, or the default profile)")
    parser = OneLineParser(
        prog=PROG,
        description="HyperPod recovery tools: checkpoints, the circuit breaker, drills and the preflight of a deployed stack.",
        epilog="Exit codes: 0 done, 1 the answer is no, 2 bad usage or no AWS region, 3 AWS error (incl. no credentials).",
        parents=[aws_options],
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {version()}")
    parser.set_defaults(usage=parser)
    groups = parser.add_subparsers(dest="group", title="commands", metavar="COMMAND")

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

    breaker = groups.add_parser("breaker", help="the cluster's circuit breaker (docs/runbook.md)")
    breaker.set_defaults(usage=breaker)
    actions = breaker.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for name, text, run in (
        ("status", "show whether automation is stopped, why and since when", _breaker_status),
        ("reset", "close the breaker (a human's call)", _breaker_reset),
    ):
        action = actions.add_parser(name, parents=[aws_options], help=text)
        where = action.add_mutually_exclusive_group(required=True)
        where.add_argument("--stack", help="the deployed stack's name: finds its cluster and ledger (instead of --cluster and --table)")
        where.add_argument("--cluster", help="the guarded cluster's name (the stack's ClusterName), with --table")
        action.add_argument(
            "--table", default=os.environ.get("LEDGER_TABLE"), help="the ledger table (default: $LEDGER_TABLE), without --stack"
        )
        if name == "status":
            action.add_argument("--json", action="store_true")
        else:
            action.add_argument("--reason", required=True, help="what was checked or fixed (kept in the breaker's history)")
            action.add_argument("--by", default=None, help="who resets it (default: the login name)")
        action.set_defaults(run=run)

    drill = groups.add_parser("drill", parents=[aws_options], help="a recovery drill on the deployed stack, dry-run by default")
    add_drill_arguments(drill)
    drill.set_defaults(run=_drill)

    preflight = groups.add_parser(
        "preflight",
        parents=[aws_options],
        help="read-only checks of a deployed stack and its cluster before arming it",
    )
    add_preflight_arguments(preflight)
    preflight.set_defaults(run=_preflight)

    suite = groups.add_parser(
        "drills", help="run every drill scenario of a folder in the sandbox (a clone's): table, JUnit, exit 1 if one fails"
    )
    add_suite_arguments(suite)
    suite.set_defaults(run=_drills)

    add_oncall_commands(groups, aws_options, _oncall)
    add_verdict_commands(groups, aws_options, _oncall)

    goodput = groups.add_parser(
        "goodput", parents=[aws_options], help="the goodput planner: ETTR, checkpoint interval, spares, from measured recovery phases"
    )
    add_goodput_arguments(goodput)
    goodput.set_defaults(run=_goodput)

    deploy = groups.add_parser(
        "deploy", parents=[aws_options], help="deploy the stack for a cluster: reads it first, asks only what it must"
    )
    add_deploy_arguments(deploy)
    deploy.set_defaults(run=deploy_command)
    arm = groups.add_parser("arm", parents=[aws_options], help="preflight, then DryRun=false on a deployed stack (nothing else changes)")
    add_arm_arguments(arm)
    arm.set_defaults(run=arm_command)
    declare(parser)  # every command read-only or a change (changes.py): a change gets its --yes
    return parser


def _goodput(invocation: Invocation) -> int:
    return run_goodput(invocation.args, invocation.client, invocation.out, invocation.now())


def _drills(invocation: Invocation) -> int:
    return run_drills(invocation.args, invocation.out)


def _oncall(command: Callable[..., int], changes: bool) -> Callable[[Invocation], int]:
    """An on-call command as (Invocation) -> int: a change also gets stdin, to be confirmed on."""

    def run(invocation: Invocation) -> int:
        if changes:
            return command(invocation.args, invocation.client, invocation.out, invocation.stdin, invocation.now())
        return command(invocation.args, invocation.client, invocation.out, invocation.now())

    return run


def run(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    s3: Any = None,
    dynamodb: Any = None,
    drill_clients: dict[str, Any] | None = None,
    sleep: Callable[[float], None] | None = None,
    stdin: TextIO | None = None,
    now: Callable[[], datetime] | None = None,
) -> int:
    """The command line run once. Clients passed in (tests, the sandbox) are used instead of boto3's; ``drill_clients``
    holds ``sfn``, ``sagemaker``, ``cloudformation``, ``lambda`` and optionally the poller's ``sleep``; ``sleep``
    is every poller's (drill, preflight)."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = _parser().parse_args(argv)  # bad usage: argparse prints the usage and the error, exits 2
    run: Callable[[Invocation], int] | None = getattr(args, "run", None)
    if run is None:  # a command group without its command, or nothing at all: show what there is
        args.usage.print_help(err)
        return EXIT_USAGE
    refused = refusal(args, stdin or sys.stdin)  # a change with no --yes and no terminal to ask: before any AWS call
    if refused is not None:
        print(f"{PROG}: {one_line(refused)}", file=err)
        return EXIT_USAGE
    drill = dict(drill_clients or {})
    given = {
        "s3": s3,
        "dynamodb": dynamodb,
        "stepfunctions": drill.get("sfn"),
        "sagemaker": drill.get("sagemaker"),
        "cloudformation": drill.get("cloudformation"),
        "lambda": drill.get("lambda"),
        "sts": drill.get("sts"),
    }
    clients = AwsClients(getattr(args, "region", None), given, err=err, profile=getattr(args, "profile", None))
    invocation = Invocation(args, out, err, clients, sleep or drill.get("sleep", time.sleep))
    invocation.stdin = stdin or sys.stdin
    if now is not None:
        invocation.now = now
    try:
        return run(invocation)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err)
        return EXIT_INTERRUPTED
    except Exception as exc:
        failure = _failure(exc)
        if failure is None:
            raise  # a bug: its traceback is what a bug report needs
        code, message = failure
        print(f"{PROG}: {one_line(message)}", file=err)
        return code


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _failure(exc: Exception) -> tuple[int, str] | None:
    """(exit code, one line) for what a command can meet; None for a bug."""
    chain = list(_causes(exc))
    # The AWS setup comes first: adapters wrap SDK errors in their own, and "no credentials" inside a
    # LedgerUnavailable is still the operator's to fix, not the table's.
    if any(isinstance(e, NoRegionError) for e in chain):
        return EXIT_USAGE, NO_REGION
    if any(isinstance(e, NoCredentialsError) for e in chain):
        return EXIT_AWS, NO_CREDENTIALS
    profile = next((e for e in chain if isinstance(e, ProfileNotFound)), None)
    if profile is not None:
        return EXIT_USAGE, f"{profile} (check AWS_PROFILE and ~/.aws/config)"
    for kinds, code, what in _FAILURES:
        if isinstance(exc, kinds):
            return code, f"{what}{exc}"
    return None


_FAILURES: tuple[tuple[type[Exception] | tuple[type[Exception], ...], int, str], ...] = (
    ((UsageError, InputRefused, PreflightUsageError, NotOurStack, StackTooOld, SandboxMissing), EXIT_USAGE, ""),
    ((CheckpointCommitRefused, CheckpointWriteConflict), EXIT_NO, "commit refused: "),
    (OnCallRefused, EXIT_NO, "refused: "),
    ((CheckpointUnreadable, CheckpointStoreUnavailable), EXIT_AWS, "S3 error: "),
    ((LedgerError, LedgerUnavailable), EXIT_AWS, "ledger error: "),
    ((ClientError, BotoCoreError), EXIT_AWS, "AWS error: "),
)


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


# DynamoDB's table names (its API reference: 3-255 of these characters).
TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
# A breaker's reason and who changed it are kept in its item's history (the last 50 changes): bounded
# so that the item stays far below DynamoDB's 400 KB whatever is written (50 x 500 x 4 bytes).
BREAKER_REASON_LIMIT = 500
BREAKER_BY_LIMIT = 128


def _ledger(invocation: Invocation) -> DynamoLedger:
    args = invocation.args
    if args.stack is not None:  # (argparse lets one of --stack and --cluster through, never both)
        stack = read_stack(invocation.client("cloudformation"), args.stack)
        args.cluster, args.table = stack.cluster, stack.output("LedgerTableName")
    if not re.fullmatch(CLUSTER_NAME_PATTERN, args.cluster):
        raise UsageError(f"--cluster {shown(args.cluster)}: not a HyperPod cluster name (letters, digits and hyphens, at most 63)")
    if not args.table:
        raise UsageError("--table (or $LEDGER_TABLE) is required: the stack's LedgerTableName output")
    if not TABLE_NAME.fullmatch(args.table):
        raise UsageError(f"--table {shown(args.table)}: not a DynamoDB table name (3-255 letters, digits, '_', '-', '.')")
    return DynamoLedger(args.table, dynamodb=invocation.client("dynamodb"))


def _unknown_to(ledger: DynamoLedger, cluster: str, state: BreakerState) -> bool:
    """True when the ledger holds nothing of ``cluster``: no breaker ever written, no recovery in its
    window, no node in recovery. A name the stack guards but no recovery has touched yet looks the
    same: both have nothing to reset, and either may be a typo of the cluster whose breaker is open."""
    return state.changed_at is None and not ledger.recovery_log(cluster) and not ledger.nodes_in_recovery(cluster, datetime.now(UTC))


def _unknown_cluster(invocation: Invocation) -> str:
    args = invocation.args
    return (
        f"the ledger {args.table} holds nothing for cluster {args.cluster!r} (no breaker, no recent recovery, no node in recovery): "
        "check the name against the stack's ClusterName parameter"
    )


def _breaker_status(invocation: Invocation) -> int:
    args, out = invocation.args, invocation.out
    ledger = _ledger(invocation)
    state = ledger.breaker(args.cluster)
    if _unknown_to(ledger, args.cluster, state):
        print(f"{PROG}: note: {_unknown_cluster(invocation)}", file=invocation.err)
    if args.json:
        print(state.model_dump_json(indent=2), file=out)
    else:
        since = f" since {state.changed_at.isoformat()} by {one_line(state.changed_by)}" if state.changed_at else ""
        print(f"{args.cluster}: breaker {state.state.upper()}{since}" + (f": {one_line(state.reason)}" if state.reason else ""), file=out)
    return EXIT_NO if state.state == "open" else EXIT_OK


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError) as exc:  # no $USER and no passwd entry (a container's uid)
        raise UsageError("--by is required here: no login name to record as who reset the breaker") from exc


def _breaker_reset(invocation: Invocation) -> int:
    args, out = invocation.args, invocation.out
    # Stored in the breaker's history and printed back in a terminal: checked before the ledger is read.
    reason = plain_text("--reason", args.reason, limit=BREAKER_REASON_LIMIT, say="say what was checked or fixed")
    who = plain_text("--by", args.by if args.by is not None else _login(), limit=BREAKER_BY_LIMIT, say="say who resets it")
    ledger = _ledger(invocation)
    state = ledger.breaker(args.cluster)
    if _unknown_to(ledger, args.cluster, state):
        raise UsageError(f"--cluster: {_unknown_cluster(invocation)}; nothing was reset")
    if state.state == "closed":
        print(f"{args.cluster}: breaker already closed; nothing changed", file=out)
        return EXIT_OK
    opened = f"open since {state.changed_at:%Y-%m-%d %H:%M} UTC" if state.changed_at else "open"
    if not confirm(
        f"Close the breaker of {args.cluster} ({opened}: {one_line(state.reason)}): automation resumes?", args, invocation.stdin, out
    ):
        print("nothing changed", file=out)
        return EXIT_NO
    now = invocation.now()
    ledger.save_breaker(args.cluster, state.changed_to("closed", reason=reason, by=who, at=now))
    ledger.audit(args.cluster, AuditEntry(at=now, by=who, action="breaker reset", target=args.cluster, reason=reason[:300]))
    print(f"{args.cluster}: breaker closed by {who} (was open since {state.changed_at}: {one_line(state.reason)})", file=out)
    return EXIT_OK


def _drill(invocation: Invocation) -> int:
    return run_drill(invocation.args, out=invocation.out, err=invocation.err, client=invocation.client, sleep=invocation.sleep)


def _preflight(invocation: Invocation) -> int:
    return run_preflight(invocation.args, out=invocation.out, client=invocation.client, sleep=invocation.sleep)
