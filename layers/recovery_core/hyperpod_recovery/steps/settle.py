"""Every end of an incident settles what it holds: node locks, places under the cluster cap and
resubmission claims. Record Outcome (and Record Job Outcome) call this at a normal end; Reconcile
Execution calls it when the execution was aborted, timed out or crashed before recording.

One path for both, so an end that skips Record Outcome cannot leave the cap shrunk or a job
blocked. Idempotent: what is already settled is no longer in the holdings.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import Holdings
    from hyperpod_recovery.ports import Settlement


def settle_holdings(
    ledger: Settlement,
    incident_id: str,
    *,
    resubmitted: dict[str, str],
    hold_locks_until: datetime | None,
    now: datetime,
    in_flight: Collection[str] = (),
    in_flight_until: datetime | None = None,
    keep_claims: Collection[str] = (),
) -> Holdings | None:
    """Complete the claims of the jobs this incident resubmitted (old job id -> new job id), give
    back every other claim (nothing was submitted, or Slurm requeued the job itself), give back
    the cap places, and release the node locks or keep them until ``hold_locks_until``.

    ``in_flight``: nodes still out of service when the incident ended without seeing them back
    (a replacement it initiated, then was stopped): their places under the cap are kept until
    ``in_flight_until`` (then expire on their own) instead of given back, so an ended incident
    never lets the cap count fewer nodes than are out.

    ``keep_claims``: claims whose outcome is unknown (a resubmission asked for, no answer seen):
    left in place until they expire, never given back to a second restart.

    Returns what was held (None when the incident never held anything: a dry run, a rejection)."""
    held = ledger.holdings(incident_id)
    if held is None:
        return None
    for job_id, new_job_id in sorted(resubmitted.items()):
        ledger.complete_resubmission(held.cluster, job_id, incident_id, new_job_id)
    for job_id in sorted((held.claims & set(keep_claims)) - set(resubmitted)):
        ledger.keep_resubmission(held.cluster, job_id, incident_id)
    for job_id in sorted(held.claims - set(resubmitted) - set(keep_claims)):
        ledger.release_resubmission(held.cluster, job_id, incident_id)
    kept = sorted(held.reserved & set(in_flight)) if in_flight_until is not None else []
    if kept:
        assert in_flight_until is not None
        ledger.hold_capacity_until(held.cluster, incident_id, kept, in_flight_until, now)
    if held.reserved - set(kept):
        ledger.release_capacity(held.cluster, incident_id, sorted(held.reserved - set(kept)), now)
    if held.locks:
        ledger.release_locks(incident_id, held.cluster, sorted(held.locks), hold_locks_until)
    return held
