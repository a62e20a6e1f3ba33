"""The fleet drill: a seeded failure trace of a whole cluster over days (sandbox/fleet/trace.py: per-node
Poisson failures at a published rate, Llama 3's fault mix, racks, replacement times, failed gates)
through the real pipeline in the sandbox, with a job mix that checkpoints, so lost work is real.

Prints ETTR per job and where the rest went, job downtime percentiles, incidents by outcome, pages per
week and why, cap and breaker activations, transitions, invocations and AWS calls per day, peak
concurrent executions, the largest DynamoDB item and state payload, the monthly cost at dated list
prices; writes the JSON report (with ``goodput_inputs`` for the goodput planner) to --out, and the
same report as an offline HTML page with its plots beside it (or to --html).

    python bench/fleet.py --nodes 2048 --days 54 [--seed 0] [--jobs 8x256] [--spares 0] [--rate llama3|rsc1|rsc2|<number>]
                          [--hang-share 0.02] [--orchestrator slurm|eks]
                          [--job-kind default|async] [--recall 0.5] [--lead-time-median 7200] [--lead-time-sigma 1]
                          [--false-alarm-rate 0.28] [--planned-swaps] [--shrink-nodes K] [--recommended]
                          [--compare [--recalls 0,0.25,0.5,0.75]] [--goals] [--workers 1]
                          [--out DIR] [--html PATH]

Issue 50: the trace's precursors (--recall, --lead-time-*, --false-alarm-rate; ASSUMPTIONS, docs/goodput.md)
are delivered as enforced at-risk signals with --planned-swaps (each a planned swap through the real
pipeline); --recommended takes the goodput planner's settings for the run (interval, spares, shrink,
planned swaps); --compare runs the same trace without planned swaps and with them at each of --recalls,
side by side (sandbox/fleet/report_compare.py); --goals runs the issue's goal set (the default job and the
async job, planner-recommended, without and with planned swaps at 50 % recall) and prints PASS or FAIL per goal.

Every number is checked to its range (MAX_NODES, MIN_DAYS..MAX_DAYS, MAX_RATE, MAX_FAILURES below): one
line naming the argument and the range, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "agent"), str(ROOT / "training"), str(ROOT / "cli")]

from hyperpod_recovery_cli.inputs import OneLineParser, bounded  # noqa: E402
from sandbox.fleet.compare import RunSpec, compare_specs, goal_specs, run_specs  # noqa: E402
from sandbox.fleet.report import format_fleet_report  # noqa: E402
from sandbox.fleet.report_compare import comparison as side_by_side  # noqa: E402
from sandbox.fleet.report_compare import format_comparison, render_comparison_html  # noqa: E402
from sandbox.fleet.report_html import render_fleet_html  # noqa: E402
from sandbox.fleet.runner import JobMix  # noqa: E402
from sandbox.fleet.settings import JOB_KINDS  # noqa: E402
from sandbox.fleet.trace import RATES  # noqa: E402

# The ranges every figure is checked to (one line naming the argument, exit 2): a fleet the sandbox
# runs in hours at most, with numbers its math can take.
MAX_NODES = 6_758  # workers and spares together: an instance group's bound (sandbox/scenario_cluster.py InstanceGroupSpec.count)
MIN_DAYS, MAX_DAYS = 0.01, 366  # (from a quarter of an hour: the report counts per week and per day)
MAX_RATE = 100.0  # failures per 1,000 node-days (Llama 3: 3.79)
MAX_FAILURES = 200_000  # expected over the whole run: nodes x days x rate / 1,000
MAX_LEAD_SECONDS = 30 * 86_400  # a precursor's median lead: a month at most
MAX_SIGMA = 3.0  # the lead's lognormal shape (3: a factor of 20 either way in one standard deviation)
MAX_WORKERS = 4
# ASSUMPTIONS, the goodput planner's (docs/goodput.md, "Planned swaps: what the literature gives (and does
# not)"): no study publishes the recall or lead time of GPU precursors. Recall: the goal's 50 %; lead: the
# planner's 1 h as the median of a lognormal of shape 1; false alarms: the rate that makes half the
# signals false at 50 % recall at Llama 3's rate (the planner's 50 %, between the 46.3 % and 85.4 %
# precision of Liu et al., SYSTOR '23), 0.5 x 356/419 announceable x 0.98 not racks x 3.79 = 1.58.
DEFAULT_RECALL = 0.5
DEFAULT_LEAD_MEDIAN = 3_600.0
DEFAULT_LEAD_SIGMA = 1.0
DEFAULT_FALSE_ALARM_RATE = 1.58
# The trace's precursor options: flag, range, default, help (each an ASSUMPTION, above).
PRECURSOR_OPTIONS: tuple[tuple[str, float, float, float, str], ...] = (
    (
        "--recall",
        0,
        1,
        DEFAULT_RECALL,
        f"the share of one node's hardware faults a precursor announces, 0 to 1 (default {DEFAULT_RECALL:g}, an ASSUMPTION)",
    ),
    (
        "--lead-time-median",
        60,
        MAX_LEAD_SECONDS,
        DEFAULT_LEAD_MEDIAN,
        f"a precursor's median lead before its failure in seconds (lognormal), 60 to {MAX_LEAD_SECONDS} "
        f"(default {DEFAULT_LEAD_MEDIAN:g}, an ASSUMPTION)",
    ),
    (
        "--lead-time-sigma",
        0,
        MAX_SIGMA,
        DEFAULT_LEAD_SIGMA,
        f"the lead's lognormal shape, 0 (every lead the median) to {MAX_SIGMA:g} (default {DEFAULT_LEAD_SIGMA:g}, an ASSUMPTION)",
    ),
    (
        "--false-alarm-rate",
        0,
        MAX_RATE,
        DEFAULT_FALSE_ALARM_RATE,
        f"at-risk signals on nodes that will not fail, per 1,000 node-days, 0 to {MAX_RATE:g} "
        f"(default {DEFAULT_FALSE_ALARM_RATE:g}: half the signals false at 50 %% recall, an ASSUMPTION)",
    ),
)


def _recalls(text: str) -> tuple[float, ...]:
    parts = [part.strip() for part in text.split(",")]
    if not 1 <= len(parts) <= 8:
        raise argparse.ArgumentTypeError(f"1 to 8 recalls separated by commas, not {text[:40]!r}")
    return tuple(bounded(0, 1)(part) for part in parts)


def _jobs(text: str) -> str:
    count, x, size = text.lower().partition("x")
    if not (count.isascii() and count.isdigit() and 1 <= int(count) <= MAX_NODES) or (x and not (size.isascii() and size.isdigit())):
        raise argparse.ArgumentTypeError(f"8x256 (8 jobs of 256 nodes) or a job count from 1 to {MAX_NODES}, not {text[:40]!r}")
    return text


def _rate(text: str) -> str:
    if text in RATES:
        return text
    try:
        bounded(0, MAX_RATE, above=True)(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{', '.join(RATES)} or {exc}") from None
    return text


def _description() -> str:
    """The module's first paragraph, whole (argparse re-wraps it)."""
    return " ".join(__doc__.split("\n\n", 1)[0].split())


def parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="bench/fleet.py", description=_description())
    parser.add_argument(
        "--nodes",
        type=bounded(1, MAX_NODES, whole=True),
        required=True,
        help=f"the cluster's worker nodes, where jobs run and fail (with --spares: at most {MAX_NODES:,})",
    )
    parser.add_argument(
        "--days",
        type=bounded(MIN_DAYS, MAX_DAYS),
        required=True,
        help=f"the run's length in days of virtual time, {MIN_DAYS:g} to {MAX_DAYS}",
    )
    parser.add_argument(
        "--seed", type=bounded(0, 2**32 - 1, whole=True), default=0, help="the failure trace's random seed: one seed, one trace (default 0)"
    )
    parser.add_argument("--jobs", type=_jobs, default="1", help="8x256: 8 jobs of 256 nodes; 1: one job on every node (default 1)")
    parser.add_argument(
        "--spares",
        type=bounded(0, MAX_NODES, whole=True),
        default=0,
        help="idle nodes beside --nodes that a failed job may restart on at once (default 0)",
    )
    parser.add_argument(
        "--rate", type=_rate, default="llama3", help=f"node failures per 1,000 node-days: {', '.join(RATES)} or a number (default llama3)"
    )
    parser.add_argument(
        "--correlated-share",
        type=bounded(0, 1),
        default=0.02,
        help="the share of failures that take a whole rack at once, 0 to 1 (default 0.02)",
    )
    parser.add_argument(
        "--hang-share",
        type=bounded(0, 1),
        default=0.02,
        help="silent hangs, on top of the failures: a share of their rate, 0 to 1 (default 0.02)",
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=bounded(1, 86_400),
        default=1800.0,
        help="the jobs' seconds between checkpoints, 1 to 86400 (default 1800)",
    )
    parser.add_argument(
        "--orchestrator",
        choices=("slurm", "eks"),
        default="slurm",
        help="slurm: Slurm jobs; eks: PyTorchJobs on a Kubernetes API (default slurm)",
    )
    parser.add_argument(
        "--job-kind",
        choices=sorted(JOB_KINDS),
        default="default",
        help="default: a 5-minute restart and a 30 s blocking checkpoint (the fleet's job); "
        "async: a 3-minute restart and 5 s blocking (asynchronous saves) (default default)",
    )
    for flag, low, high, default, what in PRECURSOR_OPTIONS:
        parser.add_argument(flag, type=bounded(low, high), default=default, help=what)
    parser.add_argument(
        "--planned-swaps",
        action="store_const",
        const=True,
        default=None,
        help="deliver each precursor as an at-risk signal in enforce mode: a planned swap through the real pipeline "
        "(default: not sent; with --recommended: where the planner says they pay)",
    )
    parser.add_argument(
        "--no-planned-swaps",
        dest="planned_swaps",
        action="store_const",
        const=False,
        help="send no precursor, even with --recommended (the run without planned swaps beside one with them)",
    )
    parser.add_argument(
        "--shrink-nodes",
        type=bounded(0, MAX_NODES, whole=True),
        default=0,
        help="the jobs may shrink by up to this many nodes (their node range) where no spare fits (default 0: they wait)",
    )
    parser.add_argument(
        "--recommended",
        action="store_true",
        help="planner-recommended settings: the goodput planner's checkpoint interval, spares, shrink and planned swaps "
        "for this run's inputs (overrides --checkpoint-interval, --spares, --shrink-nodes; --planned-swaps still turns them on)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run the trace without planned swaps and with them at each of --recalls, and print them side by side",
    )
    parser.add_argument(
        "--recalls",
        type=_recalls,
        default=(0.0, 0.25, 0.5, 0.75),
        help="with --compare: the recalls to run with planned swaps, 0 to 1 each, separated by commas (default 0,0.25,0.5,0.75)",
    )
    parser.add_argument(
        "--goals",
        action="store_true",
        help="the issue's goals: the default job and the async job, planner-recommended, without and with planned swaps "
        "at 50 %% recall (4 runs); PASS or FAIL per goal",
    )
    parser.add_argument(
        "--workers",
        type=bounded(1, MAX_WORKERS, whole=True),
        default=1,
        help=f"with --compare or --goals: runs at once, each its own process, 1 to {MAX_WORKERS} (default 1)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="the folder the JSON report is written to (default out/)")
    parser.add_argument("--html", type=Path, default=None, help="the HTML report's path (default: beside the JSON, .html)")
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, each checked to its range; the combinations too (exit 2, one line)."""
    checker = parser()
    args = checker.parse_args(argv)
    args.nodes, args.seed, args.spares = int(args.nodes), int(args.seed), int(args.spares)
    args.shrink_nodes, args.workers = int(args.shrink_nodes), int(args.workers)
    if args.compare and args.goals:
        checker.error("--compare and --goals: one at a time (--goals runs its own comparison)")
    if args.shrink_nodes >= args.nodes:
        checker.error(f"argument --shrink-nodes: at most {args.nodes - 1} (a job keeps one node)")
    if args.nodes + args.spares > MAX_NODES:
        checker.error(f"--nodes + --spares is {args.nodes + args.spares}: at most {MAX_NODES} (one instance group)")
    rate = RATES[args.rate] if args.rate in RATES else float(args.rate)
    if args.nodes * args.days * rate * (1 + args.hang_share) / 1000 > MAX_FAILURES:
        checker.error(f"--nodes x --days x --rate expects more than {MAX_FAILURES:,} failures: a shorter or smaller run")
    try:
        JobMix.parse(args.jobs, args.nodes)
    except (ValueError, ZeroDivisionError):
        checker.error(f"argument --jobs: {args.jobs!r} does not fit {args.nodes} nodes")
    return args


def spec_of(args: argparse.Namespace) -> RunSpec:
    """The one run the arguments describe."""
    return RunSpec(
        nodes=args.nodes,
        days=args.days,
        seed=args.seed,
        jobs=args.jobs,
        spares=args.spares,
        rate=RATES[args.rate] if args.rate in RATES else float(args.rate),
        correlated_share=args.correlated_share,
        hang_share=args.hang_share,
        checkpoint_interval_seconds=args.checkpoint_interval,
        orchestrator=args.orchestrator,
        job_kind=args.job_kind,
        recall=args.recall,
        lead_median_seconds=args.lead_time_median,
        lead_sigma=args.lead_time_sigma,
        false_alarm_rate=args.false_alarm_rate,
        planned_swaps=args.planned_swaps,
        shrink_nodes=args.shrink_nodes,
        recommended=args.recommended,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    spec = spec_of(args)
    if args.compare or args.goals:
        specs = goal_specs(spec) if args.goals else compare_specs(spec, args.recalls)
        started = time.perf_counter()
        reports = run_specs(specs, args.out, workers=args.workers)
        comparison = side_by_side(reports, goals=args.goals, wall_seconds=time.perf_counter() - started)
        path = args.out / f"fleet-{'goals' if args.goals else 'compare'}-{args.nodes}n-{args.days:g}d-seed{args.seed}.json"
        _publish(comparison, path, args.html, render_comparison_html, format_comparison)
        return 0
    path = args.out / f"fleet-{args.nodes}n-{args.days:g}d-seed{args.seed}.json"
    _publish(spec.run(), path, args.html, render_fleet_html, format_fleet_report)
    return 0


def _publish(
    report: dict[str, Any], path: Path, html: Path | None, render: Callable[[dict[str, Any]], str], text: Callable[[dict[str, Any]], str]
) -> None:
    """The report as JSON at ``path``, as an HTML page beside it (or at --html), and as text on stdout."""
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    page = html or path.with_suffix(".html")
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render(report))
    print(text(report))
    print(f"report: {path}")
    print(f"html: {page}")


if __name__ == "__main__":
    sys.exit(main())
