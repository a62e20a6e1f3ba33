"""The CLI's commands as a light table: each one's section and one-line summary for ``--help``, and
the function that registers its arguments, which imports the command's module only when called.

``--help`` and the first parse read this table alone (no boto3, botocore, pydantic or adapters:
tests/cli/test_lazy_commands.py holds it); the chosen command's module is imported when its
arguments are registered, just before it runs (app.py's two-step parse).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_recovery_cli.inputs import STACK_VARIABLE, OneLineParser

if TYPE_CHECKING:
    from hyperpod_recovery_cli.invocation import Invocation

Register = Callable[[Any, argparse.ArgumentParser], None]  # (the subparsers, the --region/--profile parent)


@dataclass(frozen=True)
class Command:
    name: str
    summary: str  # one line in the top-level --help
    register: Register  # registers this command (and perhaps its siblings: the shim keeps only the asked ones)


def _checkpoint(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import checkpoint

    checkpoint.register(groups, aws_options)


def _breaker(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import breaker

    breaker.register(groups, aws_options)


def _drill(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import drill

    parser = groups.add_parser("drill", parents=[aws_options], help=SUMMARIES["drill"])
    drill.add_arguments(parser)

    def run(invocation: Invocation) -> int:
        return drill.run_drill(invocation.args, out=invocation.out, err=invocation.err, client=invocation.client, sleep=invocation.sleep)

    parser.set_defaults(run=run)


def _preflight(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import preflight

    parser = groups.add_parser("preflight", parents=[aws_options], help=SUMMARIES["preflight"])
    preflight.add_arguments(parser)

    def run(invocation: Invocation) -> int:
        return preflight.run_preflight(invocation.args, out=invocation.out, client=invocation.client, sleep=invocation.sleep)

    parser.set_defaults(run=run)


def _drills(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import drill_suite

    parser = groups.add_parser("drills", help=SUMMARIES["drills"])
    drill_suite.add_arguments(parser)

    def run(invocation: Invocation) -> int:
        return drill_suite.run_drills(invocation.args, invocation.out)

    parser.set_defaults(run=run)


def _on_call(command: Callable[..., int], changes: bool) -> Callable[[Invocation], int]:
    """An on-call command as (Invocation) -> int: a change also gets stdin, to be confirmed on."""

    def run(invocation: Invocation) -> int:
        if changes:
            return command(invocation.args, invocation.client, invocation.out, invocation.stdin, invocation.now())
        return command(invocation.args, invocation.client, invocation.out, invocation.now())

    return run


def _oncall(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import oncall

    oncall.add_commands(groups, aws_options, _on_call)


def _holds(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import holds

    holds.add_commands(groups, aws_options, _on_call)


def _verdicts(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import verdicts

    verdicts.add_commands(groups, aws_options, _on_call)


def _goodput(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import goodput

    parser = groups.add_parser("goodput", parents=[aws_options], help=SUMMARIES["goodput"])
    goodput.add_arguments(parser)

    def run(invocation: Invocation) -> int:
        return goodput.run_goodput(invocation.args, invocation.client, invocation.out, invocation.now())

    parser.set_defaults(run=run)


def _deploy(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import deploy

    parser = groups.add_parser("deploy", parents=[aws_options], help=SUMMARIES["deploy"])
    deploy.add_deploy_arguments(parser)
    parser.set_defaults(run=deploy.deploy_command)


def _arm(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    from hyperpod_recovery_cli import deploy

    parser = groups.add_parser("arm", parents=[aws_options], help=SUMMARIES["arm"])
    deploy.add_arm_arguments(parser)
    parser.set_defaults(run=deploy.arm_command)


# The top-level --help's sections, in the order a new team meets them (as kubectl and the AWS CLI group theirs).
SECTIONS: tuple[tuple[str, tuple[Command, ...]], ...] = (
    (
        "Deploy and check",
        (
            Command("deploy", "deploy the stack for a cluster: reads the cluster and stack first, asks only what it must", _deploy),
            Command("preflight", "read-only checks of a deployed stack, its cluster and agent before arming it", _preflight),
            Command("arm", "the preflight, then DryRun=false: the pipeline starts acting on the cluster", _arm),
        ),
    ),
    (
        "Drills and practice",
        (
            Command("drill", "a recovery drill on the deployed stack: a dry run unless --live", _drill),
            Command("drills", "every drill scenario of a folder in the sandbox (a clone's): a table, JUnit, exit 1 if one fails", _drills),
        ),
    ),
    (
        "On call",
        (
            Command("incidents", "recent incidents of the stack's cluster, running and recorded; `incidents show ID`: one", _oncall),
            Command("locks", "node and hostname locks, places under the cap, holds; `locks release NODE`", _oncall),
            Command("stop", "stop a running incident (StopExecution)", _oncall),
            Command("hold", "keep the pipeline's hands off a node until unhold", _holds),
            Command("unhold", "let the pipeline act on a held node again", _holds),
            Command("breaker", "the cluster's circuit breaker: status, reset", _breaker),
            Command(
                "verdicts",
                "hang, slowdown and at-risk verdicts: each rule's and signal's precision; confirm or reject a hang verdict",
                _verdicts,
            ),
        ),
    ),
    (
        "Checkpoints (in training jobs)",
        (Command("checkpoint", "a job's checkpoint manifests in S3: commit, latest, verify", _checkpoint),),
    ),
    (
        "Plan",
        (Command("goodput", "the goodput planner: ETTR, checkpoint interval and spares from measured recovery phases", _goodput),),
    ),
)
COMMANDS = {command.name: command for _, commands in SECTIONS for command in commands}
SUMMARIES = {name: command.summary for name, command in COMMANDS.items()}


class _Only:
    """The subparsers as a registrar sees them, keeping only the commands asked for: a registrar of
    several commands (the on-call ones) builds the others on parsers that are dropped."""

    def __init__(self, groups: Any, names: Iterable[str] | None) -> None:
        self._groups, self._names = groups, None if names is None else set(names)

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if self._names is None or name in self._names:
            kwargs["help"] = SUMMARIES.get(name, kwargs.get("help"))
            parser: argparse.ArgumentParser = self._groups.add_parser(name, **kwargs)
            return parser
        return OneLineParser(add_help=False)


def register(groups: Any, aws_options: argparse.ArgumentParser, name: str | None) -> None:
    """Register command ``name`` (None: every command) with its arguments on ``groups``."""
    if name is not None:
        COMMANDS[name].register(_Only(groups, [name]), aws_options)
        return
    for registrar in dict.fromkeys(command.register for command in COMMANDS.values()):  # (the on-call one once)
        registrar(_Only(groups, None), aws_options)


def stub(groups: Any, name: str) -> None:
    """A command known by name only (the first parse): what follows its name is the second parse's."""
    groups.add_parser(name, add_help=False)


def list_commands(parser: argparse.ArgumentParser) -> None:
    """The commands in the top-level help, a section each, a line each (not parsed: help only)."""
    for heading, commands in SECTIONS:
        section = parser.add_argument_group(f"{heading}")
        for command in commands:
            # (listed, not added: the subparsers parse; these only print)
            section._group_actions.append(argparse.Action(option_strings=[], dest=command.name, help=command.summary))


class FromEnvironment(str):
    """A --stack that came from $HYPERPOD_RECOVERY_STACK, not from the command line."""

    __slots__ = ()


# What a command takes instead of a stack: given on the command line, it wins over the variable's stack.
INSTEAD_OF_A_STACK = {"breaker status": "cluster", "breaker reset": "cluster", "drill": "state_machine_arn", "goodput": "source_file"}


def stack_gives_way(args: argparse.Namespace) -> None:
    """A stack from the environment gives way to what the command line names instead (--cluster,
    --state-machine-arn, --from): the variable is a default, never a second answer."""
    instead = INSTEAD_OF_A_STACK.get(getattr(args, "command_path", ""))
    if isinstance(getattr(args, "stack", None), FromEnvironment) and instead and getattr(args, instead, None):
        args.stack = None


def stack_from_environment(parsers: Iterable[argparse.ArgumentParser], environ: dict[str, str] | None = None) -> None:
    """$HYPERPOD_RECOVERY_STACK as --stack's default wherever --stack is taken (said in its help); set,
    it makes a required --stack (or --stack-or---cluster choice) optional."""
    value = (os.environ if environ is None else environ).get(STACK_VARIABLE, "").strip()
    for parser in parsers:
        for action in parser._actions:
            if "--stack" not in action.option_strings:
                continue
            if f"${STACK_VARIABLE}" not in (action.help or ""):
                action.help = f"{action.help or 'the deployed stack'} (default: ${STACK_VARIABLE})"
            if value:
                action.default, action.required = FromEnvironment(value), False
                for group in parser._mutually_exclusive_groups:
                    if action in group._group_actions:
                        group.required = False
