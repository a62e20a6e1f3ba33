"""The fleet trace's precursors (issue 50): node faults announced at the recall, a lead before them, false
alarms at their rate on nodes that do not fail; seeded, and leaving the failures as they were."""

from __future__ import annotations

import math
from statistics import median

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.fleet.trace import SECONDS_PER_DAY, TraceSpec, announceable, generate

seeds = st.integers(min_value=0, max_value=2**32)
recalls = st.floats(min_value=0.05, max_value=0.95)


@settings(max_examples=10, deadline=None)
@given(seed=seeds, recall=recalls)
def test_each_announceable_failure_is_announced_at_the_recall_and_only_those(seed: int, recall: float) -> None:
    # Given a long trace (2,048 nodes x 300 days: ~2,000 announceable node faults)
    trace = generate(TraceSpec(nodes=2048, days=300, seed=seed, recall=recall))
    announced = [p.failure for p in trace.precursors if p.failure is not None]
    candidates = trace.announceable()
    # Then the share announced is the recall, within 5 binomial standard deviations
    n = len(candidates)
    assert abs(len(announced) - recall * n) <= 5 * math.sqrt(n * recall * (1 - recall)), (len(announced), recall, n)
    # And only one node's hardware faults are announced, each once, on its own node
    assert all(f is not None and announceable(f) for f in announced)
    assert len(set(announced)) == len(announced)
    assert all(p.node == p.failure.nodes[0] for p in trace.precursors if p.failure is not None)


@settings(max_examples=10, deadline=None)
@given(seed=seeds, median_seconds=st.floats(min_value=60, max_value=21_600), sigma=st.floats(min_value=0.0, max_value=1.2))
def test_a_precursor_comes_its_lead_before_its_failure_drawn_about_the_median(seed: int, median_seconds: float, sigma: float) -> None:
    trace = generate(TraceSpec(nodes=2048, days=300, seed=seed, recall=1.0, lead_median_seconds=median_seconds, lead_sigma=sigma))
    announced = [p for p in trace.precursors if p.failure is not None]
    # Then none comes after its failure nor before the run
    assert all(0 <= p.at <= p.failure.at for p in announced if p.failure is not None)
    # And the leads of the failures late enough to show their whole lead (not cut at the run's start) have
    # the median asked, within 5 standard errors of a lognormal sample's median (1.2533 σ/√n in logs)
    late = [p.failure.at - p.at for p in announced if p.failure is not None and p.failure.at > median_seconds * math.exp(4.5 * sigma)]
    assert len(late) > 100
    assert abs(math.log(median(late) / median_seconds)) <= 5 * 1.2533 * sigma / math.sqrt(len(late)) + 0.002, (median(late), median_seconds)


@settings(max_examples=10, deadline=None)
@given(seed=seeds, rate=st.floats(min_value=0.1, max_value=5.0))
def test_false_alarms_come_at_their_rate_on_nodes_that_do_not_fail_later(seed: int, rate: float) -> None:
    spec = TraceSpec(nodes=2048, days=300, seed=seed, false_alarm_rate_per_1000_node_days=rate)
    trace = generate(spec)
    alarms = [p for p in trace.precursors if p.failure is None]
    # Then their count is the Poisson mean within 5 standard deviations
    mean = rate * spec.node_days / 1000
    assert abs(len(alarms) - mean) <= 5 * math.sqrt(mean), (len(alarms), mean)
    # And no alarm is on a node that fails at or after it
    assert all(not (p.node in f.nodes and f.at >= p.at) for p in alarms for f in trace.failures)
    assert all(0 <= p.at < spec.days * SECONDS_PER_DAY for p in alarms)


@settings(max_examples=10, deadline=None)
@given(seed=seeds, low=recalls, high=recalls)
def test_a_failure_announced_at_one_recall_is_announced_at_every_higher_one_with_the_same_lead(seed: int, low: float, high: float) -> None:
    low, high = min(low, high), max(low, high)
    few = generate(TraceSpec(nodes=512, days=60, seed=seed, recall=low)).precursors
    more = generate(TraceSpec(nodes=512, days=60, seed=seed, recall=high)).precursors
    assert set(few) <= set(more)


@settings(max_examples=10, deadline=None)
@given(seed=seeds, recall=recalls, rate=st.floats(min_value=0.0, max_value=5.0))
def test_precursors_leave_the_failures_as_they_were_and_a_seed_gives_them_again(seed: int, recall: float, rate: float) -> None:
    spec = TraceSpec(nodes=512, days=60, seed=seed, recall=recall, false_alarm_rate_per_1000_node_days=rate)
    trace = generate(spec)
    assert trace.failures == generate(TraceSpec(nodes=512, days=60, seed=seed)).failures
    assert trace == generate(spec)
    assert [p.at for p in trace.precursors] == sorted(p.at for p in trace.precursors)


def test_without_recall_or_false_alarms_a_trace_has_no_precursor() -> None:
    assert generate(TraceSpec(nodes=2048, days=54, seed=0)).precursors == ()
