"""What acting on a hang verdict decides (Detect Hung Jobs): what its record says it did or would
do, the JobRecovery request it starts, which job an EKS verdict's namespace/name is, and whether a
running recovery of the job already ends the stall. The step reads and starts; this decides."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from hyperpod_recovery.domain.hangs.damping import after_damping, damp, damped_action
from hyperpod_recovery.domain.hangs.observed import skew_text
from hyperpod_recovery.models.progress import kube_job_key
from hyperpod_recovery.models.requests import JobRecoveryRequest

if TYPE_CHECKING:
    from hyperpod_recovery.models.hangs import HangVerdict
    from hyperpod_recovery.models.progress_memory import JobMemory

UNVERIFIED = "membership unverified: no fresh orchestrator snapshot"
# Recoveries a tick tries to start at most, the oldest stalls first: a file system gone stalls
# hundreds of jobs at once; 300 are all started within 10 ticks, the rest wait (counted).
MAX_STARTS_PER_TICK = 30

Move = Literal["already_started", "damped", "starts_deferred", "deferred", "act"]


@dataclass(frozen=True)
class NextMove:
    """What a tick does with one verdict, the job's memory after it, and the verdict as acted on."""

    move: Move
    memory: JobMemory
    verdict: HangVerdict
    tell: str = ""  # a damped stall's one record, told once


def next_move(verdict: HangVerdict, memory: JobMemory, now: datetime, tried: int, out_of_time: Callable[[], bool]) -> NextMove:
    """Never a start an earlier tick made; a damped stall only counted (told once); at most
    MAX_STARTS_PER_TICK starts a tick, the rest the next tick's; none once the tick is out of time
    (``out_of_time`` is asked last, only for a verdict that would act)."""
    if memory.started_episode(verdict.episode_at) is not None:
        return NextMove("already_started", memory, verdict)
    damping, after = damp(memory, verdict, now)
    if damping != "act":
        tell = damped_action(memory, verdict, now)[:512] if damping == "tell" else ""
        return NextMove("damped", after, verdict, tell)
    if verdict.mode == "enforce" and tried >= MAX_STARTS_PER_TICK:
        return NextMove("starts_deferred", after, verdict)
    if out_of_time():
        return NextMove("deferred", after, verdict)
    acted = verdict.model_copy(update={"summary": (verdict.summary + after_damping(after, now))[:1024]})
    return NextMove("act", after, acted)


def would_do(verdict: HangVerdict) -> str:
    """What enforcing the verdict does (an observed verdict's record says it would have), in the
    orchestrator's words: Slurm cancels and resubmits a job; on EKS a job is stopped and re-created."""
    on_eks = kube_job_key(verdict.job) is not None
    again = "re-create" if on_eks else "resubmit"
    if verdict.rule == "slow":
        cordon = f"cordon {', '.join(verdict.suspects)}, check it, " if verdict.suspects else ""
        return f"stop job {verdict.job}, {cordon}{again} it from its newest verified checkpoint"
    blamed = f"cordon and check {', '.join(verdict.suspects)}" if verdict.suspects else "blame no node"
    stop = "stop" if on_eks else "cancel"
    return f"capture the hang's evidence, {stop} job {verdict.job}, {blamed}, {again} it from its newest verified checkpoint"


def marked(verdict: HangVerdict, *, unverified: bool, skew: dict[str, int]) -> HangVerdict:
    """The verdict saying what it rests on: rows whose membership could not be checked; writers'
    clocks that disagree with ours (its times are our reads')."""
    update: dict[str, str] = {}
    if unverified:
        update["summary"] = (verdict.summary + f" [{UNVERIFIED}]")[:1024]
    if skew:
        update["suspects_why"] = (verdict.suspects_why + skew_text(skew))[:512]
    return verdict.model_copy(update=update) if update else verdict


def recovery_request(verdict: HangVerdict, job_id: str, name: str, now: datetime) -> tuple[JobRecoveryRequest | None, str]:
    """The JobRecovery request the verdict starts, or None and why it cannot be one."""
    try:
        return JobRecoveryRequest(
            cluster=verdict.cluster,
            job_id=job_id,
            source="progress",
            # (the incident names the job itself: "job 1001: no progress for 120 s since ...")
            reason=verdict.summary.removeprefix(f"job {verdict.job}: "),
            event_id=name,
            detected_at=now,
            hang=verdict,
        ), ""
    except ValidationError as exc:
        return None, str(exc)[:300]


def observed_action(verdict: HangVerdict, why_not: str) -> str:
    """An observed verdict's record: what enforcing it would have done, and why it was not."""
    return (f"observed: would {would_do(verdict)}" + (f" (not acted on: {why_not})" if why_not else ""))[:512]


def one_kube_job(namespace: str, name: str, found: list[tuple[str, str]]) -> tuple[str | None, str]:
    """The uid of the one job object (kind, uid) a namespace/name names, or None and why not."""
    if not found:
        return None, f"no training job {namespace}/{name} is in the Kubernetes API (its reports outlive it by their TTL)"
    if len(found) > 1:
        kinds = " and a ".join(kind for kind, _ in found)
        return None, f"both a {kinds} are named {namespace}/{name}: its reports do not say which one hangs"
    return found[0][1], ""


def running_hang_recovery(job_id: str, running: Iterable[str], own: str) -> str | None:
    """Why a running recovery of an earlier stall of the job ends this one, or None: one hang
    recovery of a job at a time (an episode whose memory was lost is dated anew, its name too)."""
    hung = next((n for n in running if n.startswith(f"hpj-{job_id}-hung-") and n != own), None)
    return f"left to hang recovery {hung}, which runs for an earlier stall of this job" if hung is not None else None
