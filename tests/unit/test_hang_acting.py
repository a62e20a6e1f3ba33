"""What a tick does with a hang verdict (domain/hangs/acting.py), each decision alone: Detect Hung
Jobs' own tests (test_detect_hung_jobs.py, test_hang_trust.py) go through the step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hyperpod_recovery.domain.hangs.acting import MAX_STARTS_PER_TICK, next_move, one_kube_job, running_hang_recovery
from hyperpod_recovery.domain.hangs.observed import remembered_start
from hyperpod_recovery.models.hangs import HangVerdict
from hyperpod_recovery.models.progress_memory import JobMemory

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def _verdict(mode: str = "enforce") -> HangVerdict:
    return HangVerdict.model_validate(
        {
            "rule": "stall",
            "mode": mode,
            "cluster": "c",
            "job": "1001",
            "decided_at": T0,
            "episode_at": T0 - timedelta(minutes=2),
            "step": 1,
            "last_progress_at": T0 - timedelta(minutes=2),
            "threshold_seconds": 60,
            "observed_seconds": 120,
            "summary": "job 1001: no progress",
        }
    )


def _never_asked() -> bool:
    raise AssertionError("the tick's time is asked only for a verdict that would act")


def test_given_an_episode_an_earlier_tick_started_then_it_is_not_started_again() -> None:
    verdict = _verdict()
    memory = remembered_start(JobMemory(job="1001", seen_at=T0), verdict.episode_at, "hpj-1001-hung-1", 1)
    assert next_move(verdict, memory, T0, 0, _never_asked).move == "already_started"


def test_given_the_ticks_starts_spent_then_an_enforced_verdict_waits_for_the_next_tick() -> None:
    move = next_move(_verdict(), JobMemory(job="1001", seen_at=T0), T0, MAX_STARTS_PER_TICK, _never_asked)
    assert move.move == "starts_deferred"


def test_given_the_ticks_starts_spent_then_an_observed_verdict_is_still_recorded() -> None:
    assert next_move(_verdict("observe"), JobMemory(job="1001", seen_at=T0), T0, MAX_STARTS_PER_TICK, lambda: False).move == "act"


def test_given_no_time_left_then_the_verdict_waits_for_the_next_tick() -> None:
    assert next_move(_verdict(), JobMemory(job="1001", seen_at=T0), T0, 0, lambda: True).move == "deferred"


def test_given_one_job_object_by_that_name_then_its_uid_else_why_not() -> None:
    assert one_kube_job("ns", "llama", [("PyTorchJob", "u-1")]) == ("u-1", "")
    assert one_kube_job("ns", "llama", [])[0] is None
    none, why = one_kube_job("ns", "llama", [("PyTorchJob", "u-1"), ("HyperPodPyTorchJob", "u-2")])
    assert none is None and "both a PyTorchJob and a HyperPodPyTorchJob" in why


def test_given_a_running_recovery_of_an_earlier_stall_then_the_stall_is_left_to_it_but_never_to_its_own() -> None:
    own = "hpj-1001-hung-200"
    assert running_hang_recovery("1001", ["hpj-1001-hung-100", own], own) is not None
    assert running_hang_recovery("1001", [own, "hpj-10011-hung-100", "hpj-1001-1700000000"], own) is None
