"""The HyperPod double's nodes (sandbox/hyperpod.py): each instance's history as timed transitions
(HyperPod's status, its slurmd, its boots), and what a replacement or a reboot did."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimNode:
    node_id: str
    group: str
    index: int
    ip: str
    hostname: str
    instance_type: str
    created_at: float
    transitions: list[tuple[float, str]]
    logical_id: str = ""
    removed_at: float | None = None
    generation: int = 0
    # slurmd on this instance: (moment, responding from then on)
    slurmd: list[tuple[float, bool]] = field(default_factory=list)
    # (moment slurmd registered, the host's boot time it registered with)
    boots: list[tuple[float, float]] = field(default_factory=list)

    def exists_at(self, t: float) -> bool:
        return self.created_at <= t and (self.removed_at is None or t < self.removed_at)

    def status_at(self, t: float) -> str:
        status = "Pending"
        for moment, value in self.transitions:
            if moment <= t:
                status = value
        return status


@dataclass
class ReplacementRecord:
    old_node_id: str
    new_node_id: str
    hostname: str
    initiated_at: float
    running_at: float | None  # None: never rejoins
    initiated_by: str  # "api" or "hyperpod" (its own NodeRecovery)
    new_hostname: str = ""  # the replacement's (the same unless behaviour.replacement_hostname is new)


@dataclass
class RebootRecord:
    node_id: str  # a reboot keeps the instance
    hostname: str
    initiated_at: float
    running_at: float | None  # None: the reboot left it in Failure
