"""What the agent will and will not do to Slurm, whatever the command says: a resume undoes only
the drains of the incident that asks, no text reaches Slurm with a control character in it, and a
node's boot time is read as slurmctld reports it, whatever else its line says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models.commands import (
    UNHEALTHY_DETAILS_KEPT,
    BootTimes,
    BootTimesResult,
    CommandEnvelope,
    CordonNodes,
    CordonResult,
    DrainNodes,
    HealthCheck,
    ResumeNodes,
    carries_owner_tag,
    owner_tag,
)
from hyperpod_recovery.models.common import one_line
from hyperpod_recovery.models.node_recovery import CordonNodesInput
from hyperpod_recovery.steps.cordon_nodes import cordon_nodes
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.slurm import SlurmCli, SlurmUnreachable, parse_node_boots
from sandbox.slurm import SimulatedSlurm, SlurmJob
from tests.fakes import T0, FakeOrchestrator
from tests.unit.test_safety import _assessment
from tests.unit.test_steps import _request

incident_names = st.from_regex(r"\A[a-z][a-z0-9-]{0,20}\Z")


@settings(max_examples=200, deadline=None)
@given(first=incident_names, suffix=st.from_regex(r"\A[a-z0-9-]{1,6}\Z"))
def test_a_resume_never_undoes_a_drain_of_another_incident_whose_name_it_prefixes(first: str, suffix: str) -> None:
    # Given node A drained by incident "<first><suffix>" (drill-10) and node B by "<first>" (drill-1)
    slurm = SimulatedSlurm()
    slurm.add_node("a")
    slurm.add_node("b")
    executor = CommandExecutor(slurm, now=lambda: T0)
    longer = first + suffix
    executor.drain(DrainNodes(nodes=["a"], reason=f"{owner_tag(longer)} fault"))
    executor.drain(DrainNodes(nodes=["b"], reason=f"{owner_tag(first)} fault"))
    # When the shorter-named incident resumes both
    result = executor.resume(ResumeNodes(nodes=["a", "b"], owner_tag=owner_tag(first)))
    # Then only its own drain is undone
    assert (result.resumed, result.not_ours) == (["b"], ["a"])
    assert slurm.nodes["a"].drained and not slurm.nodes["b"].drained


def test_a_drain_found_in_place_is_ours_only_under_this_incidents_own_tag() -> None:
    # Given node a drained by this incident before (a retried command), b by an admin, c by another incident
    slurm = SimulatedSlurm()
    for name in "abc":
        slurm.add_node(name)
    executor = CommandExecutor(slurm, now=lambda: T0)
    executor.drain(DrainNodes(nodes=["a"], reason=f"{owner_tag('inc-1')} fault"))
    slurm.drain(["b"], "admin: bad cable")
    executor.drain(DrainNodes(nodes=["c"], reason=f"{owner_tag('inc-10')} fault"))
    # When this incident drains all three
    result = executor.drain(DrainNodes(nodes=["a", "b", "c"], reason=f"{owner_tag('inc-1')} fault"))
    # Then all three were drained already, and only a is this incident's to give back
    assert (sorted(result.already_drained), result.ours_already) == (["a", "b", "c"], ["a"])


@pytest.mark.parametrize("reason", ["hyperpod-recovery:drill-1", "hyperpod-recovery:drill-1 fault", "hyperpod-recovery:drill-1\tx"])
def test_the_owner_tag_is_the_reasons_first_word(reason: str) -> None:
    assert carries_owner_tag(reason, "hyperpod-recovery:drill-1")
    assert not carries_owner_tag(reason.replace("drill-1", "drill-10"), "hyperpod-recovery:drill-1")


@pytest.mark.parametrize("bad", ["\x00", "\n", "\r", "\x1b[2J", "\x7f"])
def test_a_drain_reason_with_a_control_character_is_refused_by_the_command_model(bad: str) -> None:
    with pytest.raises(ValidationError, match="control characters"):
        DrainNodes(nodes=["a"], reason=f"hyperpod-recovery:inc-1 fault{bad}text")


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=600))
def test_cordon_turns_any_fault_text_into_a_drain_reason_slurm_accepts(text: str) -> None:
    # Given a trigger whose reason came from an outside event with anything in it
    request = _request(1)
    request = request.model_copy(update={"triggers": [request.triggers[0].model_copy(update={"reason": text})]})
    orchestrator = FakeOrchestrator()
    # When Cordon Nodes builds its command
    cordon_nodes(
        CordonNodesInput(execution_name="inc-1", task_token="t", request=request, assessment=_assessment(1)),
        orchestrator=orchestrator,
        now=T0,
    )
    # Then the command is valid on both sides of the queue: one printable line, our tag first
    (envelope,) = orchestrator.dispatched
    assert isinstance(envelope.command, CordonNodes) and envelope.command.drain
    CommandEnvelope.model_validate_json(envelope.model_dump_json())
    assert envelope.command.reason == one_line(envelope.command.reason, 256)
    assert carries_owner_tag(envelope.command.reason, owner_tag("inc-1"))


# --- cordon: drain, then the jobs on the nodes, in one command ------------------------------------
def _cordon_slurm() -> SimulatedSlurm:
    slurm = SimulatedSlurm()
    for name in ("a", "b", "c"):
        slurm.add_node(name)
    slurm.add_job(SlurmJob(job_id="1001", name="llama", nodes=["a", "b"], state="RUNNING", checkpoint_uri="s3://ckpt/llama"))
    slurm.drain(["b"], "someone else's maintenance")
    return slurm


def _cordon(executor: CommandExecutor, command: CordonNodes) -> tuple[bool, CordonResult]:
    envelope = CommandEnvelope(
        command_id="inc-1:cordon", incident_id="inc-1", execution_name="inc-1", task_token="t", requested_at=T0, command=command
    )
    reply = executor.execute(envelope)
    assert isinstance(reply.result, CordonResult)
    return reply.dry_run, reply.result


def test_a_cordon_drains_under_our_tag_keeps_other_drains_and_answers_the_jobs_on_the_nodes() -> None:
    slurm = _cordon_slurm()
    dry_run, result = _cordon(CommandExecutor(slurm, now=lambda: T0), CordonNodes(nodes=["a", "b"], reason=f"{owner_tag('inc-1')} fault"))
    # Then a is drained under our tag, b's drain is someone else's and stays theirs
    assert not dry_run and (result.drained, result.already_drained) == (["a"], ["b"])
    assert carries_owner_tag(slurm.nodes["a"].reason, owner_tag("inc-1")) and slurm.nodes["b"].reason == "someone else's maintenance"
    # And the job holding them is captured in the same answer
    assert [j.job_id for j in result.jobs] == ["1001"] and result.omitted == 0


def test_a_dry_run_cordon_drains_nothing_and_says_what_it_would_drain() -> None:
    slurm = _cordon_slurm()
    command = CordonNodes(nodes=["a", "b"], reason=f"{owner_tag('inc-1')} fault", drain=False)
    dry_run, result = _cordon(CommandExecutor(slurm, now=lambda: T0), command)
    assert dry_run and (result.drained, result.already_drained) == (["a"], ["b"]) and not slurm.nodes["a"].drained
    assert [j.job_id for j in result.jobs] == ["1001"]


@pytest.mark.parametrize("drain", [True, False])
def test_a_cordon_without_our_tag_is_refused_before_anything_is_read_or_drained(drain: bool) -> None:
    slurm = _cordon_slurm()
    with pytest.raises(InvalidCommand, match="must start with"):
        _cordon(CommandExecutor(slurm, now=lambda: T0), CordonNodes(nodes=["a"], reason="maintenance", drain=drain))
    assert not slurm.nodes["a"].drained


def test_a_cordon_goes_on_the_wire_without_its_default_drain_and_an_older_agent_cannot_read_it() -> None:
    # The live command leaves drain out; a dry run's says drain false. An agent without the type
    # refuses the whole command (a discriminated union), never lists without draining.
    live = CordonNodes(nodes=["a"], reason=f"{owner_tag('inc-1')} fault")
    assert "drain" not in live.model_dump() and CordonNodes(nodes=["a"], reason=live.reason, drain=False).model_dump()["drain"] is False


# --- boot times: the evidence that a rebooted node came back ---------------------------------------
# `scontrol show node -o` lines as Slurm 22.05 prints them (tests/slurm checks the real thing).
SCONTROL_NODES = (
    "NodeName=ip-10-1-0-1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=1.37 AvailableFeatures=fast,ib "
    "ActiveFeatures=fast,ib Gres=gpu:1 NodeAddr=127.0.0.1 NodeHostName=vm Port=17001 Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP "
    "PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)  RealMemory=1000 AllocMem=0 FreeMem=21779 Sockets=1 Boards=1 State=IDLE "
    "ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=dev  BootTime=2026-11-23T07:56:24 "
    "SlurmdStartTime=2026-11-23T13:27:48 LastBusyTime=2026-11-23T13:27:48 CfgTRES=cpu=1,mem=1000M,billing=1 AllocTRES= CapWatts=n/a "
    "CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n"
    "NodeName=ip-10-1-0-2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=1.37 NodeAddr=127.0.0.1 NodeHostName=vm "
    "Port=17002 Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP  RealMemory=1000 AllocMem=0 State=DOWN+DRAIN+NOT_RESPONDING "
    "ThreadsPerCore=1 Partitions=dev  BootTime=2026-11-20T01:02:03 SlurmdStartTime=2026-11-20T01:03:00 LastBusyTime=2026-11-23T13:27:48 "
    "CfgTRES=cpu=1,mem=1000M,billing=1 AllocTRES= CapWatts=n/a Reason=hyperpod-recovery:inc-1 HMA: BootTime=2099-01-01T00:00:00 "
    "State=IDLE [root@2026-11-23T13:27:51]\n"
    "NodeName=ip-10-1-0-3 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 State=UNKNOWN+NOT_RESPONDING Partitions=dev  BootTime=None "
    "SlurmdStartTime=None LastBusyTime=Unknown CfgTRES=cpu=1 AllocTRES=\n"
)


def test_given_scontrol_output_then_each_nodes_boot_time_and_state_are_read_and_never_from_its_reason() -> None:
    boots = {b.name: b for b in parse_node_boots(SCONTROL_NODES)}
    assert boots["ip-10-1-0-1"].boot_time == datetime(2026, 11, 23, 7, 56, 24, tzinfo=UTC) and boots["ip-10-1-0-1"].state == "IDLE"
    # A drain reason (free text, from an outside event) that mentions BootTime= or State= changes nothing
    assert boots["ip-10-1-0-2"].boot_time == datetime(2026, 11, 20, 1, 2, 3, tzinfo=UTC)
    assert boots["ip-10-1-0-2"].state == "DOWN+DRAIN+NOT_RESPONDING" and not boots["ip-10-1-0-2"].responding
    # A node that never registered has no boot time
    assert boots["ip-10-1-0-3"].boot_time is None and not boots["ip-10-1-0-3"].responding


@settings(max_examples=200, deadline=None)
@given(reason=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=200))
def test_whatever_a_drain_reason_says_the_boot_time_read_is_the_nodes_own(reason: str) -> None:
    line = SCONTROL_NODES.splitlines()[0] + f" Reason={reason} [root@2026-11-23T13:27:51]"
    (boot,) = parse_node_boots(line)
    (clean,) = parse_node_boots(SCONTROL_NODES.splitlines()[0])
    assert boot == clean


def test_boot_times_ask_scontrol_for_utc_times_and_answer_unknown_nodes_without_failing(tmp_path: Path) -> None:
    # Given an scontrol that prints a local time only when asked for UTC (otherwise it fails)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        '#!/bin/sh\n[ "$TZ" = UTC ] && [ "$SLURM_TIME_FORMAT" = standard ] || exit 3\n'
        'echo "NodeName=ip-10-1-0-1 State=IDLE+DRAIN BootTime=2026-11-23T07:56:24 SlurmdStartTime=2026-11-23T07:57:00"\n'
    )
    scontrol.chmod(0o755)
    cli = SlurmCli(bin_dir=str(tmp_path), env={"PATH": "/usr/bin:/bin", "TZ": "Asia/Tokyo", "SLURM_TIME_FORMAT": "relative"})
    # When asked about a known and an unknown node
    boots = cli.boot_times(["ip-10-1-0-1", "ip-10-1-0-9"])
    # Then the known one has its boot time in UTC, and the unknown one none (not an error)
    assert [(b.name, b.boot_time, b.state) for b in boots] == [
        ("ip-10-1-0-1", datetime(2026, 11, 23, 7, 56, 24, tzinfo=UTC), "IDLE+DRAIN"),
        ("ip-10-1-0-9", None, ""),
    ]


def test_the_boot_times_command_answers_what_slurmctld_knows_of_each_host() -> None:
    # Given a simulated slurmctld whose host a is back from a reboot and b is not answering
    views = {"a": (T0 + timedelta(minutes=2), True), "b": (T0 - timedelta(days=2), False)}
    slurm = SimulatedSlurm(host_view=lambda name: views[name])
    slurm.add_node("a")
    slurm.add_node("b")
    executor = CommandExecutor(slurm, now=lambda: T0)
    executor.drain(DrainNodes(nodes=["a", "b"], reason=f"{owner_tag('inc-1')} fault"))
    # When the agent executes a boot_times command (one node slurmctld does not know)
    envelope = CommandEnvelope(
        command_id="inc-1:boot-times:1:0",
        incident_id="inc-1",
        execution_name="inc-1",
        task_token="t",
        requested_at=T0,
        command=BootTimes(nodes=["a", "b", "c"]),
    )
    result = executor.execute(envelope).result
    # Then each node's boot time and state are answered as scontrol would show them
    assert isinstance(result, BootTimesResult)
    assert [(b.name, b.boot_time, b.state, b.responding) for b in result.nodes] == [
        ("a", T0 + timedelta(minutes=2), "IDLE+DRAIN", True),
        ("b", T0 - timedelta(days=2), "IDLE+DRAIN+NOT_RESPONDING", False),
        ("c", None, "", False),
    ]


# --- the replacement's health gate: every way it can go wrong keeps the node out of service -----
GATE_TAG = "hyperpod-recovery:inc-1"


class _GateSlurm(SimulatedSlurm):
    """Simulated slurmctld whose gate calls can fail the way a real one does."""

    def __init__(self, *, check: tuple[int | None, str] = (0, "ok"), failing: str | None = None) -> None:
        super().__init__()
        self.check, self.failing = check, failing
        for name in ("n1", "n2"):
            self.add_node(name)

    def _maybe_fail(self, call: str) -> None:
        if self.failing == call:
            raise SlurmUnreachable(f"{call}: Unable to contact slurm controller")

    def resume(self, nodes: Any) -> None:
        self._maybe_fail("resume")
        super().resume(nodes)

    def drain(self, nodes: Any, reason: str) -> None:
        self._maybe_fail("drain")
        super().drain(nodes, reason)

    def run_check(self, name: str, node: str, argv: Any, timeout_seconds: int) -> tuple[int | None, str]:
        self._maybe_fail("run_check")
        return self.check


def _gate(slurm: _GateSlurm, nodes: list[str]) -> Any:
    from hyperpod_recovery.models.commands import HealthCheck, ResumeNodes

    command = ResumeNodes(nodes=nodes, owner_tag=GATE_TAG, health_check=HealthCheck(argv=["true"], timeout_seconds=30))
    envelope = CommandEnvelope(
        command_id="c", incident_id="inc-1", execution_name="inc-1", task_token="t", requested_at=T0, command=command
    )
    return CommandExecutor(slurm, parallel_checks=False).execute(envelope).result


@pytest.mark.parametrize(
    ("check", "failing", "in_service", "drained", "reserved"),
    [
        ((0, "ok"), None, True, False, False),  # passed: in service, reservation gone
        ((1, "GPU fell off the bus"), None, False, True, False),  # failed: drained again, then unreserved
        ((None, "timed out"), None, False, True, False),  # no answer in time: the same
        ((1, "GPU fell off the bus"), "drain", False, False, True),  # failed, and the drain failed: stays reserved
        ((0, "ok"), "run_check", False, True, False),  # the check could not run: kept out
        ((0, "ok"), "resume", False, True, False),  # the drain could not be lifted: still drained
    ],
)
def test_a_node_enters_service_only_after_its_check_passed(
    check: tuple[int | None, str], failing: str | None, in_service: bool, drained: bool, reserved: bool
) -> None:
    # Given a replaced node drained by this incident
    slurm = _GateSlurm(check=check, failing=failing)
    SimulatedSlurm.drain(slurm, ["n1"], f"{GATE_TAG} unhealthy")
    # When it is resumed through the gate and something goes as the row says
    result = _gate(slurm, ["n1"])
    node = slurm.nodes["n1"]
    # Then it is in service only if the check passed; otherwise it is drained (under our tag) or still reserved for root
    assert (result.resumed == ["n1"]) is in_service and bool(result.unhealthy) is not in_service
    assert node.drained is (drained or (not in_service and not reserved and failing != "drain"))
    assert ("n1" in slurm.reserved) is reserved
    if not in_service:
        assert node.drained or "n1" in slurm.reserved, "a node that did not pass must be closed to jobs"
        assert node.reason.startswith(GATE_TAG) or "n1" in slurm.reserved


def test_a_retried_gate_checks_again_a_node_it_already_resumed() -> None:
    # Given a gate that died after lifting the drain (the node still in our reservation)
    class DiesAfterResume(_GateSlurm):
        def run_check(self, *args: Any) -> tuple[int | None, str]:
            raise SystemExit("agent killed")

    dying = DiesAfterResume()
    dying.drain(["n1"], f"{GATE_TAG} unhealthy")
    with pytest.raises(SystemExit):
        _gate(dying, ["n1"])
    assert not dying.nodes["n1"].drained and "n1" in dying.reserved  # resumed, but closed: still reserved
    # When the command comes again (SQS redelivery), the check works this time
    dying.__class__ = _GateSlurm
    result = _gate(dying, ["n1"])
    # Then the node is checked, not reported "not drained" and left unchecked
    assert result.resumed == ["n1"] and result.not_drained == [] and "n1" not in dying.reserved


def test_a_gate_failing_on_a_storm_keeps_the_check_output_of_the_first_nodes_only_and_says_which_ran() -> None:
    # Given 30 nodes drained by us whose check fails, and the check that cannot run on one of them
    slurm = SimulatedSlurm()
    names = [f"n{i}" for i in range(30)]
    for name in names:
        slurm.add_node(name)
    executor = CommandExecutor(slurm, now=lambda: T0, parallel_checks=False)
    executor.drain(DrainNodes(nodes=names, reason=f"{GATE_TAG} fault"))

    def run_check(name: str, node: str, argv: object, timeout: int) -> tuple[int | None, str]:
        if node == "n0":
            raise SlurmUnreachable("slurmctld away")
        return 1, "x" * 5000

    slurm.run_check = run_check  # type: ignore[method-assign]
    result = executor.resume(ResumeNodes(nodes=names, owner_tag=GATE_TAG, health_check=HealthCheck(argv=["true"], timeout_seconds=10)))
    # Then every node stays out, the state carries ten outputs at most, each within its limit
    assert result.resumed == [] and len(result.unhealthy) == 30
    assert sum(1 for u in result.unhealthy if u.detail) <= UNHEALTHY_DETAILS_KEPT and all(len(u.detail) <= 160 for u in result.unhealthy)
    # And only the checks that ran are verdicts on the instance
    assert {u.node: u.verdict for u in result.unhealthy}["n0"] == "could_not_run"
    assert {u.verdict for u in result.unhealthy if u.node != "n0"} == {"failed"}
