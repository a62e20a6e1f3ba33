"""``hyperpod-recovery breaker status|reset``: the cluster's circuit breaker in the ledger
(docs/runbook.md). Imported only when a breaker command runs (commands.py)."""

from __future__ import annotations

import argparse
import getpass
import os
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.models.common import CLUSTER_NAME_PATTERN
from hyperpod_recovery.models.records import AuditEntry, BreakerState
from hyperpod_recovery_cli import PROG
from hyperpod_recovery_cli.changes import confirm
from hyperpod_recovery_cli.inputs import one_line, plain_text, shown
from hyperpod_recovery_cli.invocation import EXIT_NO, EXIT_OK, UsageError
from hyperpod_recovery_cli.stack import read_stack

if TYPE_CHECKING:
    from hyperpod_recovery_cli.invocation import Invocation


def register(groups: Any, aws_options: argparse.ArgumentParser) -> None:
    """``breaker status|reset`` on the CLI's subparsers."""
    breaker = groups.add_parser("breaker", help="the cluster's circuit breaker (docs/runbook.md)")
    breaker.set_defaults(usage=breaker)
    actions = breaker.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for name, text, run in (
        ("status", "show whether automation is stopped, why and since when", status),
        ("reset", "close the breaker (a human's call)", reset),
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


# DynamoDB's table names (its API reference: 3-255 of these characters).
TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
# A breaker's reason and who changed it are kept in its item's history (the last 50 changes): bounded
# so that the item stays far below DynamoDB's 400 KB whatever is written (50 x 500 x 4 bytes).
BREAKER_REASON_LIMIT = 500
BREAKER_BY_LIMIT = 128


def _ledger(invocation: Invocation) -> DynamoLedger:
    args = invocation.args
    # argparse lets one of --stack and --cluster through, never both (a stack from the environment
    # gives way to a --cluster: commands.stack_gives_way)
    if args.stack is not None:
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


def status(invocation: Invocation) -> int:
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


def reset(invocation: Invocation) -> int:
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
