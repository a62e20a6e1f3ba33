"""``hyperpod-recovery goodput``: the goodput planner (docs/goodput.md).

    hyperpod-recovery goodput [--stack NAME [--since 30d]] [--from FILE] [--nodes N]
        [--failure-rate PER_1000_NODE_DAYS|llama3|llama3-hw|rsc1|rsc2 | --failures K --node-days D]
        [--detect T] [--cordon T] [--replace T] [--rejoin T] [--health-gate T] [--restart T]
        [--checkpoint-interval T | --checkpoint-prefix s3://bucket/prefix [--job NAME]] [--checkpoint-cost T]
        [--spares N] [--repair T] [--job-nodes N ...] [--gpus-per-node 8]
        [--precursor-recall SHARE [--precursor-lead T [--precursor-lead-shape SIGMA]] [--precursor-false-positive SHARE]
         [--swap-lost T] [--swap-restart T]]
        [--json] [--html FILE]

Durations (T) are seconds, or a number with s, m, h or d. What the command line gives replaces what
a file or a stack says; what none says is a stated default, printed as such.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery_cli import goodput_inputs as sources
from hyperpod_recovery_cli.goodput_html import render_plan
from hyperpod_recovery_cli.inputs import InputRefused, bounded, one_line
from hyperpod_recovery_cli.oncall import _since, _table
from hyperpod_recovery_cli.planner import defaults, plan_goodput
from hyperpod_recovery_cli.planner.model import RECOVERY_PHASES, GoodputPlan, PlannerInputs
from hyperpod_recovery_cli.planner.sentences import (
    ceiling_lines,
    change_lines,
    ettr_line,
    minutes,
    pct,
    recall_rows,
    recalls_heading,
    swaps_lines,
)
from hyperpod_recovery_cli.stack import read_stack

DURATION = re.compile(r"^(?P<n>[0-9]+(?:\.[0-9]+)?)(?P<unit>[smhd]?)$")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}
LONGEST = 30 * 86_400
DEFAULT_SINCE = "30d"
GIVEN = "command line"


def duration(text: str) -> float:
    match = DURATION.fullmatch(text.strip())
    seconds = float(match["n"]) * UNIT_SECONDS[match["unit"]] if match else None
    if seconds is None or seconds > LONGEST:
        raise argparse.ArgumentTypeError(f"a duration of at most 30d: seconds, or a number with s, m, h or d (15m, 90s), not {text!r}")
    return seconds


_count = bounded(0, 1_000_000, whole=True)
_SHARE = bounded(0, 1)


def _share(text: str) -> float:
    """0.5 or 50%: a share from 0 to 1."""
    stripped = text.strip()
    if stripped.endswith("%"):
        try:
            return _SHARE(str(float(stripped[:-1]) / 100))
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(f"a share from 0 to 1, or a percentage (50%), not {one_line(text)[:40]!r}") from None
    return _SHARE(stripped)


_RATE_NUMBER = bounded(0, 1_000_000, above=True)


def _rate(text: str) -> str:
    if text in defaults.RATE_PRESETS:
        return text
    try:
        _RATE_NUMBER(text)
    except argparse.ArgumentTypeError:
        presets = ", ".join(defaults.RATE_PRESETS)
        raise argparse.ArgumentTypeError(
            f"failures per 1,000 node-days (a number above 0 and at most 1,000,000) or one of {presets}, not {one_line(text)[:40]!r}"
        ) from None
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "The ETTR to expect from a cluster's failure rate, its recovery phases and a job's checkpointing; what each phase "
        "costs; the checkpoint interval that maximizes ETTR; the spares to keep; shrink or wait per job size (docs/goodput.md). "
        "Durations T: seconds, or a number with s, m, h or d."
    )
    where = parser.add_argument_group("where the figures come from (the command line's replace theirs)")
    where.add_argument("--stack", help="a deployed stack: its ledger's failures and phases, its cluster's size")
    where.add_argument("--since", help=f"with --stack: the window read, a duration (90d) or an ISO time (default {DEFAULT_SINCE})")
    where.add_argument("--from", dest="source_file", metavar="FILE", help="planner inputs in JSON, bare or under 'goodput_inputs'")
    where.add_argument("--checkpoint-prefix", metavar="S3_URI", help="measure the interval from the commit times of its manifests")
    where.add_argument("--job", help="with --checkpoint-prefix: only this job's manifests")
    given = parser.add_argument_group("figures")
    given.add_argument("--nodes", type=_count, help="the cluster's nodes")
    given.add_argument(
        "--failure-rate",
        type=_rate,
        metavar="RATE",
        help=f"node failures per 1,000 node-days, or a published preset: {', '.join(defaults.RATE_PRESETS)}",
    )
    given.add_argument("--failures", type=_count, help="node failures counted over --node-days")
    given.add_argument(
        "--node-days",
        type=bounded(0, 1e9, above=True),
        metavar="D",
        help="the node-days --failures were counted over (above 0, at most 1e9)",
    )
    for phase in RECOVERY_PHASES:
        given.add_argument(f"--{phase.replace('_', '-')}", dest=phase, type=duration, metavar="T", help=f"the {phase} phase of a recovery")
    given.add_argument("--checkpoint-interval", type=duration, metavar="T", help="compute time between checkpoints")
    given.add_argument("--checkpoint-cost", type=duration, metavar="T", help="the blocking part of one checkpoint")
    given.add_argument("--spares", type=_count, help="spare nodes kept now")
    given.add_argument(
        "--repair", type=duration, metavar="T", help="how long a failed node's place stays empty (default: replace + rejoin + gate)"
    )
    given.add_argument("--job-nodes", type=_count, action="append", metavar="N", help="a job size to plan for (repeatable)")
    given.add_argument("--gpus-per-node", type=_count, help="GPUs per node (default 8, p5)")
    swaps = parser.add_argument_group("planned swaps (docs/goodput.md, 'Planned swaps'; without a recall: none counted)")
    swaps.add_argument(
        "--precursor-recall", type=_share, metavar="SHARE", help="the share of failures an enforced at-risk verdict announces (0.5 or 50%%)"
    )
    swaps.add_argument(
        "--precursor-lead", type=duration, metavar="T", help="how long before its failure a verdict comes (default 1h, assumed)"
    )
    swaps.add_argument(
        "--precursor-lead-shape",
        type=bounded(0, 5),
        metavar="SIGMA",
        help="the leads spread lognormally around --precursor-lead with this σ (default 0: every lead the same)",
    )
    swaps.add_argument(
        "--precursor-false-positive",
        type=_share,
        metavar="SHARE",
        help="the share of verdicts whose node would not have failed, each costing a swap (at most 0.99; default 0.5, assumed)",
    )
    swaps.add_argument("--swap-lost", type=duration, metavar="T", help="the work a swap loses past its checkpoint's commit (default 10s)")
    swaps.add_argument("--swap-restart", type=duration, metavar="T", help="a swap's restart, when not the restart phase's")
    shown = parser.add_argument_group("output")
    shown.add_argument("--json", action="store_true", help="the plan as JSON")
    shown.add_argument("--html", metavar="FILE", help="also write the plan as one offline HTML page with its curves")


def command_line_layer(args: argparse.Namespace) -> sources.Layer:
    def figure(value: float) -> dict[str, Any]:
        return {"value": value, "provenance": "given", "source": GIVEN}

    layer: sources.Layer = {}
    for name, value in (
        ("nodes", args.nodes),
        ("spare_nodes", args.spares),
        ("repair_seconds", args.repair),
        ("checkpoint_interval_seconds", args.checkpoint_interval),
        ("checkpoint_cost_seconds", args.checkpoint_cost),
        ("precursor_recall", args.precursor_recall),
        ("precursor_lead_seconds", args.precursor_lead),
        ("precursor_false_positive", args.precursor_false_positive),
        ("swap_lost_seconds", args.swap_lost),
        ("swap_restart_seconds", args.swap_restart),
    ):
        if value is not None:
            layer[name] = figure(value)
    phases = {phase: figure(getattr(args, phase)) for phase in RECOVERY_PHASES if getattr(args, phase) is not None}
    if phases:
        layer["phases_seconds"] = phases
    if (args.failures is None) != (args.node_days is None):
        raise InputRefused("--failures and --node-days go together: the failures counted, and the node-days they were counted over")
    if args.failures is not None and args.failure_rate is not None:
        raise InputRefused("--failure-rate, or --failures with --node-days: one of them")
    if args.failure_rate in defaults.RATE_PRESETS:
        layer["failure_rate"] = defaults.RATE_PRESETS[args.failure_rate].model_dump(exclude_none=True)
    elif args.failure_rate is not None:
        layer["failure_rate"] = {"per_1000_node_days": float(args.failure_rate), "provenance": "given", "source": GIVEN}
    elif args.failures is not None:
        layer["failure_rate"] = {"failures": args.failures, "node_days": args.node_days, "provenance": "given", "source": GIVEN}
    if args.precursor_lead_shape is not None:
        layer["precursor_lead_shape"] = args.precursor_lead_shape
    if args.job_nodes:
        layer["job_sizes"] = args.job_nodes
    if args.gpus_per_node is not None:
        layer["gpus_per_node"] = args.gpus_per_node
    return layer


def gather(args: argparse.Namespace, client: Callable[[str], Any], now: datetime) -> PlannerInputs:
    """Every layer the arguments name, highest first, combined."""
    if args.stack and args.source_file:
        raise InputRefused("--stack or --from: one place to read figures from")
    if args.since and not args.stack:
        raise InputRefused("--since is the window of --stack's ledger: give --stack too")
    if args.job and not args.checkpoint_prefix:
        raise InputRefused("--job picks the manifests under --checkpoint-prefix: give --checkpoint-prefix too")
    if args.checkpoint_prefix and args.checkpoint_interval is not None:
        raise InputRefused("--checkpoint-interval or --checkpoint-prefix: the interval is given or measured, not both")
    layers = [command_line_layer(args)]
    if args.source_file:
        layers.append(sources.file_layer(args.source_file))
    if args.stack:
        since = _since(args.since or DEFAULT_SINCE, now)
        assert since is not None  # (a default is given)
        if since >= now:
            raise InputRefused(f"--since {args.since}: in the future")
        stack = read_stack(client("cloudformation"), args.stack)
        ledger = DynamoLedger(stack.output("LedgerTableName"), dynamodb=client("dynamodb"))
        cluster = HyperPodCluster(stack.cluster, sagemaker=client("sagemaker"))
        layers += [
            sources.ledger_layer(stack, ledger, cluster, since=since, now=now, checkpoint_uri=args.checkpoint_prefix),
            sources.stack_parameters_layer(stack),
        ]
    if args.checkpoint_prefix:
        cost = sources.merged([*layers, sources.defaults_layer()])["checkpoint_cost_seconds"]
        seconds = float(cost["value"] if isinstance(cost, dict) else cost)
        store = S3CheckpointStore(s3=client("s3"))
        layers.append(sources.checkpoint_layer(store, args.checkpoint_prefix, job=args.job, cost_seconds=seconds))
    return sources.combine([*layers, sources.defaults_layer()])


def run_goodput(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, now: datetime) -> int:
    plan = plan_goodput(gather(args, client, now))
    if args.html:
        try:
            Path(args.html).write_text(render_plan(plan), encoding="utf-8")
        except OSError as exc:
            raise InputRefused(f"--html {args.html}: cannot be written ({exc.strerror or exc})") from None
    if args.json:
        print(plan.model_dump_json(indent=2), file=out)
    else:
        print_plan(plan, out)
        if args.html:
            print(f"\nwritten: {args.html}", file=out)
    return 0


# --- the terminal table ---------------------------------------------------------------------------
def _said(provenance: str, source: str) -> str:
    """``measured: <source>``; a source read from a file is shown on one line, its control characters escaped."""
    return f"{provenance}: {one_line(source)}" if source else provenance


def print_plan(plan: GoodputPlan, out: TextIO) -> None:
    inputs, ettr = plan.inputs, plan.ettr

    def say(line: str = "") -> None:
        print(line, file=out)

    rate = inputs.failure_rate
    say(
        f"job of {ettr.job_nodes:,} nodes ({ettr.job_nodes * inputs.gpus_per_node:,} GPUs) on a cluster of {inputs.nodes.value:,} nodes "
        f"[{_said(inputs.nodes.provenance, inputs.nodes.source)}]"
    )
    say(f"failure rate  {rate.described()} [{_said(rate.provenance, rate.source)}]")
    per_day = ettr.failures_per_day
    say(f"              job MTTF {ettr.mttf_hours:.2f} h, {per_day:.2f} failures/day, {30 * per_day:.1f} per 30 days")
    interval, cost = inputs.checkpoint_interval_seconds, inputs.checkpoint_cost_seconds
    say(f"checkpoint    every {minutes(interval.value)} [{_said(interval.provenance, interval.source)}]")
    say(f"              {minutes(cost.value)} blocking [{_said(cost.provenance, cost.source)}]")
    waiting = plan.spares.no_spare_probability
    spared = waiting is not None and bool(plan.spares.spares_given)
    share = f"; replace, rejoin, health gate: the {pct(waiting or 0.0)} finding no spare" if spared else ""
    say(f"recovery      {minutes(ettr.recovery_seconds)} per failure on average (the phases below{share})")
    say()
    say(ettr_line(ettr))
    say()
    rows = [["PHASE", "TIME", "ETTR COST", "1 MIN LESS BUYS", "FROM"]]
    for phase in plan.phases:
        rows.append(
            [
                phase.phase,
                minutes(phase.seconds),
                f"{phase.ettr_points:.3f} pts",
                f"+{phase.minute_less_points:.3f} pts",
                _said(phase.provenance, phase.source),
            ]
        )
    _table(rows, out)
    advice = plan.interval
    say()
    say(
        f"interval      Young {minutes(advice.young_seconds)}, Daly {minutes(advice.daly_seconds)}; best {minutes(advice.best_seconds)}: "
        f"ETTR {pct(advice.ettr_at_best)} ({100 * (advice.ettr_at_best - advice.ettr_now):+.2f} pts)"
    )
    spares = plan.spares
    kept = ""
    if spares.spares_given is not None and spares.no_spare_probability is not None:
        kept = f"; with {spares.spares_given} now, {pct(spares.no_spare_probability)} of failures find none"
    say(
        f"spares        keep {spares.p99_spares} (99 % of failures find one): {spares.expected_in_repair:.2f} nodes in repair on average, "
        f"{spares.p99_in_repair} at P99{kept}"
    )
    say(f"              repair window {minutes(spares.repair_seconds)} [{_said(spares.repair_provenance, spares.repair_source)}]")
    gain = 100 * (spares.ettr_with_spare - ettr.ettr)
    say(f"              with a spare for every failure: ETTR {pct(spares.ettr_with_spare)} ({gain:+.2f} pts)")
    say()
    if plan.planned_swaps is not None:
        for line in swaps_lines(plan.planned_swaps):
            say(line)
        say()
    if plan.recalls:
        say(recalls_heading(plan.recalls))
        _table(recall_rows(plan.recalls), out)
        say()
    rows = [["JOB NODES", "MTTF", "ETTR", "SHRINK OR WAIT"]]
    for job in plan.job_sizes:
        rows.append([f"{job.job_nodes:,}", f"{job.mttf_hours:.1f} h", pct(job.ettr), f"{job.action}: {job.why}"])
    _table(rows, out)
    say()
    for line in change_lines(plan.changes):
        say(line)
    if plan.ceilings:
        say()
        for line in ceiling_lines(plan.ceilings):
            say(line)
    if plan.warnings:
        say()
        for warning in plan.warnings:
            say(f"warning: {warning}")
    say()
    say("models (and what they assume):")
    for name, modelled in (
        ("ETTR", plan.ettr),
        ("phases", plan.phases[0]),
        ("interval", plan.interval),
        ("spares", plan.spares),
        ("shrink", plan.job_sizes[0]),
        *([("planned swaps", plan.planned_swaps)] if plan.planned_swaps is not None else []),
        *([("ceilings", plan.ceilings[0])] if plan.ceilings else []),
    ):
        say(f"  {name}: {modelled.model}")
        say(f"      assumes: {'; '.join(modelled.assumptions)}")
