"""`hyperpod-recovery-agent job-ended`: the EpilogSlurmctld hook that reports failed jobs.

slurmctld runs it once per job end, with the job in SLURM_JOB_* variables and no SLURM_CONF. What
Slurm 22.05 shows at that moment (checked on a real slurmctld): squeue reports the ending job as
COMPLETING, with the final state only in its reason (NonZeroExitCode, NodeDown, TimeLimit,
RaisedSignal...) and the exit code in SLURM_JOB_EXIT_CODE2 ("3:0" = exit 3, signal 0). 23.11+ list the
base state beside COMPLETING, which is read when it names a failure. A job Slurm requeues after a node
failure ends with reason None and exit 0: it is not reported, Slurm is already restarting it.

Exactly one event per job end: the event is spooled to disk first, and moved to ``sent/`` once
EventBridge has accepted it; a rerun of the hook for the same end finds it there. When EventBridge
cannot be reached the event stays in the spool and the agent's loop sends it later.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.models.commands import job_display_name
from hyperpod_recovery.models.job_events import (
    FAILED_STATES,
    FAILURE_DETAIL_BUDGET,
    JOB_EVENT_SOURCE,
    JOB_FAILED_DETAIL_TYPE,
    JobFailedDetail,
    fitted,
    names_left_out,
)
from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, SlurmCli, validate_job_id
from hyperpod_recovery_agent.slurm_json import SlurmJob

log = logging.getLogger("hyperpod_recovery_agent.job_ended")

# squeue's reason for a job that is still COMPLETING -> the state it is ending in.
_REASON_STATES = {"NodeDown": "NODE_FAIL", "NodeFail": "NODE_FAIL", "TimeLimit": "TIMEOUT", "NonZeroExitCode": "FAILED"}


def ended_state(job_state: str, reason: str, exit_code: int, signal: int, base_state: str | None = None) -> str | None:
    """The failure state a job is ending in, or None when it did not fail (completed, cancelled,
    requeued, preempted). ``base_state``: the state under squeue's word, when Slurm lists it (23.11+)."""
    if job_state in FAILED_STATES:
        return job_state
    if job_state == "COMPLETING" and base_state in FAILED_STATES:
        return base_state
    if job_state not in ("COMPLETING", ""):
        return None  # COMPLETED, CANCELLED, PREEMPTED, PENDING (requeued), ...
    if reason in _REASON_STATES:
        return _REASON_STATES[reason]
    if reason.startswith("RaisedSignal"):
        return "FAILED"
    # Cancelled jobs end with reason None and signal 15; a failure always carries a reason or an exit code.
    return "FAILED" if exit_code != 0 else None


def _exit_status(environ: Mapping[str, str], record: SlurmJob | None) -> tuple[int, int]:
    """(exit code, signal): SLURM_JOB_EXIT_CODE2 is "exit:signal"; else squeue's."""
    code, _, signal = environ.get("SLURM_JOB_EXIT_CODE2", "").partition(":")
    if code.isascii() and code.isdigit() and signal.isascii() and signal.isdigit():
        return int(code) & 0xFF, int(signal) & 0xFF
    ended = record.exit if record is not None else None
    return (ended.code, ended.signal) if ended is not None else (0, 0)


def failed_job_detail(
    environ: Mapping[str, str],
    slurm: SlurmCli,
    *,
    cluster_name: str,
    report_timeout: bool,
    now: datetime | None = None,
) -> JobFailedDetail | None:
    """The event detail for the job slurmctld is ending, or None when it did not fail."""
    job_id = validate_job_id(environ.get("SLURM_JOB_ID", ""))
    record = slurm.job_record(job_id)
    exit_code, signal = _exit_status(environ, record)
    reason = record.state_reason if record else ""
    state = ended_state(record.state if record else "", reason, exit_code, signal, record.base_state if record else None)
    if state is None or (state == "TIMEOUT" and not report_timeout):
        return None
    spec = slurm.job_spec_of(record) if record else None
    comment = (record.comment if record else "") or environ.get("SLURM_JOB_COMMENT", "")
    resubmission_of = None
    for token in comment.split():
        if token.startswith(RESUBMISSION_MARK):
            resubmission_of = token.removeprefix(RESUBMISSION_MARK)
    end_epoch = (record.end_time if record else None) or 0
    ended_at = datetime.fromtimestamp(end_epoch, UTC) if 0 < end_epoch < 4_102_444_800 else (now or datetime.now(UTC))
    # The ending job's squeue record has lost its node list; slurmctld passes it in the environment.
    nodes = slurm.hostnames(environ.get("SLURM_JOB_NODELIST", "")) or (spec.nodes if spec else [])
    return _fitted(
        JobFailedDetail(
            cluster_name=cluster_name,
            job_id=job_id,
            # Slurm takes names up to 1024 bytes; the event carries the first 256 characters (what a
            # checkpoint manifest records too). A long name must never silence the hook.
            name=job_display_name(environ.get("SLURM_JOB_NAME") or (spec.name if spec else f"job-{job_id}")),
            user=environ.get("SLURM_JOB_USER") or (spec.user if spec else None),
            partition=environ.get("SLURM_JOB_PARTITION") or (spec.partition if spec else None),
            nodes=nodes,
            state=state,  # one of FAILED_STATES, checked above
            reason=reason[:256],
            exit_code=exit_code,
            signal=signal,
            restart_count=(record.restart_count if record else 0) or int(environ.get("SLURM_JOB_RESTART_COUNT") or 0),
            ended_at=ended_at,
            checkpoint_uri=spec.checkpoint_uri if spec else None,
            auto_resume=spec.auto_resume if spec else False,
            resubmission_of=resubmission_of if resubmission_of and resubmission_of.isascii() and resubmission_of.isdigit() else None,
            event_key=f"{cluster_name}:{job_id}:{end_epoch or int(ended_at.timestamp())}",
        )
    )


def _fitted(detail: JobFailedDetail) -> JobFailedDetail:
    sent = fitted(detail)
    if names_left_out(detail, sent):
        log.warning(
            "job %s: its %d node names make the job-failed event more than %d bytes: sent without them "
            "(its recovery cannot tell whether a node failed, and asks a human)",
            detail.job_id,
            len(detail.nodes),
            FAILURE_DETAIL_BUDGET,
        )
    return sent


class JobEventSender:
    """Puts job-failed events on EventBridge, at most once per job end, spooling what fails."""

    def __init__(self, events: Any, event_bus: str, state_dir: Path) -> None:
        self.events = events
        self.event_bus = event_bus
        self.spool = state_dir / "job-events" / "spool"
        self.sent = state_dir / "job-events" / "sent"
        self.spool.mkdir(parents=True, exist_ok=True)
        self.sent.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _name(event_key: str) -> str:
        return hashlib.sha256(event_key.encode()).hexdigest() + ".json"

    def send(self, detail: JobFailedDetail) -> str:
        """ "sent", "duplicate" (this job end was reported already) or "spooled" (EventBridge failed)."""
        name = self._name(detail.event_key)
        if (self.sent / name).exists():
            return "duplicate"
        try:
            fd = os.open(self.spool / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return "duplicate"  # another run of the hook holds it; it or the agent's loop sends it
        with os.fdopen(fd, "w") as handle:
            handle.write(detail.model_dump_json())
            handle.flush()
            os.fsync(handle.fileno())
        return "sent" if self._put(name) else "spooled"

    def prune(self, keep_seconds: float, now: float | None = None) -> int:
        """Forget sent markers older than ``keep_seconds`` (a job end is never re-reported that late)."""
        cutoff = (now if now is not None else time.time()) - keep_seconds
        old = [p for p in self.sent.glob("*.json") if p.stat().st_mtime < cutoff]
        for path in old:
            path.unlink(missing_ok=True)
        return len(old)

    def flush(self) -> int:
        """Send what earlier runs could not; the number sent."""
        return sum(1 for path in sorted(self.spool.glob("*.json")) if self._put(path.name))

    def _put(self, name: str) -> bool:
        detail = json.loads((self.spool / name).read_text())
        try:
            response = self.events.put_events(
                Entries=[
                    {
                        "Source": JOB_EVENT_SOURCE,
                        "DetailType": JOB_FAILED_DETAIL_TYPE,
                        "Detail": json.dumps(detail),
                        "EventBusName": self.event_bus,
                        "Time": datetime.fromisoformat(detail["ended_at"]),
                    }
                ]
            )
        except (ClientError, BotoCoreError) as exc:
            log.warning("job %s: EventBridge refused the job-failed event, kept in %s: %s", detail["job_id"], self.spool, exc)
            return False
        if response.get("FailedEntryCount"):
            entry = response["Entries"][0]
            log.warning(
                "job %s: event not accepted (%s: %s), kept in the spool",
                detail["job_id"],
                entry.get("ErrorCode"),
                entry.get("ErrorMessage"),
            )
            return False
        (self.spool / name).replace(self.sent / name)
        log.info("job %s ended %s: job-failed event sent", detail["job_id"], detail["state"])
        return True
