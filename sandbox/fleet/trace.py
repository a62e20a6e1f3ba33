"""A seeded failure trace for a fleet drill: what a cluster of ``nodes`` workers suffers over ``days``.

Pure: the same ``TraceSpec`` (seed included) gives the same trace, on any machine. Nothing here
knows the pipeline; the fleet runner turns each ``Failure`` into what HyperPod or Slurm would send.

The model, and where its figures come from (../shared/reference/goodput-models.md):

* each node fails as a Poisson process of rate ``rate_per_1000_node_days`` (Llama 3, Table 5:
  419 unexpected interruptions over 2,048 nodes × 54 days = 3.79; Meta's RSC-1 6.50 and RSC-2
  2.34 as named options). N independent Poisson processes are one of rate N·r whose every event
  picks its node uniformly: the trace is drawn in O(failures), not O(nodes × days);
* what failed is drawn from Llama 3's Table 5 counts (the counts: they sum to 419, its
  percentages do not agree with its faulty-GPU count); which of them a reboot fixes, which need a
  replacement, and which end only the job (a software bug, an NCCL watchdog timeout, a dependency)
  is OUR reading (ASSUMPTION: the paper does not say);
* a share of the failures are correlated: a rack (``rack_size`` neighbouring nodes, a switch or
  its power) fails as one interruption, as Llama 3 counts one;
* a replacement takes a lognormal time (median ``replacement_median_seconds``, shape
  ``replacement_sigma``, clipped to [min, max]): ASSUMPTION, AWS publishes no distribution;
* a share of replacements come back sick (their health gate fails), and a share of reboots
  do not help (the ladder then replaces the node): ASSUMPTIONS, configurable;
* silent hangs (a rank stuck where no watchdog ends the job: a data-loader deadlock, a stuck
  filesystem read) come on top of the table, at ``hang_share`` of its rate, from a stream of their
  own (a trace without hangs is the same trace, failure for failure). ASSUMPTION: 2 %, between
  Llama 3's NCCL-watchdog share (1.7 %, which its watchdog ends: ``nccl_watchdog``) and
  ByteRobust's 9.9 % of incidents that were hangs. Only the hang detector
  (functions/detect_hung_jobs) finds one: the trace sends no event for it;
* precursors (issue 50): each node fault of one node (a reboot's or a replacement's; not a rack's,
  not a job's or a hang's, which no node signal announces) is announced with probability ``recall``,
  ``lead`` seconds before it (lognormal: median ``lead_median_seconds``, shape ``lead_sigma``), by a
  signal named for its fault; and false alarms come at ``false_alarm_rate_per_1000_node_days`` on
  nodes that will not fail in the rest of the run. Each from a stream of its own: a trace with
  precursors is the same trace, failure for failure, and a failure announced at one recall is
  announced at every higher one (the draws are shared). ASSUMPTIONS all three: no study publishes
  the recall or lead time of GPU precursors (docs/goodput.md, "At-risk signals").
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

Remedy = Literal["reboot", "replace", "job", "hang"]
SECONDS_PER_DAY = 86_400.0

# Published rates, failures per 1,000 node-days.
RATES = {"llama3": 3.79, "rsc1": 6.50, "rsc2": 2.34}


@dataclass(frozen=True)
class FaultType:
    name: str
    weight: int  # its count in the published table
    remedy: Remedy
    hmm_fault: str  # the fault type HyperPod's health agent names (what the event's reason says)
    detect_seconds: float  # from the failure to the event that tells the stack (ASSUMPTIONS below)


# ASSUMPTIONS: HyperPod's health agent reports a hardware fault about a minute after it happens; a
# crashing job's epilog reports it at once; a rank stuck in a collective is ended by the NCCL watchdog
# after its default timeout, 10 minutes (the ~10 min ByteRobust and Meta quote for NCCL-timeout faults).
HMA_SECONDS = 60.0
CRASH_SECONDS = 0.0
NCCL_TIMEOUT_SECONDS = 600.0

# Llama 3 (arXiv 2407.21783) Table 5, the 419 unexpected interruptions of the 54-day snapshot.
LLAMA3_TABLE5: tuple[FaultType, ...] = (
    FaultType("faulty_gpu", 148, "replace", "NvidiaErrorTerminate", HMA_SECONDS),
    FaultType("gpu_hbm3", 72, "replace", "NvidiaErrorTerminate", HMA_SECONDS),
    FaultType("software_bug", 54, "job", "", CRASH_SECONDS),
    FaultType("network_switch_cable", 35, "replace", "NetworkErrorTerminate", HMA_SECONDS),
    FaultType("host_maintenance", 32, "reboot", "NodeErrorReboot", HMA_SECONDS),
    FaultType("gpu_sram", 19, "replace", "NvidiaErrorTerminate", HMA_SECONDS),
    FaultType("gpu_system_processor", 17, "reboot", "NvidiaErrorReboot", HMA_SECONDS),
    FaultType("nic", 7, "replace", "NetworkErrorTerminate", HMA_SECONDS),
    FaultType("nccl_watchdog", 7, "job", "", NCCL_TIMEOUT_SECONDS),
    FaultType("silent_data_corruption", 6, "replace", "NvidiaErrorTerminate", HMA_SECONDS),
    FaultType("gpu_thermal_sensor", 6, "replace", "NvidiaErrorTerminate", HMA_SECONDS),
    FaultType("ssd", 3, "replace", "NodeErrorTerminate", HMA_SECONDS),
    FaultType("power_supply", 3, "replace", "NodeErrorTerminate", HMA_SECONDS),
    FaultType("server_chassis", 2, "replace", "NodeErrorTerminate", HMA_SECONDS),
    FaultType("io_expansion_board", 2, "replace", "NodeErrorTerminate", HMA_SECONDS),
    FaultType("dependency", 2, "job", "", CRASH_SECONDS),
    FaultType("cpu", 2, "replace", "NodeErrorTerminate", HMA_SECONDS),
    FaultType("system_memory", 2, "replace", "NodeErrorTerminate", HMA_SECONDS),
)
# What a correlated event is: a rack's switch or power (a replacement of each node).
RACK_FAULT = FaultType("rack", 0, "replace", "NetworkErrorTerminate", HMA_SECONDS)
# A silent hang: no event at all (detect_seconds 0: the trace's moment is the hang's start; the
# detector's ticks find it). Its node is the one whose rank stopped first.
HANG_FAULT = FaultType("hang", 0, "hang", "", 0.0)

# The signal that announces each node fault (plan50.md's names): what DCGM or NVML would raise before it.
# ASSUMPTION: a plausible precursor per fault; no study ties one to the other with numbers.
PRECURSOR_SIGNAL = {
    "faulty_gpu": "xid_warning",
    "gpu_hbm3": "row_remap_pending",
    "gpu_sram": "ecc_sbe_rate",
    "gpu_system_processor": "recovery_action",
    "network_switch_cable": "nvlink_errors",
    "nic": "pcie_replay_rate",
    "gpu_thermal_sensor": "thermal",
    "silent_data_corruption": "ecc_sbe_rate",
}
DEFAULT_SIGNAL = "node_history"  # (the rest: the ledger's history of the node, a lemon score)
FALSE_ALARM_SIGNALS = ("row_remap_pending", "ecc_sbe_rate", "xid_warning", "nvlink_errors")


@dataclass(frozen=True)
class TraceSpec:
    nodes: int
    days: float
    seed: int = 0
    rate_per_1000_node_days: float = RATES["llama3"]
    mix: tuple[FaultType, ...] = LLAMA3_TABLE5
    correlated_share: float = 0.02  # of interruptions: a rack at once
    rack_size: int = 16
    replacement_median_seconds: float = 600.0
    replacement_sigma: float = 0.35
    replacement_min_seconds: float = 240.0
    replacement_max_seconds: float = 3_600.0
    gate_fail_share: float = 0.03  # of replacements: the new node fails its health gate
    reboot_fail_share: float = 0.10  # of reboots: the node does not come back (the ladder replaces it)
    start_seconds: float = 600.0  # no failure before the jobs have run this long
    hang_share: float = 0.02  # silent hangs, on top of the table's failures: a share of its rate (ASSUMPTION above)
    # Precursors (ASSUMPTIONS above): the share of node faults announced, how long before, false alarms' rate.
    recall: float = 0.0
    lead_median_seconds: float = 3_600.0
    lead_sigma: float = 1.0
    false_alarm_rate_per_1000_node_days: float = 0.0

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.days <= 0 or self.rate_per_1000_node_days < 0:
            raise ValueError("a trace needs nodes >= 1, days > 0 and a rate >= 0")
        for name in ("correlated_share", "gate_fail_share", "reboot_fail_share", "hang_share", "recall"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be a share in [0, 1]")
        if self.lead_median_seconds <= 0 or self.lead_sigma < 0 or self.false_alarm_rate_per_1000_node_days < 0:
            raise ValueError("a precursor's lead needs a median > 0 and a shape >= 0, false alarms a rate >= 0")
        if not self.mix or any(t.weight <= 0 for t in self.mix):
            raise ValueError("the fault mix needs types of positive weight")

    @property
    def node_days(self) -> float:
        return self.nodes * self.days

    @property
    def expected_failures(self) -> float:
        return self.rate_per_1000_node_days * self.node_days / 1000.0


@dataclass(frozen=True)
class Failure:
    at: float  # virtual seconds from the run's start
    nodes: tuple[int, ...]  # worker indices (one; a rack's several)
    fault: str
    remedy: Remedy
    hmm_fault: str
    detect_seconds: float = 0.0
    correlated: bool = False
    replacement_seconds: float = 0.0  # how long HyperPod takes to bring a replacement up
    gate_fails: bool = False  # the replacement comes back sick (its health gate fails)
    reboot_fails: bool = False  # a reboot does not bring the node back


@dataclass(frozen=True)
class Precursor:
    """An at-risk signal on a node: ``lead`` seconds before ``failure`` (it announces), or a false alarm (None)."""

    at: float
    node: int  # a worker index
    signal: str
    failure: Failure | None = None

    @property
    def lead_seconds(self) -> float | None:
        return None if self.failure is None else round(self.failure.at - self.at, 3)


@dataclass(frozen=True)
class Trace:
    spec: TraceSpec
    failures: tuple[Failure, ...] = field(default_factory=tuple)
    precursors: tuple[Precursor, ...] = field(default_factory=tuple)

    def announceable(self) -> list[Failure]:
        """The failures a node signal can announce: one node's hardware fault (a reboot's or a replacement's)."""
        return [f for f in self.failures if announceable(f)]

    def counts(self) -> Counter[str]:
        return Counter(f.fault for f in self.failures)

    def by_remedy(self) -> Counter[str]:
        return Counter(f.remedy for f in self.failures)


def generate(spec: TraceSpec) -> Trace:
    """The trace ``spec`` describes: failures in time order."""
    rng = random.Random(f"fleet-trace/{spec.seed}")  # noqa: S311 - a reproducible simulation, not security
    end = spec.days * SECONDS_PER_DAY
    rate_per_second = spec.rate_per_1000_node_days / 1000.0 * spec.nodes / SECONDS_PER_DAY
    weights = [t.weight for t in spec.mix]
    failures: list[Failure] = []
    t = spec.start_seconds
    while rate_per_second > 0:
        t += rng.expovariate(rate_per_second)
        if t >= end:
            break
        node = rng.randrange(spec.nodes)
        correlated = spec.nodes >= spec.rack_size > 1 and rng.random() < spec.correlated_share
        if correlated:
            first = node - node % spec.rack_size
            nodes = tuple(range(first, min(first + spec.rack_size, spec.nodes)))
            kind = RACK_FAULT
        else:
            nodes = (node,)
            kind = rng.choices(spec.mix, weights)[0]
        replacement = math.exp(rng.gauss(math.log(spec.replacement_median_seconds), spec.replacement_sigma))
        replacement = min(spec.replacement_max_seconds, max(spec.replacement_min_seconds, replacement))
        gate_fails = rng.random() < spec.gate_fail_share
        reboot_fails = rng.random() < spec.reboot_fail_share
        failures.append(  # (sorted with the hangs below)
            Failure(
                at=round(t, 3),
                nodes=nodes,
                fault=kind.name,
                remedy=kind.remedy,
                hmm_fault=kind.hmm_fault,
                detect_seconds=kind.detect_seconds,
                correlated=correlated,
                replacement_seconds=round(replacement, 1),
                gate_fails=gate_fails and kind.remedy != "job",
                reboot_fails=reboot_fails and kind.remedy == "reboot",
            )
        )
    failures += _hangs(spec, end)
    ordered = tuple(sorted(failures, key=lambda f: f.at))
    precursors = _announcements(spec, ordered) + _false_alarms(spec, ordered, end)
    return Trace(spec, ordered, tuple(sorted(precursors, key=lambda p: (p.at, p.node))))


def announceable(failure: Failure) -> bool:
    return failure.remedy in ("reboot", "replace") and not failure.correlated and len(failure.nodes) == 1


def _announcements(spec: TraceSpec, failures: tuple[Failure, ...]) -> list[Precursor]:
    """Each announceable failure is announced with probability ``recall``, ``lead`` before it (not before
    the run's start). Every failure draws both, whatever the recall: one seed, the same leads at every recall."""
    rng = random.Random(f"fleet-trace/{spec.seed}/precursors")  # noqa: S311 - a reproducible simulation
    found: list[Precursor] = []
    for failure in failures:
        if not announceable(failure):
            continue
        chance, lead = rng.random(), math.exp(rng.gauss(math.log(spec.lead_median_seconds), spec.lead_sigma))
        if chance < spec.recall:
            signal = PRECURSOR_SIGNAL.get(failure.fault, DEFAULT_SIGNAL)
            found.append(Precursor(round(max(0.0, failure.at - lead), 3), failure.nodes[0], signal, failure))
    return found


def _false_alarms(spec: TraceSpec, failures: tuple[Failure, ...], end: float) -> list[Precursor]:
    """False alarms: a Poisson stream at their rate, each on a node drawn among those that do not fail from
    then to the run's end (a node drawn that will fail is drawn again: the rate is of alarms that are false)."""
    rng = random.Random(f"fleet-trace/{spec.seed}/false-alarms")  # noqa: S311 - a reproducible simulation
    rate_per_second = spec.false_alarm_rate_per_1000_node_days / 1000.0 * spec.nodes / SECONDS_PER_DAY
    last_failure: dict[int, float] = {}
    for failure in failures:
        for node in failure.nodes:
            last_failure[node] = failure.at
    alarms: list[Precursor] = []
    t = 0.0
    while rate_per_second > 0:
        t += rng.expovariate(rate_per_second)
        if t >= end:
            break
        for _ in range(64):  # (nearly every node is free of failures: a draw or two)
            node = rng.randrange(spec.nodes)
            if last_failure.get(node, -1.0) < t:
                alarms.append(Precursor(round(t, 3), node, rng.choice(FALSE_ALARM_SIGNALS)))
                break
    return alarms


def _hangs(spec: TraceSpec, end: float) -> list[Failure]:
    """Silent hangs: a Poisson stream at ``hang_share`` of the rate, its own seed (the table's trace is unchanged)."""
    rng = random.Random(f"fleet-trace/{spec.seed}/hangs")  # noqa: S311 - a reproducible simulation
    rate_per_second = spec.hang_share * spec.rate_per_1000_node_days / 1000.0 * spec.nodes / SECONDS_PER_DAY
    hangs: list[Failure] = []
    t = spec.start_seconds
    while rate_per_second > 0:
        t += rng.expovariate(rate_per_second)
        if t >= end:
            break
        kind = HANG_FAULT
        hangs.append(Failure(at=round(t, 3), nodes=(rng.randrange(spec.nodes),), fault=kind.name, remedy=kind.remedy, hmm_fault=""))
    return hangs
