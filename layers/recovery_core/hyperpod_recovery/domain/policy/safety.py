"""The safety policy, evaluated before anything destructive (pure).

In order: an open circuit breaker stops everything; too many recoveries (or too many failed ones)
in the breaker's window trip it; a node recovered too often in its window is a repeat offender and
goes to a human instead of being replaced again; and the cluster cap bounds how many nodes may be
in recovery at once (a percent of the compute nodes AND an absolute count, the smaller wins).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.models.node_recovery import Assessment, SafetyDecision, SkippedNode

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import BreakerState, RecoveryLogEntry

# Ends of recoveries that acted on their nodes (aborted and failed ones may have: Reconcile Execution
# logs them when they had passed the safety policy), and the ones the breaker counts as failures.
ACTED_OUTCOMES = ("recovered", "escalated", "aborted", "failed")
FAILED_OUTCOMES = ("escalated", "failed")


@dataclass(frozen=True)
class SafetyPolicy:
    """template.yaml's MaxNodesInRecovery*, Breaker* and RepeatOffender* parameters."""

    max_percent: float
    max_nodes: int
    breaker_max_recoveries: int
    breaker_max_failures: int
    breaker_window_seconds: int
    offender_max_recoveries: int
    offender_window_seconds: int

    def limit(self, compute_nodes: int) -> int:
        """Nodes allowed in recovery at once. At least one, so a small cluster can still heal."""
        return max(1, min(self.max_nodes, math.floor(compute_nodes * self.max_percent / 100)))

    @property
    def log_seconds(self) -> int:
        return max(self.breaker_window_seconds, self.offender_window_seconds)


def breaker_trip_reason(policy: SafetyPolicy, log: list[RecoveryLogEntry], now: datetime) -> str | None:
    recent = [e for e in log if e.at >= now - timedelta(seconds=policy.breaker_window_seconds)]
    failed = [e for e in recent if e.outcome in FAILED_OUTCOMES]
    window = f"in the last {policy.breaker_window_seconds} s"
    if len(recent) >= policy.breaker_max_recoveries:
        return f"{len(recent)} recoveries {window} (limit {policy.breaker_max_recoveries}): a wider problem than single nodes"
    if len(failed) >= policy.breaker_max_failures:
        incidents = ", ".join(e.incident for e in failed[-3:])
        return f"{len(failed)} failed recoveries {window} (limit {policy.breaker_max_failures}; latest {incidents})"
    return None


def apply_safety_policy(
    assessment: Assessment,
    policy: SafetyPolicy,
    *,
    breaker: BreakerState,
    log: list[RecoveryLogEntry],
    in_recovery: set[str],
    now: datetime,
) -> Assessment:
    """The assessment as the rest of the workflow may act on it: offenders moved to ``skipped``,
    and ``proceed`` false when the breaker or the cap says no. Nothing is written here."""
    targets = list(assessment.targets)
    limit = policy.limit(assessment.compute_nodes)
    others = in_recovery - {t.node_id for t in targets}

    def verdict(**fields: object) -> Assessment:
        decision = SafetyDecision(at=now, in_recovery_before=len(others), limit=limit, **fields)
        return assessment.model_copy(update={"safety": decision, "proceed": bool(assessment.targets) and not decision.capped})

    if breaker.state == "open":
        return verdict(
            capped=True, error="CircuitBreakerOpen", reason=f"the circuit breaker is open since {breaker.changed_at}: {breaker.reason}"
        )
    tripped = breaker_trip_reason(policy, log, now)
    if tripped:
        return verdict(capped=True, error="CircuitBreakerOpen", reason=f"circuit breaker tripped: {tripped}", breaker_tripped_now=True)

    offender_since = now - timedelta(seconds=policy.offender_window_seconds)
    skipped = list(assessment.skipped)
    kept = []
    for target in targets:
        times = sum(1 for e in log if e.at >= offender_since and e.outcome in ACTED_OUTCOMES and target.slurm_node in e.hostnames)
        if times >= policy.offender_max_recoveries:
            skipped.append(
                SkippedNode(
                    node_id=target.node_id,
                    reason="repeat_offender",
                    detail=f"{target.slurm_node} was recovered {times} times in the last {policy.offender_window_seconds} s: "
                    "not replaced again, a human should look at it",
                )
            )
        else:
            kept.append(target)
    assessment = assessment.model_copy(update={"targets": kept, "skipped": skipped})
    if not kept:
        return verdict().model_copy(update={"proceed": False})
    if len(others) + len(kept) > limit:
        return verdict(
            capped=True,
            error="ClusterCapReached",
            reason=f"{len(others)} node(s) already in recovery + {len(kept)} more would exceed the cap of {limit} "
            f"({policy.max_percent:g}% of {assessment.compute_nodes} compute nodes, at most {policy.max_nodes})",
        )
    return verdict(reserved=[t.node_id for t in kept])
