"""The drill CLI's phase chart: every phase shows on one time scale."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery_cli.drill import Phase, phase_chart

WIDTH = 48


@given(st.lists(st.tuples(st.floats(0, 10_000), st.floats(0, 10_000)), min_size=1, max_size=12))
def test_every_phase_has_a_mark_inside_the_chart(spans: list[tuple[float, float]]) -> None:
    # Given phases of any length at any point, a zero-length one at the very end included
    phases = [Phase("record", min(a, b), max(a, b)) for a, b in spans]
    # Then every row's bar is exactly the chart's width and marks the phase at least once
    for line in phase_chart(phases, width=WIDTH):
        bar = line.rsplit("|", 2)[1]
        assert len(bar) == WIDTH and "#" in bar


def test_the_last_instant_phase_is_drawn_at_the_right_edge() -> None:
    (_, last) = phase_chart([Phase("wait_for_rejoin", 0, 600), Phase("record", 600, 600)], width=WIDTH)
    assert last.rsplit("|", 2)[1] == " " * (WIDTH - 1) + "#"
