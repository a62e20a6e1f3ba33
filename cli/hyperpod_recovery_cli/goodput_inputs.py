"""Where the goodput planner's figures come from, each a layer of a planner-inputs document:

    the command line  >  a JSON file (--from)  >  a deployed stack (--stack: ledger, cluster)
                      >  a job's checkpoint manifests (--checkpoint-prefix)  >  stated defaults

A higher layer's figure replaces a lower one's (per phase for the recovery phases). Every figure
carries its provenance (measured, given, default) and its source; ``combine`` validates the result
once, and a refusal names the field (exit code 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.checkpoints.discovery import list_all, parse_manifest, schema_problem, split_s3_uri
from hyperpod_recovery.models.manifest import MANIFEST_NAME, MAX_MANIFEST_BYTES, step_dir, step_of_folder
from hyperpod_recovery.ports import CheckpointReader
from hyperpod_recovery_cli.inputs import InputRefused, one_line
from hyperpod_recovery_cli.planner import defaults
from hyperpod_recovery_cli.planner.measure import commit_gap_seconds, is_failure, mean_phases, mean_replacement, mean_startup
from hyperpod_recovery_cli.planner.model import INPUTS_KEY, PlannerInputs
from hyperpod_recovery_cli.stack import Stack

Layer = dict[str, Any]
FIGURES = ("nodes", "spare_nodes", "repair_seconds", "checkpoint_interval_seconds", "checkpoint_cost_seconds")
FILE_LIMIT = 16 * 1024 * 1024  # a fleet-drill report with its traces; the inputs are a few hundred bytes of it
# The newest manifests whose commit times give the checkpoint period (ten gaps).
MANIFESTS_READ = 11
# A ledger query's page of incidents goes on until this many: a year of a large fleet's failures.
INCIDENTS_READ = 20_000
NON_COMPUTE = ("Controller", "Login")


def defaults_layer() -> Layer:
    return {
        "failure_rate": defaults.FAILURE_RATE.model_dump(exclude_none=True),
        "phases_seconds": {phase: figure.model_dump() for phase, figure in defaults.PHASES.items()},
        "checkpoint_interval_seconds": defaults.CHECKPOINT_INTERVAL.model_dump(),
        "checkpoint_cost_seconds": defaults.CHECKPOINT_COST.model_dump(),
    }


def merged(layers: Sequence[Layer]) -> Layer:
    """``layers`` highest first, laid over one another (phases one by one)."""
    document: Layer = {}
    for layer in reversed(layers):
        for key, value in layer.items():
            if key == "phases_seconds" and isinstance(value, dict) and isinstance(document.get(key), dict):
                document[key] = document[key] | value
            else:
                document[key] = value
    return document


def combine(layers: Sequence[Layer]) -> PlannerInputs:
    document = merged(layers)
    if "nodes" not in document:
        raise InputRefused("the cluster's size is unknown: give --nodes N, or --stack NAME, or --from FILE")
    try:
        return PlannerInputs.model_validate(document)
    except ValidationError as exc:
        raise InputRefused(f"the planner's inputs: {schema_problem(exc).replace('Value error, ', '')}") from None


def _sourced(value: Any, source: str) -> Any:
    """A file's figure with the file as its source, unless it names one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"value": value, "provenance": "given", "source": source}
    if isinstance(value, dict) and not value.get("source"):
        return value | {"source": source}
    return value


def file_layer(path: str) -> Layer:
    """A planner-inputs object, bare or under ``goodput_inputs`` in any JSON object (a fleet-drill report)."""
    file = Path(path)
    try:
        if file.stat().st_size > FILE_LIMIT:
            raise InputRefused(f"--from {path}: larger than {FILE_LIMIT // (1024 * 1024)} MiB")
        document = json.loads(file.read_bytes())
    except OSError as exc:
        raise InputRefused(f"--from {path}: cannot be read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:
        raise InputRefused(f"--from {path}: not JSON ({one_line(str(exc))[:120]})") from None
    if isinstance(document, dict) and INPUTS_KEY in document:
        document = document[INPUTS_KEY]
    if not isinstance(document, dict) or not document:
        raise InputRefused(f"--from {path}: not a planner-inputs object, nor an object with a {INPUTS_KEY!r} key (docs/goodput.md)")
    unknown = sorted(set(document) - set(PlannerInputs.model_fields))
    if unknown:
        raise InputRefused(
            f"--from {path}: unknown field(s) {', '.join(map(repr, unknown[:5]))}: not planner inputs "
            f"(a report holds them under {INPUTS_KEY!r}; docs/goodput.md)"
        )
    source = f"file {file.name}"
    layer: Layer = {name: _sourced(value, source) if name in FIGURES else value for name, value in document.items()}
    if isinstance(layer.get("phases_seconds"), dict):
        layer["phases_seconds"] = {phase: _sourced(value, source) for phase, value in layer["phases_seconds"].items()}
    if isinstance(layer.get("failure_rate"), dict) and not layer["failure_rate"].get("source"):
        layer["failure_rate"] = layer["failure_rate"] | {"source": source}
    return layer


def stack_parameters_layer(stack: Stack) -> Layer:
    """The phases the deployed stack's own parameters assume (still defaults: assumed, not measured)."""
    phases: Layer = {}
    for phase, name in defaults.STACK_PARAMETERS.items():
        value = stack.parameters.get(name, "")
        if value.isascii() and value.isdigit():
            phases[phase] = {"value": int(value), "provenance": "default", "source": f"stack {stack.name} parameter {name}"}
    return {"phases_seconds": phases} if phases else {}


def compute_nodes(cluster: HyperPodCluster, stack: Stack) -> int:
    """The cluster's compute nodes now: every instance group's CurrentCount but the controller's and login groups."""
    skipped = {*stack.groups("ControllerGroups"), *stack.groups("LoginGroups")}
    info = cluster.describe()
    return sum(
        group.current_count or 0 for group in info.groups.values() if group.name not in skipped and group.node_type not in NON_COMPUTE
    )


def ledger_layer(
    stack: Stack, ledger: DynamoLedger, cluster: HyperPodCluster, *, since: datetime, now: datetime, checkpoint_uri: str | None = None
) -> Layer:
    """What the deployed stack measured since ``since``: the cluster's size, its node failures over
    node-days, each recovery phase's mean (the restart with the jobs' own start-up, where shrunk
    copies measured it; only the job under ``checkpoint_uri`` when given), and how long a replaced node's place stayed empty."""
    nodes = compute_nodes(cluster, stack)
    window = f"since {since:%Y-%m-%d %H:%M} UTC"
    layer: Layer = {"nodes": {"value": nodes, "provenance": "measured", "source": f"DescribeCluster {stack.cluster}: compute groups now"}}
    records = ledger.incidents(stack.cluster, since=since, limit=INCIDENTS_READ)
    failures = sum(1 for record in records if is_failure(record))
    days = (now - since).total_seconds() / 86_400
    if failures and nodes and days > 0:
        layer["failure_rate"] = {
            "failures": failures,
            "node_days": nodes * days,
            "provenance": "measured",
            "source": f"ledger {ledger.table_name}: {failures} node failure(s) {window}, {nodes} nodes x {days:.1f} days",
        }
    phases = mean_phases(records)
    if phases:
        layer["phases_seconds"] = {
            phase: {"value": seconds, "provenance": "measured", "source": f"ledger: mean of {count} recovered incident(s) {window}"}
            for phase, (seconds, count) in phases.items()
        }
    log = ledger.recovery_log(stack.cluster, since=since)
    startup = mean_startup(log, checkpoint_uri)
    if "restart" in phases and startup is not None:  # the resubmission, then the job starting on it
        restart = layer["phases_seconds"]["restart"]
        restart["value"] += startup[0]
        restart["source"] += f", plus the jobs' own start-up: mean of {startup[1]} restart(s) measured from shrunk copies' checkpoints"
    elif "restart" in phases:  # the ledger sees the resubmission, not the job starting on it
        restart = layer["phases_seconds"]["restart"]
        restart["source"] += "; the pipeline's part only: add the job's start-up (NCCL init, checkpoint load) with --restart"
    replaced = mean_replacement(log)
    if replaced is not None:
        seconds, count = replaced
        layer["repair_seconds"] = {
            "value": seconds,
            "provenance": "measured",
            "source": f"recovery log: mean of {count} replacement(s), call to back through the health gate",
        }
    return layer


def checkpoint_layer(reader: CheckpointReader, uri: str, *, job: str | None, cost_seconds: float) -> Layer:
    """The checkpoint interval from the commit times of the newest manifests under ``uri``: their
    median gap is one period, compute and blocking write, so the cost is taken off it."""
    try:
        bucket, prefix = split_s3_uri(uri)
    except ValueError as exc:
        raise InputRefused(f"--checkpoint-prefix: {exc}") from None
    steps = sorted(
        step
        for page in list_all(reader, bucket, prefix, delimiter="/")
        for folder in page.folders
        if (step := step_of_folder(folder[len(prefix) :])) is not None
    )
    times = []
    for step in steps[-MANIFESTS_READ:]:
        body = reader.get(bucket, f"{prefix}{step_dir(step)}/{MANIFEST_NAME}", MAX_MANIFEST_BYTES)
        manifest = parse_manifest(step, body, job)[0] if body is not None else None
        if manifest is not None:
            times.append(manifest.created_at)
    gap = commit_gap_seconds(times)
    if gap is None:
        whose = f" of job {job!r}" if job else ""
        raise InputRefused(
            f"--checkpoint-prefix {uri}: {len(times)} committed manifest(s){whose} among the newest {MANIFESTS_READ} step folders; "
            "two are needed to measure the interval (give --checkpoint-interval instead)"
        )
    seconds, gaps = gap
    return {
        "checkpoint_interval_seconds": {
            "value": max(1.0, seconds - cost_seconds),
            "provenance": "measured",
            "source": f"{uri}: median of {gaps} gap(s) between manifest commits, less the checkpoint cost",
        }
    }
