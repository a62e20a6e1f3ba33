"""The fleet drill at several sizes, side by side: does what one incident costs, or the largest item and
state, grow with the fleet? (They must not: a cost that grows with the fleet is a defect of the design.)
Reads the JSON reports bench/fleet.py wrote, or runs them first.

    python bench/fleet_scaling.py out/fleet-256n-54d-seed0.json out/fleet-1024n-54d-seed0.json ...
    python bench/fleet_scaling.py --run 256:1x256,1024:4x256,2048:8x256,4096:16x256 --days 54 --out out
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

COLUMNS = (
    ("nodes", lambda r: f"{r['plan']['nodes']:,}"),
    ("jobs", lambda r: r["plan"]["jobs"]),
    ("failures", lambda r: str(r["trace"]["failures"])),
    ("incidents", lambda r: str(r["incidents"]["total"])),
    ("AWS calls / incident", lambda r: f"{r['cost_per_incident']['aws_calls']:g}"),
    ("SageMaker / incident", lambda r: f"{sum(r['cost_per_incident']['sagemaker_calls_by_call'].values()):.1f}"),
    ("ListClusterNodes / incident", lambda r: f"{r['cost_per_incident']['sagemaker_calls_by_call'].get('ListClusterNodes', 0):g}"),
    ("transitions / incident", lambda r: f"{r['cost_per_incident']['state_transitions']:g}"),
    ("largest item B", lambda r: f"{r['limits']['largest_dynamodb_item_bytes']:,}"),
    ("largest state B", lambda r: f"{r['limits']['largest_state_payload_bytes']:,}"),
    ("pages", lambda r: str(r["pages"]["total"])),
    ("breaker openings", lambda r: str(len(r["safety"]["breaker_openings"]))),
    ("peak executions", lambda r: str(r["executions"]["peak_concurrent"])),
    ("$ / month", lambda r: f"{r['monthly_cost']['total_usd']:.2f}"),
    ("wall s", lambda r: f"{r['wall_seconds']:.0f}"),
)


def table(reports: list[dict[str, Any]]) -> str:
    rows = [[name for name, _ in COLUMNS]] + [[cell(r) for _, cell in COLUMNS] for r in sorted(reports, key=lambda r: r["plan"]["nodes"])]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/fleet_scaling.py", description=" ".join(__doc__.split("\n\n", 1)[0].split()))
    parser.add_argument("reports", nargs="*", type=Path, help="fleet reports (JSON) bench/fleet.py wrote, to set side by side")
    parser.add_argument("--run", help="NODES:JOBS,... to run first (bench/fleet.py), e.g. 256:1x256,1024:4x256")
    parser.add_argument("--days", type=float, default=54.0, help="with --run: each run's days of virtual time (default 54)")
    parser.add_argument("--seed", type=int, default=0, help="with --run: the failure traces' seed (default 0)")
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="with --run: where the runs write their reports (default out/)")
    return parser


def main(argv: list[str] | None = None) -> int:
    checker = parser()
    args = checker.parse_args(argv)
    paths = list(args.reports)
    for size in args.run.split(",") if args.run else []:
        nodes, _, jobs = size.partition(":")
        command = [sys.executable, str(ROOT / "bench" / "fleet.py"), "--nodes", nodes, "--days", f"{args.days:g}", "--seed", str(args.seed)]
        subprocess.run([*command, "--jobs", jobs or "1", "--out", str(args.out)], check=True, stdout=subprocess.DEVNULL)
        paths.append(args.out / f"fleet-{nodes}n-{args.days:g}d-seed{args.seed}.json")
    if not paths:
        checker.error("give reports, or --run")
    print(table([json.loads(path.read_text()) for path in paths]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
