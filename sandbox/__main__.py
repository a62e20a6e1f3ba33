"""``python -m sandbox run [--scenario FILE] [--out DIR]``: run a drill, print its timeline, write the report
(JSON, and HTML with a timeline picture), and hold it to the scenario's ``expect`` block.
``python -m sandbox check`` (same arguments) only checks them (the scenario's schema: nothing of the
drill is imported). ``python -m sandbox drills DIR [--junit FILE] [--jobs N]`` runs every scenario of a
folder, N at once (sandbox/drills.py). A drill's last printed line is its pass/fail.

Exit codes: 0 the drill met its expectations (the scenario's ``expect``, or without one: no incident
needed a human, nothing past the cap, one copy per job, no message the record contradicts); 1 an
expectation failed (one line each: what was expected, what happened); 2 bad usage: an unknown option,
a scenario file that cannot be run, an --out that is not a folder (one line on stderr naming the
field); 3 the sandbox itself failed (a bug: its traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import NoReturn

import sandbox  # noqa: F401  (puts the layer's package on sys.path)
from sandbox.scenario import ScenarioError, load_scenario, printable_line

# `check` (make drill's first step) reads a file: it imports the scenario's schema only. The drill
# itself (moto, boto3, the handlers: seconds of imports) is imported by the commands that run one.

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
    drills = commands.add_parser("drills", help="run every scenario of a folder: a table, JUnit XML, exit 1 if one fails")
    drills.add_argument("folder", type=Path, help="a folder of scenario files (events/drills, or your own)")
    drills.add_argument("--junit", type=Path, default=None, help="write JUnit XML here (one testcase per scenario)")
    drills.add_argument("--out", type=Path, default=Path("out") / "drills", help="directory for the reports and logs")
    drills.add_argument(
        "--jobs", type=int, default=None, help="drills run at once, one process each (default: the machine's cores, os.cpu_count())"
    )
    run.add_argument(
        "--slurm",
        choices=("simulated", "real"),
        default="simulated",
        help="real: the agent as its own process against the slurmctld SLURM_CONF names (make drill SLURM=real)",
    )
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ScenarioError as exc:
        print(f"error: {printable_line(str(exc))}", file=sys.stderr)
        return 2
    except Exception:  # the sandbox itself failed: a bug, and its traceback is what a report needs
        traceback.print_exc()
        return 3


def _run(args: argparse.Namespace) -> int:
    if args.command == "drills":
        if not args.folder.is_dir():
            raise ScenarioError(f"{args.folder}: not a folder of scenarios")
        _check_out(args.out)
        if args.jobs is not None and args.jobs < 1:
            raise ScenarioError(f"--jobs {args.jobs}: at least 1 (the drills run in that many processes at once)")
        from sandbox.drills import run_folder

        return run_folder(args.folder, args.out, args.junit, sys.stdout, jobs=args.jobs)
    scenario = load_scenario(args.scenario)
    if args.command == "check":
        _check_out(args.out)
        return 0
    _make_out(args.out)
    from sandbox.drills import check_drill
    from sandbox.expectations import verdict_line
    from sandbox.html_report import render_html
    from sandbox.report import format_report
    from sandbox.runner import DrillRunner

    runner = DrillRunner(scenario, log_path=args.out / f"drill-{scenario.name}-lambda.log", real_slurm=args.slurm == "real")
    report = runner.run()
    report_path = args.out / f"drill-{scenario.name}.json"
    report_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    html_path = report_path.with_suffix(".html")
    checks = check_drill(scenario, report)
    html_path.write_text(render_html(report, checks))
    print(format_report(report))
    print(f"\nreport: {report_path}\n        {html_path} (timeline picture; opens offline)")
    said = "the scenario's expect" if scenario.expect else "no expect block: no incident needs a human, nothing past the cap, one copy"
    print(f"\nexpectations ({said}):")
    for check in checks:
        print(f"  {check.line}")
    failed = [c for c in checks if not c.ok]
    if failed:
        sys.stdout.flush()  # (the verdict below stays the last line a terminal shows)
        print(f"drill {scenario.name}: {len(failed)} expectation(s) failed", file=sys.stderr)
    print(f"\n{verdict_line(scenario.name, checks)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
