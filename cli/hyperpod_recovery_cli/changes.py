"""One rule for every command that changes something, kept in one place.

Every subcommand of ``hyperpod-recovery`` is declared here, by the words that name it
("breaker reset", "verdicts confirm"): either it only reads, or it changes something (the ledger, an
execution, a stack). A change runs only when confirmed: ``--yes``, or "yes" typed at a terminal
that names what will change. With neither (a script, a pipe) it is refused before anything is
read: one line on stderr, exit code 2. Each change is kept in the ledger's audit log (AUDIT items,
with who and why). A subcommand declared neither way fails tests/integration/test_cli_rule.py.
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from hyperpod_recovery_cli.inputs import InputRefused, plain_text

BY_LIMIT = 128  # who made a change, as the audit log keeps it


@dataclass(frozen=True)
class Change:
    """A command that changes ``what``; ``when`` says whether this invocation does (``deploy
    --check-only`` and a dry-run drill read or rehearse only)."""

    what: str
    when: Callable[[argparse.Namespace], bool] = lambda args: True


@dataclass(frozen=True)
class ReadOnly:
    """A command that changes nothing we could audit; ``why`` when that is not obvious."""

    why: str = "reads only"


COMMANDS: dict[str, Change | ReadOnly] = {
    "checkpoint commit": ReadOnly(
        "the training job's own write of its own checkpoint manifest, run by job scripts with no terminal; "
        "no ledger, stack or execution is changed"
    ),
    "checkpoint latest": ReadOnly(),
    "checkpoint verify": ReadOnly(),
    "breaker status": ReadOnly(),
    "breaker reset": Change("closes the cluster's circuit breaker (automation resumes)"),
    "drill": Change(
        "starts a LIVE recovery (drains, replaces nodes, resubmits jobs)",
        # A dry run starts an execution whose every effect is gated off by its dry_run flag: the
        # runbook, the notifications and `make drill` print it to run as is.
        when=lambda args: bool(args.live),
    ),
    "preflight": ReadOnly(),
    "drills": ReadOnly("runs scenarios in the local sandbox; nothing on AWS"),
    "incidents": ReadOnly(),
    "incidents show": ReadOnly(),
    "locks": ReadOnly(),
    "locks release": Change("releases node locks and places under the cap"),
    "stop": Change("stops a running recovery (StopExecution)"),
    "hold": Change("keeps the pipeline off a node"),
    "unhold": Change("lets the pipeline act on a held node again"),
    "verdicts list": ReadOnly(),
    "verdicts at-risk": ReadOnly(),
    "verdicts confirm": Change("reviews a verdict (counted in its rule's precision)"),
    "verdicts reject": Change("reviews a verdict (counted in its rule's precision)"),
    "goodput": ReadOnly("reads the ledger and S3; writes only the --html file asked for"),
    "deploy": Change("deploys the stack (sam deploy)", when=lambda args: not args.check_only),
    "arm": Change("arms the stack (DryRun=false: the pipeline acts on the cluster)"),
}


def commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every runnable command of the argparse tree, by the words that name it."""
    if path and "run" in parser._defaults:
        yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, f"{path} {name}".strip())


def declare(parser: argparse.ArgumentParser) -> None:
    """Name each command in its defaults and give every change its ``--yes``. A command the registry
    does not declare is a KeyError here: the CLI cannot start with one (and the rule's test names it)."""
    for path, command in commands(parser):
        kind = COMMANDS[path]
        command.set_defaults(command_path=path)
        if isinstance(kind, Change) and not any("--yes" in action.option_strings for action in command._actions):
            command.add_argument("--yes", action="store_true", help="do it without asking (a terminal asks otherwise)")


def _is_terminal(stdin: TextIO) -> bool:
    try:
        return bool(stdin.isatty())
    except (AttributeError, OSError, ValueError):  # a closed or replaced stdin
        return False


def refusal(args: argparse.Namespace, stdin: TextIO) -> str | None:
    """Why this invocation may not run (no --yes and no terminal to ask), or None."""
    kind = COMMANDS.get(getattr(args, "command_path", ""))
    if not isinstance(kind, Change) or not kind.when(args) or getattr(args, "yes", False) or _is_terminal(stdin):
        return None
    return f"{args.command_path} {kind.what}: add --yes to confirm (no terminal to ask)"


def confirm(question: str, args: argparse.Namespace, stdin: TextIO, out: TextIO) -> bool:
    """--yes, or "yes" typed at the terminal the question is printed on. Without a
    terminal and without --yes: refused (main() refuses it before the command runs; this is the
    same rule for a caller that skipped main)."""
    if getattr(args, "yes", False):
        return True
    if not _is_terminal(stdin):
        raise InputRefused(f"{question.rstrip('?')}: add --yes to confirm (no terminal to ask)")
    print(f"{question} Type yes to go on: ", end="", file=out, flush=True)
    return stdin.readline().strip().lower() == "yes"


def who(args: argparse.Namespace, client: Callable[[str], Any]) -> str:
    """The login name (or --by) and the AWS identity that makes the call: the second is AWS's word."""
    if getattr(args, "by", None) is not None:
        name = plain_text("--by", args.by, limit=BY_LIMIT, say="say who you are")
    else:
        try:
            name = getpass.getuser()
        except (OSError, KeyError) as exc:  # no $USER and no passwd entry (a container's uid)
            raise InputRefused("--by is required here: no login name to record as who made the change") from exc
    arn = client("sts").get_caller_identity()["Arn"]
    return f"{name} ({arn})"
