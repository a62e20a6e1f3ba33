"""The names of the executions the pipeline starts. Each is derived from what started it, so a
duplicate event (or a retried start) arrives at a name Step Functions already holds and is turned
away: the name is the exactly-once key of a recovery. Step Functions allows 80 characters.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_recovery.models.requests import RecoveryRequest

NAME_LIMIT = 80  # Step Functions' longest execution name
CHILD_SUFFIX = "-nodes"


def incident_id_for(request: RecoveryRequest, episode_window_seconds: int) -> str:
    """NodeRecovery: the same nodes in the same fault episode give the same name, so a duplicate
    event cannot start a second execution (Step Functions refuses the name)."""
    episode_start = int(request.detected_at.timestamp()) // episode_window_seconds * episode_window_seconds
    stamp = datetime.fromtimestamp(episode_start, UTC).strftime("%Y%m%dT%H%M")
    if len(request.node_ids) == 1:
        return f"hpr-{request.node_ids[0]}-{stamp}"
    digest = hashlib.sha256("|".join([request.cluster, *request.node_ids]).encode()).hexdigest()[:10]
    return f"hpr-{len(request.node_ids)}n-{digest}-{stamp}"


def job_execution_name(job_id: str, ended_at: datetime) -> str:
    """JobRecovery: one execution per job end, so a redelivered event cannot start a second one."""
    return f"hpj-{job_id}-{int(ended_at.timestamp())}"


def node_execution_name(execution_name: str) -> str:
    """The NodeRecovery a JobRecovery nests: derived, so a retried start finds the same execution."""
    return f"{execution_name[: NAME_LIMIT - len(CHILD_SUFFIX)]}{CHILD_SUFFIX}"


def hang_execution_name(job: str, reason: str, episode_at: datetime) -> str:
    """JobRecovery of a hang or slowdown: one per job and episode (``hpj-1001-hung-<epoch>``), so a
    stall seen by every tick of the detector starts one execution."""
    return f"hpj-{job}-{reason}-{int(episode_at.timestamp())}"


HANG_MARK = "-hung-"


PLANNED_SWAP_MARK = "hps-"


def planned_swap_execution_name(verdict_id: str) -> str:
    """PlannedSwap: one per at-risk verdict (``hps-<verdict_id>``); a longer id keeps its start and
    ends in a digest of the whole, so two ids never share a name. Step Functions allows letters,
    digits, - and _ (a verdict id holds no other)."""
    name = f"{PLANNED_SWAP_MARK}{verdict_id}"
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(verdict_id.encode()).hexdigest()[:10]
    return f"{name[: NAME_LIMIT - len(digest) - 1]}-{digest}"
