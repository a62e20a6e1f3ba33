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
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "agent"), str(ROOT / "training")]

from sandbox.fleet.report import format_fleet_report  # noqa: E402
from sandbox.fleet.report_html import render_fleet_html  # noqa: E402
from sandbox.fleet.runner import FleetPlan, FleetRunner, JobMix  # noqa: E402
from sandbox.fleet.trace import RATES, TraceSpec, generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--days", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", default="1", help="8x256: 8 jobs of 256 nodes; 1: one job on every node")
    parser.add_argument("--spares", type=int, default=0)
    parser.add_argument("--rate", default="llama3", help=f"failures per 1,000 node-days: {', '.join(RATES)} or a number")
    parser.add_argument("--correlated-share", type=float, default=0.02)
    parser.add_argument("--hang-share", type=float, default=0.02, help="silent hangs, on top of the failures: a share of their rate")
    parser.add_argument("--checkpoint-interval", type=float, default=1800.0)
    parser.add_argument("--orchestrator", choices=("slurm", "eks"), default="slurm", help="eks: PyTorchJobs on a Kubernetes API")
    parser.add_argument("--out", type=Path, default=ROOT / "out")
    parser.add_argument("--html", type=Path, default=None, help="the HTML report's path (default: beside the JSON, .html)")
    args = parser.parse_args(argv)
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
