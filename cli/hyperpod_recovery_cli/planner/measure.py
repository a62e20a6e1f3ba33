"""The planner's figures from what a deployed stack keeps: incident records (phases, failures), the
recovery log (replacement times) and a job's checkpoint manifests (commit times). Pure: the
readers (cli/hyperpod_recovery_cli/goodput_inputs.py) fetch, these decide what counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise
from statistics import fmean, median

from hyperpod_recovery.domain.elastic.estimates import same_location
from hyperpod_recovery.models.records import IncidentRecord, RecoveryLogEntry
from hyperpod_recovery.vocabulary import PhaseName
from hyperpod_recovery_cli.planner.model import RecoveryPhase

# Which of an incident record's phases (domain/record/node_incident.py build_phases) make each planner phase.
# detect runs from the fault's detection to the pipeline's go-ahead; health_gate is Resume Nodes with
# its health check; restart is the pipeline's part of it (the job's own start-up after its
# resubmission, NCCL init and checkpoint load, is not in the ledger).
LEDGER_PHASES: dict[RecoveryPhase, tuple[PhaseName, ...]] = {
    "detect": ("detect", "assess"),
    "cordon": ("cordon", "find_jobs"),
    "replace": ("replace",),
    "rejoin": ("wait_for_rejoin",),
    "health_gate": ("resume",),
    "restart": ("find_checkpoint", "resubmit"),
}
# A node fault the pipeline saw, whatever it then did (a dry run included: the fault was real);
# a duplicate, a refused or stale request is another incident's fault or none.
NOT_A_FAILURE = frozenset({"duplicate", "rejected", "stale"})
# A request someone started by hand (a drill, an operator) is no failure of the fleet.
BY_HAND = "manual"


def is_failure(record: IncidentRecord) -> bool:
    return record.workflow == "node" and record.outcome not in NOT_A_FAILURE and any(source != BY_HAND for source in record.trigger)


def measured_from(record: IncidentRecord) -> bool:
    """Phases that are real waits: a recovery that ran (not a dry run, whose waits are not waits) to its end."""
    return record.workflow == "node" and record.outcome == "recovered" and not record.dry_run


def phase_seconds(record: IncidentRecord) -> dict[RecoveryPhase, float]:
    """The planner's phases one incident went through, each the sum of its ledger phases."""
    found: dict[RecoveryPhase, float] = {}
    for phase, names in LEDGER_PHASES.items():
        spans = [(p.end - p.start).total_seconds() for p in record.phases if p.name in names]
        if spans:
            found[phase] = sum(spans)
    return found


def mean_phases(records: Sequence[IncidentRecord]) -> dict[RecoveryPhase, tuple[float, int]]:
    """Per planner phase: (mean seconds, incidents) over the recovered incidents that went through it.
    The mean, because ETTR loses the expected recovery time per failure; over the incidents that had
    the phase, because the model charges every failure with every phase."""
    seen: dict[RecoveryPhase, list[float]] = {}
    for record in records:
        if measured_from(record):
            for phase, seconds in phase_seconds(record).items():
                seen.setdefault(phase, []).append(seconds)
    return {phase: (fmean(values), len(values)) for phase, values in seen.items()}


def mean_replacement(log: Sequence[RecoveryLogEntry]) -> tuple[float, int] | None:
    """(mean seconds, replacements) from the replacement call to back through the health gate: how
    long a failed node's place stays empty. None without any."""
    measured = [entry.replaced_seconds for entry in log if entry.replaced_seconds is not None]
    return (fmean(measured), len(measured)) if measured else None


def mean_startup(log: Sequence[RecoveryLogEntry], checkpoint_uri: str | None = None) -> tuple[float, int] | None:
    """(mean seconds, restarts) of the jobs' own start-up after a resubmission was answered (scheduling,
    NCCL init, the checkpoint's load), as the pipeline measured it from shrunk copies' checkpoint times
    (domain/elastic/estimates.py restart_seconds): after the record's resubmit phase, never overlapping
    it. ``checkpoint_uri``: that job's only. None without any."""
    measured = [
        r.seconds for entry in log for r in entry.restarts if checkpoint_uri is None or same_location(r.checkpoint_uri, checkpoint_uri)
    ]
    return (fmean(measured), len(measured)) if measured else None


def commit_gap_seconds(commit_times: Sequence[datetime]) -> tuple[float, int] | None:
    """(median seconds between consecutive commits, gaps): the checkpoint period τ + δ. The median,
    so that the long gap around a failure (rework, recovery) does not count. None under two commits."""
    times = sorted(commit_times)
    gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(times)]
    gaps = [gap for gap in gaps if gap > 0]
    return (median(gaps), len(gaps)) if gaps else None
