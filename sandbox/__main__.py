"""``python -m sandbox run [--scenario FILE] [--out DIR]``: run a drill, print its timeline, write the report
(JSON, and HTML with a timeline picture). ``python -m sandbox check`` (same arguments) only checks them.

Exit codes: 0 the drill ran (whatever the incidents' outcomes); 2 bad usage: an unknown option, a
scenario file that cannot be run, an --out that is not a folder (one line on stderr naming the
field); 1 the sandbox itself failed (a bug: its traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

import sandbox  # noqa: F401  (puts the layer's package on sys.path)
from sandbox.html_report import render_html
from sandbox.report import format_report
from sandbox.runner import DrillRunner
from sandbox.scenario import ScenarioError, load_scenario, printable_line

DEFAULT_SCENARIO = Path(__file__).resolve().parent.parent / "events" / "drills" / "default.json"


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors on one line, like the scenario's (exit code 2); the usage is what --help prints."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} run --help)\n")


def _check_out(out: Path) -> None:
    """A file in the report folder's place (`make drill OUT=README.md`) is refused before the drill
    runs, and never written."""
    if out.exists() and not out.is_dir():
        raise ScenarioError(f"--out {out}: exists and is not a directory (the drill writes its report files into a folder)")


def _make_out(out: Path) -> None:
    _check_out(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ScenarioError(f"--out {out}: cannot be made: {exc.strerror or exc}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = _OneLineParser(prog="python -m sandbox", description="Run a recovery drill on an in-memory AWS.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one scenario")
    check = commands.add_parser("check", help="check a scenario file and the report's folder without running (make drill does first)")
    for command in (run, check):
        command.add_argument(
            "--scenario", type=Path, default=DEFAULT_SCENARIO, help="scenario JSON file (default: events/drills/default.json)"
        )
        command.add_argument("--out", type=Path, default=Path("out"), help="directory for the report and the Lambda log")
    run.add_argument(
        "--slurm",
        choices=("simulated", "real"),
        default="simulated",
        help="real: the agent as its own process against the slurmctld SLURM_CONF names (make drill SLURM=real)",
    )
    args = parser.parse_args(argv)

    try:
        scenario = load_scenario(args.scenario)
        if args.command == "check":
            _check_out(args.out)
            return 0
        _make_out(args.out)
        runner = DrillRunner(scenario, log_path=args.out / f"drill-{scenario.name}-lambda.log", real_slurm=args.slurm == "real")
        report = runner.run()
    except ScenarioError as exc:
        print(f"error: {printable_line(str(exc))}", file=sys.stderr)
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
