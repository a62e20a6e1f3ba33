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
    hyperpod-recovery verdicts at-risk --stack NAME [--since 30d] [--signal SIGNAL] [--json]
    hyperpod-recovery goodput [--stack NAME [--since 30d] | --from FILE] [--nodes N] [--failure-rate R] [--detect T ...]
        [--checkpoint-interval T | --checkpoint-prefix s3://...] [--checkpoint-cost T] [--json] [--html FILE]
    hyperpod-recovery --version      (also after any command: hyperpod-recovery preflight --version)

Every --stack defaults to $HYPERPOD_RECOVERY_STACK. Under make (HYPERPOD_RECOVERY_VIA_MAKE=1), a
message names the make variable (STACK=…) where it would name the option (--stack).

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
``set_defaults(run=...)``. Its module is imported only when it runs: the parse is made twice, first
with every command known by name only (commands.py's table: what ``--help`` lists, in sections), then
with the chosen command's arguments. It makes its AWS clients with ``invocation.client("service")`` when it
needs them, so a missing region or credentials reach run()'s one error handler; its arguments are
checked first, without AWS.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, NoReturn, TextIO

from hyperpod_recovery_cli import PROG, commands
from hyperpod_recovery_cli.aws_session import NO_CREDENTIALS, NO_REGION, AwsClients, missing_stack
from hyperpod_recovery_cli.changes import commands as tree
from hyperpod_recovery_cli.changes import declare, refusal
from hyperpod_recovery_cli.inputs import InputRefused, OneLineParser, for_make, incident_id, one_line

# (the names scripts and tests know them by here)
from hyperpod_recovery_cli.invocation import EXIT_AWS as EXIT_AWS
from hyperpod_recovery_cli.invocation import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from hyperpod_recovery_cli.invocation import EXIT_NO as EXIT_NO
from hyperpod_recovery_cli.invocation import EXIT_OK as EXIT_OK
from hyperpod_recovery_cli.invocation import EXIT_S3 as EXIT_S3
from hyperpod_recovery_cli.invocation import EXIT_USAGE as EXIT_USAGE
from hyperpod_recovery_cli.invocation import Invocation as Invocation
from hyperpod_recovery_cli.invocation import UsageError as UsageError

DESCRIPTION = """\
Operate the recovery pipeline of a SageMaker HyperPod cluster (Slurm or EKS): deploy, check and arm
its stack, drill it, answer its incidents on call, commit and verify training checkpoints, plan goodput."""
EPILOG = f"""\
Run `{PROG} COMMAND --help` for a command's options. --region and --profile go before or after the
command (default: $AWS_REGION, $AWS_DEFAULT_REGION or the profile's; $AWS_PROFILE, else the default
credentials chain); every --stack defaults to $HYPERPOD_RECOVERY_STACK.
Exit codes: 0 done, 1 the answer is no, 2 bad usage or no AWS region, 3 AWS error (incl. no credentials), 130 interrupted."""


def version() -> str:
    from importlib import metadata  # (only --version pays for it)

    try:
        return metadata.version("hyperpod-recovery")
    except metadata.PackageNotFoundError:  # run from a checkout (PYTHONPATH), not an installed package
        import hyperpod_recovery

        return hyperpod_recovery.__version__


class _Version(argparse.Action):
    """--version, before or after any command: the installed package's version, read only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help="print the installed version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        print(f"{PROG} {version()}", file=sys.stdout)
        parser.exit(0)


_ALL = object()  # _parser()'s default: every command with its arguments (the tests' and the docs' tree)
_STUBS = object()  # every command known by name only: the first parse, and what --help reads


def _parser(command: str | object | None = _ALL) -> argparse.ArgumentParser:
    """The command line's parser: with every command's arguments (the default), with only ``command``'s
    (a name; None: none), or with every command known by name only (``_STUBS``: the first parse)."""
    # --region and --profile are accepted before or after the command's name; SUPPRESS keeps a subcommand's unset
    # default from overwriting a value given before it.
    aws_options = OneLineParser(add_help=False)
    aws_options.add_argument(
        "--region", default=argparse.SUPPRESS, help="AWS region (default: $AWS_REGION, $AWS_DEFAULT_REGION, or the profile's)"
    )
    aws_options.add_argument(
        "--profile", metavar="NAME", default=argparse.SUPPRESS, help="AWS profile (default: $AWS_PROFILE, or the default profile)"
    )
    aws_options.add_argument("--version", action=_Version)
    parser = OneLineParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[aws_options],
    )
    parser.set_defaults(usage=parser)
    commands.list_commands(parser)
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", help=argparse.SUPPRESS)
    # (set after the subparsers: theirs start with the generated one; the commands are listed in sections)
    parser.usage = "%(prog)s [-h] [--version] [--region REGION] [--profile NAME] COMMAND ..."
    if command is _STUBS:
        for name in commands.COMMANDS:
            commands.stub(groups, name)
        return parser
    if command is _ALL:
        commands.register(groups, aws_options, None)
    elif isinstance(command, str):
        commands.register(groups, aws_options, command)
    runnable = [command_parser for _, command_parser in tree(parser)]
    commands.stack_from_environment(runnable)
    declare(parser)  # every command read-only or a change (changes.py): a change gets its --yes
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, parsed in two steps: which command (argparse's own answer, every command known
    by name only: --help stops here), then that command's arguments, its module imported."""
    known, _ = _parser(_STUBS).parse_known_args(argv)  # bad usage: argparse prints the usage and the error, exits 2
    args = _parser(known.group).parse_args(argv)  # (no command: None, a parser with none)
    commands.stack_gives_way(args)
    return args


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
    args = parse(argv)  # bad usage: argparse prints the usage and the error, exits 2
    for named in ("incident", "verdict"):  # one incident id on input too: its execution's ARN is taken for it
        if isinstance(getattr(args, named, None), str):
            setattr(args, named, incident_id(getattr(args, named)))
    run: Callable[[Invocation], int] | None = getattr(args, "run", None)
    if run is None:  # a command group without its command, or nothing at all: show what there is
        args.usage.print_help(err)
        return EXIT_USAGE
    refused = refusal(args, stdin or sys.stdin)  # a change with no --yes and no terminal to ask: before any AWS call
    if refused is not None:
        print(f"{PROG}: {for_make(one_line(refused))}", file=err)
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
        failure = _failure(exc, clients)
        if failure is None:
            raise  # a bug: its traceback is what a bug report needs
        code, message = failure
        print(f"{PROG}: {for_make(one_line(message))}", file=err)
        return code


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _loaded(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """Classes of ``module`` if it was imported, else none: an exception cannot be an instance of a
    class its command never imported (so a failure costs no import; --help imports none of them)."""
    found = sys.modules.get(module)
    return tuple(getattr(found, name) for name in names) if found is not None else ()


def _failure(exc: Exception, clients: AwsClients | None = None) -> tuple[int, str] | None:
    """(exit code, one line) for what a command can meet; None for a bug."""
    chain = list(_causes(exc))
    # The AWS setup comes first: adapters wrap SDK errors in their own, and "no credentials" inside a
    # LedgerUnavailable is still the operator's to fix, not the table's.
    no_region = _loaded("botocore.exceptions", "NoRegionError")
    no_credentials = _loaded("botocore.exceptions", "NoCredentialsError")
    no_profile = _loaded("botocore.exceptions", "ProfileNotFound")
    if no_region and any(isinstance(e, no_region) for e in chain):
        return EXIT_USAGE, NO_REGION
    if no_credentials and any(isinstance(e, no_credentials) for e in chain):
        return EXIT_AWS, NO_CREDENTIALS
    profile = next((e for e in chain if no_profile and isinstance(e, no_profile)), None)
    if profile is not None:
        return EXIT_USAGE, f"{profile} (check AWS_PROFILE and ~/.aws/config)"
    missing = next((said for e in chain if (said := missing_stack(e, clients)) is not None), None)
    if missing is not None:
        return EXIT_AWS, missing
    for kinds, code, what in _failures():
        if kinds and isinstance(exc, kinds):
            return code, f"{what}{exc}"
    return None


def _failures() -> tuple[tuple[tuple[type[BaseException], ...], int, str], ...]:
    return (
        (
            (
                UsageError,
                InputRefused,
                *_loaded("hyperpod_recovery_cli.preflight", "PreflightUsageError"),
                *_loaded("hyperpod_recovery_cli.stack", "NotOurStack", "StackTooOld"),
                *_loaded("hyperpod_recovery_cli.drill_suite", "SandboxMissing"),
            ),
            EXIT_USAGE,
            "",
        ),
        (_loaded("hyperpod_recovery.errors", "CheckpointCommitRefused", "CheckpointWriteConflict"), EXIT_NO, "commit refused: "),
        (_loaded("hyperpod_recovery_cli.oncall", "OnCallRefused"), EXIT_NO, "refused: "),
        (_loaded("hyperpod_recovery.errors", "CheckpointUnreadable", "CheckpointStoreUnavailable"), EXIT_AWS, "S3 error: "),
        (_loaded("hyperpod_recovery.errors", "LedgerError", "LedgerUnavailable"), EXIT_AWS, "ledger error: "),
        (_loaded("botocore.exceptions", "ClientError", "BotoCoreError"), EXIT_AWS, "AWS error: "),
    )
