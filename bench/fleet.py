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
                          [--out DIR] [--html PATH]

Every number is checked to its range (MAX_NODES, MIN_DAYS..MAX_DAYS, MAX_RATE, MAX_FAILURES below): one
line naming the argument and the range, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "agent"), str(ROOT / "training"), str(ROOT / "cli")]

from hyperpod_recovery_cli.inputs import OneLineParser, bounded  # noqa: E402
from sandbox.fleet.report import format_fleet_report  # noqa: E402
from sandbox.fleet.report_html import render_fleet_html  # noqa: E402
from sandbox.fleet.runner import FleetPlan, FleetRunner, JobMix  # noqa: E402
from sandbox.fleet.trace import RATES, TraceSpec, generate  # noqa: E402

# The ranges every figure is checked to (one line naming the argument, exit 2): a fleet the sandbox
# runs in hours at most, with numbers its math can take.
MAX_NODES = 6_758  # workers and spares together: an instance group's bound (sandbox/scenario.py InstanceGroupSpec.count)
MIN_DAYS, MAX_DAYS = 0.01, 366  # (from a quarter of an hour: the report counts per week and per day)
MAX_RATE = 100.0  # failures per 1,000 node-days (Llama 3: 3.79)
MAX_FAILURES = 200_000  # expected over the whole run: nodes x days x rate / 1,000


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
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="the folder the JSON report is written to (default out/)")
    parser.add_argument("--html", type=Path, default=None, help="the HTML report's path (default: beside the JSON, .html)")
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, each checked to its range; the combinations too (exit 2, one line)."""
    checker = parser()
    args = checker.parse_args(argv)
    args.nodes, args.seed, args.spares = int(args.nodes), int(args.seed), int(args.spares)
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


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rate = RATES[args.rate] if args.rate in RATES else float(args.rate)
    trace = generate(
        TraceSpec(
            nodes=args.nodes,
            days=args.days,
            seed=args.seed,
            rate_per_1000_node_days=rate,
            correlated_share=args.correlated_share,
            hang_share=args.hang_share,
        )
    )
    plan = FleetPlan(
        nodes=args.nodes,
        days=args.days,
        mix=JobMix.parse(args.jobs, args.nodes),
        spares=args.spares,
        checkpoint_interval_seconds=args.checkpoint_interval,
        orchestrator=args.orchestrator,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        report = FleetRunner(plan, trace, Path(tmp) / "fleet-lambda.log").run_fleet()
    path = args.out / f"fleet-{args.nodes}n-{args.days:g}d-seed{args.seed}.json"
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    page = args.html or path.with_suffix(".html")
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render_fleet_html(report))
    print(format_fleet_report(report))
    print(f"report: {path}")
    print(f"html: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
