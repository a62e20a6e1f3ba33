"""``hyperpod-recovery drill``: a recovery drill on a deployed stack, dry-run unless told otherwise.

It starts the workflow with StartExecution (what ``aws stepfunctions start-execution`` does), prints
each state as the execution enters it, and when it ends prints the outcome and the phase timeline:
the incident record's phases (read from the ledger, as the metrics and the sandbox's drill report
read them), or, when there is no record to read (no ledger given, no access to it, an execution that
ended before recording), the phases read back from the execution history.

What to recover comes from one of:
  --scenario FILE   a sandbox drill scenario (events/drills/*.json): its faults' node references
                    (``workers:7``) are resolved against the real cluster's instance groups
                    (ListClusterNodes: the 8th node of group "workers", in launch order)
  --input FILE      a start input as is (events/manual/*.json, events/manual-job/*.json)
  --node ID ...     instance ids (``i-...``) of the cluster, or ``group:index`` as in a scenario
  --job ID          a Slurm job id (JobRecovery)

Without ``--live`` the request is a dry run whatever the input says: every step runs, nothing on the
cluster changes. ``--live`` also needs ``--yes``, so a pasted command cannot replace nodes by accident.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.record.durations import format_duration, offset_text
from hyperpod_recovery.domain.record.phases import phases_from_states
from hyperpod_recovery.errors import RecoveryError
from hyperpod_recovery.models.common import JOB_ID_PATTERN, NODE_ID_PATTERN
from hyperpod_recovery.models.records import AuditEntry, IncidentRecord
from hyperpod_recovery.vocabulary import PhaseName
from hyperpod_recovery_cli.changes import who
from hyperpod_recovery_cli.inputs import InputRefused, bounded, one_line, plain_text, shown
from hyperpod_recovery_cli.scenario_schema import (
    EXPECT_KINDS,
    NODE_REF,
    SCENARIO_NAME,
    SCENARIO_NAME_LIMIT,
    ExpectSpec,
    JsonFileError,
    read_json,
)
from hyperpod_recovery_cli.stack import NotOurStack, read_stack

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# StartExecution's name: 1-80 characters without whitespace, brackets, wildcards, control characters
# or "#%\\^|~`$&,;:/ (its API reference); narrowed to the characters the drill's own names use.
EXECUTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
REASON_LIMIT = 1024  # a manual request's reason (models/requests.py)

RECORD_STATES = (
    "Record Outcome",
    "Record Duplicate",
    "Escalate Incident",
    "Record Rejection",
    "Record Stale Event",
    "Record Job Outcome",
    "Escalate Job Incident",
    "Record Job Rejection",
    "Record Stale Job Event",
)


class DrillUsageError(Exception):
    """The drill cannot be built from what was given (exit code 2)."""


@dataclass
class Targets:
    cluster: str
    node_state_machine: str
    job_state_machine: str | None
    ledger_table: str | None = None  # where the incident record is (the stack's LedgerTableName)


@dataclass
class Phase:
    """A phase as the drill prints it: seconds since the execution started."""

    name: PhaseName
    start: float  # seconds since the execution started
    end: float


def resolve_stack(cloudformation: Any, stack: str) -> Targets:
    try:
        found = read_stack(cloudformation, stack)
    except NotOurStack as exc:
        raise DrillUsageError(str(exc)) from exc
    outputs = found.outputs
    return Targets(found.cluster, outputs["StateMachineArn"], outputs.get("JobStateMachineArn"), outputs.get("LedgerTableName"))


def cluster_nodes_by_group(sagemaker: Any, cluster: str) -> dict[str, list[str]]:
    nodes: list[dict[str, Any]] = []
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster):
        nodes += page["ClusterNodeSummaries"]
    groups: dict[str, list[str]] = {}
    for node in sorted(nodes, key=lambda n: (str(n.get("LaunchTime", "")), n["InstanceId"])):
        groups.setdefault(node["InstanceGroupName"], []).append(node["InstanceId"])
    return groups


def resolve_node_refs(refs: list[str], groups: dict[str, list[str]]) -> list[str]:
    """``workers:7`` -> the instance id of the 8th node (launch order) of instance group workers."""
    ids = []
    for ref in refs:
        match = NODE_REF.fullmatch(ref)
        if match is None:
            raise DrillUsageError(f"node reference {ref!r} must look like 'workers:7'")
        members = groups.get(match["group"])
        if not members:
            raise DrillUsageError(f"{ref}: the cluster has no instance group {match['group']!r} (groups: {', '.join(sorted(groups))})")
        index = int(match["index"])
        if index >= len(members):
            raise DrillUsageError(f"{ref}: group {match['group']!r} has {len(members)} node(s) (0-{len(members) - 1})")
        ids.append(members[index])
    return list(dict.fromkeys(ids))


def read_drill_file(args: argparse.Namespace) -> dict[str, Any] | None:
    """The --input or --scenario file, read and checked before anything reaches AWS."""
    path = args.input or args.scenario
    if not path:
        return None
    document = _read_json(Path(path))
    if not isinstance(document, dict):
        raise DrillUsageError(f"{path}: a start input is a JSON object" if args.input else f"{path}: a scenario is a JSON object")
    if args.scenario:
        faults = _scenario_faults(document)
        if any(f.get("job") for f in faults):
            raise DrillUsageError("this scenario fails a job: its job ids are the sandbox's, so name the real one with --job")
        if not _node_refs(faults):
            raise DrillUsageError(f"{path}: no fault names a node")
        _scenario_name(document)
        check_expect(document.get("expect"))
    return document


def check_expect(expect: Any) -> None:
    """The scenario's expect block as the sandbox takes it, checked before anything starts: a loose
    value read as something else would decide a drill's verdict."""
    if expect is None:
        return
    if not isinstance(expect, dict):
        raise DrillUsageError(f"expect: an object of expectations, not {shown(expect)}")
    for name, value in expect.items():
        kind = EXPECT_KINDS.get(name)
        if kind is None:
            raise DrillUsageError(f"expect.{name}: not an expectation (known: {', '.join(EXPECT_KINDS)})")
        try:
            ExpectSpec.model_validate({name: value})
        except ValidationError as exc:
            raise DrillUsageError(f"expect.{name}: a {kind}, not {shown(value)}") from exc


def _scenario_name(document: dict[str, Any]) -> str | None:
    """The scenario's ``name`` (it goes into the request's reason), refused as the sandbox refuses it."""
    name = document.get("name")
    if name is None:
        return None
    if not (isinstance(name, str) and SCENARIO_NAME.fullmatch(name)):
        raise DrillUsageError(f"name: a scenario's name is lower-case letters, digits and '-', at most 63, not {shown(name)}")
    return name


def _read_json(path: Path) -> Any:
    try:
        return read_json(path, missing="no such file", directory="give a JSON file")
    except JsonFileError as exc:
        raise DrillUsageError(f"cannot read the drill: {exc}") from exc


def _scenario_faults(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenario's faults, each an object whose ``node`` is a node reference and ``nodes`` a list
    of them: what the drill reads of a scenario (the sandbox checks the rest when it runs one)."""
    faults = document.get("faults", [])
    if not isinstance(faults, list):
        raise DrillUsageError(f"faults: a list of fault objects, not {shown(faults)}")
    for i, fault in enumerate(faults):
        if not isinstance(fault, dict):
            raise DrillUsageError(f"faults.{i}: a fault is a JSON object, not {shown(fault)}")
        node, nodes = fault.get("node"), fault.get("nodes")
        if node is not None and not (isinstance(node, str) and NODE_REF.fullmatch(node)):
            raise DrillUsageError(f"faults.{i}.node: a node reference like 'workers:7', not {shown(node)}")
        if nodes is not None and not isinstance(nodes, list):
            raise DrillUsageError(f"faults.{i}.nodes: a list of node references like ['workers:7'], not {shown(nodes)}")
        for j, ref in enumerate(nodes or []):
            if not (isinstance(ref, str) and NODE_REF.fullmatch(ref)):
                raise DrillUsageError(f"faults.{i}.nodes.{j}: a node reference like 'workers:7', not {shown(ref)}")
    return faults


def _node_refs(faults: list[dict[str, Any]]) -> list[str]:
    return [ref for f in faults for ref in ([f["node"]] if f.get("node") else []) + list(f.get("nodes") or [])]


def build_request(
    args: argparse.Namespace, document: dict[str, Any] | None, targets: Targets, sagemaker: Callable[[], Any]
) -> tuple[str, dict[str, Any], list[str]]:
    """(workflow "node" | "job", start input, notes for the operator). ``document`` is what
    read_drill_file() read; ``sagemaker`` makes the client, needed only to resolve a scenario's nodes."""
    notes: list[str] = []
    reason = args.reason
    if args.input:
        payload = dict(document or {})
        workflow = "job" if "job_id" in payload else "node"
    elif args.job:
        workflow, payload = "job", {"cluster": targets.cluster, "job_id": args.job}
    elif args.node:
        # ``workers:0`` (what `make deploy` suggests) is resolved like a scenario's node reference.
        refs = list(dict.fromkeys(node for node in args.node if NODE_REF.fullmatch(node)))
        groups = cluster_nodes_by_group(sagemaker(), targets.cluster) if refs else {}
        resolved = {ref: resolve_node_refs([ref], groups)[0] for ref in refs}
        node_ids = [resolved.get(node, node) for node in args.node]
        workflow, payload = "node", {"cluster": targets.cluster, "node_ids": list(dict.fromkeys(node_ids))}
        if refs:
            notes.append(f"nodes {', '.join(refs)} are {', '.join(resolved[r] for r in refs)} on {targets.cluster}")
    else:
        scenario = document or {}
        refs = _node_refs(scenario.get("faults", []))
        workflow = "node"
        payload = {"cluster": targets.cluster, "node_ids": resolve_node_refs(refs, cluster_nodes_by_group(sagemaker(), targets.cluster))}
        # (a file's stem may be anything a file system allows: kept to one line and the name's bound)
        named = _scenario_name(scenario) or one_line(Path(args.scenario).stem[:SCENARIO_NAME_LIMIT])
        reason = reason or f"drill {named}"
        notes.append(f"scenario nodes {', '.join(refs)} are {', '.join(payload['node_ids'])} on {targets.cluster}")
    payload.setdefault("cluster", targets.cluster)
    payload["reason"] = reason or payload.get("reason") or "recovery drill"
    if not args.live and payload.get("dry_run") is False:
        notes.append("the input asked for a real run; without --live this is a dry run")
    payload["dry_run"] = not args.live
    if workflow == "job" and not targets.job_state_machine:
        raise DrillUsageError("no JobRecovery state machine: give --job-state-machine-arn or --stack")
    return workflow, payload, notes


def _history(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
        events += page["events"]
    return events


def _entered(event: dict[str, Any]) -> str | None:
    details = event.get("stateEnteredEventDetails")
    return str(details["name"]) if event["type"].endswith("StateEntered") and details else None


def _at(seconds: float) -> str:
    return f"T+{offset_text(seconds)}"


def phases_from_history(events: list[dict[str, Any]]) -> list[Phase]:
    """The execution's phases so far, in seconds since it started: the phases Reconcile Execution
    reads back from a history (domain/record/phases.py), so the drill and the incident record agree."""
    if not events:
        return []
    started = events[0]["timestamp"]
    entered = [(name, event["timestamp"]) for event in events if (name := _entered(event)) is not None]
    last = max(event["timestamp"] for event in events)
    return [
        Phase(phase.name, (phase.start - started).total_seconds(), (phase.end - started).total_seconds())
        for phase in phases_from_states(entered, last)
    ]


def phases_from_record(record: IncidentRecord) -> list[Phase]:
    """The incident record's phases (the ones Record Outcome wrote, the metrics and the report
    read), in seconds since the fault was detected."""
    if not record.phases:
        return []
    origin = min(p.start for p in record.phases)
    return [Phase(p.name, (p.start - origin).total_seconds(), (p.end - origin).total_seconds()) for p in record.phases]


def read_record(client: Callable[[str], Any], table: str | None, incident_id: str, err: TextIO) -> IncidentRecord | None:
    """The incident record from the ledger; None when there is no ledger to read (no --stack or
    --ledger-table), the execution ended before recording, or the ledger cannot be read (said on err)."""
    if not table:
        return None
    try:
        return DynamoLedger(table, dynamodb=client("dynamodb")).get_incident(incident_id)
    except (RecoveryError, ValidationError) as exc:  # ValidationError: a record this version cannot read
        print(f"note: the incident record could not be read ({exc}); the timeline is the execution history's", file=err)
        return None


def phase_chart(phases: list[Phase], width: int = 48) -> list[str]:
    """The phases as text bars on one time scale (a terminal's version of the report's picture)."""
    if not phases:
        return []
    total = max(p.end for p in phases) or 1.0
    lines = []
    for phase in phases:
        size = max(1, round((phase.end - phase.start) / total * width))
        # A phase at the very end (the record, a few ms) still shows: its bar ends at the right edge.
        left = min(int(phase.start / total * width), width - size)
        bar = (" " * left + "#" * size)[:width].ljust(width)
        lines.append(f"  {phase.name:<20} {_at(phase.start):>10}  {format_duration(phase.end - phase.start):>10}  |{bar}|")
    return lines


def _recorded_outcome(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    current = None
    for event in events:
        name = _entered(event)
        if name is not None:
            current = name
        details = event.get("stateExitedEventDetails")
        if details and current in RECORD_STATES:
            output = json.loads(details.get("output") or "{}")
            outcome = output.get("outcome") if isinstance(output, dict) else None
            if isinstance(outcome, dict) and "outcome" in outcome:
                return outcome
    return None


def follow(
    sfn: Any, execution_arn: str, out: TextIO, sleep: Callable[[float], None], poll_seconds: float, timeout_seconds: float
) -> dict[str, Any]:
    """Print each state as the execution enters it; return DescribeExecution once it has ended."""
    seen = 0
    waited = 0.0
    while True:
        description: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        events = _history(sfn, execution_arn)
        started = events[0]["timestamp"] if events else None
        for event in events[seen:]:
            at = (event["timestamp"] - started).total_seconds() if started else 0.0
            name = _entered(event)
            if name is not None:
                print(f"  {_at(at):>10}  {name}", file=out, flush=True)
            elif event["type"].endswith("Failed") and event["type"] != "ExecutionFailed":
                failure: dict[str, Any] = next((v for k, v in event.items() if k.endswith("EventDetails")), {})
                print(f"  {_at(at):>10}    ! {event['type']}: {failure.get('error', '')}", file=out, flush=True)
        seen = len(events)
        if description["status"] != "RUNNING":
            return description
        if waited >= timeout_seconds:
            print(f"  still running after {timeout_seconds:.0f}s: stopped following (the execution goes on)", file=out)
            return description
        sleep(poll_seconds)
        waited += poll_seconds


def _live_audit(
    args: argparse.Namespace, client: Callable[[str], Any], targets: Targets, name: str, workflow: str, at: datetime
) -> Callable[[], None] | None:
    """How a live drill is kept in the ledger's audit log (changes.py), made before it starts: who
    is asked of STS first, so a drill that cannot be audited does not start."""
    if not targets.ledger_table:  # (--state-machine-arn without --ledger-table: no ledger named)
        return None
    entry = AuditEntry(
        at=at, by=who(args, client), action="drill live", target=name, reason=args.reason or "live drill", detail=f"{workflow} recovery"
    )
    ledger = DynamoLedger(targets.ledger_table, dynamodb=client("dynamodb"))
    return lambda: ledger.audit(targets.cluster, entry)


def check_arguments(args: argparse.Namespace) -> None:
    """What the command line alone can tell is wrong (exit code 2, before any AWS call)."""
    if not args.stack and not (args.state_machine_arn and args.cluster):
        raise DrillUsageError("give --stack, or --state-machine-arn with --cluster")
    if args.live and not args.yes:
        raise DrillUsageError("--live changes the cluster (drains, replaces nodes, resubmits jobs): add --yes to confirm")
    for node in args.node or []:
        if not (re.fullmatch(NODE_ID_PATTERN, node) or NODE_REF.fullmatch(node)):
            raise DrillUsageError(f"--node {shown(node)}: an instance id of the cluster (i-0123456789abcdef0) or group:index (workers:0)")
    if args.job is not None and not re.fullmatch(JOB_ID_PATTERN, args.job):
        raise DrillUsageError(f"--job {shown(args.job)}: a Slurm job id (4711, or 4711_3 for an array task)")
    if args.reason is not None:
        # Kept in the incident record and printed in its notifications: a manual request's reason.
        args.reason = plain_text("--reason", args.reason, limit=REASON_LIMIT, say="say why (or leave --reason out)")
    if args.name is not None and not EXECUTION_NAME.fullmatch(args.name):
        raise DrillUsageError(
            f"--name {shown(args.name)}: an execution name is 1 to 80 letters, digits, '-' or '_' (Step Functions' rule, narrowed)"
        )


def run_drill(
    args: argparse.Namespace,
    *,
    out: TextIO,
    err: TextIO,
    client: Callable[[str], Any],
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """The ``drill`` command. ``client(service)`` makes each AWS client when it is first needed; AWS
    errors (ClientError, BotoCoreError: no region, no credentials, no such stack) propagate to the
    CLI's handler, which prints one line and exits 2 or 3."""
    try:
        check_arguments(args)
        document = read_drill_file(args)
        if args.stack:
            targets = resolve_stack(client("cloudformation"), args.stack)
        else:
            targets = Targets(args.cluster, args.state_machine_arn, args.job_state_machine_arn, args.ledger_table)
        workflow, payload, notes = build_request(args, document, targets, lambda: client("sagemaker"))
    except (DrillUsageError, InputRefused) as exc:
        print(f"hyperpod-recovery drill: {one_line(str(exc))}", file=err)
        return EXIT_USAGE

    machine = targets.node_state_machine if workflow == "node" else targets.job_state_machine
    name = args.name or f"drill-{now().strftime('%Y%m%dT%H%M%S')}"
    mode = "LIVE: the cluster will be changed" if args.live else "dry run: nothing on the cluster changes"
    for note in notes:
        print(f"note: {note}", file=out)
    print(f"{workflow} recovery drill {name} on {targets.cluster} ({mode})", file=out)
    print(f"input: {json.dumps(payload)}", file=out, flush=True)
    sfn = client("stepfunctions")
    audit = _live_audit(args, client, targets, name, workflow, now()) if args.live else None
    execution_arn = sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps(payload))["executionArn"]
    if audit is not None:
        audit()
    # The incident id users see everywhere is the execution's name, the ledger's key (not its ARN).
    print(f"incident: {name}", file=out, flush=True)
    try:
        description = follow(sfn, execution_arn, out, sleep, args.poll_seconds, args.timeout_seconds)
    except KeyboardInterrupt:
        print(f"hyperpod-recovery drill: stopped following; incident {name} goes on (hyperpod-recovery incidents show {name})", file=err)
        return EXIT_INTERRUPTED
    events = _history(sfn, execution_arn)

    outcome = _recorded_outcome(events)
    print("", file=out)
    print(f"status: {description['status']}", file=out)
    if outcome is not None:
        print(f"outcome: {outcome['outcome']}" + (f" ({outcome['error']})" if outcome.get("error") else ""), file=out)
        print(f"summary: {outcome.get('summary', '')}", file=out)
        for metric, seconds in (outcome.get("durations") or {}).items():
            print(f"  {metric}: {seconds:g}", file=out)
    elif description.get("error"):
        print(f"error: {description['error']}: {description.get('cause', '')}", file=out)
    # The record's phases when it was written (the same the metrics and the drill report read); an
    # execution that ended before recording (stopped, crashed) has only its history to tell.
    record = read_record(client, targets.ledger_table, name, err)
    if record is not None:
        print("\ntimeline (from the incident record):", file=out)
        phases = phases_from_record(record)
    else:
        print("\ntimeline (from the execution history):", file=out)
        phases = phases_from_history(events)
    for line in phase_chart(phases):
        print(line, file=out)
    expect = (document or {}).get("expect") if args.scenario else None
    if expect is not None:
        checks, unchecked = deployed_expectations(expect, record, live=args.live, recorded=(outcome or {}).get("outcome"))
        print("\nexpectations (the scenario's expect, as far as a deployed stack shows them):", file=out)
        for ok, line in checks:
            print(f"  {'ok  ' if ok else 'FAIL'} {line}", file=out)
        if unchecked:
            print(f"  not checked here: {', '.join(unchecked)} (the sandbox's report shows them: make drill)", file=out)
        if checks:  # what was checked decides; with nothing checkable, the execution's end does
            return EXIT_OK if all(ok for ok, _ in checks) else EXIT_FAILED
    return EXIT_OK if description["status"] == "SUCCEEDED" else EXIT_FAILED


# What a deployed stack's drill can show of a scenario's expect block: the one incident it started,
# read from its record. The rest needs the sandbox's view of everything (second copies, the cap over
# time, every message): said as not checked, never passed silently.
CHECKABLE_ON_A_STACK = ("outcomes", "no_human_needed", "resubmissions", "checkpoint_step")
NEEDS_A_HUMAN = ("escalated", "capped", "stale", "aborted", "failed")
SANDBOX_SAFETY = ("within_cap", "one_copy_per_job", "messages_match_record")


def deployed_expectations(
    expect: Any, record: IncidentRecord | None, *, live: bool, recorded: str | None = None
) -> tuple[list[tuple[bool, str]], list[str]]:
    """([(ok, "what: expected ...; got ...")], [names not checked]) for the drill's one incident:
    its record, or without one (no ledger to read) the outcome its Record step answered."""
    check_expect(expect)  # (checked when the file was read: here for a caller that did not)
    checks: list[tuple[bool, str]] = []
    unchecked = [name for name, value in expect.items() if name not in CHECKABLE_ON_A_STACK and value not in (None, [], False)]
    # (the sandbox's safety expectations hold unless a scenario turns them off: never passed silently here)
    unchecked += [name for name in SANDBOX_SAFETY if expect.get(name, True) is not False and name not in unchecked]
    got = record.outcome if record is not None else recorded
    if got is None:
        unchecked += [name for name in CHECKABLE_ON_A_STACK if name in expect]
        unchecked.append("(no incident record or recorded outcome to read: the execution ended before recording, or no ledger)")
        return [], unchecked
    if "outcomes" in expect:
        wanted = expect["outcomes"]
        if not live:
            unchecked.append("outcomes (a dry run's outcome is dry_run: give --live --yes)")
        elif not (isinstance(wanted, list) and len(wanted) == 1):
            unchecked.append(
                f"outcomes (the scenario expects {len(wanted) if isinstance(wanted, list) else '?'} incidents; a drill starts one)"
            )
        else:
            error = f" ({record.error})" if record is not None and record.error else ""
            checks.append((got == wanted[0], f"outcome: expected {wanted[0]}; got {got}{error}"))
    if expect.get("no_human_needed"):
        if live:
            checks.append((got not in NEEDS_A_HUMAN, f"no human needed: expected no such outcome; got {got}"))
        else:
            unchecked.append("no_human_needed (a dry run's outcome is dry_run: give --live --yes)")
    if record is None:  # the answer's outcome alone: what it resubmitted is in the record
        unchecked += [f"{name} (no incident record to read)" for name in ("resubmissions", "checkpoint_step") if name in expect]
        return checks, unchecked
    made = list(record.resubmissions)
    if "resubmissions" in expect:
        if live:
            checks.append((len(made) == expect["resubmissions"], f"resubmissions: expected {expect['resubmissions']}; got {len(made)}"))
        else:
            unchecked.append("resubmissions (a dry run resubmits nothing)")
    if "checkpoint_step" in expect:
        steps = sorted({r.checkpoint_step for r in made})
        if live:
            checks.append(
                (steps == [expect["checkpoint_step"]], f"checkpoint step: expected {expect['checkpoint_step']}; got {steps or 'none'}")
            )
        else:
            unchecked.append("checkpoint_step (a dry run resubmits nothing)")
    return checks, unchecked


def add_arguments(drill: argparse.ArgumentParser) -> None:
    where = drill.add_argument_group("where")
    where.add_argument("--stack", help="the deployed stack's name (reads its outputs and ClusterName)")
    where.add_argument("--state-machine-arn", help="NodeRecovery's ARN, instead of --stack")
    where.add_argument("--job-state-machine-arn", help="JobRecovery's ARN, instead of --stack")
    where.add_argument("--cluster", help="the cluster's name, with --state-machine-arn")
    where.add_argument(
        "--ledger-table", help="the ledger's table name, with --state-machine-arn (the timeline is then the incident record's)"
    )
    what = drill.add_mutually_exclusive_group(required=True)
    what.add_argument("--scenario", help="a drill scenario (events/drills/*.json); node refs resolve against the real cluster")
    what.add_argument("--input", help="a start input file as is (events/manual/*.json, events/manual-job/*.json)")
    what.add_argument("--node", action="append", help="an instance id (i-...), or group:index (workers:0), to recover; repeat for several")
    what.add_argument("--job", help="a Slurm job id to recover (JobRecovery)")
    drill.add_argument("--reason", help="why (kept in the incident record)")
    drill.add_argument("--name", help="the execution's name (default drill-<UTC time>)")
    drill.add_argument("--live", action="store_true", help="a real recovery instead of a dry run (needs --yes)")
    drill.add_argument("--yes", action="store_true", help="confirm --live")
    drill.add_argument(
        "--poll-seconds", type=bounded(0.1, 3600), default=5.0, help="how often to read the execution's progress (0.1 to 3600, default 5)"
    )
    drill.add_argument(
        "--timeout-seconds", type=bounded(0, 7 * 86_400), default=4 * 3600, help="stop following after this long (at most 7 d, default 4 h)"
    )
