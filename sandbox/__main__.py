"""``python -m sandbox run [--scenario FILE] [--out DIR]``: run a drill, print its timeline, write the report
(JSON, and HTML with a timeline picture).

Exit codes: 0 the drill ran (whatever the incidents' outcomes), 2 the scenario file is unusable,
1 the sandbox itself failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import sandbox  # noqa: F401  (puts the layer's package on sys.path)
from sandbox.html_report import render_html
from sandbox.report import format_report
from sandbox.runner import DrillRunner
from sandbox.scenario import ScenarioError, load_scenario

DEFAULT_SCENARIO = Path(__file__).resolve().parent.parent / "events" / "drills" / "default.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description="Run a recovery drill on an in-memory AWS.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one scenario")
    run.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO, help="scenario JSON file (default: events/drills/default.json)")
    run.add_argument("--out", type=Path, default=Path("out"), help="directory for the report and the Lambda log")
    run.add_argument(
        "--slurm",
        choices=("simulated", "real"),
        default="simulated",
        help="real: the agent as its own process against the slurmctld SLURM_CONF names (make drill SLURM=real)",
    )
    args = parser.parse_args(argv)

    try:
        scenario = load_scenario(args.scenario)
        args.out.mkdir(parents=True, exist_ok=True)
        runner = DrillRunner(scenario, log_path=args.out / f"drill-{scenario.name}-lambda.log", real_slurm=args.slurm == "real")
        report = runner.run()
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report_path = args.out / f"drill-{scenario.name}.json"
    report_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    html_path = report_path.with_suffix(".html")
    html_path.write_text(render_html(report))
    print(format_report(report))
    print(f"\nreport: {report_path}\n        {html_path} (timeline picture; opens offline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
