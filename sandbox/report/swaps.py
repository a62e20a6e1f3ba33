"""The drill report's planned swaps: each PlannedSwap's record (the ledger's INCIDENT#<swap>/SWAP), and
the issue's two goals measured on the simulated cluster: the work lost past the checkpoint (from the
manifest's commit until the old copy stopped training) and the time to running again (from the commit
until the new copy ran)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.jobs.eks_jobs import RESUBMITTED_FROM_ANNOTATION
from hyperpod_recovery.models.planned_swap import SwapRecord
from sandbox.report.source import DrillSource

SWAP_PREFIX = "hps-"


def planned_swaps(runner: DrillSource, ledger: DynamoLedger, names: list[str]) -> list[dict[str, Any]]:
    swaps = []
    for name in sorted(n for n in names if n.startswith(SWAP_PREFIX) and not n.endswith("-nodes")):
        record = ledger.swap_record(name)
        if record is None:
            swaps.append({"id": name, "outcome": "unrecorded"})
            continue
        swaps.append({**_shown(record, runner.epoch), **_goals(runner, record)})
    return swaps


def _seconds(moment: datetime | None, epoch: datetime) -> float | None:
    return None if moment is None else round((moment - epoch).total_seconds(), 3)


def _shown(record: SwapRecord, epoch: datetime) -> dict[str, Any]:
    cost = record.cost
    return {
        "id": record.swap_id,
        "outcome": record.outcome,
        "signal": record.signal,
        "node": record.node,
        "job": record.job_id,
        "dry_run": record.dry_run,
        "summary": record.summary,
        "checkpoint_step": record.checkpoint_step,
        "committed_at": _seconds(record.committed_at, epoch),
        "seen_at": _seconds(record.seen_at, epoch),
        "nested_incident": record.nested_incident,
        "nested_outcome": record.nested_outcome,
        **(
            {
                "action": cost.action,
                "swap_node_seconds": cost.swap_node_seconds,
                "keep_node_seconds": cost.keep_node_seconds,
                "figures": {f.name: [f.value, f.source] for f in cost.figures},
            }
            if cost is not None
            else {}
        ),
    }


def _goals(runner: DrillSource, record: SwapRecord) -> dict[str, Any]:
    """Work lost past the commit and time to running again, where the drill's cluster shows them."""
    if record.committed_at is None or record.job_id is None:
        return {}
    if runner.eks is not None:
        return _kube_goals(runner, record)
    slurm = getattr(runner.slurm, "slurm", None)
    if slurm is None:
        return {}
    old = slurm.jobs.get(record.job_id)
    if old is None:
        return {}
    stops = [m for m in (old.ended_at, old.completing_until) if m is not None]
    copies = [j for j in slurm.jobs.values() if j.resubmission_of == record.job_id and j.started_at is not None]
    goals: dict[str, Any] = {}
    if stops:
        goals["work_lost_past_checkpoint_seconds"] = round(max(0.0, (min(stops) - record.committed_at).total_seconds()), 3)
    if copies:
        goals["running_again_after_commit_seconds"] = round((min(j.started_at for j in copies) - record.committed_at).total_seconds(), 3)
    return goals


def _kube_goals(runner: DrillSource, record: SwapRecord) -> dict[str, Any]:
    """EKS: the job object (its uid) trained while all its pods ran (FakeKube.runs()); its re-creation
    names it in its resubmitted-from annotation."""
    assert runner.eks is not None and record.committed_at is not None
    kube = runner.eks.kube
    runs = kube.runs()
    committed = (record.committed_at - runner.epoch).total_seconds()
    goals: dict[str, Any] = {}
    ended = [end for _, end in runs.get(record.job_id or "", []) if end is not None and end >= committed]
    if ended:
        goals["work_lost_past_checkpoint_seconds"] = round(min(ended) - committed, 3)
    copies = [
        spans[0][0]
        for obj in kube.jobs.values()
        if ((obj["metadata"].get("annotations") or {}).get(RESUBMITTED_FROM_ANNOTATION)) == record.job_id
        and (spans := runs.get(obj["metadata"]["uid"]))
        and spans[0][0] is not None
    ]
    if copies:
        goals["running_again_after_commit_seconds"] = round(min(copies) - committed, 3)
    return goals


def swap_contradictions(swaps: Sequence[SwapRecord], swap_id: str, note: dict[str, str]) -> list[str]:
    """What a planned swap's notification says that its record does not: its outcome, its costs, its job."""
    record = next((r for r in swaps if r.swap_id == swap_id), None)
    if record is None:
        return ["names no recorded planned swap"]
    problems = []
    if f"planned swap {record.outcome} " not in note["subject"]:
        problems.append(f"its subject does not say the recorded outcome {record.outcome!r}")
    if record.cost is not None and f"swap {record.cost.swap_node_seconds / 3600:,.2f} node-h" not in note["message"]:
        problems.append("it does not say the swap's recorded expected cost")
    if record.job_id is not None and record.job_id not in note["message"] + note["subject"]:
        problems.append(f"it does not name job {record.job_id}")
    return problems
