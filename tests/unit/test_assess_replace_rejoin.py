"""Pure decisions: which nodes to act on, what a BatchReplace result means, when a node is back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.nodes.assess import assess_nodes
from hyperpod_recovery.domain.nodes.cadence import next_wait_seconds
from hyperpod_recovery.domain.nodes.ladder import recommended_repair
from hyperpod_recovery.domain.nodes.rejoin import observe_rejoin
from hyperpod_recovery.domain.nodes.replace import chunked, classify_replacements
from hyperpod_recovery.errors import NodeRoleUnknown, RejoinDeadlineExceeded, UnsupportedOrchestrator
from hyperpod_recovery.models.cluster import BatchOutcome, ClusterNode
from hyperpod_recovery.models.commands import BootTimesResult, CommandReply, NodeBoot
from hyperpod_recovery.models.node_recovery import NodeTarget, ReplaceFailure
from tests.fakes import T0, FakeCluster, FakeLedger, compute_node, node_id
from tests.unit.test_steps import _request


def _assess(nodes: list[ClusterNode], requested: list[str], locked: list[str] | None = None, **kwargs):  # type: ignore[no-untyped-def]
    cluster = FakeCluster(nodes, **kwargs)
    return assess_nodes(requested, locked if locked is not None else requested, cluster.describe(), cluster.list_nodes(), [], [], T0)


def test_compute_node_becomes_a_target_under_its_slurm_name() -> None:
    assessment = _assess([compute_node(7)], [node_id(7)])
    assert assessment.proceed
    assert [(t.node_id, t.slurm_node, t.instance_group) for t in assessment.targets] == [(node_id(7), "ip-10-1-0-7", "workers")]


@pytest.mark.parametrize(("group", "reason"), [("controller", "controller"), ("login", "login")])
def test_controller_and_login_nodes_are_never_targets(group: str, reason: str) -> None:
    assessment = _assess([compute_node(1, group=group), compute_node(2)], [node_id(1), node_id(2)])
    assert [t.node_id for t in assessment.targets] == [node_id(2)]
    assert [(s.node_id, s.reason) for s in assessment.skipped] == [(node_id(1), reason)]


def test_older_cluster_without_node_types_uses_the_configured_controller_groups() -> None:
    # Given a cluster that reports no SlurmConfig.NodeType for its groups
    cluster = FakeCluster([compute_node(1, group="head"), compute_node(2)], groups={"head": None, "workers": None})
    # When the stack names "head" as a controller group
    assessment = assess_nodes(
        [node_id(1), node_id(2)], [node_id(1), node_id(2)], cluster.describe(), cluster.list_nodes(), ["head"], [], T0
    )
    # Then the head node is protected
    assert [s.reason for s in assessment.skipped] == ["controller"]
    assert [t.node_id for t in assessment.targets] == [node_id(2)]


def test_unknown_and_foreign_locked_nodes_are_skipped_with_reasons() -> None:
    assessment = _assess([compute_node(1), compute_node(2)], [node_id(1), node_id(2), node_id(9)], locked=[node_id(2), node_id(9)])
    reasons = {s.node_id: s.reason for s in assessment.skipped}
    assert reasons == {node_id(1): "locked_elsewhere", node_id(9): "not_found"}
    assert [t.node_id for t in assessment.targets] == [node_id(2)]


def test_nothing_actionable_means_do_not_proceed() -> None:
    assert not _assess([compute_node(1, group="controller")], [node_id(1)]).proceed


def test_a_cluster_orchestrated_otherwise_than_the_stack_was_deployed_for_is_never_acted_on() -> None:
    # Given an EKS-orchestrated cluster and a stack deployed for Slurm (and the other way round)
    cluster = FakeCluster([compute_node(1)], orchestrator="eks")
    # Then nothing is assessed: its nodes are named and cordoned another way
    with pytest.raises(UnsupportedOrchestrator, match="redeploy it with Orchestrator=Eks"):
        assess_nodes([node_id(1)], [node_id(1)], cluster.describe(), cluster.list_nodes(), [], [], T0)
    slurm = FakeCluster([compute_node(1)])
    with pytest.raises(UnsupportedOrchestrator, match="redeploy it with Orchestrator=Slurm"):
        assess_nodes([node_id(1)], [node_id(1)], slurm.describe(), slurm.list_nodes(), [], [], T0, orchestrator="eks")


def test_on_eks_every_group_is_compute_and_a_node_is_named_after_its_instance() -> None:
    # Given an EKS cluster (no Slurm controller group; HyperPod shows no hostname needed)
    nodes = [compute_node(1, group="gpu-a"), compute_node(2, group="gpu-b").model_copy(update={"private_dns_hostname": None})]
    cluster = FakeCluster(nodes, orchestrator="eks", groups={"gpu-a": None, "gpu-b": None})
    # When its nodes are assessed by an EKS stack
    ids = [node_id(1), node_id(2)]
    assessment = assess_nodes(ids, ids, cluster.describe(), cluster.list_nodes(), [], [], T0, "eks")
    # Then both are targets, under the Kubernetes names HyperPod gives them
    assert [(t.node_id, t.slurm_node) for t in assessment.targets] == [(node_id(n), f"hyperpod-{node_id(n)}") for n in (1, 2)]
    assert assessment.orchestrator == "eks" and assessment.compute_nodes == 2


def _targets(*numbers: int) -> list[NodeTarget]:
    return [NodeTarget(node_id=node_id(n), instance_group="workers", slurm_node=f"ip-10-1-0-{n}", status="Running") for n in numbers]


def test_replace_result_is_classified_per_node() -> None:
    # Given a response with one success and each kind of per-node failure
    outcome = BatchOutcome(
        successful=[node_id(1)],
        failed=[
            ReplaceFailure(node_id=node_id(2), error_code="InstanceIdInUse"),
            ReplaceFailure(node_id=node_id(3), error_code="InvalidInstanceStatus"),
            ReplaceFailure(node_id=node_id(4), error_code="InstanceIdNotFound"),
            ReplaceFailure(node_id=node_id(5), error_code="InternalServerError"),
        ],
        calls=1,
    )
    # When classified (node 6 is in neither list)
    replacement = classify_replacements(_targets(1, 2, 3, 4, 5, 6), outcome, set(), T0, 30, 2700, dry_run=False)
    # Then HyperPod-busy nodes are awaited, vanished nodes are watched by hostname, the rest failed
    assert {r.node_id: r.initiation for r in replacement.replaced} == {
        node_id(1): "initiated",
        node_id(2): "already_in_progress",
        node_id(3): "already_in_progress",
        node_id(4): "vanished",
    }
    assert {f.node_id: f.error_code for f in replacement.failed} == {node_id(5): "InternalServerError", node_id(6): "NotAccountedFor"}
    assert replacement.proceed
    assert replacement.watch.deadline == T0 + timedelta(seconds=2700)
    assert replacement.watch.next_wait_seconds == 30


def test_nothing_started_means_do_not_proceed() -> None:
    outcome = BatchOutcome(failed=[ReplaceFailure(node_id=node_id(1), error_code="InternalServerError")], calls=1)
    assert not classify_replacements(_targets(1), outcome, set(), T0, 30, 2700, dry_run=False).proceed


def test_nodes_started_by_an_earlier_attempt_count_as_initiated() -> None:
    replacement = classify_replacements(_targets(1), BatchOutcome(), {node_id(1)}, T0, 30, 2700, dry_run=False)
    assert [r.initiation for r in replacement.replaced] == ["initiated"]


def test_dry_run_replaces_nothing_and_waits_for_nothing() -> None:
    # (Wait For Rejoin answers a dry run's wait at once; its timeout is the least a task may have)
    replacement = classify_replacements(_targets(1), BatchOutcome(), set(), T0, 30, 2700, dry_run=True, expected_seconds=600)
    assert [r.initiation for r in replacement.replaced] == ["dry_run"] and replacement.watch.next_wait_seconds == 1
    assert replacement.watch.expected_at is None


@pytest.mark.parametrize(
    ("actions", "expected", "announced", "first_wait", "expected_at"),
    [
        ({}, 600, True, 600, T0 + timedelta(seconds=600)),  # announced: no check before the typical end
        ({}, 600, False, 300, T0 + timedelta(seconds=600)),  # not announced: halfway there, then thicker
        ({}, None, False, 30, None),  # no typical duration known: the usual backoff
        ({node_id(1): "reboot"}, 600, True, 30, None),  # a reboot is neither announced nor paced: the backoff
    ],
)
def test_a_replacement_is_first_checked_by_its_typical_duration(
    actions: dict[str, str], expected: int | None, announced: bool, first_wait: int, expected_at: Any
) -> None:
    replacement = classify_replacements(_targets(1), BatchOutcome(successful=[node_id(1)], calls=1), set(), T0, 30, 2700, dry_run=False,
                                        actions=actions, expected_seconds=expected, announced=announced)  # fmt: skip
    watch = replacement.watch
    assert watch.next_wait_seconds == first_wait and watch.expected_at == expected_at
    assert watch.announced == (announced and expected_at is not None)


@pytest.mark.parametrize(
    ("checks", "to_deadline", "expected_in", "announced", "wait"),
    [
        (0, 2700, 570, True, 570),  # announced, before the typical end: wait for it (an event wakes the wait earlier)
        (0, 2700, 570, False, 285),  # not announced: half the time left
        (4, 2700, 50, False, 30),  # near the end: never below the first wait
        (4, 2700, -10, True, 30),  # just overdue: soon again
        (4, 2700, -45, False, 45),  # overdue: as long as it is overdue...
        (4, 2700, -500, False, 60),  # ...up to the longest wait
        (3, 2700, None, False, 60),  # no typical duration: the usual backoff
        (0, 100, 570, True, 101),  # never past the deadline
    ],
)
def test_the_check_cadence_follows_the_typical_duration_but_never_passes_the_deadline(
    checks: int, to_deadline: float, expected_in: float | None, announced: bool, wait: int
) -> None:
    assert next_wait_seconds(checks, 30, 60, to_deadline, expected_in, announced=announced) == wait


@settings(max_examples=200, deadline=None)
@given(back_at=st.integers(1, 2000), expected=st.integers(60, 1800), first=st.integers(5, 120), announced=st.booleans())
def test_a_replacement_back_before_its_typical_end_is_seen_within_half_its_earliness(
    back_at: int, expected: int, first: int, announced: bool
) -> None:
    # Given a replacement back at back_at, a cluster without Cluster Events (announced: the event is lost)
    elapsed, checks = 0, 0
    while elapsed < back_at:
        elapsed += next_wait_seconds(checks, first, max(first, 60), 100_000, expected - elapsed, announced=announced)
        checks += 1
    lag = elapsed - back_at
    # Then, polled, it is seen within half of how early it came, or one first wait; past the typical
    # end within its lateness or the longest wait; announced but the event lost, at the typical end
    early = max(0, expected - back_at)
    if back_at < expected:
        bound = early + 1 if announced else max(early / 2 + 1, first)
    else:
        bound = max(first, min(max(first, 60), back_at - expected)) + 1
    assert lag <= bound, (lag, bound, elapsed, checks)


def test_batches_hold_at_most_25_nodes() -> None:
    assert [len(c) for c in chunked([str(i) for i in range(64)])] == [25, 25, 14]


def _watch(initiation: str = "initiated"):  # type: ignore[no-untyped-def]
    return classify_replacements(
        _targets(7),
        BatchOutcome(
            successful=[node_id(7)] if initiation == "initiated" else [],
            failed=[] if initiation == "initiated" else [ReplaceFailure(node_id=node_id(7), error_code="InstanceIdInUse")],
        ),
        set(),
        T0,
        30,
        2700,
        dry_run=False,
    ).watch


def _replacement_node(status: str) -> ClusterNode:
    node = compute_node(7, status=status)
    return node.model_copy(update={"node_id": node_id(0xBEEF)})


def test_replaced_node_is_back_when_a_new_instance_runs_under_its_hostname() -> None:
    # Given the old instance gone and a new instance id Running under the same hostname
    watch = observe_rejoin(_watch(), [_replacement_node("Running")], T0 + timedelta(minutes=10), 30, 60)
    # Then the node has rejoined and polling stops
    assert watch.done and watch.nodes[0].rejoined and watch.nodes[0].replacement_node_id == node_id(0xBEEF)
    assert watch.next_wait_seconds == 0


def test_pending_replacement_is_not_back_yet() -> None:
    watch = observe_rejoin(_watch(), [_replacement_node("Pending")], T0 + timedelta(minutes=5), 30, 60)
    assert not watch.done and watch.nodes[0].status == "Pending" and watch.checks == 1


def test_node_hyperpod_was_repairing_counts_only_once_slurm_shows_it_booted() -> None:
    from hyperpod_recovery.models.commands import BootTimesResult, CommandReply, NodeBoot

    # Given HyperPod was already repairing the node (InstanceIdInUse), and it went down and is Running again under the same id
    watch = observe_rejoin(_watch("already_in_progress"), [compute_node(7, status="Pending")], T0 + timedelta(seconds=90), 30, 60)
    watch = observe_rejoin(watch, [compute_node(7, status="Running")], T0 + timedelta(seconds=150), 30, 60)
    # Then HyperPod's word is not enough: slurmctld is asked for the node's boot time first
    assert not watch.done and watch.boot_check == ["ip-10-1-0-7"]
    # When slurmctld shows a boot after the repair began
    booted = T0 + timedelta(seconds=100)
    reading = CommandReply[BootTimesResult](
        requested_at=T0, completed_at=T0, result=BootTimesResult(nodes=[NodeBoot(name="ip-10-1-0-7", boot_time=booted, state="IDLE+DRAIN")])
    )
    watch = observe_rejoin(
        watch.model_copy(update={"boot_reading": reading}), [compute_node(7, status="Running")], T0 + timedelta(seconds=152), 30, 60
    )
    # Then it has rejoined as itself, with the boot time as its evidence
    assert watch.done and watch.nodes[0].matched_by == "instance_id" and watch.nodes[0].booted_at == booted


def test_deadline_passed_with_a_node_missing_raises_naming_the_node() -> None:
    with pytest.raises(RejoinDeadlineExceeded, match="ip-10-1-0-7"):
        observe_rejoin(_watch(), [_replacement_node("Pending")], T0 + timedelta(seconds=2700), 30, 60)


def test_backoff_doubles_up_to_the_maximum_and_never_overshoots_the_deadline() -> None:
    assert [next_wait_seconds(n, 30, 120, 10_000) for n in range(1, 6)] == [60, 120, 120, 120, 120]
    assert next_wait_seconds(3, 30, 120, seconds_to_deadline=45) == 46


# --- the escalation ladder: reboot first when the fault asks for it, replace when that does not help ---
def _trigger(node: str, reason: str) -> Any:
    from hyperpod_recovery.models.requests import Trigger

    return Trigger(source="hyperpod_node_health", node_ids=[node], reason=reason, detected_at=T0, recommends=recommended_repair(reason))


@pytest.mark.parametrize(
    ("reasons", "repair"),
    [
        (["HMA has detected fault type NvidiaErrorReboot on this node. Recommendation: Please Reboot the Faulty Node."], "reboot"),
        (["HMA has detected fault type NvidiaErrorTerminate on this node. Recommendation: Please Replace the Faulty Node."], "replace"),
        (["CloudWatch alarm hyperpod-recovery:llm-train:reboot-xid-i-0391f86fa0fe0d465: Threshold Crossed"], "reboot"),
        (["NvidiaErrorReboot ...", "NvidiaErrorTerminate ..."], "replace"),  # the stronger repair wins
        (["quarterly recovery drill"], "replace"),
    ],
    ids=["hma-reboot", "hma-replace", "alarm-opts-in-by-name", "mixed-signals", "manual"],
)
def test_the_first_repair_follows_what_the_fault_asks_for(reasons: list[str], repair: str) -> None:
    from hyperpod_recovery.domain.nodes.ladder import first_repair

    assert first_repair(node_id(1), [_trigger(node_id(1), r) for r in reasons]) == repair


def test_a_reboot_that_does_not_bring_the_node_back_is_replaced_once() -> None:
    from hyperpod_recovery.models.node_recovery import CheckRejoinInput, RejoinWatch, WatchedNode
    from hyperpod_recovery.steps.check_rejoin import check_rejoin

    # Given node 1 rebooted at T0 and still in Failure at the reboot deadline
    cluster = FakeCluster([compute_node(1, status="Failure"), compute_node(2)])
    ledger = FakeLedger()
    watch = RejoinWatch(
        at=T0,
        started_at=T0,
        deadline=T0 + timedelta(minutes=45),
        reboot_deadline=T0 + timedelta(minutes=15),
        nodes=[WatchedNode(node_id=node_id(1), slurm_node="ip-10-1-0-1", initiation="initiated", action="reboot")],
        next_wait_seconds=30,
    )
    request = _request(1)
    before = check_rejoin(
        CheckRejoinInput(execution_name="inc-1", request=request, rejoin=watch),
        cluster=cluster,
        ledger=ledger,
        poll_seconds=30,
        max_poll_seconds=60,
        now=T0 + timedelta(minutes=10),
    )
    assert before.nodes[0].action == "reboot" and cluster.replace_calls == []
    # When Check Rejoin runs after the reboot deadline, it first asks slurmctld (nothing replaced yet)
    asked = check_rejoin(
        CheckRejoinInput(execution_name="inc-1", request=request, rejoin=watch),
        cluster=cluster,
        ledger=ledger,
        poll_seconds=30,
        max_poll_seconds=60,
        now=T0 + timedelta(minutes=16),
    )
    assert asked.boot_check == ["ip-10-1-0-1"] and cluster.replace_calls == []
    # And with slurmctld's answer (no boot since the reboot), twice: a retried Lambda
    from hyperpod_recovery.models.commands import BootTimesResult, CommandReply, NodeBoot

    stale_boot = NodeBoot(name="ip-10-1-0-1", boot_time=T0 - timedelta(days=3), state="DOWN+DRAIN+NOT_RESPONDING")
    reading = CommandReply[BootTimesResult](requested_at=T0, completed_at=T0, result=BootTimesResult(nodes=[stale_boot]))
    step = CheckRejoinInput(execution_name="inc-1", request=request, rejoin=asked.model_copy(update={"boot_reading": reading}))
    after = check_rejoin(step, cluster=cluster, ledger=ledger, poll_seconds=30, max_poll_seconds=60, now=T0 + timedelta(minutes=16))
    check_rejoin(step, cluster=cluster, ledger=ledger, poll_seconds=30, max_poll_seconds=60, now=T0 + timedelta(minutes=16))
    # Then it is replaced, once, and the watch now waits for the replacement
    assert cluster.replace_calls == [[node_id(1)]]
    assert after.nodes[0].action == "replace" and after.nodes[0].escalated_to_replace_at == T0 + timedelta(minutes=16) and not after.done


# --- node roles: a node of unknown role is never replaceable --------------------------------------
def _assess_groups(groups: dict[str, str | None], controller_groups: list[str], login_groups: list[str] = []):  # type: ignore[no-untyped-def]  # noqa: B006
    nodes = [compute_node(1, group="head"), compute_node(2, group="entry"), compute_node(3)]
    cluster = FakeCluster(nodes, groups=groups)
    ids = [n.node_id for n in nodes]
    return assess_nodes(ids, ids, cluster.describe(), cluster.list_nodes(), controller_groups, login_groups, T0)


def test_an_older_cluster_without_node_types_and_without_controller_groups_is_not_touched() -> None:
    # Given a cluster that does not report SlurmConfig.NodeType, and a stack left at ControllerGroups=""
    # When its nodes are assessed
    with pytest.raises(NodeRoleUnknown, match="ControllerGroups is empty"):
        _assess_groups({"head": None, "entry": None, "workers": None}, [])
    # Then nothing is assessed as compute: no drain, no replace can follow


@pytest.mark.parametrize(
    ("groups", "controller_groups", "login_groups", "problem"),
    [
        # DescribeCluster says head is the controller, the stack says it is compute (another group listed)
        ({"head": "Controller", "entry": "Login", "workers": "Compute"}, ["entry"], [], "head.*Controller in DescribeCluster"),
        # the stack names a group the cluster does not have
        ({"head": None, "entry": None, "workers": None}, ["controller"], [], "no such group"),
        # some groups report, some do not, and nothing names the controller
        ({"head": None, "entry": "Login", "workers": "Compute"}, [], [], "ControllerGroups is empty"),
        # every group reports, none is the controller
        ({"head": "Compute", "entry": "Login", "workers": "Compute"}, [], [], "no instance group is the Slurm controller"),
    ],
)
def test_node_roles_that_disagree_or_cannot_be_decided_escalate(
    groups: dict[str, str | None], controller_groups: list[str], login_groups: list[str], problem: str
) -> None:
    with pytest.raises(NodeRoleUnknown, match=problem):
        _assess_groups(groups, controller_groups, login_groups)


def test_reported_and_configured_roles_that_agree_are_used() -> None:
    assessment = _assess_groups({"head": "Controller", "entry": "Login", "workers": "Compute"}, ["head"], ["entry"])
    assert [s.reason for s in assessment.skipped] == ["controller", "login"] and [t.node_id for t in assessment.targets] == [node_id(3)]


def test_a_node_of_a_group_describe_cluster_does_not_list_is_never_a_target() -> None:
    nodes = [compute_node(1), compute_node(2, group="mystery")]
    cluster = FakeCluster(nodes)
    assessment = assess_nodes([node_id(1), node_id(2)], [node_id(1), node_id(2)], cluster.describe(), nodes, [], [], T0)
    assert [t.node_id for t in assessment.targets] == [node_id(1)]
    assert [(s.node_id, s.reason) for s in assessment.skipped] == [(node_id(2), "unknown_role")]


def test_an_eks_stack_pointed_at_another_eks_cluster_touches_nothing() -> None:
    # Given an EKS-orchestrated cluster whose nodes are in EKS cluster "llm-eks", and a stack whose EksClusterName is "staging"
    cluster = FakeCluster([compute_node(1)], orchestrator="eks", groups={"workers": None})
    cluster.info = cluster.info.model_copy(update={"eks_cluster_arn": "arn:aws:eks:us-west-2:123456789012:cluster/llm-eks"})
    # Then nothing is assessed: every node would be unknown there, and nothing cordoned while replaced
    with pytest.raises(UnsupportedOrchestrator, match="EksClusterName=llm-eks"):
        assess_nodes([node_id(1)], [node_id(1)], cluster.describe(), cluster.list_nodes(), [], [], T0, "eks", "staging")
    assert assess_nodes([node_id(1)], [node_id(1)], cluster.describe(), cluster.list_nodes(), [], [], T0, "eks", "llm-eks").proceed


def _eks_watch(*logical_ids: str):  # type: ignore[no-untyped-def]
    targets = [
        NodeTarget(node_id=node_id(n), instance_group="workers", slurm_node=f"hyperpod-{node_id(n)}", status="Running", logical_id=logical)
        for n, logical in enumerate(logical_ids, start=1)
    ]
    outcome = BatchOutcome(successful=[t.node_id for t in targets], calls=1)
    return classify_replacements(targets, outcome, set(), T0, 30, 2700, dry_run=False, orchestrator="eks").watch


def _replacement(n: int, logical: str, status: str = "Running") -> ClusterNode:
    return ClusterNode(
        node_id=node_id(100 + n), instance_group="workers", status=status, logical_id=logical, launch_time=T0 + timedelta(seconds=60)
    )


def test_on_eks_a_replacement_is_back_only_when_its_kubernetes_node_is_ready_and_settled() -> None:
    # Given an EKS watch of one replaced node, and HyperPod showing its replacement Running
    watch = _eks_watch("lg-1")
    seen = observe_rejoin(watch, [_replacement(1, "lg-1")], T0 + timedelta(minutes=10), 30, 60)
    new_name = f"hyperpod-{node_id(101)}"
    # Then it is not back yet: the orchestrator is asked about its new Kubernetes node first
    assert not seen.nodes[0].rejoined and seen.boot_check == [new_name]
    assert (seen.nodes[0].replacement_slurm_node, seen.nodes[0].renamed_in_service, seen.nodes[0].service_name) == (
        new_name,
        True,
        new_name,
    )
    # When the reading says it is not Ready (or HyperPod still checks it), it waits; when Ready and settled, it is back
    for state, back in (("NotReady+NOT_RESPONDING", False), ("Ready+UNKNOWN", False), ("Ready", True)):
        reading = CommandReply[BootTimesResult](
            completed_at=T0, requested_at=T0, result=BootTimesResult(nodes=[NodeBoot(name=new_name, state=state)])
        )
        after = observe_rejoin(
            seen.model_copy(update={"boot_reading": reading}), [_replacement(1, "lg-1")], T0 + timedelta(minutes=11), 30, 60
        )
        assert after.nodes[0].rejoined is back and (after.nodes[0].to_resume is back)


def test_on_slurm_nothing_changed_a_replacement_under_its_hostname_is_back_when_running() -> None:
    targets = [NodeTarget(node_id=node_id(1), instance_group="workers", slurm_node="ip-10-1-0-1", status="Running", logical_id="lg-1")]
    watch = classify_replacements(targets, BatchOutcome(successful=[node_id(1)], calls=1), set(), T0, 30, 2700, dry_run=False).watch
    replacement = _replacement(1, "lg-1").model_copy(update={"private_dns_hostname": "ip-10-1-0-1.us-west-2.compute.internal"})
    seen = observe_rejoin(watch, [replacement], T0 + timedelta(minutes=10), 30, 60)
    assert seen.nodes[0].rejoined and seen.boot_check == [] and not seen.nodes[0].renamed_in_service
    assert "orchestrator" not in seen.model_dump(mode="json")  # the Slurm state is as it was
