"""Never two copies of one job: the fleet report's check (sandbox/fleet/report.py ``second_copies``),
on constructed copies, from the orchestrator's own record of when each ran."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.fleet.report import second_copies

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
END = 86_400.0


def at(seconds: float | None) -> datetime | None:
    return None if seconds is None else EPOCH + timedelta(seconds=seconds)


def copy(
    job_id: str, start: float | None, *, ended: float | None = None, completing_until: float | None = None, running: bool = False
) -> Any:
    return SimpleNamespace(
        job_id=job_id,
        state="RUNNING" if running else "ENDED",
        started_at=at(start),
        ended_at=at(ended),
        completing_until=at(completing_until),
    )


def runner(*jobs: Any, root: str = "1001") -> Any:
    """The first copy is the job as submitted; the others, its resubmissions."""
    copies = {j.job_id: SimpleNamespace(copy=j.job_id, root=root, original=k == 0) for k, j in enumerate(jobs)}
    return cast(
        Any,
        SimpleNamespace(
            fleet_training=SimpleNamespace(copies=copies),
            fleet_copies=SimpleNamespace(jobs={j.job_id: j for j in jobs}),
            epoch=EPOCH,
        ),
    )


def test_given_each_copy_started_after_the_last_ended_then_there_is_no_second_copy() -> None:
    jobs = (copy("1001", None, ended=1000.0), copy("1002", 1600.0, ended=5000.0), copy("1003", 5000.0, running=True))
    assert second_copies(runner(*jobs), END) == []


def test_given_a_resubmission_started_while_the_cancelled_copy_was_still_completing_then_it_is_a_second_copy() -> None:
    # Given a cancelled copy whose KillWait ends at 1,200 s, and its resubmission started at 1,100 s
    found = second_copies(runner(copy("1001", None, completing_until=1200.0), copy("1002", 1100.0, running=True)), END)
    assert found == [{"job": "1001", "copies": ["1001", "1002"], "at": 1100.0}]


def test_given_a_copy_that_never_ends_then_any_later_copy_is_a_second_one() -> None:
    # Given a cancelled copy whose processes SIGKILL does not end (no end at all), and a copy started a day later
    found = second_copies(runner(copy("1001", None), copy("1002", 80_000.0, running=True)), END)
    assert [c["copies"] for c in found] == [["1001", "1002"]]


def test_given_a_copy_that_never_started_then_it_is_no_copy() -> None:
    # Given a resubmission still pending (it never ran) beside the running original
    found = second_copies(runner(copy("1001", None, running=True), copy("1002", None)), END)
    assert found == []


spans = st.lists(st.tuples(st.floats(0, END / 2), st.floats(1, END / 2)), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(spans=spans)
def test_a_second_copy_is_found_exactly_when_two_runs_overlap(spans: list[tuple[float, float]]) -> None:
    # Given copies each running [start, start + length) (the first from 0, as the job was submitted)
    runs = [(0.0, spans[0][1]), *((s, s + n) for s, n in spans[1:])]
    jobs = [copy(str(1001 + k), None if k == 0 else s, ended=e) for k, (s, e) in enumerate(runs)]
    found = second_copies(runner(*jobs), END)
    # Then one is reported exactly when some two runs overlap in time
    ordered = sorted(runs)
    overlap = any(b[0] < max(a[1] for a in ordered[:k]) for k, b in enumerate(ordered) if k)
    assert bool(found) == overlap
