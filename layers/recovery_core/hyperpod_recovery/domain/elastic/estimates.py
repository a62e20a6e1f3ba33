"""The figures shrink-or-wait decides on: the expected wait for a replacement (measured on this
cluster, per instance group, from the ledger's recovery log) and the cost of growing back."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from statistics import median

from hyperpod_recovery.domain.elastic.decide import Estimate
from hyperpod_recovery.models.records import RecoveryLogEntry

# Fewer measured replacements than this and the stack's parameter decides: one slow replacement
# must not make every job shrink, nor one quick one make every job wait.
MIN_MEASURED_REPLACEMENTS = 3
MEASURED_WINDOW_DAYS = 30


def expected_wait(log: Sequence[RecoveryLogEntry], groups: Collection[str], *, parameter_seconds: int) -> Estimate:
    """The median measured replacement of ``groups``' nodes (the nodes this incident replaces), once
    there are MIN_MEASURED_REPLACEMENTS of them; else ``parameter_seconds`` (ExpectedReplacementSeconds)."""
    wanted = set(groups)
    measured = [e.replaced_seconds for e in log if e.replaced_seconds is not None and (not wanted or wanted & set(e.instance_groups))]
    if len(measured) < MIN_MEASURED_REPLACEMENTS:
        return Estimate(parameter_seconds, "parameter")
    return Estimate(int(median(measured)), "measured")


def grow_back_cost(parameter_seconds: int) -> Estimate:
    """One restart of the job at full size. ASSUMPTION until restarts are measured per job (the
    progress reports' first step after a resubmission would tell it): the stack's ElasticGrowBackSeconds."""
    return Estimate(parameter_seconds, "parameter")
