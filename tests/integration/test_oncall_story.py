"""The on-call path as one story per orchestrator and per way an incident ends: after the incident
ends (recovered, escalated, capped, stopped by the on-call human, aborted), every ``hyperpod-recovery``
command the notification prints, and every one the commands' own output prints in turn, is run pasted
exactly as printed (shlex-split, through the console entry point, against the sandbox's deployed
stack, a human answering ``yes`` at the terminal when it asks), and each must work: exit 0 and the
effect it claims, read back from the ledger or the state machine.

A paste-ready command is written in backticks; every mention of a command in what a human reads is
one (a command named in plain text could not be told from the sentence around it). A command kind
with no check below fails the story: a new command in a message gets its check or the test says so.
A new ending is one row of ENDINGS: it gets the story on both orchestrators."""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.models.records import HOST_LOCK_PREFIX
from hyperpod_recovery_cli.main import main
from sandbox.oncall import OnCall, start_running
from sandbox.report.build import notifications_sent
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes
from tests.conftest import EVENTS

pytestmark = pytest.mark.sandbox
DRILLS = EVENTS / "drills"
STACK = "sandbox"
PASTE_READY = re.compile(r"`hyperpod-recovery ([^`]+)`")
# A command named anywhere in what a human reads (not the CLI's own "hyperpod-recovery: " prefix,
# nor a drain reason "hyperpod-recovery:<incident>").
NAMED = re.compile(r"hyperpod-recovery (?=[a-z])")
MAX_COMMANDS = 40  # a story that prints more commands than this is a loop in the messages


@dataclass(frozen=True)
class Ending:
    """How an incident comes to end: the scenario of each orchestrator, changed, and what the human
    does first (with ``{running}`` for a live recovery started and left running)."""

    scenarios: dict[str, Path]
    changes: dict[str, Any] = field(default_factory=dict)
    running: bool = False  # a live recovery of workers:3 is left running for the human to meet
    first: tuple[str, ...] = ()  # the human's own commands, before the printed ones


ONE_FAULT = [{"at": 120, "kind": "node_health", "node": "workers:7"}]
DEFAULTS = {"slurm": DRILLS / "default.json", "eks": DRILLS / "eks-default.json"}
ENDINGS = {
    "recovered": Ending(DEFAULTS),
    "escalated": Ending({"slurm": DRILLS / "rejoin-deadline.json", "eks": DRILLS / "eks-rejoin-deadline.json"}),
    # two nodes at once, one place under the cap: a human recovers each when the cap has room
    "capped": Ending(
        DEFAULTS,
        {
            "faults": [{"at": 120, "kind": "node_health", "node": "workers:6"}, *ONE_FAULT],
            "settings": {"caps": {"max_nodes": 1}},
        },
    ),
    # the human meets a running recovery holding the node, is told to stop it, and stops it as told
    "stopped": Ending(DEFAULTS, running=True, first=("locks release {node} --stack sandbox --reason 'RMA 42' --yes",)),
    "aborted": Ending(DEFAULTS, {"faults": [*ONE_FAULT, {"at": 400, "kind": "abort", "execution": 1}]}),
}
# The human's first look, as the runbook's "On call" section has it.
LOOK = ("incidents --stack sandbox", "locks --stack sandbox")


@dataclass
class Story:
    """The stack after the ending, the human's terminal on it, and what was run (command, exit)."""

    runner: DrillRunner
    session: OnCall
    transcript: list[tuple[str, int]] = field(default_factory=list)
    read: list[str] = field(default_factory=list)  # everything the human read: notifications, outputs

    @property
    def ledger(self) -> DynamoLedger:
        return DynamoLedger(self.runner.aws.ledger_table, dynamodb=self.runner.aws.client("dynamodb"))

    def now(self) -> Any:
        return self.runner.virtual_now()

    def run(self, command: str) -> tuple[int, str]:
        code = self.session.run(command, answer="yes\n")
        self.transcript.append((command, code))
        self.read.append(self.session.said)
        return code, self.session.said


# --- what each command claims, read back ----------------------------------------------------------
def _names(nodes: list[str]) -> set[str]:
    return {n.removeprefix(HOST_LOCK_PREFIX) for n in nodes} | {HOST_LOCK_PREFIX + n.removeprefix(HOST_LOCK_PREFIX) for n in nodes}


def check_release(story: Story, argv: list[str], run: Callable[[], tuple[int, str]]) -> str:
    """Every lock of each incident that held a named node is gone (its instance's and its hostname's)."""
    options = next((i for i, arg in enumerate(argv) if arg.startswith("--")), len(argv))
    named = _names(argv[2:options])
    holders = {lock.incident for lock in story.ledger.node_locks("llm-train", story.now()) if lock.node in named}
    code, said = run()
    assert code == 0, said
    left = [lock.node for lock in story.ledger.node_locks("llm-train", story.now()) if lock.incident in holders]
    assert left == [], f"released {argv[2:options]}: {left} of {holders} still locked:\n{said}"
    assert holders or "nothing changed" in said, said  # (an earlier printed release already freed them)
    return said


def check_hold(story: Story, argv: list[str], run: Callable[[], tuple[int, str]]) -> str:
    """A hold is kept on a node the cluster has now (the named one, or what replaced it)."""
    code, said = run()
    assert code == 0, said
    current = set()
    for node in story.runner.aws.client("sagemaker").list_cluster_nodes(ClusterName="llm-train")["ClusterNodeSummaries"]:
        current |= {node["InstanceId"], f"hyperpod-{node['InstanceId']}"}
    current |= {story.runner.double.slurm_name(ref) for ref in _refs(story)}
    holds = story.ledger.all_node_holds("llm-train")
    assert any(hold.node in current for hold in holds), f"{[h.node for h in holds]} holds no node of the cluster:\n{said}"
    return said


def check_unhold(story: Story, argv: list[str], run: Callable[[], tuple[int, str]]) -> str:
    code, said = run()
    assert code == 0 and argv[1] not in {hold.node for hold in story.ledger.all_node_holds("llm-train")}, said
    return said


def _refs(story: Story) -> list[str]:
    return [f"{group.name}:{i}" for group in story.runner.scenario.cluster.instance_groups for i in range(group.count)]


def check_show(story: Story, argv: list[str], run: Callable[[], tuple[int, str]]) -> str:
    code, said = run()
    assert code == 0 and (said.startswith(f"incident {argv[2]} ") or f"{argv[2]}: running since" in said), said
    return said


def check_read(story: Story, argv: list[str], run: Callable[[], tuple[int, str]]) -> str:
    code, said = run()
    assert code == 0, said
    return said


def check_stop(story: Story, argv: list[str], run: Callable[[], tuple[int, str]]) -> str:
    """The execution is stopped, then recorded aborted by Reconcile Execution (a minute passes after each command)."""
    code, said = run()
    assert code == 0 and "stopped (OperatorStopped" in said, said
    # it keeps what it says it keeps: a lock of the incident on each node its printed release names
    kept = {lock.node for lock in story.ledger.node_locks("llm-train", story.now()) if lock.incident == argv[1]}
    for release in (c for c in PASTE_READY.findall(said) if c.startswith("locks release ")):
        nodes = shlex.split(release)[2 : shlex.split(release).index("--stack")]
        assert all(_names([node]) & kept for node in nodes), f"{nodes} said kept, locks held: {kept}"
    record = story.ledger.get_incident(argv[1])
    assert record is not None and record.outcome == "aborted", said
    return said


def check_drill(story: Story, argv: list[str], run: Callable[[], tuple[int, str]]) -> str:
    """A live recovery of the node ran to its end and recorded it recovered."""
    code, said = run()
    name = re.search(r"node recovery drill (\S+) on", said)
    assert code == 0 and name is not None, said
    record = story.ledger.get_incident(name[1])
    assert record is not None and record.outcome == "recovered" and not record.dry_run, said
    return said


CHECKS: dict[str, Callable[[Story, list[str], Callable[[], tuple[int, str]]], str]] = {
    "incidents show": check_show,
    "incidents": check_read,
    "locks release": check_release,
    "locks": check_read,
    "hold": check_hold,
    "unhold": check_unhold,
    "stop": check_stop,
    "drill": check_drill,
}


def _kind(argv: list[str]) -> str:
    two = " ".join(argv[:2])
    return two if two in CHECKS else argv[0]


# --- the story --------------------------------------------------------------------------------------
def follow(story: Story, commands: list[str], notifications: Callable[[], list[str]]) -> None:
    """Run each command once, in the order printed, then every command its output prints, and those
    of every notification sent meanwhile (a stopped incident's comes once Reconcile Execution records it)."""
    queue, seen = list(commands), set()
    while queue or (queue := [c for text in notifications() for c in PASTE_READY.findall(text)]):
        command = queue.pop(0)
        if command in seen:
            continue
        seen.add(command)
        assert len(seen) <= MAX_COMMANDS, f"more than {MAX_COMMANDS} commands printed: {sorted(seen)}"
        argv = shlex.split(command)
        assert not any(arg.startswith(HOST_LOCK_PREFIX) for arg in argv), f"a lock's key printed as a node: {command}"
        check = CHECKS.get(_kind(argv))
        assert check is not None, f"no check for `hyperpod-recovery {command}`: say what it claims in CHECKS"
        said = check(story, argv, lambda command=command: story.run(command))  # type: ignore[misc]
        queue += PASTE_READY.findall(said)


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_after_each_ending_every_command_printed_works_pasted_as_printed(ending: str, orchestrator: str, tmp_path: Path) -> None:
    spec = ENDINGS[ending]
    scenario = load_scenario(spec.scenarios[orchestrator])
    runner = DrillRunner(with_changes(scenario, spec.changes) if spec.changes else scenario, log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        # Given the incident has ended (or, for a stop, is running and holds the node)
        runner.play()
        node = start_running(runner, "workers:3") if spec.running else ""
        story = Story(runner, OnCall(runner, io.StringIO(), cli=main))
        for command in spec.first:  # the human's own (a refusal among them is what it is)
            command = command.replace("{node}", node)
            story.transcript.append((command, story.session.run(command)))
            story.read.append(story.session.said)

        def sent() -> list[str]:
            messages = [note["message"] for note in notifications_sent(aws)]
            story.read.extend(messages)
            return messages

        # When the human pastes every command printed, the notification's first, then the runbook's first look
        printed = [c for text in [*story.read, *sent()] for c in PASTE_READY.findall(text)]
        follow(story, [*printed, *LOOK], sent)
        transcript = "\n".join(f"$ hyperpod-recovery {command}  -> exit {code}" for command, code in story.transcript)
    # Then each worked (the checks above); the human was given something to do beyond the first look
    assert len(story.transcript) > len(LOOK) + len(spec.first), transcript
    # And every command named in what the human read is a paste-ready one, in backticks
    for text in story.read:
        for mention in NAMED.finditer(text):
            assert text[mention.start() - 1 : mention.start()] == "`", f"a command outside backticks: {text[mention.start() :][:120]!r}"
    print(f"\n{ending} on {orchestrator}:\n{transcript}")
