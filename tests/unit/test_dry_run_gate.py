"""The one dry-run gate (adapters/dry_run.py): a step of a dry run gets its cluster, ledger and
orchestrator behind the gate from the runtime, and nothing it would change is changed.

Tested through the handlers, as Lambda runs them: the steps no longer check for a dry run, so a
step called without the runtime would act. Every mutating step is a row; each row also runs live,
so a gate that held back nothing (or everything) fails here."""

from __future__ import annotations

import copy
import inspect
from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery import ports
from hyperpod_recovery.adapters.dry_run import DryRunCluster, DryRunLedger, DryRunOrchestrator
from hyperpod_recovery.clock import install_clock
from hyperpod_recovery.models.commands import MUTATING_COMMANDS, JobRef
from hyperpod_recovery.models.hangs import HangVerdict, RecordedVerdict
from hyperpod_recovery.models.node_recovery import Assessment, NodeTarget, RejoinWatch, ResumePlan, WatchedNode
from hyperpod_recovery.models.records import BreakerState, RecoveryLogEntry, RejoinWait
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest, Trigger
from sandbox.aws import load_handler
from tests.fakes import CLUSTER, T0, FakeCluster, FakeOrchestrator, compute_node, fake_dependencies, node_id


def _request(dry_run: bool) -> dict[str, Any]:
    trigger = Trigger(source="hyperpod_node_health", node_ids=[node_id(1)], reason="fault", detected_at=T0)
    request = RecoveryRequest(
        cluster=CLUSTER, node_ids=[node_id(1)], dry_run=dry_run, detected_at=T0, incident_id="inc-1", received_at=T0, triggers=[trigger]
    )
    return request.model_dump(mode="json")


def _assessment() -> dict[str, Any]:
    target = NodeTarget(node_id=node_id(1), instance_group="workers", slurm_node="ip-10-1-0-1", status="Running")
    return Assessment(at=T0, orchestrator="slurm", node_recovery="None", targets=[target], proceed=True, compute_nodes=100).model_dump(
        mode="json"
    )


def _rejoin(dry_run: bool) -> dict[str, Any]:
    node = WatchedNode(node_id=node_id(1), slurm_node="ip-10-1-0-1", instance_group="workers", initiation="initiated", rejoined=True)
    watch = RejoinWatch(
        at=T0, started_at=T0, deadline=T0 + timedelta(hours=1), nodes=[node], done=True, dry_run=dry_run, next_wait_seconds=0
    )
    return watch.model_dump(mode="json")


def _plan() -> dict[str, Any]:
    plan = ResumePlan(job=JobRef(job_id="1001", name="llama"), checkpoint={"uri": "s3://ckpt/llama/step-000003000/", "step": 3000})  # type: ignore[arg-type]
    return plan.model_dump(mode="json")


@pytest.fixture(autouse=True)
def _clock_at_t0() -> Any:
    """The handlers read the process clock: the ledger's locks and windows are at T0."""
    install_clock(lambda: T0)
    yield
    install_clock(None)


# (function folder, the step's input for a dry run or a live run)
MUTATING_STEPS = {
    "lock_nodes": lambda dry: {"execution_name": "inc-1", "request": _request(dry)},
    "apply_safety_policy": lambda dry: {"execution_name": "inc-1", "request": _request(dry), "assessment": _assessment()},
    "replace_nodes": lambda dry: {"execution_name": "inc-1", "request": _request(dry), "assessment": _assessment()},
    "cordon_nodes": lambda dry: {"execution_name": "inc-1", "task_token": "tok", "request": _request(dry), "assessment": _assessment()},
    "resume_nodes": lambda dry: {"execution_name": "inc-1", "task_token": "tok", "request": _request(dry), "rejoin": _rejoin(dry)},
    "resubmit_job": lambda dry: {"execution_name": "inc-1", "task_token": "tok", "request": _request(dry), "plan": _plan()},
}


def _what_changed(deps: Any) -> dict[str, Any]:
    ledger, cluster, orchestrator = deps.ledger, deps.cluster, deps.orchestrator
    return {
        # (the drill's own record, jobs and notification are written: what a drill is for)
        "ledger": copy.deepcopy({k: v for k, v in vars(ledger).items() if k not in ("incidents", "jobs", "effects")}),
        "batch calls": (list(cluster.replace_calls), list(getattr(cluster, "reboot_calls", []))),
        # (a cordon without its drain only reads: a dry run's, sent for the jobs it lists)
        "commands": [
            e.command.type
            for e in orchestrator.dispatched
            if e.command.type in MUTATING_COMMANDS and getattr(e.command, "drain", True) is not False
        ],
    }


@pytest.mark.parametrize("function", sorted(MUTATING_STEPS))
def test_given_a_dry_run_when_a_mutating_step_runs_then_nothing_changes_and_a_live_run_does(function: str, lambda_context: Any) -> None:
    handler = load_handler(f"functions/{function}/")
    # Given a cluster, a ledger and an orchestrator as a recovery finds them
    dry_deps, live_deps = fake_dependencies(FakeCluster([compute_node(1)])), fake_dependencies(FakeCluster([compute_node(1)]))
    before = _what_changed(dry_deps)
    # When the step runs in a dry run, and again live
    handler(MUTATING_STEPS[function](True), lambda_context, deps=dry_deps)
    handler(MUTATING_STEPS[function](False), lambda_context, deps=live_deps)
    # Then the dry run changed nothing the live run changed
    assert _what_changed(dry_deps) == before
    assert _what_changed(live_deps) != before
    # And a command it would have sent was answered at once, as done, marked dry run; a cordon goes
    # to the agent without its drain, for the real jobs (the agent marks its answer dry run)
    if function == "cordon_nodes":
        ((envelope),) = dry_deps.orchestrator.dispatched  # type: ignore[attr-defined]
        assert envelope.command.drain is False and dry_deps.orchestrator.answered == []  # type: ignore[attr-defined]
        ((live),) = live_deps.orchestrator.dispatched  # type: ignore[attr-defined]
        assert live.command.drain is True
    if function in ("resume_nodes", "resubmit_job"):
        ((token, reply),) = dry_deps.orchestrator.answered  # type: ignore[attr-defined]
        assert token == "tok" and reply.dry_run and reply.completed_at == reply.requested_at == T0


def test_given_a_dry_run_then_a_lock_held_by_another_incident_is_shown_and_none_is_taken(lambda_context: Any) -> None:
    deps = fake_dependencies()
    deps.ledger.acquire_locks("inc-real", CLUSTER, [node_id(1)], T0, timedelta(hours=1))
    result = load_handler("functions/lock_nodes/")({"execution_name": "drill", "request": _request(True)}, lambda_context, deps=deps)
    assert result["held_elsewhere"] == {node_id(1): "inc-real"} and result["locked"] == [] and result["dry_run"] is True
    assert deps.ledger.lock_holders(CLUSTER, [node_id(1)], T0) == {node_id(1): "inc-real"}


def test_given_a_dry_run_that_would_trip_the_breaker_then_the_breaker_stays_closed(lambda_context: Any) -> None:
    # Given three escalations in the breaker's window (BREAKER_MAX_FAILURES=3): the breaker trips
    deps = fake_dependencies()
    deps.ledger.recoveries[CLUSTER] = [  # type: ignore[attr-defined]
        RecoveryLogEntry(incident=f"i{k}", at=T0 - timedelta(minutes=10 * k), hostnames=[f"ip-10-1-0-{7 + k}"], outcome="escalated")
        for k in (1, 2, 3)
    ]
    step = {"execution_name": "drill", "request": _request(True), "assessment": _assessment()}
    result = load_handler("functions/apply_safety_policy/")(step, lambda_context, deps=deps)
    # Then the drill says it would be capped, and the breaker is as it was
    assert result["safety"]["capped"] and deps.ledger.breaker(CLUSTER).state == "closed"


# --- the gate itself: every port method is a read it passes or a change it holds back -----------
def _port_methods(protocol: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(protocol, inspect.isfunction) if not name.startswith("_")}


@pytest.mark.parametrize(
    ("protocol", "gate"), [(ports.Cluster, DryRunCluster), (ports.Ledger, DryRunLedger), (ports.Orchestrator, DryRunOrchestrator)]
)
def test_the_gate_decides_every_method_of_its_port_itself(protocol: type, gate: type) -> None:
    # A method added to the port and not to the gate would fail mypy; one the gate inherited or
    # forwarded by magic would pass it unexamined. Each is written out in the gate.
    assert _port_methods(protocol) <= set(vars(gate))


class _Spy:
    """An adapter that records every call, and answers the reads a gate may make."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return {"lock_holders": {}, "job_restarts": []}.get(name)

        return call


HELD_BACK_LEDGER_CALLS: dict[str, tuple[Any, ...]] = {
    "acquire_locks": ("inc-1", CLUSTER, [node_id(1)], T0, timedelta(hours=1)),
    "release_locks": ("inc-1", CLUSTER, [node_id(1)], None),
    "replacements_initiated": ("inc-1",),
    "mark_replacements_initiated": ("inc-1", [node_id(1)], T0),
    "claim_resubmission": (CLUSTER, "1001", "inc-1", T0, timedelta(hours=1)),
    "complete_resubmission": (CLUSTER, "1001", "inc-1", "1002"),
    "release_resubmission": (CLUSTER, "1001", "inc-1"),
    "keep_resubmission": (CLUSTER, "1001", "inc-1"),
    "recreation_token": (CLUSTER, "1001", T0),
    "note_failure_started": (CLUSTER, "u:1", T0),
    "reserve_job_restart": (CLUSTER, "inc-1", 20, T0, timedelta(hours=1)),
    "record_restart": (CLUSTER, "1001", None),
    "reserve_capacity": (CLUSTER, "inc-1", [node_id(1)], 10, T0, timedelta(hours=1)),
    "release_capacity": (CLUSTER, "inc-1", [node_id(1)], T0),
    "hold_capacity_until": (CLUSTER, "inc-1", [node_id(1)], T0, T0),
    "save_breaker": (CLUSTER, BreakerState(state="open", reason="r", changed_at=T0)),
    "log_recovery": (CLUSTER, RecoveryLogEntry(incident="inc-1", at=T0, hostnames=["h"], outcome="escalated"), 60),
    "await_rejoin": (CLUSTER, RejoinWait(execution="inc-1", task_token="t", until=T0), T0),
    "end_rejoin_wait": (CLUSTER, "inc-1", "t"),
    "record_verdict": (
        RecordedVerdict(
            verdict=HangVerdict(
                rule="stall",
                mode="enforce",
                cluster=CLUSTER,
                job="1001",
                decided_at=T0,
                episode_at=T0,
                step=1,
                last_progress_at=T0,
                threshold_seconds=60,
                observed_seconds=61,
                summary="job 1001: no progress",
            ),
            action="started job recovery hpj-1001-hung-1",
        ),
    ),
}


@pytest.mark.parametrize("method", sorted(HELD_BACK_LEDGER_CALLS))
def test_a_held_back_ledger_call_never_reaches_the_ledger(method: str) -> None:
    spy = _Spy()
    args = HELD_BACK_LEDGER_CALLS[method]
    if method == "record_restart":
        from hyperpod_recovery.models.job_recovery import RestartEntry

        args = (
            CLUSTER,
            "1001",
            RestartEntry(failed_job_id="1001", new_job_id="1002", kind="application", checkpoint_step=1, restarted_at=T0, incident="inc-1"),
        )
    getattr(DryRunLedger(spy), method)(*args)  # type: ignore[arg-type]
    # A lock, a job restart's place, are answered from what is there (a read); nothing else is asked of the ledger
    reads = {"acquire_locks": ["lock_holders"], "reserve_job_restart": ["job_restarts"]}
    assert spy.calls == reads.get(method, [])


def test_every_ledger_method_is_either_held_back_or_passed_through() -> None:
    passed_through = _port_methods(ports.Ledger) - set(HELD_BACK_LEDGER_CALLS)
    # The reads, and the incident's own record and notification (what a drill is for)
    assert passed_through == {
        "lock_holders", "node_holds", "resubmission_claim", "lineage_root", "restart_history", "nodes_in_recovery", "holdings",
        "jobs_of", "breaker", "recovery_log", "get_incident", "save_incident", "save_jobs", "rejoin_waits",
        "begin_effect", "finish_effect", "effect_of", "failures_started", "job_restarts",
        "claim_notification", "ends_swept_until", "save_ends_swept_until", "verdicts", "save_evidence", "evidence_of",
        "save_swap", "swap_record",
    }  # fmt: skip


def test_held_back_batch_calls_are_answered_as_initiated_in_no_call() -> None:
    cluster = FakeCluster([compute_node(1)])
    outcome = DryRunCluster(cluster).replace_nodes([node_id(1)])
    assert outcome.successful == [node_id(1)] and outcome.calls == 0 and cluster.replace_calls == []
    assert DryRunCluster(cluster).reboot_nodes([node_id(1)]).successful == [node_id(1)]


def test_read_only_commands_still_reach_the_scheduler() -> None:
    from hyperpod_recovery.models.commands import CommandEnvelope, JobsOnNodes

    orchestrator = FakeOrchestrator()
    envelope = CommandEnvelope(
        command_id="inc-1:jobs",
        incident_id="inc-1",
        execution_name="inc-1",
        task_token="tok",
        requested_at=T0,
        command=JobsOnNodes(nodes=["n1"]),
    )
    DryRunOrchestrator(orchestrator).dispatch(envelope)
    assert orchestrator.dispatched == [envelope] and orchestrator.answered == []


def test_a_dry_run_is_gated_once() -> None:
    gated = fake_dependencies().for_dry_run()
    assert gated.dry_run and gated.for_dry_run() is gated and isinstance(gated.ledger, DryRunLedger)


# --- the Record steps: a drill's end settles nothing real and counts nowhere -------------------
def _record_step(dry: bool, *, readable_request: bool = True) -> dict[str, Any]:
    from hyperpod_recovery.models.node_recovery import LockResult, SafetyDecision

    assessment = Assessment.model_validate(_assessment())
    assessment = assessment.model_copy(update={"safety": SafetyDecision(at=T0, reserved=[node_id(1)], limit=10)})
    state = {
        "request": _request(dry) if readable_request else {"cluster": CLUSTER, "not": "a request"},
        "lock": LockResult(at=T0, locked=[node_id(1)], dry_run=dry, proceed=True).model_dump(mode="json"),
        "assessment": assessment.model_dump(mode="json"),
    }
    error = {"Error": "ClusterUnavailable", "Cause": "SageMaker throttled"}
    return {"execution_name": "inc-1", "disposition": "escalated", "error": error, "state": state}


@pytest.mark.parametrize("readable_request", [True, False], ids=["request", "request-unreadable"])
def test_given_a_drill_that_escalates_then_recording_it_counts_it_nowhere(readable_request: bool, lambda_context: Any) -> None:
    handler = load_handler("functions/record_outcome/")
    dry_deps, live_deps = fake_dependencies(), fake_dependencies()
    before = _what_changed(dry_deps)
    # When a drill's end is recorded (its request readable or not: its lock says it was a drill)
    handler(_record_step(True, readable_request=readable_request), lambda_context, deps=dry_deps)
    handler(_record_step(False), lambda_context, deps=live_deps)
    # Then the breaker's and the repeat offenders' log are as they were, and the live end counted
    assert _what_changed(dry_deps) == before
    assert live_deps.ledger.recovery_log(CLUSTER) and not dry_deps.ledger.recovery_log(CLUSTER)
    # And the drill's record says it was one (escalated: a step failed, as it would have live)
    record = dry_deps.ledger.get_incident("inc-1")
    assert record is not None and record.dry_run and record.outcome == "escalated"


# Steps whose input carries no request: never gated, and they change nothing (a new one must be looked at)
UNGATED = {"ValidateRequestInput", "ValidateJobRequestInput", "FindNewestCheckpointInput", "CheckControllerAgentInput"}
# PlannedSwap's steps read only, but for its record and notification (a dry run's say what it would do);
# what a dry-run swap changes is its nested NodeRecovery's, whose request carries the dry run.
UNGATED |= {"StartPlannedSwapInput", "CheckSwapCheckpointInput", "RecordSwapOutcomeInput"}


def test_every_workflow_step_either_carries_its_request_or_is_known_to_change_nothing() -> None:
    import re

    from hyperpod_recovery.models import job_recovery, node_recovery, planned_swap, preflight
    from hyperpod_recovery.models.job_recovery import JobWorkflowState
    from hyperpod_recovery.models.node_recovery import WorkflowState
    from tests.conftest import ROOT

    gated_by = (RecoveryRequest, JobRecoveryRequest, WorkflowState, JobWorkflowState)
    for app in sorted((ROOT / "functions").glob("*/app.py")):
        match = re.search(r"@workflow_step\((\w+)\)", app.read_text())
        if match is None:
            continue
        name = match[1]
        model = next(getattr(m, name) for m in (node_recovery, job_recovery, preflight, planned_swap) if hasattr(m, name))
        fields = {key: field.annotation for key, field in model.model_fields.items()}
        carries = any(
            (isinstance(annotation, type) and issubclass(annotation, gated_by))
            or any(t in gated_by for t in getattr(annotation, "__args__", ()))
            for key, annotation in fields.items()
            if key in ("request", "state")
        )
        assert carries or name in UNGATED, f"{app.parent.name}: {name} carries no request the dry-run gate can read"


@pytest.mark.parametrize(("dry", "counted"), [(True, 0), (False, 3)])
def test_what_a_step_did_is_counted_only_when_it_did_it(dry: bool, counted: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the metrics a handler emits for what it did to the cluster (nodes replaced, the breaker opened)
    from hyperpod_recovery import runtime

    emitted: list[tuple[str, float]] = []
    monkeypatch.setattr(runtime.metrics, "add_metric", lambda name, unit, value: emitted.append((name, value)))
    deps = fake_dependencies().for_dry_run() if dry else fake_dependencies()
    # When a step reports 3 of them
    deps.count_done("NodesReplaceInitiated", 3)
    # Then a dry run, which did none of it, counts 0
    assert emitted == [("NodesReplaceInitiated", counted)]
