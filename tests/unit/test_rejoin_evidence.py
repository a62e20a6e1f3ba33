"""When is a repaired node back, and which node is it? (issue 16, findings 4 and 5)

A reboot is judged by slurmctld's boot time, whatever HyperPod's status showed meanwhile; a
replacement is found by every identity HyperPod gives (NodeLogicalId, hostname, instance group),
the one that matched is recorded, and nothing is guessed when they disagree or are ambiguous.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.nodes.rejoin import MAX_BOOT_READINGS, observe_rejoin, rejoin_text
from hyperpod_recovery.domain.record.node_incident import build_timeline, summarize
from hyperpod_recovery.errors import RejoinDeadlineExceeded
from hyperpod_recovery.models.cluster import ClusterNode
from hyperpod_recovery.models.commands import BootTimes, BootTimesResult, CommandReply, NodeBoot, ResumeNodes, ResumeResult
from hyperpod_recovery.models.node_recovery import (
    CheckRejoinInput,
    ReadBootTimesInput,
    RejoinWatch,
    Replacement,
    ResumeNodesInput,
    WatchedNode,
    WorkflowState,
)
from hyperpod_recovery.steps.check_rejoin import check_rejoin
from hyperpod_recovery.steps.read_boot_times import read_boot_times
from hyperpod_recovery.steps.resume_nodes import resume_nodes
from tests.fakes import T0, FakeCluster, FakeLedger, FakeOrchestrator, compute_node, node_id
from tests.unit.test_steps import _request

NAME = "ip-10-1-0-7"  # compute_node(7)'s Slurm name
LOGICAL = "df268d19-f035-4f28-9b80-b956b92ae21e"
STATUSES = ["Pending", "Running", "Failure", "SystemUpdating", "DeepHealthCheckInProgress"]


def _node(action: str = "replace", initiation: str = "initiated", logical_id: str | None = LOGICAL) -> WatchedNode:
    return WatchedNode(
        node_id=node_id(7),
        slurm_node=NAME,
        instance_group="workers",
        logical_id=logical_id,
        initiation=initiation,  # type: ignore[arg-type]
        action=action,  # type: ignore[arg-type]
    )


def _watch(*nodes: WatchedNode, reboot_deadline: datetime | None = None) -> RejoinWatch:
    return RejoinWatch(
        at=T0,
        started_at=T0,
        deadline=T0 + timedelta(minutes=45),
        reboot_deadline=reboot_deadline,
        nodes=list(nodes or [_node()]),
        next_wait_seconds=30,
    )


def _reading(*boots: NodeBoot) -> CommandReply[BootTimesResult]:
    return CommandReply[BootTimesResult](requested_at=T0, completed_at=T0, result=BootTimesResult(nodes=list(boots)))


def _booted(seconds_after_request: float, state: str = "IDLE+DRAIN") -> NodeBoot:
    return NodeBoot(name=NAME, boot_time=T0 + timedelta(seconds=seconds_after_request), state=state)


def _instance(n: int, status: str = "Running", *, host: int | None = None, logical: str | None = None, new: bool = True) -> ClusterNode:
    """Instance ``n`` of group workers: under host ``ip-10-1-0-<host>``, launched after the request when ``new``."""
    return ClusterNode(
        node_id=node_id(n),
        instance_group="workers",
        status=status,
        private_dns_hostname=f"ip-10-1-0-{host if host is not None else n}.us-west-2.compute.internal",
        launch_time=T0 + timedelta(minutes=5) if new else T0 - timedelta(days=1),
        logical_id=logical,
    )


def _observe(watch: RejoinWatch, nodes: list[ClusterNode], at: float, **kwargs) -> RejoinWatch:  # type: ignore[no-untyped-def]
    return observe_rejoin(watch, nodes, T0 + timedelta(seconds=at), 30, 60, **kwargs)


def _check(
    watch: RejoinWatch,
    cluster: FakeCluster,
    at: float,
    ledger: FakeLedger | None = None,
    reading: CommandReply[BootTimesResult] | None = None,
) -> RejoinWatch:
    if reading is not None:
        watch = watch.model_copy(update={"boot_reading": reading})
    step = CheckRejoinInput(execution_name="inc-1", request=_request(7), rejoin=watch)
    return check_rejoin(
        step, cluster=cluster, ledger=ledger or FakeLedger(), poll_seconds=30, max_poll_seconds=60, now=T0 + timedelta(seconds=at)
    )


# --- finding 4: a reboot is judged by slurmctld's boot time ----------------------------------------
def test_given_hyperpod_shows_a_rebooted_node_running_throughout_when_slurm_reports_a_boot_after_the_request_then_it_is_back() -> None:
    # Given a node rebooted at T0 that HyperPod reports Running at every check (it never shows Pending)
    watch = _observe(_watch(_node("reboot")), [compute_node(7)], 30)
    # Then the workflow asks slurmctld before deciding, and does not count it back yet
    assert watch.boot_check == [NAME] and not watch.done
    # When slurmctld still shows the old boot and the node not answering, it is not back
    watch = _observe(
        watch.model_copy(update={"boot_reading": _reading(_booted(-86_400, "IDLE+DRAIN+NOT_RESPONDING"))}), [compute_node(7)], 31
    )
    assert not watch.done and watch.boot_check == []  # one reading per check: the next waits
    # When, a check later, slurmctld reports a boot after the reboot request, from a responding slurmd
    watch = _observe(watch, [compute_node(7)], 90)
    watch = _observe(watch.model_copy(update={"boot_reading": _reading(_booted(40, "DOWN+DRAIN"))}), [compute_node(7)], 91)
    # Then it is back, as itself, with the boot time as its evidence
    (node,) = watch.nodes
    assert watch.done and node.rejoined and node.matched_by == "instance_id" and node.booted_at == T0 + timedelta(seconds=40)


def test_given_hyperpod_showed_a_rebooted_node_pending_then_running_then_that_alone_does_not_count_it_back() -> None:
    # Given the reboot went as our double used to assume: Pending, then Running again
    watch = _observe(_watch(_node("reboot")), [compute_node(7, status="Pending")], 30)
    watch = _observe(watch, [compute_node(7, status="Running")], 90)
    # Then it is not back until slurmctld shows the reboot
    assert not watch.done and not watch.nodes[0].rejoined and watch.boot_check == [NAME]


class _Step:
    """One check: HyperPod's status of the node, and what slurmctld would answer if asked."""

    def __init__(self, status: str, boot_offset: float, responding: bool) -> None:
        self.status, self.boot_offset, self.responding = status, boot_offset, responding

    def reading(self) -> CommandReply[BootTimesResult]:
        return _reading(_booted(self.boot_offset, "IDLE+DRAIN" if self.responding else "DOWN+DRAIN+NOT_RESPONDING"))

    @property
    def evidence(self) -> bool:
        return self.boot_offset > 0 and self.responding


steps = st.lists(
    st.builds(
        _Step,
        status=st.sampled_from(STATUSES),
        boot_offset=st.sampled_from([-86_400.0, -1.0, 0.0, 1.0, 45.0]),
        responding=st.booleans(),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=300, deadline=None)
@given(history=steps, initiation=st.sampled_from(["initiated", "already_in_progress"]))
def test_a_rebooted_node_is_back_exactly_when_slurm_showed_a_boot_after_the_request_while_hyperpod_showed_it_running(
    history: list[_Step], initiation: str
) -> None:
    # Given any sequence of HyperPod statuses, and of slurmctld answers to the readings asked for
    watch = _watch(_node("reboot", initiation))
    for i, step in enumerate(history):
        watch = _observe(watch, [compute_node(7, status=step.status)], 30 * (i + 1))
        if watch.boot_check:
            watch = _observe(watch.model_copy(update={"boot_reading": step.reading()}), [compute_node(7, status=step.status)], 30 * (i + 1))
    # Then it is back if and only if a reading taken while HyperPod showed it Running proved a boot
    # since the request from a responding slurmd (HyperPod's status cycle alone never counts)
    expected = any(s.status == "Running" and s.evidence for s in history)
    assert watch.nodes[0].rejoined == expected == watch.done


@settings(max_examples=200, deadline=None)
@given(status=st.sampled_from(STATUSES), boot_offset=st.sampled_from([-86_400.0, 0.0, 30.0]), responding=st.booleans())
def test_at_the_reboot_deadline_a_rebooted_node_is_replaced_only_after_slurm_shows_it_did_not_boot(
    status: str, boot_offset: float, responding: bool
) -> None:
    # Given a node rebooted at T0, HyperPod showing it in any status at the reboot deadline
    cluster, ledger = FakeCluster([compute_node(7, status=status)]), FakeLedger()
    watch = _watch(_node("reboot"), reboot_deadline=T0 + timedelta(minutes=15))
    # When Check Rejoin runs at the deadline: nothing is replaced before slurmctld is asked
    asked = _check(watch, cluster, 900, ledger)
    assert asked.boot_check == [NAME] and cluster.replace_calls == []
    # And with slurmctld's answer
    boot = _booted(boot_offset, "IDLE+DRAIN" if responding else "DOWN+DRAIN+NOT_RESPONDING")
    after = _check(asked, cluster, 901, ledger, reading=_reading(boot))
    # Then it is replaced if and only if slurmctld shows no boot since the reboot from a responding slurmd
    booted = boot_offset > 0 and responding
    assert cluster.replace_calls == ([] if booted else [[node_id(7)]])
    assert after.nodes[0].action == ("reboot" if booted else "replace")
    # And a node slurmctld shows booted is back as soon as HyperPod shows it Running
    assert after.nodes[0].rejoined == (booted and status == "Running")


def test_a_reading_that_does_not_cover_a_node_never_replaces_it() -> None:
    # Given a reading about another node only, at the reboot deadline
    cluster = FakeCluster([compute_node(7, status="Failure")])
    watch = _watch(_node("reboot"), reboot_deadline=T0 + timedelta(minutes=15))
    after = _check(watch, cluster, 900, reading=_reading(NodeBoot(name="ip-10-1-0-8", state="IDLE")))
    # Then the node is not replaced on it
    assert cluster.replace_calls == [] and after.nodes[0].action == "reboot"


def test_boot_readings_are_budgeted_and_the_last_one_is_kept_for_the_reboot_deadline() -> None:
    # Given a rebooted node HyperPod shows Running, whose readings never show a boot, with all readings but one used
    watch = _watch(_node("reboot"), reboot_deadline=T0 + timedelta(minutes=15)).model_copy(update={"boot_readings": MAX_BOOT_READINGS - 1})
    # When checked before the reboot deadline, no reading is asked for (the last one is kept)
    assert _observe(watch, [compute_node(7)], 600).boot_check == []
    # Then at the reboot deadline it is asked for
    assert _observe(watch, [compute_node(7)], 900).boot_check == [NAME]
    # And once it is spent, none: the node is then never replaced (it waits for the rejoin deadline)
    spent = watch.model_copy(update={"boot_readings": MAX_BOOT_READINGS})
    cluster = FakeCluster([compute_node(7)])
    assert _check(spent, cluster, 900).boot_check == [] and cluster.replace_calls == []


@pytest.mark.parametrize(
    ("state", "responding"),
    [
        ("IDLE", True),
        ("IDLE+DRAIN", True),
        ("DOWN+DRAIN", True),  # slurmctld sets an unexpectedly rebooted node DOWN, its slurmd registered
        ("DOWN+DRAIN+NOT_RESPONDING", False),
        ("IDLE+NOT_RESPONDING", False),
        ("UNKNOWN", False),
        ("FUTURE", False),
        ("", False),  # unknown to slurmctld
    ],
)
def test_a_node_responds_unless_slurm_flags_it_otherwise(state: str, responding: bool) -> None:
    assert NodeBoot(name=NAME, boot_time=T0, state=state).responding is responding


def test_read_boot_times_asks_the_agent_about_the_nodes_check_rejoin_named_once_per_check() -> None:
    # Given a watch that asks for NAME's boot time, at two successive checks
    orchestrator = FakeOrchestrator()
    for checks in (3, 4):
        watch = _watch(_node("reboot")).model_copy(update={"boot_check": [NAME], "checks": checks})
        read_boot_times(
            ReadBootTimesInput(execution_name="inc-1", task_token="t", request=_request(7), rejoin=watch), orchestrator=orchestrator, now=T0
        )
    # Then each sends a read-only BootTimes command for that node, under its own command id (the agent
    # answers a command id it has seen from its journal)
    assert [e.command for e in orchestrator.dispatched] == [BootTimes(nodes=[NAME])] * 2
    assert len({e.command_id for e in orchestrator.dispatched}) == 2


# --- finding 5: the replacement is identified by every identity HyperPod gives ----------------------
def test_given_a_replacement_under_a_new_hostname_that_carries_the_nodes_logical_id_then_it_is_matched_by_logical_id() -> None:
    # Given the old instance gone and a new one, under another hostname, with the node's NodeLogicalId
    watch = _observe(_watch(), [_instance(0xBEEF, host=99, logical=LOGICAL)], 600)
    # Then it is the node's replacement, found by its logical id, under its new Slurm name
    (node,) = watch.nodes
    assert watch.done and node.replacement_node_id == node_id(0xBEEF) and node.matched_by == "logical_id"
    assert node.replacement_slurm_node == "ip-10-1-0-99"
    assert "same NodeLogicalId" in rejoin_text(node) and "ip-10-1-0-99 in Slurm now" in rejoin_text(node)


def test_given_the_same_hostname_then_the_match_is_recorded_as_such() -> None:
    watch = _observe(_watch(_node(logical_id=None)), [_instance(0xBEEF, host=7)], 600)
    assert watch.nodes[0].matched_by == "hostname" and watch.nodes[0].replacement_slurm_node is None
    assert "(same hostname)" in rejoin_text(watch.nodes[0])


def _group_match(extra_new: int, others_missing: int, scale_up: int, target_known: bool) -> RejoinWatch:
    """Group workers had 8 nodes: node 7 (watched) replaced by a new instance with a new hostname and
    logical id; ``others_missing`` other old nodes gone, ``extra_new`` other new instances, and
    ``scale_up`` more nodes in TargetCount."""
    old = [_instance(n, new=False) for n in range(8) if n != 7][others_missing:]
    new = [_instance(0x100 + i, host=100 + i, logical=f"new-{i}") for i in range(1 + extra_new)]
    counts = {"workers": 8 + scale_up} if target_known else {}
    return _observe(_watch(), old + new, 600, target_counts=lambda: counts)


def test_given_the_only_new_node_of_the_group_while_only_ours_is_missing_then_it_is_matched_by_instance_group() -> None:
    watch = _group_match(extra_new=0, others_missing=0, scale_up=0, target_known=True)
    (node,) = watch.nodes
    assert watch.done and node.matched_by == "instance_group" and node.replacement_node_id == node_id(0x100)
    assert node.replacement_slurm_node == "ip-10-1-0-100" and "the only new node of its instance group" in rejoin_text(node)


@settings(max_examples=200, deadline=None)
@given(extra_new=st.integers(0, 2), others_missing=st.integers(0, 2), scale_up=st.integers(0, 2), target_known=st.booleans())
def test_a_node_is_matched_by_its_group_only_when_nothing_else_could_explain_the_new_node(
    extra_new: int, others_missing: int, scale_up: int, target_known: bool
) -> None:
    # Given other new nodes, other missing nodes, a scale-up, or no TargetCount
    watch = _group_match(extra_new, others_missing, scale_up, target_known)
    # Then the group is used only when the match is unambiguous; otherwise the node keeps waiting
    unambiguous = extra_new == 0 and others_missing == 0 and scale_up == 0 and target_known
    assert (watch.nodes[0].matched_by == "instance_group") == unambiguous == watch.done


def test_target_count_is_read_only_when_a_group_match_is_possible() -> None:
    asked: list[int] = []

    def counts() -> dict[str, int]:
        asked.append(1)
        return {"workers": 8}

    _observe(_watch(_node(logical_id=None)), [_instance(0xBEEF, host=7)], 600, target_counts=counts)  # found by hostname
    assert asked == []


def test_given_the_logical_id_on_one_new_instance_and_the_hostname_on_another_then_nothing_matches_and_the_cause_names_both() -> None:
    # Given identities that disagree
    nodes = [_instance(0xA, host=99, logical=LOGICAL), _instance(0xB, host=7, logical="other-id")]
    watch = _observe(_watch(), nodes, 600)
    # Then the node is not counted back
    assert not watch.done and watch.nodes[0].replacement_node_id is None
    # And at the deadline the escalation names what was seen
    with pytest.raises(RejoinDeadlineExceeded) as raised:
        _observe(watch, nodes, 2700)
    cause = str(raised.value)
    assert f"its NodeLogicalId is on {node_id(0xA)} but its hostname on {node_id(0xB)}" in cause
    assert f"{node_id(0xA)} (ip-10-1-0-99, logical id {LOGICAL}, Running)" in cause


def test_given_no_identity_matches_by_the_deadline_then_the_cause_names_the_new_nodes_seen_in_the_group() -> None:
    # Given two nodes of the group replaced, both back under new hostnames and new logical ids (ambiguous)
    watched = [_node(logical_id=None), WatchedNode(node_id=node_id(3), slurm_node="ip-10-1-0-3", instance_group="workers")]
    nodes = [_instance(0xA, host=98, logical="aaa-1"), _instance(0xB, host=99, logical="bbb-2")]
    with pytest.raises(RejoinDeadlineExceeded) as raised:
        _observe(_watch(*watched), nodes, 2700, target_counts=lambda: {"workers": 2})
    cause = str(raised.value)
    assert "2 node(s) not back" in cause and "no new instance carries its NodeLogicalId or hostname" in cause
    assert f"new in group workers since 09:00:00 UTC: {node_id(0xA)} (ip-10-1-0-98, logical id aaa-1, Running)" in cause
    assert f"{node_id(0xB)} (ip-10-1-0-99, logical id bbb-2, Running)" in cause


def test_the_timeline_and_summary_say_which_identity_matched() -> None:
    # Given a recovery whose replacement came back under a new hostname, found by its logical id
    watch = _observe(_watch(), [_instance(0xBEEF, host=99, logical=LOGICAL)], 600)
    state = WorkflowState(request=_request(7), replacement=Replacement(at=T0, calls=1, proceed=True, watch=watch))
    # Then the timeline's rejoin entry says so, and the summary tells the human the node has a new name
    (rejoined,) = [e for e in build_timeline(state, T0) if e.event == "node rejoined"]
    assert "same NodeLogicalId" in rejoined.detail and NAME in rejoined.detail
    assert "ip-10-1-0-7 is ip-10-1-0-99 now (same NodeLogicalId; ip-10-1-0-7 is left drained)" in summarize(state, "recovered", None)


def test_resume_leaves_a_name_whose_replacement_came_back_under_another_one_drained() -> None:
    # Given two nodes back: one under its own name, one under a new name
    same = WatchedNode(node_id=node_id(3), slurm_node="ip-10-1-0-3", rejoined=True, replacement_node_id=node_id(0xA), matched_by="hostname")
    renamed = same.model_copy(update={"node_id": node_id(7), "slurm_node": NAME, "replacement_slurm_node": "ip-10-1-0-99"})
    orchestrator = FakeOrchestrator()
    watch = _watch(same, renamed).model_copy(update={"done": True})
    resume_nodes(
        ResumeNodesInput(execution_name="inc-1", task_token="t", request=_request(3, 7), rejoin=watch), orchestrator=orchestrator, now=T0
    )
    # Then only the name that came back is resumed
    assert [e.command for e in orchestrator.dispatched] == [ResumeNodes(nodes=["ip-10-1-0-3"], owner_tag="hyperpod-recovery:inc-1")]
    # And with no such name, nothing is sent: the task is answered at once
    only_renamed = FakeOrchestrator()
    watch = _watch(renamed).model_copy(update={"done": True})
    resume_nodes(
        ResumeNodesInput(execution_name="inc-1", task_token="t", request=_request(7), rejoin=watch), orchestrator=only_renamed, now=T0
    )
    assert only_renamed.dispatched == [] and [r.result for _, r in only_renamed.answered] == [ResumeResult()]
