"""The ledger's roles (ports.py): DynamoLedger and the fake each answer every method of every role,
and the verdicts role keeps the same expectations on both (moto and the fake)."""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery import ports
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.models.hangs import HangVerdict, RecordedVerdict
from tests.contract import adapter_support
from tests.fakes import T0, FakeLedger

ROLES = [ports.NodeLocks, ports.JobClaims, ports.Lineages, ports.IncidentStore, ports.Replacements, ports.Effects]
ROLES += [ports.SafetyRecords, ports.RecoveryLog, ports.RejoinWaits, ports.Marks, ports.Verdicts, ports.SwapRecords]


def _methods(protocol: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(protocol, inspect.isfunction) if not name.startswith("_")}


def test_the_ledger_is_exactly_the_union_of_its_roles() -> None:
    # Given every role a step may ask for
    # Then Ledger holds each role's methods and nothing beside them, and no method is in two roles
    assert _methods(ports.Ledger) == set().union(*map(_methods, ROLES))
    assert sum(len(_methods(role)) for role in ROLES) == len(_methods(ports.Ledger))


@pytest.mark.parametrize("implementation", [DynamoLedger, FakeLedger], ids=["dynamodb", "fake"])
def test_the_adapter_and_the_fake_answer_every_method_of_every_role(implementation: type) -> None:
    missing = {role.__name__: sorted(_methods(role) - set(dir(implementation))) for role in ROLES}
    assert {role: names for role, names in missing.items() if names} == {}


# The fake and the DynamoDB ledger, as every ledger contract module has them.
ledger = adapter_support.ledger


def _verdict(job: str, episode_minutes: int, action: str, execution: str | None = None, mode: str = "enforce") -> RecordedVerdict:
    episode = T0 + timedelta(minutes=episode_minutes)
    verdict = HangVerdict.model_validate(
        {
            "rule": "stall",
            "mode": mode,
            "cluster": "c",
            "job": job,
            "decided_at": episode + timedelta(minutes=10),
            "episode_at": episode,
            "step": 1,
            "last_progress_at": episode,
            "threshold_seconds": 60,
            "observed_seconds": 600,
            "summary": f"job {job}: no progress",
        }
    )
    return RecordedVerdict(verdict=verdict, action=action, execution=execution)


def test_ledger_keeps_a_verdict_once_per_episode_and_lists_them_oldest_first_since_a_moment(ledger: Any) -> None:
    # Given two episodes of one job and one of another
    assert ledger.record_verdict(_verdict("1001", 5, "left to inc-1")) is True
    assert ledger.record_verdict(_verdict("1002", 0, "left to inc-1")) is True
    assert ledger.record_verdict(_verdict("1001", 30, "left to inc-2")) is True
    # When the first episode is seen again
    assert ledger.record_verdict(_verdict("1001", 5, "left to inc-1")) is False
    # Then each episode is kept once, oldest first, and a listing since a moment starts there
    assert [(r.verdict.job, r.verdict.episode_at) for r in ledger.verdicts("c")] == [
        ("1002", T0),
        ("1001", T0 + timedelta(minutes=5)),
        ("1001", T0 + timedelta(minutes=30)),
    ]
    assert [r.verdict.episode_at for r in ledger.verdicts("c", since=T0 + timedelta(minutes=5))] == [
        T0 + timedelta(minutes=5),
        T0 + timedelta(minutes=30),
    ]
    assert ledger.verdicts("other") == []


def test_ledger_says_what_a_later_tick_did_of_an_enforced_verdict_that_started_nothing(ledger: Any) -> None:
    # Given an enforced stall left to another incident
    ledger.record_verdict(_verdict("1001", 0, "left to inc-1"))
    # When a later tick of the same episode starts its recovery
    assert ledger.record_verdict(_verdict("1001", 0, "started hpj-1001-hung-1", execution="hpj-1001-hung-1")) is False
    # Then the kept verdict names the recovery, what it said before kept after it
    (kept,) = ledger.verdicts("c")
    assert kept.execution == "hpj-1001-hung-1"
    assert kept.action.startswith("started hpj-1001-hung-1 | before ") and kept.action.endswith(": left to inc-1")
    # And once a recovery started, a later tick changes nothing
    ledger.record_verdict(_verdict("1001", 0, "left to inc-3"))
    assert ledger.verdicts("c") == [kept]


def test_ledger_keeps_an_observed_verdict_as_first_said(ledger: Any) -> None:
    # Given an observed stall (observe mode: nothing is started)
    ledger.record_verdict(_verdict("1001", 0, "would start a recovery", mode="observe"))
    # When a later tick says otherwise
    ledger.record_verdict(_verdict("1001", 0, "would leave it to inc-1", mode="observe"))
    # Then the first words stand
    assert [r.action for r in ledger.verdicts("c")] == ["would start a recovery"]
