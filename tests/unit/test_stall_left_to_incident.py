"""A stall another incident already ends (domain/hangs/handled.py): Detect Hung Jobs leaves it to the
incident that claimed the job's resubmission after its last progress, and never holds back a hang
its own recovery would have acted on (a property over every claim and moment)."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.hangs.classify import classify_hang
from hyperpod_recovery.domain.hangs.handled import HANDLED_WINDOW, ended_by, handled_by
from hyperpod_recovery.models.records import ResubmissionClaim
from tests.fakes import T0
from tests.unit.test_hang_classify import _setup
from tests.unit.test_hang_detection import report

STILL = [report(f"ip-10-1-0-{i}", step=101, idle=100) for i in (1, 2, 3)] + [report("ip-10-1-0-4", step=100, idle=105)]


def _claim(claimed_ago: float | None, open_for: float | None = 3600.0, new_job_id: str | None = None) -> ResubmissionClaim:
    """A claim on job 1001 taken ``claimed_ago`` seconds before T0, holding ``open_for`` seconds after T0 while open."""
    return ResubmissionClaim(
        job_id="1001",
        incident_id="hpr-x",
        claimed=False,
        new_job_id=new_job_id,
        claimed_at=T0 - timedelta(seconds=claimed_ago) if claimed_ago is not None else None,
        open_until=T0 + timedelta(seconds=open_for) if open_for is not None and new_job_id is None else None,
    )


def test_given_a_claim_taken_after_the_last_progress_then_the_stall_is_left_to_its_incident() -> None:
    request, _, _ = _setup()
    verdict = request.hang
    assert verdict is not None and verdict.last_progress_at == T0 - timedelta(seconds=90)
    # Given a claim 60 s old (after the job's last progress, 90 s ago), open or completed
    assert "has not resubmitted it yet" in (handled_by(verdict, _claim(60), T0) or "")
    done = handled_by(verdict, _claim(60, new_job_id="1002"), T0)
    assert done == (
        "left to incident hpr-x, which claimed its resubmission at 2026-03-14 08:59:00 UTC, after the job's last progress, "
        "and resubmitted it as job 1002"
    )
    # On EKS, in its own words
    eks = handled_by(verdict, _claim(60, new_job_id="0f3c"), T0, on_eks=True)
    assert eks is not None and "claimed its re-creation" in eks and eks.endswith("re-created it as the job of uid 0f3c")


def test_given_a_claim_that_does_not_speak_for_this_stall_then_the_stall_is_acted_on() -> None:
    request, _, _ = _setup()
    verdict = request.hang
    assert verdict is not None
    # Taken before the job's last progress (it ran again since: a requeued job keeps its id)
    assert handled_by(verdict, _claim(120, new_job_id="1002"), T0) is None
    # Open but expired (its incident died without settling it)
    assert handled_by(verdict, _claim(60, open_for=-1), T0) is None
    # Taken after the last progress, but longer ago than the incident needs to stop the copy
    assert handled_by(verdict, _claim(60), T0 + HANDLED_WINDOW) is None
    # A claim read without its moment (an item of an older layout), or none at all
    assert handled_by(verdict, _claim(None), T0) is None and handled_by(verdict, None, T0) is None
    # A slowdown (its episode is the job's run, not a stop)
    slow = verdict.model_copy(update={"rule": "slow"})
    assert handled_by(slow, _claim(60), T0) is None


@settings(max_examples=300, deadline=None)
@given(
    claimed_ago=st.one_of(st.none(), st.floats(min_value=-600, max_value=86_400 * 40)),
    open_for=st.floats(min_value=-7200, max_value=7200),
    completed=st.booleans(),
    later=st.floats(min_value=0, max_value=3600),
)
def test_property_a_stall_left_to_an_incident_is_one_its_recovery_would_leave_alone(
    claimed_ago: float | None, open_for: float, completed: bool, later: float
) -> None:
    # Given any claim on the job, and a tick at any moment after the verdict
    request, job, cluster = _setup()
    assert request.hang is not None
    claim = _claim(claimed_ago, open_for, "1002" if completed else None)
    now: datetime = T0 + timedelta(seconds=later)
    # When the detector leaves the stall to the claim's incident
    if handled_by(request.hang, claim, now) is None:
        return
    # Then the claim holds, and the hang's own recovery, reading that claim then, would have left the job alone too
    assert claim.in_force(now) and claim.claimed_at is not None and claim.claimed_at >= request.hang.last_progress_at
    classified = classify_hang(request, job, None, STILL, cluster, "hpj-1001-hung-1", now, claim=claim)
    assert classified.kind == "left_alone" and "hpr-x" in classified.reason


# --- a running recovery of the job's end ------------------------------------------------------------
def test_given_the_jobs_end_recovery_running_then_the_stall_of_its_ended_copy_is_left_to_it() -> None:
    request, _, _ = _setup()
    verdict = request.hang
    assert verdict is not None
    end = int(T0.timestamp()) - 30  # (the job ended 30 s ago, 60 s after its last progress)
    running = ["hpr-i-0123-20260314T0850", f"hpj-10011-{end}", "hpj-1001-hung-1", f"hpj-1001-{end}-nodes", f"hpj-1001-{end}"]
    assert ended_by(verdict, "1001", running, T0) == (
        f"left to job recovery hpj-1001-{end}, running for the job's end at 2026-03-14 08:59:30 UTC, after its last progress"
    )


def test_given_no_running_recovery_of_this_end_of_the_job_then_the_stall_is_acted_on() -> None:
    request, _, _ = _setup()
    verdict = request.hang
    assert verdict is not None
    last = int(verdict.last_progress_at.timestamp())
    # Only other jobs', a hang's, a nested node recovery's
    assert ended_by(verdict, "1001", [f"hpj-10011-{last}", f"hpj-1001-hung-{last}", f"hpj-1001-{last}-nodes"], T0) is None
    # An end before the job's last progress (a requeued job, running again since under its id)
    assert ended_by(verdict, "1001", [f"hpj-1001-{last - 1}"], T0) is None
    # An end longer ago than the window
    assert ended_by(verdict, "1001", [f"hpj-1001-{last}"], verdict.last_progress_at + HANDLED_WINDOW + timedelta(seconds=1)) is None
    # A slowdown
    assert ended_by(verdict.model_copy(update={"rule": "slow"}), "1001", [f"hpj-1001-{last}"], T0) is None


def test_given_running_executions_anyone_could_have_named_then_none_holds_a_stall_back_or_fails_the_tick() -> None:
    request, _, _ = _setup()
    verdict = request.hang
    assert verdict is not None
    now = int(T0.timestamp())
    # A date past any calendar, past any integer a date takes, a digit that is not ASCII, an end an hour ahead
    odd = ["hpj-1001-1000000000000", "hpj-1001-100000000000000000000", "hpj-1001-\u00b2", f"hpj-1001-{now + 3600}"]
    assert ended_by(verdict, "1001", odd, T0) is None
    # (an end a few seconds ahead of the tick's clock still counts: the node that saw it dated it)
    assert ended_by(verdict, "1001", [f"hpj-1001-{now + 5}"], T0) is not None


def test_given_the_claim_is_the_episodes_own_recovery_then_it_is_not_another_incidents() -> None:
    request, _, _ = _setup()
    verdict = request.hang
    assert verdict is not None
    own = "hpj-1001-hung-1773478710"
    for holder in (own, f"{own}-nodes"):
        claim = _claim(60).model_copy(update={"incident_id": holder})
        assert handled_by(verdict, claim, T0, own=own) is None
    assert handled_by(verdict, _claim(60), T0, own=own) is not None
