"""The on-call commands: what a human does at 2 a.m. to a deployed stack, each one command.

    hyperpod-recovery incidents --stack NAME [--open] [--escalated] [--since 6h|ISO] [--limit N] [--json]
    hyperpod-recovery incidents show ID --stack NAME [--json]
    hyperpod-recovery locks --stack NAME [--json]
    hyperpod-recovery locks release NODE --stack NAME --reason TEXT [--by WHO] [--yes]
    hyperpod-recovery stop INCIDENT --stack NAME --reason TEXT [--by WHO] [--yes]

Each finds the ledger table, the state machines and the cluster from the stack (DescribeStacks).
Reading is all they do unless the command changes something: then it asks (on a terminal) or needs
``--yes``, and the change is kept in the ledger's audit log with who (the login name and the AWS
identity that made the call) and why. What a human could break is refused with the reason: a lock
whose incident is still running is released by stopping that incident, never under it.
(hold and unhold: holds.py.)
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TextIO

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.messages.advice import Deployment, next_steps
from hyperpod_recovery.domain.messages.kept import show_command, still_running_refusal, stop_answer
from hyperpod_recovery.domain.record.durations import format_duration
from hyperpod_recovery.domain.record.fate_words import copy_label, copy_state_text, job_label
from hyperpod_recovery.models.records import HOST_LOCK_PREFIX, AuditEntry, IncidentRecord, NodeLock
from hyperpod_recovery_cli.changes import confirm, who
from hyperpod_recovery_cli.drill import phase_chart, phases_from_record
from hyperpod_recovery_cli.inputs import InputRefused, plain_text
from hyperpod_recovery_cli.stack import Stack, read_stack

EXIT_OK, EXIT_NO = 0, 1
REASON_LIMIT = 300  # kept in a hold and in the audit log (ShortText)
# Outcomes that handed something to a human (the notification's ACTION NEEDED).
NEEDS_A_HUMAN = ("escalated", "capped", "stale", "aborted", "failed")
# Step Functions' StopExecution: error at most 256 characters, cause at most 32,768 (its API reference).
STOP_ERROR = "OperatorStopped"
STOP_CAUSE_LIMIT = 32_768
SINCE = re.compile(r"^(?P<n>[0-9]{1,5})(?P<unit>[mhd])$")
# What the operator may name a node by: an instance id, or the orchestrator's name of it
# (a Slurm hostname, an EKS node name). The cluster's node list decides which it is.
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")
INCIDENT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")  # an execution name (the incident id)


class OnCallRefused(Exception):
    """The change would hurt (a running incident holds the lock, a node the cluster does not have):
    exit code 1, one line saying why and what to do instead."""


# --- what every command stands on ----------------------------------------------------------------
@dataclass(frozen=True)
class Deployed:
    """The stack as the on-call commands need it."""

    stack: Stack
    ledger: DynamoLedger

    @property
    def cluster(self) -> str:
        return self.stack.cluster

    @property
    def orchestrator(self) -> Literal["slurm", "eks"]:
        return "eks" if self.stack.parameters.get("Orchestrator", "Slurm").lower() == "eks" else "slurm"

    @property
    def machines(self) -> list[str]:
        return [arn for arn in (self.stack.outputs.get("StateMachineArn"), self.stack.outputs.get("JobStateMachineArn")) if arn]

    @property
    def deployment(self) -> Deployment:
        return Deployment(stack=self.stack.name, ledger_table=self.ledger.table_name)


def deployed(args: argparse.Namespace, client: Callable[[str], Any]) -> Deployed:
    if not args.stack:
        raise InputRefused("--stack is required: the deployed stack's name")
    stack = read_stack(client("cloudformation"), args.stack)
    return Deployed(stack, DynamoLedger(stack.output("LedgerTableName"), dynamodb=client("dynamodb")))


def reason_of(args: argparse.Namespace) -> str:
    return plain_text("--reason", args.reason, limit=REASON_LIMIT, say="say why (it is kept in the ledger)")


def _since(text: str | None, now: datetime) -> datetime | None:
    if text is None:
        return None
    match = SINCE.fullmatch(text)
    if match:
        return now - timedelta(**{{"m": "minutes", "h": "hours", "d": "days"}[match["unit"]]: int(match["n"])})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputRefused(f"--since {text!r}: a duration (30m, 6h, 2d) or an ISO time (2026-11-26T02:00Z)") from None
    # (recorded_at is compared as UTC text in the index: an offset is converted, not compared as written)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _age(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "-"
    seconds = max(0.0, (now - moment).total_seconds())
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out)


# --- incidents ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Running:
    """An incident still running: an execution with no record yet."""

    name: str
    workflow: Literal["node", "job"]
    started_at: datetime
    nodes: list[str]
    job: str | None


def running_incidents(sfn: Any, place: Deployed) -> list[Running]:
    found = []
    for machine in place.machines:
        workflow: Literal["node", "job"] = "job" if machine == place.stack.outputs.get("JobStateMachineArn") else "node"
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=machine, statusFilter="RUNNING"):
            for execution in page["executions"]:
                described = sfn.describe_execution(executionArn=execution["executionArn"])
                start = _start_input(described.get("input"))
                found.append(
                    Running(
                        name=execution["name"],
                        workflow=workflow,
                        started_at=execution["startDate"],
                        nodes=[str(n) for n in start.get("node_ids") or []],
                        job=str(start["job_id"]) if start.get("job_id") else None,
                    )
                )
    return sorted(found, key=lambda r: r.started_at, reverse=True)


def _start_input(text: str | None) -> dict[str, Any]:
    """The request inside an execution's input (a start input, or the intake's {"request": ...})."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    inner = value.get("request", value)
    return inner if isinstance(inner, dict) else {}


def _jobs_text(record: IncidentRecord) -> str:
    parts = []
    for fate in record.job_fates:
        name = f"{fate.namespace}/{fate.name}" if fate.namespace else fate.job
        copy = fate.copy_name or fate.copy_id
        parts.append(f"{name}->{copy}" if copy and fate.live_copy else f"{name}:{fate.fate}")
    if record.jobs_omitted:
        parts.append(f"+{record.jobs_omitted} more")
    return ", ".join(parts) or (f"job {record.job_id}" if record.job_id else "-")


def _nodes_text(names: list[str], omitted: int = 0) -> str:
    """The first three names, and how many more (``omitted``: those a record counts but does not name)."""
    more = len(names) - 3 + omitted
    return ", ".join(names[:3]) + (f" +{more}" if more > 0 else "") if names else "-"


def list_incidents(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, now: datetime) -> int:
    if args.open and args.escalated:
        raise InputRefused("--open and --escalated: a running incident has no outcome yet; give one of them")
    place = deployed(args, client)
    since = _since(args.since, now)
    running = running_incidents(client("stepfunctions"), place) if not args.escalated else []
    outcomes = NEEDS_A_HUMAN if args.escalated else ()
    records = [] if args.open else place.ledger.incidents(place.cluster, since=since, limit=args.limit, outcomes=outcomes)
    running = [r for r in running if since is None or r.started_at >= since]
    if args.json:
        # One list, one key for every incident (incident_id), and its state: docs/cli-json.md, cli_json.py.
        rows: list[dict[str, Any]] = [_running_row(r) for r in running]
        rows += [json.loads(r.model_dump_json()) | {"state": "recorded"} for r in records]
        print(json.dumps(rows, indent=2), file=out)
        return EXIT_OK
    print(f"{place.cluster} (stack {place.stack.name}): {len(running)} running, {len(records)} recorded" + _filters(args), file=out)
    if not running and not records:
        return EXIT_OK
    table = [["INCIDENT", "OUTCOME", "TRIGGER", "NODES", "JOBS (-> COPY)", "AGE", "ERROR"]]
    for r in running:
        table.append([r.name, "running", "-", _nodes_text(r.nodes), f"job {r.job}" if r.job else "-", _age(r.started_at, now), "-"])
    for record in records:
        trigger = ",".join(dict.fromkeys(record.trigger)) or "-"
        nodes = _nodes_text(record.hostnames or record.nodes, record.nodes_omitted)
        outcome = record.outcome + (" (dry run)" if record.dry_run and record.outcome != "dry_run" else "")
        table.append([record.incident_id, outcome, trigger, nodes, _jobs_text(record), _age(record.recorded_at, now), record.error or "-"])
    _table(table, out)
    newest = running[0].name if running else records[0].incident_id
    print(f"\n`{show_command(place.stack.name, newest)}`: its record, timeline and phases (any incident above by its id)", file=out)
    return EXIT_OK


def _running_row(running: Running) -> dict[str, Any]:
    row = {"incident_id": running.name, "state": "running", "workflow": running.workflow, "started_at": running.started_at.isoformat()}
    return row | {"nodes": running.nodes} | ({"job": running.job} if running.job else {})


def _filters(args: argparse.Namespace) -> str:
    said = [name for name, on in (("open", args.open), ("escalated", args.escalated)) if on]
    said += [f"since {args.since}"] if args.since else []
    return f" ({', '.join(said)})" if said else ""


def show_incident(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, now: datetime) -> int:
    if not INCIDENT_NAME.fullmatch(args.incident):
        raise InputRefused(f"incident {args.incident!r}: an execution name (letters, digits, '-' and '_', at most 80)")
    place = deployed(args, client)
    record = place.ledger.get_incident(args.incident)
    if record is None:
        running = next((r for r in running_incidents(client("stepfunctions"), place) if r.name == args.incident), None)
        if running is None:
            raise OnCallRefused(
                f"no incident {args.incident} in the ledger of stack {place.stack.name} and no execution of that name running "
                f"(`hyperpod-recovery incidents --stack {place.stack.name}` lists them)"
            )
        if args.json:
            print(json.dumps(_running_row(running), indent=2), file=out)
            return EXIT_OK
        print(f"{running.name}: running since {running.started_at.isoformat()} ({running.workflow} recovery); no record yet", file=out)
        print(f"nodes: {', '.join(running.nodes) or '-'}" + (f"; job {running.job}" if running.job else ""), file=out)
        return EXIT_OK
    if args.json:
        print(json.dumps(json.loads(record.model_dump_json()) | {"state": "recorded"}, indent=2), file=out)
        return EXIT_OK
    print(f"incident {record.incident_id} ({record.workflow} recovery, cluster {record.cluster}, {record.orchestrator})", file=out)
    print(
        f"outcome: {record.outcome}" + (" (dry run)" if record.dry_run else "") + (f"   error: {record.error}" if record.error else ""),
        file=out,
    )
    print(f"recorded: {record.recorded_at.isoformat()} ({_age(record.recorded_at, now)} ago)", file=out)
    print(f"summary: {record.summary}", file=out)
    if record.cause:
        print(f"cause: {record.cause}", file=out)
    if record.node_fates:
        print("\nnodes:", file=out)
        for node in record.node_fates:
            instead = f" -> {node.replacement_node or node.replacement}" if node.replacement else ""
            print(f"  {node.node} ({node.instance or '-'}): {node.fate}{instead}" + (f": {node.detail}" if node.detail else ""), file=out)
    if record.job_fates:
        print("\njobs:", file=out)
        for fate in record.job_fates:
            copy = f" -> {copy_label(fate)} ({copy_state_text(fate)})" if fate.copy_id and fate.live_copy else ""
            step = f" from step {fate.checkpoint_step}" if fate.checkpoint_step is not None else ""
            print(f"  {job_label(fate)}: {fate.fate}{copy}{step}", file=out)
            if fate.reason:
                print(f"    {fate.reason}", file=out)
    # The locks this incident still keeps (an escalation's, until EscalationHoldSeconds): what
    # WHAT HAPPENS NEXT offers to release, read from the ledger now rather than from the page.
    kept = [lock.expires_at for lock in place.ledger.node_locks(place.cluster, now) if lock.incident == record.incident_id]
    print("\nwhat happens next:", file=out)
    for step in next_steps(record, place.deployment, min(kept) if kept else None):
        print(f"  {step}", file=out)
    print("\ntimeline (UTC):", file=out)
    for entry in record.timeline:
        print(f"  {entry.at:%H:%M:%S}  {entry.event}: {entry.detail}", file=out)
    if record.phases:
        print("\nphases:", file=out)
        for line in phase_chart(phases_from_record(record)):
            print(line, file=out)
    total = (record.recorded_at - record.detected_at).total_seconds() if record.detected_at else None
    print(f"\nfault to record: {format_duration(total)}", file=out)
    return EXIT_OK


# --- locks -------------------------------------------------------------------------------------
def list_locks(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, now: datetime) -> int:
    place = deployed(args, client)
    locks = place.ledger.node_locks(place.cluster, now)
    places = place.ledger.capacity_places(place.cluster, now)
    holds = place.ledger.all_node_holds(place.cluster)
    if args.json:
        print(
            json.dumps(
                {
                    "cluster": place.cluster,
                    "locks": [json.loads(lock.model_dump_json()) for lock in locks],
                    "cap_places": {n: {"incident": i, "until": u.isoformat()} for n, (i, u) in sorted(places.items())},
                    "holds": [json.loads(h.model_dump_json()) for h in holds],
                },
                indent=2,
            ),
            file=out,
        )
        return EXIT_OK
    limit = place.stack.parameters.get("MaxNodesInRecovery") or "-"
    print(
        f"{place.cluster} (stack {place.stack.name}): {len(locks)} node lock(s), {len(places)} place(s) under the cap "
        f"(MaxNodesInRecovery {limit}), {len(holds)} hold(s)",
        file=out,
    )
    if locks or places:
        table = [["NODE", "KIND", "HELD BY", "UNTIL"]]
        for lock in locks:
            kind = "hostname lock" if lock.node.startswith(HOST_LOCK_PREFIX) else "node lock"
            table.append(
                [lock.node.removeprefix(HOST_LOCK_PREFIX), kind, f"incident {lock.incident}", f"{lock.expires_at:%Y-%m-%d %H:%M} UTC"]
            )
        for node, (incident, until) in sorted(places.items()):
            table.append([node, "cap place", f"incident {incident}", f"{until:%Y-%m-%d %H:%M} UTC"])
        _table(table, out)
    if holds:
        print("\nholds (the pipeline leaves these nodes alone until each is unheld):", file=out)
        for hold in holds:
            print(f"  {hold.node}: held by {hold.by} since {hold.at:%Y-%m-%d %H:%M} UTC: {hold.reason}", file=out)
            print(f"    `hyperpod-recovery unhold {hold.node} --stack {place.stack.name} --reason 'what you did'`", file=out)
    return EXIT_OK


def _execution_status(sfn: Any, place: Deployed, incident: str) -> dict[str, Any] | None:
    """DescribeExecution of ``incident`` on either machine; None when neither has it."""
    for machine in place.machines:
        arn = machine.replace(":stateMachine:", ":execution:", 1) + f":{incident}"
        try:
            described: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        except sfn.exceptions.ExecutionDoesNotExist:
            continue
        return described
    return None


def release_lock(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, stdin: TextIO, now: datetime) -> int:
    """Release what ended incidents still hold of each node: its lock, the lock of its hostname (or,
    named by hostname, of its instance) as the holder's own record pairs them, and its place under
    the cap. Every node is checked before anything changes: one held by a running incident refuses
    the whole command."""
    reason = reason_of(args)
    nodes = [node_name(node) for node in dict.fromkeys(args.node)]
    place = deployed(args, client)
    all_locks = place.ledger.node_locks(place.cluster, now)
    all_places = place.ledger.capacity_places(place.cluster, now)
    plans: dict[str, tuple[list[NodeLock], dict[str, tuple[str, datetime]]]] = {}
    claimed: set[str] = set()  # a lock or place already in an earlier node's plan (both names of one node given)
    for node in nodes:
        locks, places = _release_plan(place, node, all_locks, all_places)
        plans[node] = (
            [lock for lock in locks if lock.node not in claimed],
            {n: e for n, e in places.items() if f"place:{n}" not in claimed},
        )
        claimed |= {lock.node for lock in locks} | {f"place:{n}" for n in places}
    holders = sorted(
        {lock.incident for locks, _ in plans.values() for lock in locks} | {i for _, p in plans.values() for i, _ in p.values()}
    )
    sfn = client("stepfunctions")
    for holder in holders:
        status = _execution_status(sfn, place, holder)
        if status is not None and status["status"] != "RUNNING" and place.ledger.get_incident(holder) is None:
            # Its record pairs each node's instance with its hostname: without it a hostname lock
            # would be left behind while the release said the node was free.
            raise OnCallRefused(
                f"incident {holder} ended ({status['status']}) but is not recorded yet: Reconcile Execution records it within "
                f"minutes; release after `hyperpod-recovery incidents show {holder} --stack {place.stack.name}` shows its record"
            )
        if status is not None and status["status"] == "RUNNING":
            held = ", ".join(node for node, (locks, _) in plans.items() if any(lock.incident == holder for lock in locks)) or "a cap place"
            raise OnCallRefused(still_running_refusal(held, holder, place.stack.name))
    for node, (locks, places) in plans.items():
        if not locks and not places:
            print(f"{node}: no lock and no place under the cap on {place.cluster}; nothing changed", file=out)
    wanted = {node: plan for node, plan in plans.items() if plan[0] or plan[1]}
    if not wanted:
        return EXIT_OK
    said = "; ".join(
        ", ".join(
            [*(f"{lock.node} (incident {lock.incident}, until {lock.expires_at:%H:%M} UTC)" for lock in locks)]
            + [f"cap place of {n}" for n in places]
        )
        for locks, places in wanted.values()
    )
    if not confirm(f"Release {said} on {place.cluster}?", args, stdin, out):
        print("nothing changed", file=out)
        return EXIT_NO
    by = who(args, client)
    for node, (locks, places) in wanted.items():
        released = [lock.node for lock in locks if place.ledger.release_lock(place.cluster, lock.node, lock.incident)]
        for instance, (incident, _) in places.items():
            place.ledger.release_capacity(place.cluster, incident, [instance], now)
        detail = f"released {', '.join(released) or 'no lock'}" + (f"; cap place of {', '.join(places)}" if places else "")
        place.ledger.audit(place.cluster, AuditEntry(at=now, by=by, action="locks release", target=node, reason=reason, detail=detail))
        missed = [lock.node for lock in locks if lock.node not in released]
        print(f"{node}: {detail} (by {by})" + (f"; {', '.join(missed)} had changed hands and were left" if missed else ""), file=out)
    print("the next fault reported for these nodes starts a recovery as usual", file=out)
    return EXIT_OK


def _release_plan(
    place: Deployed, node: str, locks: list[NodeLock], places: dict[str, tuple[str, datetime]]
) -> tuple[list[NodeLock], dict[str, tuple[str, datetime]]]:
    """The locks and cap places to release for ``node``: its own, and its other identity's (instance
    <-> hostname) as the record of an incident that holds a lock pairs them, a replacement named by
    its own name included; never a name's that only looks alike."""
    names = {node, f"{HOST_LOCK_PREFIX}{node}"}
    for holder in {lock.incident for lock in locks} | {i for i, _ in places.values()}:
        record = place.ledger.get_incident(holder)
        for fate in record.node_fates if record else []:
            if node in (fate.node, fate.instance, fate.replacement, fate.replacement_node):
                names |= {fate.node, f"{HOST_LOCK_PREFIX}{fate.node}"} | ({fate.instance} if fate.instance else set())
    return [lock for lock in locks if lock.node in names], {n: entry for n, entry in places.items() if n in names}


def node_name(text: str) -> str:
    text = text.removeprefix(HOST_LOCK_PREFIX)  # a hostname lock's key, as `locks --json` and older messages print it
    if not NODE_NAME.fullmatch(text):
        raise InputRefused(f"node {text!r}: an instance id (i-...) or the orchestrator's name of the node")
    return text


# --- stop --------------------------------------------------------------------------------------
def stop_incident(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, stdin: TextIO, now: datetime) -> int:
    reason = reason_of(args)
    if not INCIDENT_NAME.fullmatch(args.incident):
        raise InputRefused(f"incident {args.incident!r}: an execution name (letters, digits, '-' and '_', at most 80)")
    place = deployed(args, client)
    sfn = client("stepfunctions")
    status = _execution_status(sfn, place, args.incident)
    if status is None:
        raise OnCallRefused(f"no execution {args.incident} on stack {place.stack.name}'s state machines: nothing to stop")
    if status["status"] != "RUNNING":
        print(f"{args.incident} already ended ({status['status']}); nothing changed", file=out)
        return EXIT_OK
    if not confirm(f"Stop incident {args.incident} (running since {status['startDate']:%Y-%m-%d %H:%M} UTC)?", args, stdin, out):
        print("nothing changed", file=out)
        return EXIT_NO
    holdings = place.ledger.holdings(args.incident)  # read before the stop: what Reconcile Execution settles
    by = who(args, client)
    cause = f"stopped by {by}: {reason}"[:STOP_CAUSE_LIMIT]
    sfn.stop_execution(executionArn=status["executionArn"], error=STOP_ERROR, cause=cause)
    place.ledger.audit(place.cluster, AuditEntry(at=now, by=by, action="stop", target=args.incident, reason=reason))
    print(f"{args.incident}: stopped ({STOP_ERROR}: {cause})", file=out)
    hold = place.stack.parameters.get("EscalationHoldSeconds")
    until = now + timedelta(seconds=int(hold)) if hold and hold.isdigit() else None
    for line in stop_answer(args.incident, place.stack.name, holdings.locks if holdings else set(), until):
        print(line, file=out)
    return EXIT_OK


# --- the parsers -------------------------------------------------------------------------------
def stack_option(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    # A command group that also runs alone (``incidents``, ``locks``) cannot require it: argparse would
    # demand it before ``show``/``release`` take theirs. deployed() asks for it then.
    parser.add_argument("--stack", required=required, help="the deployed stack's name (finds its ledger, state machines and cluster)")


def change_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reason", required=True, help="why (kept in the ledger's audit log)")
    parser.add_argument("--by", default=None, help="who (default: the login name; the AWS identity is recorded with it)")
    parser.add_argument("--yes", action="store_true", help="do it without asking")


Command = Callable[..., int]


def add_commands(groups: Any, region: argparse.ArgumentParser, wrap: Callable[[Command, bool], Any]) -> None:
    """Register the on-call commands on the CLI's subparsers; ``wrap(command, changes)`` makes each
    an ``(Invocation) -> int`` (app.py owns the Invocation)."""
    incidents = groups.add_parser("incidents", parents=[region], help="recent incidents of the stack's cluster (running and recorded)")
    stack_option(incidents, required=False)
    incidents.add_argument("--open", action="store_true", help="only incidents still running")
    incidents.add_argument("--escalated", action="store_true", help=f"only those that needed a human ({', '.join(NEEDS_A_HUMAN)})")
    incidents.add_argument("--since", help="only since: a duration (30m, 6h, 2d) or an ISO time")
    incidents.add_argument("--limit", type=_positive, default=50, help="at most this many recorded incidents (default 50)")
    incidents.add_argument("--json", action="store_true")
    incidents.set_defaults(run=wrap(list_incidents, False))
    shows = incidents.add_subparsers(dest="incidents_command", title="commands", metavar="COMMAND")
    show = shows.add_parser("show", parents=[region], help="one incident: its record, what happens next, timeline and phases")
    show.add_argument("incident", help="the incident id (the execution's name)")
    stack_option(show)
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=wrap(show_incident, False))

    locks = groups.add_parser("locks", parents=[region], help="node locks, hostname locks, places under the cap and holds")
    stack_option(locks, required=False)
    locks.add_argument("--json", action="store_true")
    locks.set_defaults(run=wrap(list_locks, False))
    actions = locks.add_subparsers(dest="locks_command", title="commands", metavar="COMMAND")
    release = actions.add_parser("release", parents=[region], help="release a node's locks and cap place held by an ended incident")
    release.add_argument(
        "node",
        nargs="+",
        help="instance ids, current names, or the names of nodes they replaced (each node's other identity is released with it)",
    )
    stack_option(release)
    change_options(release)
    release.set_defaults(run=wrap(release_lock, True))

    stop = groups.add_parser(
        "stop",
        parents=[region],
        help="stop a running incident (StopExecution): recorded aborted, its node locks kept for you (it prints the release)",
    )
    stop.add_argument("incident", help="the incident id (the execution's name)")
    stack_option(stop)
    change_options(stop)
    stop.set_defaults(run=wrap(stop_incident, True))


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"a whole number from 1 to 1000, not {text!r}")
    return int(text)
