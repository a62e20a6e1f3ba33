"""A repair that fails the health gate is replaced once more (Replace Unhealthy Nodes), never taken
for its own successor, and a second failure, or a second replacement that cannot start, leaves the
node drained for a human (domain/nodes/health_gate.py, steps/replace_unhealthy_nodes.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.nodes.health_gate import CHECK_DID_NOT_RUN, NOT_ASKED
from hyperpod_recovery.domain.nodes.rejoin import observe_rejoin
from hyperpod_recovery.domain.nodes.replace import classify_replacements
from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT, decide_completed
from hyperpod_recovery.domain.record.reconcile import EndedExecution
from hyperpod_recovery.errors import RejoinDeadlineExceeded
from hyperpod_recovery.models.cluster import BatchOutcome, ClusterNode
from hyperpod_recovery.models.commands import CommandReply, ResumeResult
from hyperpod_recovery.models.node_recovery import (
    FirstGate,
    GateFailure,
    NodeTarget,
    RejoinWatch,
    Replacement,
    ReplaceUnhealthyNodesInput,
    ResumeNodesInput,
    WorkflowState,
)
from hyperpod_recovery.models.records import BreakerState
from hyperpod_recovery.steps.replace_unhealthy_nodes import replace_unhealthy_nodes
from hyperpod_recovery.steps.resume_nodes import resume_nodes
from tests.fakes import T0, FakeCluster, FakeLedger, FakeOrchestrator, compute_node, node_id
from tests.unit.test_steps import _request

GPU_GONE = "exit 1: Unable to determine the device handle for GPU0000:9A:00.0: Unknown Error (GPU has fallen off the bus)"
FIRST = node_id(0xB1)  # the first replacement of node 7, which fails the gate
SECOND = node_id(0xB2)  # the replacement of the replacement


def _instance(n: int, instance: str, status: str = "Running", launched: int = 60) -> ClusterNode:
    """A new instance under node n's hostname, launched ``launched`` seconds after T0."""
    return compute_node(n, status=status).model_copy(update={"node_id": instance, "launch_time": T0 + timedelta(seconds=launched)})


def _back(*numbers: int, expected: int | None = 600) -> RejoinWatch:
    """The watch once nodes ``numbers`` were replaced and their replacements are back (node 7's is FIRST)."""
    targets = [NodeTarget(node_id=node_id(n), instance_group="workers", slurm_node=f"ip-10-1-0-{n}", status="Running") for n in numbers]
    replacement = classify_replacements(
        targets, BatchOutcome(successful=[node_id(n) for n in numbers], calls=1), set(), T0, 30, 2700, dry_run=False,
        expected_seconds=expected,
    )  # fmt: skip
    nodes = [_instance(n, FIRST if n == 7 else node_id(0xC0 + n)) for n in numbers]
    watch = observe_rejoin(replacement.watch, nodes, T0 + timedelta(seconds=600), 30, 60)
    assert watch.done
    return watch


def _gate(unhealthy: list[str], resumed: list[str], at: int = 610, verdict: str = "failed") -> CommandReply[ResumeResult]:
    result = ResumeResult(resumed=resumed, unhealthy=[{"node": n, "detail": GPU_GONE, "verdict": verdict} for n in unhealthy])  # type: ignore[misc]
    return CommandReply[ResumeResult](
        command_id="inc-1:resume", type="resume_nodes", requested_at=T0 + timedelta(seconds=at - 4),
        completed_at=T0 + timedelta(seconds=at), result=result,
    )  # fmt: skip


def _replace_again(
    watch: RejoinWatch, gate: CommandReply[ResumeResult], cluster: FakeCluster, ledger: FakeLedger, **kw: Any
) -> RejoinWatch:
    step = ReplaceUnhealthyNodesInput(execution_name="inc-1", request=_request(7, 8, **kw), rejoin=watch, resume=gate)
    return replace_unhealthy_nodes(
        step, cluster=cluster, ledger=ledger, first_check_after_seconds=30, deadline_seconds=2700, expected_replacement_seconds=600,
        now=T0 + timedelta(seconds=611),
    )  # fmt: skip


def test_given_a_replacement_that_failed_the_gate_then_it_is_replaced_once_more_and_watched_for_its_successor() -> None:
    # Given nodes 7 and 8 back, 7's replacement (FIRST) failing the health check and 8's passing
    watch = _back(7, 8)
    cluster, ledger = FakeCluster([_instance(7, FIRST), _instance(8, node_id(0xC8))]), FakeLedger()
    # When Replace Unhealthy Nodes runs
    after = _replace_again(watch, _gate(["ip-10-1-0-7"], ["ip-10-1-0-8"]), cluster, ledger)
    # Then the instance that failed is replaced, once, and marked for a retried Lambda
    assert cluster.replace_calls == [[FIRST]] and FIRST in ledger.replacements_initiated("inc-1")
    seven, eight = after.nodes
    # And node 7 waits for a new replacement, with a deadline of its own; node 8 is in service
    assert seven.replaced_again and not seven.rejoined and seven.gate_failure and seven.gate_failure.instance == FIRST
    assert eight.resumed_at == T0 + timedelta(seconds=610) and not eight.to_resume
    assert not after.done and after.deadline == T0 + timedelta(seconds=611 + 2700)
    assert after.first_gate is not None and after.first_gate.said == {"ip-10-1-0-7": GPU_GONE}
    # And the next check is paced by the replacement's typical duration, as the first was
    assert after.expected_at == T0 + timedelta(seconds=611 + 600) and after.next_wait_seconds == 300


def test_given_the_failed_instance_still_running_under_the_hostname_then_it_is_not_taken_for_its_successor() -> None:
    # Given node 7 replaced again, and HyperPod still showing FIRST Running under its hostname
    watch = _replace_again(_back(7), _gate(["ip-10-1-0-7"], []), FakeCluster([_instance(7, FIRST)]), FakeLedger())
    still = [_instance(7, FIRST)]
    # When Check Rejoin looks (by hostname, by logical id, by instance group alike)
    seen = observe_rejoin(watch, still, T0 + timedelta(seconds=700), 30, 60, target_counts=lambda: {"workers": 1})
    # Then node 7 is not back
    assert not seen.done and not seen.nodes[0].rejoined
    # And once the successor runs under the hostname, it is back as that successor
    successor = [_instance(7, FIRST, "ShuttingDown"), _instance(7, SECOND, launched=900)]
    seen = observe_rejoin(seen, successor, T0 + timedelta(seconds=1300), 30, 60)
    assert seen.done and seen.nodes[0].replacement_node_id == SECOND and seen.nodes[0].to_resume


@settings(max_examples=100, deadline=None)
@given(status=st.sampled_from(["Running", "Pending", "ShuttingDown", "Failure", "SystemUpdating"]), by_group=st.booleans())
def test_whatever_the_failed_instance_shows_it_is_never_its_own_successor(status: str, by_group: bool) -> None:
    watch = _replace_again(_back(7), _gate(["ip-10-1-0-7"], []), FakeCluster([_instance(7, FIRST)]), FakeLedger())
    counts = (lambda: {"workers": 1}) if by_group else None
    seen = observe_rejoin(watch, [_instance(7, FIRST, status)], T0 + timedelta(seconds=700), 30, 60, target_counts=counts)
    assert not seen.nodes[0].rejoined and seen.nodes[0].replacement_node_id != FIRST


def test_given_a_retried_lambda_then_nothing_is_replaced_twice() -> None:
    watch, gate = _back(7), _gate(["ip-10-1-0-7"], [])
    cluster, ledger = FakeCluster([_instance(7, FIRST)]), FakeLedger()
    first = _replace_again(watch, gate, cluster, ledger)
    again = _replace_again(watch, gate, cluster, ledger)
    assert cluster.replace_calls == [[FIRST]] and first.nodes == again.nodes


@pytest.mark.parametrize(
    ("breaker_open", "code", "replaced", "why"),
    [
        (True, None, False, "the circuit breaker is open: storm"),
        (False, "InternalServerError", False, "BatchReplaceClusterNodes failed for it: InternalServerError"),
        (False, "InstanceIdInUse", True, ""),  # HyperPod already replaces it: watched
        (False, "InstanceIdNotFound", True, ""),  # gone already: its successor is watched for
    ],
)
def test_given_a_second_replacement_that_cannot_start_then_the_node_stays_drained_and_the_incident_escalates(
    breaker_open: bool, code: str | None, replaced: bool, why: str
) -> None:
    cluster, ledger = FakeCluster([_instance(7, FIRST)]), FakeLedger()
    if breaker_open:
        ledger.save_breaker("llm-train", BreakerState(state="open", reason="storm"))
    if code:
        cluster.replace_results[FIRST] = code
    after = _replace_again(_back(7), _gate(["ip-10-1-0-7"], []), cluster, ledger)
    assert after.nodes[0].replaced_again is replaced and after.done is not replaced
    if breaker_open:
        assert cluster.replace_calls == []
    if not replaced:
        # Then Record Outcome escalates it, saying why, and nothing is resumed for it
        state = WorkflowState(request=_request(7), replacement=_replacement(after), resume=_gate(["ip-10-1-0-7"], []))
        outcome, error, cause = decide_completed(state)
        assert (outcome, error) == ("escalated", "ReplacementUnhealthy") and cause and why in cause and "left drained" in cause
        assert not after.nodes[0].to_resume
        # And the whole record builds (timeline, phases): no second rejoin to tell
        record_at = T0 + timedelta(seconds=612)
        events = [e.event for e in NODE_INCIDENT.timeline(state, record_at)]
        assert events.count("node rejoined") == 1 and "not replaced again" in events
        assert [p.name for p in NODE_INCIDENT.phases(state, record_at)].count("wait_for_rejoin") == 1


def _replacement(watch: RejoinWatch) -> Replacement:
    return Replacement(at=T0, calls=1, proceed=True, watch=watch)


def test_given_the_second_pass_then_resume_nodes_asks_only_for_the_nodes_replaced_again_under_a_new_command() -> None:
    # Given node 7 replaced again and back, node 8 in service since the first gate
    cluster = FakeCluster([_instance(7, FIRST), _instance(8, node_id(0xC8))])
    watch = _replace_again(_back(7, 8), _gate(["ip-10-1-0-7"], ["ip-10-1-0-8"]), cluster, FakeLedger())
    back = observe_rejoin(watch, [_instance(7, SECOND, launched=900), _instance(8, node_id(0xC8))], T0 + timedelta(seconds=1300), 30, 60)
    orchestrator = FakeOrchestrator()
    step = ResumeNodesInput(execution_name="inc-1", task_token="t", request=_request(7, 8), rejoin=back)
    resume_nodes(step, orchestrator=orchestrator, now=T0)
    (command,) = orchestrator.dispatched
    # Then only node 7 is asked about, and not under the first command's id (the agent would replay its answer)
    assert command.command.nodes == ["ip-10-1-0-7"] and command.command_id == "inc-1:resume:again"


def test_given_both_gates_failed_then_the_record_says_so_once_with_both_instances() -> None:
    watch = _replace_again(_back(7), _gate(["ip-10-1-0-7"], []), FakeCluster([_instance(7, FIRST)]), FakeLedger())
    back = observe_rejoin(watch, [_instance(7, SECOND, launched=900)], T0 + timedelta(seconds=1300), 30, 60)
    second = _gate(["ip-10-1-0-7"], [], at=1310).model_copy(update={"command_id": "inc-1:resume:again"})
    state = WorkflowState(request=_request(7), replacement=_replacement(back), resume=second)
    outcome, error, cause = decide_completed(state)
    assert (outcome, error) == ("escalated", "ReplacementUnhealthy")
    assert cause is not None and cause.count("ip-10-1-0-7") == 1 and FIRST in cause and "second replacement failed" in cause
    # And the timeline tells both gates, the second replacement between them
    events = [e.event for e in NODE_INCIDENT.timeline(state, T0 + timedelta(seconds=1311))]
    again = events.index("replaced again")
    assert events.count("health check failed") == 2 and "nodes resumed" in events[again:]
    # And the phases wait, resume, replace, wait, resume in order
    phases = [p.name for p in NODE_INCIDENT.phases(state, T0 + timedelta(seconds=1311))]
    assert phases[phases.index("wait_for_rejoin") :][:5] == ["wait_for_rejoin", "resume", "replace", "wait_for_rejoin", "resume"]


def test_given_an_execution_stopped_while_its_node_is_replaced_again_then_its_nodes_are_not_back() -> None:
    # Given an execution stopped in the wait after Replace Unhealthy Nodes
    def ended(*states: str) -> EndedExecution:
        return EndedExecution(
            name="inc-1", workflow="node", status="ABORTED", error=None, cause=None, started_at=T0, stopped_at=T0, request=None,
            states_entered=tuple((name, T0) for name in states),
        )  # fmt: skip

    first_pass = ("Check Rejoined", "Resume Nodes", "Check Health Gate", "Replace Unhealthy Nodes", "Wait For Rejoin")
    # Then Reconcile Execution keeps its nodes' places under the cap: they are out of service again
    assert not ended(*first_pass).saw_nodes_back
    # And once the second pass resumed them, they are back
    assert ended(*first_pass, "Check Rejoined", "Resume Nodes", "Resubmit Jobs").saw_nodes_back


def test_given_a_check_that_could_not_run_then_the_node_is_not_replaced_again_but_left_drained() -> None:
    # Given node 7's check never ran (slurmctld away, srun's own error): nothing is known of the instance
    cluster = FakeCluster([_instance(7, FIRST)])
    after = _replace_again(_back(7), _gate(["ip-10-1-0-7"], [], verdict="could_not_run"), cluster, FakeLedger())
    # Then nothing is replaced, and the incident escalates saying the check could not run
    assert cluster.replace_calls == [] and after.done and after.nodes[0].left_unhealthy
    _, error, cause = decide_completed(WorkflowState(replacement=_replacement(after), resume=_gate(["ip-10-1-0-7"], [])))
    assert error == "ReplacementUnhealthy" and cause and "could not be checked" in cause and "nothing is known" in cause


def test_given_every_checked_replacement_failing_then_none_is_replaced_again() -> None:
    # Given nodes 7 and 8 both failing the check: more likely the check or the capacity
    cluster = FakeCluster([_instance(7, FIRST), _instance(8, node_id(0xC8))])
    after = _replace_again(_back(7, 8), _gate(["ip-10-1-0-7", "ip-10-1-0-8"], []), cluster, FakeLedger())
    # Then nothing is replaced again: the storm would double for nothing
    assert cluster.replace_calls == [] and after.done and all(n.left_unhealthy for n in after.nodes)
    assert after.first_gate is not None and "every one of the 2 replacements" in after.first_gate.refused


def test_given_a_retry_after_the_breaker_opened_then_a_replacement_already_started_is_still_watched() -> None:
    # Given the first attempt replaced FIRST (its answer lost), and the breaker opened before the retry
    watch, gate = _back(7), _gate(["ip-10-1-0-7"], [])
    cluster, ledger = FakeCluster([_instance(7, FIRST)]), FakeLedger()
    _replace_again(watch, gate, cluster, ledger)
    ledger.save_breaker("llm-train", BreakerState(state="open", reason="storm"))
    retried = _replace_again(watch, gate, cluster, ledger)
    # Then the node is watched for the replacement under way, not reported as never replaced
    assert cluster.replace_calls == [[FIRST]] and retried.nodes[0].replaced_again and not retried.done


def test_given_the_second_replacement_late_then_the_deadline_never_offers_the_failed_instance() -> None:
    watch = _replace_again(_back(7), _gate(["ip-10-1-0-7"], []), FakeCluster([_instance(7, FIRST)]), FakeLedger())
    # When the deadline comes with FIRST still listed Running and no successor
    with pytest.raises(RejoinDeadlineExceeded) as raised:
        observe_rejoin(watch, [_instance(7, FIRST)], watch.deadline, 30, 60)
    # Then the cause names it as the failed first replacement, and never as a candidate seen
    assert f"its first replacement {FIRST} failed the health check" in str(raised.value)
    assert "Seen: new in group workers since" in str(raised.value) and f"{FIRST} (" not in str(raised.value)


def test_the_second_pass_counts_its_own_checks_in_the_timeline() -> None:
    watch = _replace_again(_back(7), _gate(["ip-10-1-0-7"], []), FakeCluster([_instance(7, FIRST)]), FakeLedger())
    back = observe_rejoin(watch, [_instance(7, SECOND, launched=900)], T0 + timedelta(seconds=1300), 30, 60)
    state = WorkflowState(request=_request(7), replacement=_replacement(back), resume=_gate([], ["ip-10-1-0-7"], at=1310))
    timeline = NODE_INCIDENT.timeline(state, T0 + timedelta(seconds=1311))
    (rejoined,) = [e for e in timeline if e.event == "node rejoined" and SECOND in e.detail]
    assert rejoined.detail.endswith("after 1 check(s)")


@settings(max_examples=300, deadline=None)
@given(
    shapes=st.lists(st.tuples(st.booleans(), st.sampled_from([None, "again", "left", "not_run"]), st.booleans()), min_size=1, max_size=4),
    first_gate=st.booleans(),
    done=st.booleans(),
    resume=st.sampled_from([None, "first", "second"]),
    initiation=st.sampled_from(["initiated", "already_in_progress", "vanished", "dry_run"]),
)
def test_whatever_a_run_with_a_health_gate_left_in_its_state_its_record_builds(
    shapes: list[tuple[bool, str | None, bool]], first_gate: bool, done: bool, resume: str | None, initiation: str
) -> None:
    # Given any mix of watched nodes (rejoined or not; failed the gate and replaced again, left, or
    # its check not run; in service), with or without the first gate's record, at any step's end
    watch = _back(*range(7, 7 + len(shapes)))
    nodes = []
    for node, (rejoined, failure, in_service) in zip(watch.nodes, shapes, strict=True):
        update: dict[str, Any] = {"rejoined": rejoined, "resumed_at": T0 if in_service else None, "initiation": initiation}
        if failure is not None:
            error = {"again": "", "left": NOT_ASKED, "not_run": CHECK_DID_NOT_RUN}[failure]
            update["gate_failure"] = GateFailure(instance=FIRST, replaced_again=failure == "again", error=error)
        nodes.append(node.model_copy(update=update))
    gate = FirstGate(requested_at=T0 + timedelta(seconds=606), completed_at=T0 + timedelta(seconds=610),
                     replaced_at=T0 + timedelta(seconds=611), refused="", checks=3) if first_gate else None  # fmt: skip
    watch = watch.model_copy(update={"nodes": nodes, "first_gate": gate, "done": done, "checks": 5})
    answer = {None: None, "first": _gate(["ip-10-1-0-7"], []), "second": _gate(["ip-10-1-0-7"], [], at=1310)}[resume]
    state = WorkflowState(request=_request(7), replacement=_replacement(watch), resume=answer)
    # Then the record's every part builds, whatever the outcome
    at = T0 + timedelta(seconds=1400)
    outcome, _, _ = decide_completed(state)
    assert outcome in ("recovered", "escalated")
    NODE_INCIDENT.timeline(state, at)
    NODE_INCIDENT.phases(state, at)
    NODE_INCIDENT.summarize(state, outcome, None)
