"""``make preflight-sandbox [ORCHESTRATOR=eks]``: ``hyperpod-recovery preflight`` against the sandbox's
deployed stack, offline: the real template's functions, workflows, rule, topic and key in moto, the
HyperPod double, and the default drill's cluster (events/drills/default.json, or eks-default.json with
its running PyTorchJob). Prints what the preflight prints and exits with its exit code; nothing is written.

make readme-sample writes the Slurm run's output into README.md (tools/readme_sample.py).
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = {
    "slurm": ROOT / "events" / "drills" / "default.json",
    "eks": ROOT / "events" / "drills" / "eks-default.json",
}


@dataclass(frozen=True)
class PreflightRun:
    code: int
    printed: str
    errors: str


def preflight_in_sandbox(scenario: Path, *argv: str) -> PreflightRun:
    """``hyperpod-recovery preflight --stack sandbox`` against the scenario's stack in the sandbox
    (its virtual clock: the agent check's polls cost no real time)."""
    from hyperpod_recovery_cli.main import main as cli_main
    from sandbox.runner import DrillRunner
    from sandbox.scenario import load_scenario

    with tempfile.TemporaryDirectory(prefix="hpr-preflight-sandbox-") as folder:
        runner = DrillRunner(load_scenario(scenario), log_path=Path(folder) / "lambda.log")
        printed, errors = io.StringIO(), io.StringIO()
        with runner.deployed():
            code = cli_main(["preflight", "--stack", "sandbox", *argv], stdout=printed, stderr=errors, sleep=runner.advance)
    return PreflightRun(code, printed.getvalue(), errors.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make preflight-sandbox", description=__doc__.split("\n\n")[0])
    parser.add_argument("--orchestrator", type=str.lower, choices=sorted(SCENARIOS), default="slurm")
    args = parser.parse_args(argv)
    run = preflight_in_sandbox(SCENARIOS[args.orchestrator])
    sys.stdout.write(run.printed)
    sys.stderr.write(run.errors)
    return run.code


if __name__ == "__main__":
    sys.exit(main())
