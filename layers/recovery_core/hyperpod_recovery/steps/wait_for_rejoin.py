"""Wait For Rejoin: the wait between two rejoin checks, which a Cluster Event can cut short.

The state waits for its task token at most the watch's next wait (TimeoutSecondsPath): its
timeout is the polling fallback, on every cluster. This step puts the token where Notice Cluster
Event finds it (the ledger); a dry run, or a watch with nothing left to wait for, goes on at once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.nodes.rejoin_events import rejoin_wait
from hyperpod_recovery.domain.policy.limits import MAX_EVENT_WAKES
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import WaitForRejoinInput
    from hyperpod_recovery.ports import RejoinWaits, Workflows


def wait_for_rejoin(step: WaitForRejoinInput, *, ledger: RejoinWaits, workflows: Workflows, cluster: str, now: datetime) -> dict[str, Any]:
    watch = step.rejoin
    if watch.dry_run or watch.done:
        workflows.wake(step.task_token, json.dumps({"woken_by": "nothing to wait for", "at": now.isoformat()}))
        return {"registered": False}
    if not watch.announced:
        # The cluster announces no replacement's end (not Continuous, or a reboot): nothing would
        # answer the token early, so nothing is registered.
        return {"registered": False, "reason": "no Cluster Event announces these nodes' return"}
    if watch.checks >= MAX_EVENT_WAKES:
        # The history's bound counts this many passes a Cluster Event may cut short; past them
        # the wait is its timeout alone (the fallback cadence).
        return {"registered": False, "reason": f"{MAX_EVENT_WAKES} checks made: the timeout alone ends this wait"}
    until = now + timedelta(seconds=watch.next_wait_seconds)
    try:
        ledger.await_rejoin(cluster, rejoin_wait(step.execution_name, step.task_token, watch, until), now)
    except (LedgerUnavailable, LedgerError) as exc:
        # Only the early wake-up is lost: the wait still ends at its timeout and Check Rejoin looks.
        logger.warning("could not register the wait for a Cluster Event; polling only", extra={"reason": str(exc)})
        return {"registered": False, "reason": str(exc)[:256]}
    return {"registered": True, "until": until.isoformat()}
