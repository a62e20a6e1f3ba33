"""Holding a node: the operator keeps the pipeline's hands off it until unhold.

    hyperpod-recovery hold NODE --stack NAME --reason TEXT [--by WHO] [--yes]
    hyperpod-recovery unhold NODE --stack NAME --reason TEXT [--by WHO] [--yes]

A node is named by its instance id, its current name, or the name of the node it replaced (the
ledger's records of replacements): an escalation names the node it was about, which may be gone.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.models.records import AuditEntry, NodeHold
from hyperpod_recovery_cli.changes import confirm, who
from hyperpod_recovery_cli.oncall import (
    EXIT_NO,
    EXIT_OK,
    Command,
    Deployed,
    OnCallRefused,
    change_options,
    deployed,
    node_name,
    reason_of,
    stack_option,
)
from hyperpod_recovery_cli.replaced_nodes import Replacement, replacement_of

REPLACEMENTS_READ = 200  # recent records searched for what replaced a node named by its old name


@dataclass(frozen=True)
class NamedNode:
    """The node the operator named, as the cluster lists it now; ``replaced``: the ledger's record of
    the replacement that stands where the named (gone) node stood."""

    instance: str
    name: str | None
    replaced: Replacement | None = None


def _cluster_node(client: Callable[[str], Any], place: Deployed, node: str) -> NamedNode:
    """The node the operator named, from ListClusterNodes, by instance id, its current name, or the
    name of the node it replaced (the ledger's records of replacements): a hold on a name the cluster
    does not have would hold nothing, silently."""
    listed = [
        (found.node_id, found.name_in(place.orchestrator))
        for found in HyperPodCluster(place.cluster, sagemaker=client("sagemaker")).list_nodes()
    ]
    for instance, name in listed:
        if node in (instance, name):
            return NamedNode(instance, name)
    replaced = replacement_of(node, place.ledger.incidents(place.cluster, limit=REPLACEMENTS_READ))
    if replaced is not None:
        for instance, name in listed:
            if replaced.instance == instance:
                return NamedNode(instance, name, replaced)
    raise OnCallRefused(
        f"{node}: the cluster {place.cluster} has no such node (instance id or {place.orchestrator} name), and no recorded "
        "replacement stands in its place: nothing held"
    )


def hold_node(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, stdin: TextIO, now: datetime) -> int:
    reason = reason_of(args)
    node = node_name(args.node)
    place = deployed(args, client)
    found = _cluster_node(client, place, node)
    instance, name = found.instance, found.name
    if found.replaced is not None:  # the named node is gone: its replacement is the node held
        print(
            f"{node} was replaced by {instance}{f' ({name})' if name else ''} (incident {found.replaced.incident}): holding that node",
            file=out,
        )
        node = name if place.orchestrator == "eks" and name else instance
    if node == instance or place.orchestrator == "eks":  # (an EKS node's name is its instance's: hyperpod-<instance id>)
        kind = "this instance only: a replacement is not held"
    else:
        kind = "this hostname, whatever instance it is (a replacement that comes up under a new hostname is not held)"
    if not confirm(f"Hold {node} ({kind}) on {place.cluster}: the pipeline will leave it alone?", args, stdin, out):
        print("nothing changed", file=out)
        return EXIT_NO
    by = who(args, client)
    hold = NodeHold(node=node, by=by, reason=reason, at=now)
    existing = place.ledger.hold_node(place.cluster, hold)
    if existing is not None:
        print(f"{node}: already held by {existing.by} since {existing.at:%Y-%m-%d %H:%M} UTC: {existing.reason}; nothing changed", file=out)
        return EXIT_OK
    place.ledger.audit(
        place.cluster, AuditEntry(at=now, by=by, action="hold", target=node, reason=reason, detail=f"{instance} {name or ''}".strip())
    )
    print(f"{node} ({instance}{', ' + name if name and name != node else ''}): held by {by}: {reason}", file=out)
    print(
        "New incidents skip it and say so (skipped: held). An incident already running on it goes on: "
        f"`hyperpod-recovery locks --stack {place.stack.name}` shows who holds it now.",
        file=out,
    )
    return EXIT_OK


def unhold_node(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, stdin: TextIO, now: datetime) -> int:
    """Remove the holds that keep the pipeline off this node, by whichever identity they were placed
    under (its instance id or its name), so `unhold` undoes a `hold` however the node is named."""
    reason = reason_of(args)
    node = node_name(args.node)
    place = deployed(args, client)
    names = [node]
    # (a node the cluster no longer has, replaced: its hold by that name is still removable)
    with contextlib.suppress(OnCallRefused):
        found = _cluster_node(client, place, node)
        names += [name for name in (found.instance, found.name) if name]
    current = place.ledger.node_holds(place.cluster, names)
    if not current:
        print(f"{node}: not held on {place.cluster} (under {', '.join(dict.fromkeys(names))}); nothing changed", file=out)
        return EXIT_OK
    said = "; ".join(f"{hold.node} (by {hold.by}: {hold.reason})" for hold in current.values())
    if not confirm(f"Remove the hold on {said}?", args, stdin, out):
        print("nothing changed", file=out)
        return EXIT_NO
    by = who(args, client)
    for hold in current.values():
        removed = place.ledger.unhold_node(place.cluster, hold.node, hold)
        place.ledger.audit(
            place.cluster,
            AuditEntry(at=now, by=by, action="unhold", target=hold.node, reason=reason, detail=f"was held by {hold.by}: {hold.reason}"),
        )
        print(
            f"{hold.node}: hold removed by {by}"
            + ("" if removed else " (it had changed or been removed since it was read: left as it is)"),
            file=out,
        )
    print("the next fault reported for it starts a recovery as usual", file=out)
    return EXIT_OK


def add_commands(groups: Any, region: argparse.ArgumentParser, wrap: Callable[[Command, bool], Any]) -> None:
    """Register hold and unhold on the CLI's subparsers (as oncall.add_commands does its own)."""
    for name, text, command in (
        ("hold", "keep the pipeline's hands off a node until unhold (an instance id, or a hostname: whichever instance it is)", hold_node),
        ("unhold", "let the pipeline act on a held node again", unhold_node),
    ):
        parser = groups.add_parser(name, parents=[region], help=text)
        parser.add_argument(
            "node",
            help="an instance id (i-...), the orchestrator's name of the node, or the name of a node it replaced (the ledger's record)",
        )
        stack_option(parser)
        change_options(parser)
        parser.set_defaults(run=wrap(command, True))
