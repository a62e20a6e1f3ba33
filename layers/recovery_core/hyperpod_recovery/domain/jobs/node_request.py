"""The node recovery a job's incident starts for the nodes it found at fault: one request, one
trigger per node HyperPod knows by id, each with the reason the job's incident gives for it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.intake.reason_budget import within_reason_budget
from hyperpod_recovery.models.common import one_line
from hyperpod_recovery.models.requests import TRIGGER_REASON_LIMIT, JobRecoveryRequest, RecoveryRequest, Trigger, TriggerSource

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_recovery import FaultyNode

Recommendation = Literal["reboot", "replace", "check"]


def node_recovery_request(
    request: JobRecoveryRequest,
    nodes: Sequence[FaultyNode],
    source: TriggerSource,
    reason: Callable[[FaultyNode], str],
    recommends: Callable[[FaultyNode], Recommendation | None] = lambda _: None,
) -> RecoveryRequest | None:
    """The request for ``nodes`` that have a HyperPod id (a node known only by its name cannot be
    asked for); None when none has one."""
    known = [(f, f.node_id) for f in nodes if f.node_id]
    if not known:
        return None
    triggers = [
        Trigger(
            source=source,
            node_ids=[node_id],
            reason=one_line(reason(f), TRIGGER_REASON_LIMIT),
            recommends=recommends(f),
            event_id=request.event_id,
            detected_at=request.detected_at,
        )
        for f, node_id in known
    ]
    return RecoveryRequest(
        cluster=request.cluster,
        node_ids=sorted({node_id for _, node_id in known}),
        triggers=within_reason_budget(triggers),
        detected_at=request.detected_at,
        dry_run=request.dry_run,
    )
