"""The safety policy before anything destructive: circuit breaker, repeat offenders, cluster cap;
and the breaker CLI a human resets it with."""

from __future__ import annotations

import io
from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.domain.policy.safety import SafetyPolicy
from hyperpod_recovery.domain.policy.safety import apply_safety_policy as decide_safety
from hyperpod_recovery.domain.record.incident import decide_outcome
from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT
from hyperpod_recovery.models.node_recovery import ApplySafetyPolicyInput, Assessment, NodeTarget, RecordOutcomeInput, WorkflowState
from hyperpod_recovery.models.records import BreakerState, RecoveryLogEntry
from hyperpod_recovery.steps.apply_safety_policy import apply_safety_policy
from hyperpod_recovery.steps.record_outcome import record_outcome
from hyperpod_recovery_cli.main import main
from tests.fakes import CLUSTER, T0, FakeLedger, FakeNotifier, node_id
from tests.unit.test_steps import _request

TTL = timedelta(hours=6)

POLICY = SafetyPolicy(
    max_percent=20,
    max_nodes=64,
    breaker_max_recoveries=5,
    breaker_max_failures=2,
    breaker_window_seconds=3600,
    offender_max_recoveries=2,
    offender_window_seconds=7 * 86_400,
)


def _assessment(*numbers: int, compute_nodes: int = 100) -> Assessment:
    targets = [NodeTarget(node_id=node_id(n), instance_group="workers", slurm_node=f"ip-10-1-0-{n}", status="Running") for n in numbers]
    return Assessment(at=T0, orchestrator="slurm", node_recovery="None", targets=targets, proceed=True, compute_nodes=compute_nodes)


def _log(*entries: tuple[int, str, list[int]]) -> list[RecoveryLogEntry]:
    """(minutes ago, outcome, node numbers)"""
    return [
        RecoveryLogEntry(incident=f"i{k}", at=T0 - timedelta(minutes=m), hostnames=[f"ip-10-1-0-{n}" for n in nodes], outcome=outcome)  # type: ignore[arg-type]
        for k, (m, outcome, nodes) in enumerate(entries)
    ]


def _apply(
    assessment: Assessment,
    *,
    log: list[RecoveryLogEntry] | None = None,
    in_recovery: set[str] | None = None,
    breaker: BreakerState | None = None,
) -> Assessment:
    return decide_safety(assessment, POLICY, breaker=breaker or BreakerState(), log=log or [], in_recovery=in_recovery or set(), now=T0)


def test_a_recovery_within_every_limit_proceeds_and_reserves_its_nodes() -> None:
    result = _apply(_assessment(1, 2))
    assert result.proceed and result.safety is not None and result.safety.reserved == [node_id(1), node_id(2)]
    assert result.safety.limit == 20  # 20% of 100 compute nodes, under the 64-node cap


@pytest.mark.parametrize(("compute", "limit"), [(512, 64), (100, 20), (4, 1)], ids=["count-wins", "percent-wins", "never-below-one"])
def test_the_cap_is_the_smaller_of_the_percent_and_the_count(compute: int, limit: int) -> None:
    assert POLICY.limit(compute) == limit


def test_nodes_past_the_cap_are_not_acted_on_at_all() -> None:
    # Given 19 nodes of 100 already in recovery elsewhere, and two more failing
    others = {node_id(n) for n in range(100, 119)}
    result = _apply(_assessment(1, 2), in_recovery=others)
    # Then neither is acted on: the whole request is capped
    assert not result.proceed and result.safety is not None
    assert (result.safety.capped, result.safety.error, result.safety.reserved) == (True, "ClusterCapReached", [])
    assert "19 node(s) already in recovery + 2 more would exceed the cap of 20" in result.safety.reason


def test_an_open_breaker_stops_everything() -> None:
    breaker = BreakerState(state="open", reason="3 failed recoveries", changed_at=T0 - timedelta(hours=5), changed_by="hpr-x")
    result = _apply(_assessment(1), breaker=breaker)
    assert not result.proceed and result.safety is not None and result.safety.error == "CircuitBreakerOpen"
    assert not result.safety.breaker_tripped_now and "3 failed recoveries" in result.safety.reason


def test_too_many_recoveries_or_failures_in_the_window_trip_the_breaker() -> None:
    busy = _apply(_assessment(1), log=_log(*[(m, "recovered", [50 + m]) for m in range(5)]))
    assert busy.safety is not None and busy.safety.breaker_tripped_now and "5 recoveries" in busy.safety.reason
    failing = _apply(_assessment(1), log=_log((10, "escalated", [7]), (20, "escalated", [8])))
    assert failing.safety is not None and failing.safety.breaker_tripped_now and "2 failed recoveries" in failing.safety.reason
    # Old history does not count
    calm = _apply(_assessment(1), log=_log((120, "escalated", [7]), (180, "escalated", [8])))
    assert calm.proceed and calm.safety is not None and not calm.safety.capped


def test_a_repeat_offender_is_escalated_not_replaced_and_the_others_proceed() -> None:
    # Given node 1 recovered twice this week (by hostname: its instance id changed each time)
    result = _apply(_assessment(1, 2), log=_log((60 * 24 * 3, "recovered", [1]), (60 * 24, "escalated", [1, 9])))
    assert [t.node_id for t in result.targets] == [node_id(2)] and result.proceed
    assert [(s.node_id, s.reason) for s in result.skipped] == [(node_id(1), "repeat_offender")]
    # And the outcome names it, after the other node was recovered
    outcome, error, cause = decide_outcome(
        NODE_INCIDENT,
        RecordOutcomeInput(execution_name="hpr-1", disposition="completed", state=WorkflowState(request=_request(1, 2), assessment=result)),
    )
    assert (outcome, error) == ("escalated", "RepeatOffender") and "recovered 2 times" in (cause or "")


def test_a_capped_incident_ends_capped_with_the_reason() -> None:
    capped = _apply(_assessment(1), breaker=BreakerState(state="open", reason="r", changed_at=T0))
    state = WorkflowState(request=_request(1), assessment=capped)
    assert decide_outcome(NODE_INCIDENT, RecordOutcomeInput(execution_name="hpr-1", disposition="completed", state=state))[:2] == (
        "capped",
        "CircuitBreakerOpen",
    )


# --- the step: what it writes ------------------------------------------------------------------
def test_tripping_opens_the_breaker_in_the_ledger() -> None:
    # (A dry run that would trip it leaves it closed: tests/unit/test_dry_run_gate.py.)
    ledger = FakeLedger()
    ledger.recoveries[CLUSTER] = _log((10, "escalated", [7]), (20, "escalated", [8]))
    live = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name="hpr-1", request=_request(1), assessment=_assessment(1)),
        ledger=ledger,
        policy=POLICY,
        reservation_ttl=TTL,
        now=T0,
    )
    breaker = ledger.breaker(CLUSTER)
    assert live.safety is not None and live.safety.capped and breaker.state == "open" and breaker.changed_by == "hpr-1"
    assert breaker.history[-1].startswith(T0.isoformat()) and "open by hpr-1" in breaker.history[-1]


def test_a_reservation_lost_to_a_race_caps_the_incident() -> None:
    ledger = FakeLedger()
    ledger.reserve_capacity = lambda *args, **kwargs: False  # type: ignore[method-assign]
    result = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name="hpr-1", request=_request(1), assessment=_assessment(1)),
        ledger=ledger,
        policy=POLICY,
        reservation_ttl=TTL,
        now=T0,
    )
    assert not result.proceed and result.safety is not None and result.safety.error == "ClusterCapReached"


def test_record_outcome_frees_the_cap_and_logs_what_it_acted_on() -> None:
    ledger = FakeLedger()
    assessment = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name="hpr-1", request=_request(1), assessment=_assessment(1)),
        ledger=ledger,
        policy=POLICY,
        reservation_ttl=TTL,
        now=T0,
    )
    assert ledger.nodes_in_recovery(CLUSTER, T0) == {node_id(1)}
    step = RecordOutcomeInput(
        execution_name="hpr-1", disposition="escalated", state=WorkflowState(request=_request(1), assessment=assessment)
    )
    record_outcome(
        step, ledger=ledger, notifier=FakeNotifier(), cluster=CLUSTER, escalation_hold=timedelta(hours=1), execution_url="u", now=T0
    )
    assert ledger.nodes_in_recovery(CLUSTER, T0) == set()
    assert [(e.incident, e.hostnames, e.outcome) for e in ledger.recovery_log(CLUSTER)] == [("hpr-1", ["ip-10-1-0-1"], "escalated")]


# --- the CLI a human resets the breaker with -------------------------------------------------------
def _cli(*args: str, dynamodb: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err, dynamodb=dynamodb)
    return code, out.getvalue(), err.getvalue()


def test_a_human_reads_and_resets_the_breaker_and_the_reset_is_recorded() -> None:
    from hyperpod_recovery.adapters.ledger import DynamoLedger
    from tests.contract.adapter_support import REGION, ledger_table_from_template

    with mock_aws():
        table = ledger_table_from_template()
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        ledger = DynamoLedger(table, dynamodb=dynamodb)
        # Given a closed breaker
        assert _cli("breaker", "status", "--cluster", CLUSTER, "--table", table, dynamodb=dynamodb)[:2] == (
            0,
            f"{CLUSTER}: breaker CLOSED\n",
        )
        # And then the pipeline opened it
        ledger.save_breaker(
            CLUSTER, BreakerState(state="open", reason="3 failed recoveries", changed_at=T0, changed_by="hpr-9", history=["open"])
        )
        code, out, _ = _cli("breaker", "status", "--cluster", CLUSTER, "--table", table, dynamodb=dynamodb)
        assert code == 1 and "OPEN since 2026-03-14T09:00:00+00:00 by hpr-9: 3 failed recoveries" in out
        # When a human resets it, saying why
        code, out, _ = _cli(
            "breaker",
            "reset",
            "--cluster",
            CLUSTER,
            "--table",
            table,
            "--reason",
            "NIC firmware rolled back",
            "--by",
            "ana",
            "--yes",
            dynamodb=dynamodb,
        )
        # Then it is closed, with who and why in its history
        state = ledger.breaker(CLUSTER)
        assert code == 0 and "closed by ana" in out and state.state == "closed" and state.changed_by == "ana"
        assert state.history[0] == "open" and state.history[-1].endswith("closed by ana: NIC firmware rolled back")
        assert _cli("breaker", "reset", "--cluster", CLUSTER, "--table", table, "--reason", "again", "--yes", dynamodb=dynamodb)[
            1
        ].endswith("already closed; nothing changed\n")


def test_the_breaker_cli_says_which_table_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_TABLE", raising=False)
    code, _, err = _cli("breaker", "status", "--cluster", CLUSTER, dynamodb=None)
    assert code == 2 and "LedgerTableName" in err


def test_a_dry_run_past_the_cap_says_it_would_be_capped() -> None:
    from hyperpod_recovery.domain.record.node_incident import summarize

    ledger = FakeLedger()
    ledger.reserve_capacity(CLUSTER, "other", [node_id(n) for n in range(100, 120)], 100, T0, TTL)
    assessment = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name="d", request=_request(1, dry_run=True), assessment=_assessment(1)),
        ledger=ledger,
        policy=POLICY,
        reservation_ttl=TTL,
        now=T0,
    )
    state = WorkflowState(request=_request(1, dry_run=True), assessment=assessment)
    assert decide_outcome(NODE_INCIDENT, RecordOutcomeInput(execution_name="d", disposition="completed", state=state))[0] == "dry_run"
    assert "would be capped (ClusterCapReached" in summarize(state, "dry_run", None)
