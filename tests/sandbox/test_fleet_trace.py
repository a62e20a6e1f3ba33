"""The fleet drill's failure trace: seeded, at the published rate, in the published mix."""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.fleet.trace import LLAMA3_TABLE5, RATES, SECONDS_PER_DAY, TraceSpec, generate

seeds = st.integers(min_value=0, max_value=2**32)


@settings(max_examples=25, deadline=None)
@given(seed=seeds, nodes=st.integers(min_value=1, max_value=4096), days=st.floats(min_value=0.5, max_value=60))
def test_the_same_seed_gives_the_same_trace(seed: int, nodes: int, days: float) -> None:
    # Given one spec, When it is generated twice, Then the traces are equal
    spec = TraceSpec(nodes=nodes, days=days, seed=seed)
    assert generate(spec) == generate(TraceSpec(nodes=nodes, days=days, seed=seed))


@settings(max_examples=25, deadline=None)
@given(seed=seeds, nodes=st.integers(min_value=16, max_value=4096), days=st.floats(min_value=1, max_value=60))
def test_failures_are_in_time_order_within_the_run_on_existing_nodes(seed: int, nodes: int, days: float) -> None:
    trace = generate(TraceSpec(nodes=nodes, days=days, seed=seed, correlated_share=0.2))
    times = [f.at for f in trace.failures]
    assert times == sorted(times)
    assert all(0 <= t < days * SECONDS_PER_DAY for t in times)
    assert all(0 <= n < nodes for f in trace.failures for n in f.nodes)
    assert all(len(f.nodes) == 1 for f in trace.failures if not f.correlated)


@settings(max_examples=20, deadline=None)
@given(seed=seeds, rate=st.sampled_from(sorted(RATES)))
def test_the_rate_is_the_published_one_within_statistical_bounds(seed: int, rate: str) -> None:
    # Given a long trace (2,048 nodes × 540 days: ~4,190 failures at Llama 3's rate)
    spec = TraceSpec(nodes=2048, days=540, seed=seed, rate_per_1000_node_days=RATES[rate], correlated_share=0.0)
    failures = len(generate(spec).failures)
    # Then the count is within 5 standard deviations of the Poisson mean (a false alarm ~1 in 3.5 million)
    mean = spec.expected_failures
    assert abs(failures - mean) <= 5 * math.sqrt(mean), (failures, mean)


@settings(max_examples=10, deadline=None)
@given(seed=seeds)
def test_the_fault_mix_follows_the_published_table(seed: int) -> None:
    spec = TraceSpec(nodes=2048, days=540, seed=seed, correlated_share=0.0)
    counts = generate(spec).counts()
    n = sum(counts.values())
    total_weight = sum(t.weight for t in LLAMA3_TABLE5)
    for fault in LLAMA3_TABLE5:
        p = fault.weight / total_weight
        # each type's share within 5 binomial standard deviations of its published share
        assert abs(counts[fault.name] - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1, (fault.name, counts[fault.name], n * p)


@settings(max_examples=10, deadline=None)
@given(seed=seeds, share=st.floats(min_value=0.05, max_value=0.5))
def test_the_correlated_share_is_racks_of_neighbours(seed: int, share: float) -> None:
    spec = TraceSpec(nodes=1024, days=300, seed=seed, correlated_share=share, rack_size=16)
    failures = generate(spec).failures
    racks = [f for f in failures if f.correlated]
    n = len(failures)
    assert abs(len(racks) - n * share) <= 5 * math.sqrt(n * share * (1 - share)) + 1
    for rack in racks:
        assert len(rack.nodes) == 16 and rack.nodes[0] % 16 == 0 and list(rack.nodes) == list(range(rack.nodes[0], rack.nodes[0] + 16))


@settings(max_examples=10, deadline=None)
@given(seed=seeds)
def test_what_only_a_job_suffers_never_waits_for_a_node(seed: int) -> None:
    failures = generate(TraceSpec(nodes=2048, days=100, seed=seed, gate_fail_share=0.5, reboot_fail_share=0.5)).failures
    remedies = Counter(f.remedy for f in failures)
    assert remedies["job"] and remedies["reboot"] and remedies["replace"]
    assert not any(f.gate_fails for f in failures if f.remedy == "job")
    assert not any(f.reboot_fails for f in failures if f.remedy != "reboot")
    spec = TraceSpec(nodes=1, days=1)
    repaired = [f for f in failures if f.remedy != "hang"]
    assert all(spec.replacement_min_seconds <= f.replacement_seconds <= spec.replacement_max_seconds for f in repaired)
    assert all(f.replacement_seconds == 0 for f in failures if f.remedy == "hang")


def test_another_seed_gives_another_trace() -> None:
    assert generate(TraceSpec(nodes=2048, days=54, seed=1)) != generate(TraceSpec(nodes=2048, days=54, seed=2))


@settings(max_examples=10, deadline=None)
@given(seed=seeds, share=st.floats(min_value=0.01, max_value=0.5))
def test_silent_hangs_come_at_their_share_of_the_rate_and_leave_the_tables_trace_as_it_was(seed: int, share: float) -> None:
    # Given a long trace with hangs, and the same trace without
    spec = TraceSpec(nodes=2048, days=300, seed=seed, hang_share=share)
    with_hangs = generate(spec).failures
    without = generate(TraceSpec(nodes=2048, days=300, seed=seed, hang_share=0.0)).failures
    hangs = [f for f in with_hangs if f.remedy == "hang"]
    # Then the hangs are a Poisson stream at their share (5 standard deviations), one node each, sending no event
    mean = share * spec.expected_failures
    assert abs(len(hangs) - mean) <= 5 * math.sqrt(mean), (len(hangs), mean)
    assert all(len(f.nodes) == 1 and f.detect_seconds == 0 and not f.gate_fails and not f.reboot_fails for f in hangs)
    # And the table's failures are the same, failure for failure, in time order with the hangs
    assert [f for f in with_hangs if f.remedy != "hang"] == list(without)
    assert [f.at for f in with_hangs] == sorted(f.at for f in with_hangs)
