"""Try the on-call commands offline: play a scenario through the sandbox's stack, then run
``hyperpod-recovery`` commands against that stack (``--stack sandbox``), in order.

    python -m sandbox.oncall --scenario events/drills/rejoin-deadline.json \\
        --run "incidents --stack sandbox" --run "locks --stack sandbox" \\
        --run "locks release i-... --stack sandbox --reason 'replaced by hand' --yes"

(``make oncall`` with SCENARIO=... and RUN='...;...'). The commands are the real CLI's, talking to
the sandbox's moto (the real template's table and state machines) and HyperPod double; a change needs
``--yes`` (there is no terminal to ask). ``{node}``, ``{hostname}`` and ``{incident}`` in a command are
filled with the scenario's first faulted node, its hostname (the orchestrator's name of it) and the
newest incident, so a scripted run needs no ids; with ``--start workers:3`` a live recovery of that
node is also left running, as ``{running}``. A ``drill`` follows its execution on the sandbox's
virtual time (its poller's sleep moves the clock), so it ends as the execution does. Exit code: the
last command's, or 2 for bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery_cli.app import run as cli_run
from sandbox.runner import DrillRunner
from sandbox.scenario import ScenarioError, load_scenario


def _fills(runner: DrillRunner) -> dict[str, str]:
    aws = runner.aws
    fills = {}
    refs = [fault.node for fault in runner.scenario.faults if getattr(fault, "node", None)]
    if refs:
        node = runner.double.current(refs[0], t=0).node_id
        eks = runner.scenario.cluster.orchestrator == "eks"
        fills |= {"{node}": node, "{hostname}": f"hyperpod-{node}" if eks else runner.double.slurm_name(refs[0])}
    records = DynamoLedger(aws.ledger_table, dynamodb=aws.client("dynamodb")).incidents(runner.scenario.cluster.name, limit=1)
    if records:
        fills["{incident}"] = records[0].incident_id
    return fills


POLL_FLOOR_SECONDS = 60.0
RUNNING = "oncall-running"  # the execution --start leaves running ({running} in a command)


def start_running(runner: DrillRunner, ref: str) -> str:
    """A live recovery of node ``ref`` started by hand and left running two minutes in (cordoned,
    its replacement on the way): what ``stop`` and a refused ``locks release`` act on. Its node's
    instance id."""
    runner.clock.set_driver_time(runner.clock.horizon)  # after everything the scenario played
    node = runner.double.current(ref, t=runner.clock.now()).node_id
    request = {"cluster": runner.scenario.cluster.name, "node_ids": [node], "reason": "on-call try-out", "dry_run": False}
    machine = runner.aws.state_machines["NodeRecoveryStateMachine"]
    runner.aws.client("stepfunctions").start_execution(stateMachineArn=machine, name=RUNNING, input=json.dumps(request))
    runner.advance(120)
    return node


class OnCall:
    """The real CLI's commands run against a deployed sandbox stack, as a human pastes them: each
    ``run`` is one command line, its names filled in, run through the console entry point with the
    stack's clients; a poller's sleep (``drill`` following its execution) lets virtual time pass,
    so the execution it follows moves on instead of waiting on a clock nobody advances."""

    def __init__(self, runner: DrillRunner, printed: io.TextIOBase | TextIO, cli: Callable[..., int] = cli_run) -> None:
        self.runner = runner
        self.printed = printed
        self.cli = cli  # app.run, or a test's console entry point (main)
        self.said = ""
        aws = runner.aws
        self.clients = {
            "sfn": aws.client("stepfunctions"),
            "sagemaker": aws.client("sagemaker"),
            "cloudformation": aws.client("cloudformation"),
            "sts": aws.client("sts"),
            # A poller's sleep lets virtual time pass, a minute at least: the states `drill` prints
            # carry their own times, and a replacement's ten minutes are not followed in 5 s steps.
            "sleep": lambda seconds: runner.advance(max(seconds, POLL_FLOOR_SECONDS)),
        }

    def run(self, command: str, *, answer: str | None = None) -> int:
        """Run one command line; ``answer`` is typed at a terminal when the command asks. What it
        printed (stdout and stderr, as a terminal shows them) is kept in ``said``."""
        for key, value in (_fills(self.runner) | {"{running}": RUNNING}).items():
            command = command.replace(key, value)
        print(f"$ hyperpod-recovery {command}", file=self.printed)
        now = self.runner.virtual_now()
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):  # (argparse prints its refusal on sys.stderr)
                code = self.cli(
                    shlex.split(command),
                    stdout=said,
                    stderr=said,
                    drill_clients=self.clients,
                    dynamodb=self.runner.aws.client("dynamodb"),
                    stdin=Terminal(answer) if answer is not None else io.StringIO(),
                    now=lambda moment=now: moment,  # type: ignore[misc]
                )
        except SystemExit as exit_:  # argparse's refusal (printed on stderr, kept in said)
            code = int(exit_.code or 0)
        self.said = said.getvalue()
        print(f"{self.said}(exit {code})\n", file=self.printed)
        self.runner.advance(60)  # a minute between commands: a stop's end reaches Reconcile Execution
        return code


class Terminal(io.StringIO):
    """A terminal a human types ``answer`` at when a command asks."""

    def isatty(self) -> bool:
        return True


def run(scenario: Path, commands: Sequence[str], log_path: Path, out: io.TextIOBase | None = None, start: str | None = None) -> int:
    printed = out or sys.stdout
    runner = DrillRunner(load_scenario(scenario), log_path=log_path)
    code = 0
    with runner.deployed():
        runner.play()
        if start is not None:
            start_running(runner, start)
            print(f"(started {RUNNING}: a live recovery of {start}, left running)\n", file=printed)
        session = OnCall(runner, printed)
        for command in commands:
            code = session.run(command)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.oncall", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", required=True, type=Path, help="the drill scenario to play first")
    parser.add_argument("--run", action="append", default=[], help="a hyperpod-recovery command line (repeat; run in order)")
    parser.add_argument("--out", type=Path, default=Path("out"), help="where the handlers' log goes (default out/)")
    parser.add_argument(
        "--start", metavar="REF", help="also start a live recovery of this node (workers:3) and leave it running: {running}"
    )
    args = parser.parse_args(argv)
    if not args.run:
        parser.error("give at least one --run 'COMMAND' (e.g. --run 'incidents --stack sandbox')")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        return run(args.scenario, args.run, args.out / "oncall-lambda.log", start=args.start)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
