"""A job's downtime is the time no copy of it trained, from the first fault that hit it: the union of
the gaps, never the run between two faults (sandbox/job_downtime.py)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from sandbox.job_downtime import CopyRun, down_intervals, total, union


def test_given_two_faults_each_followed_by_a_quick_copy_then_the_downtime_is_the_two_gaps_not_the_run_between() -> None:
    # Given a job hit at 60 s, running again as a copy at 67.4 s; that copy hit at 1800 s, a new copy at 1807.4 s
    runs = [CopyRun(0, 2000_000, [60_000]), CopyRun(67_400, 2000_000, [1800_000]), CopyRun(1807_400, 2000_000)]
    # When its downtime is measured
    down = down_intervals(runs, [60_000, 1800_000], 2000_000)
    # Then it is the two gaps, 14.8 s, not the 1747.4 s from the first fault to the last copy
    assert down == [(60_000, 67_400), (1800_000, 1807_400)]
    assert total(down) == 14_800


def test_given_a_fault_on_nodes_the_job_had_left_then_its_running_copy_is_not_down() -> None:
    # The copy runs elsewhere: a fault at 900 s hit only the old job (already cut at 60 s)
    runs = [CopyRun(0, 1000_000, [60_000, 900_000]), CopyRun(70_000, 1000_000)]
    assert down_intervals(runs, [60_000, 900_000], 1000_000) == [(60_000, 70_000)]


def test_given_no_copy_running_at_the_end_then_the_last_gap_runs_to_the_end() -> None:
    assert down_intervals([CopyRun(0, 500_000, [100_000])], [100_000], 500_000) == [(100_000, 500_000)]


def test_given_no_fault_then_nothing_is_down() -> None:
    assert down_intervals([CopyRun(0, 500_000)], [], 500_000) == []


MOMENT = st.integers(min_value=0, max_value=10_000)


@st.composite
def lineages(draw: st.DrawFn) -> tuple[list[CopyRun], list[int], int]:
    end = draw(st.integers(min_value=1, max_value=10_000))
    runs = []
    for _ in range(draw(st.integers(min_value=0, max_value=5))):
        start = draw(st.integers(min_value=0, max_value=end))
        stop = draw(st.integers(min_value=start, max_value=end))
        runs.append(CopyRun(start, stop, draw(st.lists(st.integers(min_value=0, max_value=end), max_size=3))))
    faults = sorted({hit for run in runs for hit in run.hits} | set(draw(st.lists(st.integers(min_value=0, max_value=end), max_size=3))))
    return runs, faults, end


@given(lineages())
def test_given_any_lineage_then_down_never_overlaps_a_training_copy_and_with_them_covers_from_the_first_fault(
    lineage: tuple[list[CopyRun], list[int], int],
) -> None:
    runs, faults, end = lineage
    down = down_intervals(runs, faults, end)
    training = union([run.training() for run in runs])
    # Never counting time a copy was training
    for start, stop in down:
        assert all(stop <= t_start or start >= t_stop for t_start, t_stop in training)
    # Disjoint, sorted, inside [first fault, end)
    assert down == union(down)
    if not faults:
        assert down == []
        return
    assert all(min(faults) <= start < stop <= end for start, stop in down)
    # And down plus training covers every moment from the first fault to the end
    covered = union(down + [(max(s, min(faults)), min(e, end)) for s, e in training])
    assert total(covered) == end - min(faults) if min(faults) < end else covered == []
    # So the sum is the window less the training time inside it: never the span from first fault to last copy
    inside = total([(max(s, min(faults)), min(e, end)) for s, e in training if min(e, end) > max(s, min(faults))])
    assert total(down) == max(0, end - min(faults)) - inside


@given(st.lists(st.tuples(MOMENT, MOMENT), max_size=8))
def test_given_any_intervals_then_their_union_is_disjoint_and_covers_the_same_moments(intervals: list[tuple[int, int]]) -> None:
    merged = union(intervals)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(merged))
    for moment in range(0, 10_001, 97):
        assert any(s <= moment < e for s, e in intervals) == any(s <= moment < e for s, e in merged)
