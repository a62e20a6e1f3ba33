"""Detect Hung Jobs (invoked every minute, reading every few seconds): a job that hangs or slows
down ends nothing and announces nothing, so this reads the progress the training scripts report (the progress table)
and decides, per job, a stall or a slowdown verdict (domain/hangs).

Each verdict is kept in the ledger once per episode (the same stall seen a minute later is the
same episode: its last progress names it). A rule in ``enforce`` starts one JobRecovery per episode,
named by the job and the episode (``hpj-<job>-hung-<epoch>``), so a stall seen by many ticks starts
one execution; in ``observe`` the verdict says what would have been done, and nothing is touched.
A stall another incident already ends (it claimed the job's resubmission after the job's last
progress: a node's fault stops the job, and its other ranks wait until that incident cancels it; or
the job failed, and its end's JobRecovery runs) is recorded as left to that incident and starts
nothing (domain/hangs/handled.py); should a later tick of the same episode start the recovery after
all, the kept verdict is updated to say so. A recovery is recorded only once its start was
answered: the record never names an execution that did not start.

What the table says is a signal, not proof (docs/progress.md, "What is trusted"): a row counts only
from a node the orchestrator says runs the job now (``JobNodeSource``), and is dated by this
detector's own reads, remembered per job between ticks (``ProgressMemory``); the recovery acts only
on a job the orchestrator says is running and whose own submission opted in, on the nodes the
orchestrator gave it. A tick tries at most MAX_STARTS_PER_TICK recoveries, the oldest stalls first,
never one an earlier tick started, and damps a job whose stalls keep clearing by themselves
(domain/hangs/damping.py). An EKS job
reports as ``namespace/name`` (a pod cannot know its job's uid): the recovery is started for the
one job object of that name the Kubernetes API holds (its uid), and for none when there is none, or
more than one kind of job under that name (said in the verdict's record).

Within its one-minute schedule the invocation reads again every few seconds (``read_repeatedly``:
docs/progress.md, "How soon a hang is an incident"): at once, then every ``every_seconds`` on slots
of its own start (a slow read skips a slot, never drifts into the next invocation's), until its
window or its function's time runs out. Each read is one whole tick: it recalls what the reads
before it saw (this invocation's and earlier ones') and remembers what it saw, so a stall seen by
many reads is one episode, one verdict and at most one JobRecovery. Its Timeout is under the
schedule's minute: two invocations overlap only when Lambda held one back, and then their starts
are still named by the episode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import ValidationError

from hyperpod_recovery.domain.hangs.acting import (
    MAX_STARTS_PER_TICK,
    marked,
    next_move,
    observed_action,
    one_kube_job,
    recovery_request,
    running_hang_recovery,
)
from hyperpod_recovery.domain.hangs.detect import job_verdicts
from hyperpod_recovery.domain.hangs.handled import ended_by, handled_by
from hyperpod_recovery.domain.hangs.observed import observe, own_rows, remembered_start
from hyperpod_recovery.domain.intake.execution_names import hang_execution_name
from hyperpod_recovery.errors import (
    HistoryUnavailable,
    KubeAccessDenied,
    KubeObjectGone,
    KubeThrottled,
    KubeUnavailable,
    LedgerError,
    LedgerUnavailable,
    StartExecutionFailed,
)
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, matches
from hyperpod_recovery.models.hangs import HangVerdict, RecordedVerdict
from hyperpod_recovery.models.kubernetes import JOB_KINDS, KUBE_UID_PATTERN, KubeJobRef
from hyperpod_recovery.models.progress import ProgressReport, kube_job_key
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.domain.hangs.rules import HangRules
    from hyperpod_recovery.models.job_nodes import JobNodes
    from hyperpod_recovery.models.progress_memory import JobMemory
    from hyperpod_recovery.ports import HangRecord, JobClaims, JobNodeSource, KubeApi, ProgressMemory, ProgressReader, Verdicts, Workflows

# A read starts no more recoveries once this little of its function's time is left: the next read,
# seconds later, goes on (the verdicts are the same, their names too; a start cut off by the Timeout
# after StartExecution is found again by its name).
STOP_WITH_MS = 3_000

__all__ = ["MAX_STARTS_PER_TICK", "READ_RESERVE_MS", "READ_WINDOW_SECONDS", "STOP_WITH_MS", "detect_hung_jobs", "read_repeatedly"]


def detect_hung_jobs(
    *,
    progress: ProgressReader,
    ledger: HangRecord,
    workflows: Workflows,
    job_nodes: JobNodeSource,
    memory: ProgressMemory,
    cluster: str,
    rules: HangRules,
    now: datetime,
    remaining_ms: Callable[[], int],
    kube: KubeApi | None,
) -> dict[str, int]:
    """A stack in dry run still starts its recoveries: Validate Job Request makes them dry runs.
    ``job_nodes``: which nodes the orchestrator says each job runs on (whose rows count);
    ``memory``: what the ticks before saw and started; ``kube``: an EKS stack's Kubernetes API (an
    EKS job's verdict names it by namespace/name)."""
    counts: Counter[str] = Counter()
    jobs = progress.running_jobs()
    counts["jobs_reporting"] = len(jobs)
    if not jobs:
        return dict(counts)  # (no job reports: no membership to ask for, nor an alarm for its absence)
    membership = _membership(job_nodes, now, counts)
    try:
        memories = memory.recall(cluster, sorted(jobs))
    except (LedgerUnavailable, LedgerError) as exc:
        # (every row would look new, and the memory written back would forget the stalls it dates)
        logger.warning("could not recall what the last ticks saw: nothing judged this tick", extra={"error": str(exc)[:300]})
        counts["memory_unavailable"] += 1
        return dict(counts)
    seen: dict[str, JobMemory] = {}
    verdicts: list[HangVerdict] = []
    for job, reports in sorted(jobs.items()):
        try:
            judged = _judge(cluster, job, reports, membership, memories.get(job), rules, now)
        except (ValidationError, ValueError) as exc:
            # One job's reports (anyone with the writer policy may write them) never fail the tick.
            logger.warning("a job's progress could not be judged", extra={"job": job, "error": str(exc)[:300]})
            counts["invalid"] += 1
            continue
        if judged is None:
            counts["not_running"] += 1  # (the orchestrator runs no such job: its rows count for nothing)
            continue
        seen[job], found = judged
        verdicts += found
    _act_on_oldest_first(verdicts, seen, ledger, workflows, now, counts, kube, remaining_ms)
    _remember(memory, cluster, list(seen.values()), counts)
    return dict(counts)


def _remember(memory: ProgressMemory, cluster: str, memories: list[JobMemory], counts: Counter[str]) -> None:
    """What this tick saw and started; what is not written, the next tick dates a tick later (and a
    start it forgets is held back by the running recovery's name: _left_to)."""
    if not memories:
        return
    try:
        unwritten = memory.remember(cluster, memories)
    except (LedgerUnavailable, LedgerError) as exc:
        logger.warning("could not remember what this tick saw", extra={"error": str(exc)[:300]})
        unwritten = len(memories)
    if unwritten:
        logger.warning("could not remember what this tick saw of some jobs", extra={"jobs": unwritten})
        counts["memory_unwritten"] += unwritten


def _membership(job_nodes: JobNodeSource, now: datetime, counts: Counter[str]) -> JobNodes | None:
    """The orchestrator's fresh snapshot, or None: every row counts as before, the verdicts say their
    membership is unverified, and the metric's alarm fires (Classify Failure's re-measure on the
    orchestrator's own allocation stays the backstop)."""
    try:
        snapshot = job_nodes.running_job_nodes()
    except (LedgerUnavailable, LedgerError, KubeUnavailable, KubeThrottled, KubeAccessDenied) as exc:
        logger.warning("could not read which nodes each job runs on", extra={"error": str(exc)[:300]})
        snapshot = None
    if snapshot is None or not snapshot.fresh(now):
        taken = f"{snapshot.taken_at:%Y-%m-%d %H:%M:%S} UTC" if snapshot is not None else "none"
        logger.warning("no fresh job membership: progress rows judged unverified", extra={"snapshot_taken_at": taken})
        counts["job_nodes_unavailable"] = 1
        return None
    return snapshot


def _judge(
    cluster: str,
    job: str,
    reports: list[ProgressReport],
    membership: JobNodes | None,
    before: JobMemory | None,
    rules: HangRules,
    now: datetime,
) -> tuple[JobMemory, list[HangVerdict]] | None:
    """The job's memory after this tick, and its verdict (by our clock, on its own nodes' rows); None
    when the orchestrator does not run it."""
    own = own_rows(job, reports, membership)
    if own is None:
        return None
    seen = observe(before, job, own, now)
    found = job_verdicts(cluster, job, seen.reports, rules, now, seen.learned_pace, seen.write_gap, seen.confirmed)
    return seen.memory, [marked(v, unverified=membership is None, skew=seen.skew) for v in found]


def _act_on_oldest_first(
    verdicts: list[HangVerdict],
    seen: dict[str, JobMemory],
    ledger: HangRecord,
    workflows: Workflows,
    now: datetime,
    counts: Counter[str],
    kube: KubeApi | None,
    remaining_ms: Callable[[], int],
) -> None:
    """The oldest stalls first (by our clock), at most MAX_STARTS_PER_TICK recoveries tried; the rest,
    counted, are the next tick's (their episodes, and so their names, stay the same)."""
    running = _RunningJobRecoveries(workflows)
    tried = 0
    for verdict in sorted(verdicts, key=lambda v: (v.episode_at, v.job)):
        counts[f"{verdict.rule}_verdicts"] += 1
        step = next_move(verdict, seen[verdict.job], now, tried, lambda: remaining_ms() < STOP_WITH_MS)
        seen[verdict.job], verdict = step.memory, step.verdict
        if step.move != "act":
            counts[step.move] += 1  # (already started: remembered, started by an earlier tick)
            if step.tell:
                _record(RecordedVerdict(verdict=verdict, action=step.tell), ledger)
            continue
        started = _act(verdict, ledger, workflows, now, counts, kube, running)
        tried += started is not None
        if started:
            seen[verdict.job] = remembered_start(seen[verdict.job], verdict.episode_at, started, verdict.step)


class _Unresolved(Exception):
    """The Kubernetes API did not answer which job a namespace/name is: the next tick asks again."""


def _recovered_job(verdict: HangVerdict, kube: KubeApi | None) -> tuple[str | None, str]:
    """The id the job's recovery carries (a Slurm job's own; an EKS job's uid), or None and why
    it is not acted on."""
    key = kube_job_key(verdict.job)
    if key is None:
        return (verdict.job, "") if matches(SLURM_JOB_ID_PATTERN, verdict.job) else (None, "its id names no Slurm job")
    if kube is None:
        return None, "an EKS job's verdict, on a stack without the Kubernetes API"
    namespace, name = key
    found: list[tuple[str, str]] = []
    for kind in JOB_KINDS:
        try:
            ref = KubeJobRef.model_validate({"kind": kind, "namespace": namespace, "name": name})
        except ValidationError:
            # (a report key longer than a job object's name may be: nobody's job, whoever wrote it)
            return None, f"{namespace}/{name} names no Kubernetes job object (its name is too long or malformed)"
        try:
            job = kube.get_job(ref)
        except KubeObjectGone:
            continue  # (none of this kind by that name, or the kind's CRD is not installed)
        except KubeAccessDenied as exc:
            # (lasting: the RBAC of deploy/kubernetes-rbac.yaml not applied; recorded, so it shows in `verdicts list`)
            return None, f"the Kubernetes API refused to read {kind} {namespace}/{name}: {str(exc)[:200]}"
        except (KubeUnavailable, KubeThrottled) as exc:
            raise _Unresolved(str(exc)) from exc
        uid = str((job.get("metadata") or {}).get("uid") or "")
        if matches(KUBE_UID_PATTERN, uid):
            found.append((kind, uid))
    return one_kube_job(namespace, name, found)


class _RunningJobRecoveries:
    """The running JobRecoveries' names, listed at most once a tick, and only when a stall needs them:
    ListExecutions is throttled per account and region (a bucket of 100, refilled at 2 a second),
    shared with the sweep, and a rack's fault stalls many jobs in one tick."""

    def __init__(self, workflows: Workflows) -> None:
        self._workflows = workflows
        self._names: list[str] | None = None
        self._failed: HistoryUnavailable | None = None

    def names(self) -> list[str]:
        if self._failed is not None:
            raise self._failed
        if self._names is None:
            try:
                self._names = self._workflows.running("job")
            except HistoryUnavailable as exc:
                self._failed = exc
                raise
        return self._names


def _left_to(verdict: HangVerdict, job_id: str, own: str, ledger: JobClaims, running: _RunningJobRecoveries, now: datetime) -> str | None:
    """Why the stall is another incident's to end (domain/hangs/handled.py), or None: the job's
    resubmission claim, else a running recovery of the job's end. What cannot be read starts the
    recovery (its Inspect Job and Classify Failure read the job and its claim again). ``own``: this
    episode's recovery, whose own claim (or its nested node recovery's) is never another incident's."""
    if verdict.rule != "stall":
        return None
    try:
        claim = ledger.resubmission_claim(verdict.cluster, job_id)
    except (LedgerUnavailable, LedgerError) as exc:
        logger.warning("could not read a hung job's resubmission claim", extra={"job": verdict.job, "error": str(exc)[:300]})
        return None
    left_to = handled_by(verdict, claim, now, on_eks=kube_job_key(verdict.job) is not None, own=own)
    if left_to is not None:
        return left_to
    try:
        names = running.names()
    except HistoryUnavailable as exc:
        logger.warning("could not list the running job recoveries", extra={"job": verdict.job, "error": str(exc)[:300]})
        return None
    return running_hang_recovery(job_id, names, own) or ended_by(verdict, job_id, names, now)


def _act(
    verdict: HangVerdict,
    ledger: HangRecord,
    workflows: Workflows,
    now: datetime,
    counts: Counter[str],
    kube: KubeApi | None,
    running: _RunningJobRecoveries,
) -> str | None:
    """The execution the verdict's episode has (started now or before), "" when its start failed, or
    None when none was tried (observed, left to another incident, not enforceable)."""
    enforce = verdict.mode == "enforce"
    job_id: str | None = verdict.job
    why_not = ""
    if enforce:
        try:
            job_id, why_not = _recovered_job(verdict, kube)
        except _Unresolved as exc:
            # (nothing recorded: the next tick, a minute later, sees the same episode and asks again)
            logger.warning("could not ask which job a hang verdict names", extra={"job": verdict.job, "error": str(exc)[:300]})
            counts["start_failed"] += 1
            return ""
        enforce = job_id is not None
    if not enforce and verdict.mode == "enforce":
        counts["observed_not_enforceable"] += 1
    name = hang_execution_name(job_id or verdict.job.replace("/", "-"), verdict.reason, verdict.episode_at)
    if enforce and job_id is not None:
        left_to = _left_to(verdict, job_id, name, ledger, running, now)
        if left_to is not None:
            counts["left_to_another_incident"] += 1
            _record(RecordedVerdict(verdict=verdict, action=f"not acted on: {left_to}"[:512]), ledger)
            return None
        request, invalid = recovery_request(verdict, job_id, name, now)
        if request is None:  # (a job id the workflow cannot carry: counted, never the tick's failure)
            logger.warning("verdict cannot start a recovery", extra={"job": verdict.job, "error": invalid})
            counts["invalid"] += 1
            _record(RecordedVerdict(verdict=verdict, action=f"not acted on: its recovery's request is invalid: {invalid}"[:512]), ledger)
            return None
        try:
            started = workflows.start(name, request.model_dump_json(exclude_none=True), workflow="job")
        except StartExecutionFailed as exc:
            # (the record never names a recovery that did not start; a later start updates it)
            logger.warning("could not start a hang recovery; the next tick tries again", extra={"execution": name, "error": str(exc)})
            counts["start_failed"] += 1
            action = f"not acted on: job recovery {name} could not be started ({exc}); the next tick tries again"
            _record(RecordedVerdict(verdict=verdict, action=action[:512]), ledger)
            return ""
        counts["recoveries_started" if started == "started" else "already_started"] += 1
        # (after the start: a lost write is made by the next tick, whose start finds the same execution)
        _record(RecordedVerdict(verdict=verdict, action=f"started job recovery {name}", execution=name), ledger)
        return name
    counts["observed"] += 1
    _record(RecordedVerdict(verdict=verdict, action=observed_action(verdict, why_not)), ledger)
    return None


def _record(recorded: RecordedVerdict, ledger: Verdicts) -> None:
    """Keep the episode's verdict (once; a later start updates one that started nothing)."""
    verdict = recorded.verdict
    try:
        first = ledger.record_verdict(recorded)
    except (LedgerUnavailable, LedgerError):
        logger.warning("could not record a verdict", extra={"job": verdict.job, "rule": verdict.rule})
        first = True
    if first:
        logger.info("hang verdict", extra={"verdict": verdict.summary, "mode": verdict.mode, "suspects": verdict.suspects})


# The invocation's reads stay within this much of its start: the next one, a minute later, reads on.
READ_WINDOW_SECONDS = 55
# A read is not begun with less of the function's time left (a read takes well under a second; one
# with less than STOP_WITH_MS left judges and records but starts nothing: the next read, 5 s on, does).
READ_RESERVE_MS = 3_000
# What a read counts that is a level, not an event: the invocation's figure is the largest read's
# (a job reporting in twelve reads is one job; a stall seen twelve times, one stall).
LEVELS = frozenset({"jobs_reporting", "stall_verdicts", "slow_verdicts", "job_nodes_unavailable", "memory_unavailable", "not_running"})


def read_repeatedly(
    read: Callable[[datetime], dict[str, int]],
    *,
    clock: Callable[[], datetime],
    pause: Callable[[float], None],
    every_seconds: float,
    remaining_ms: Callable[[], int],
    window_seconds: float = READ_WINDOW_SECONDS,
) -> dict[str, int]:
    """Read at the invocation's start, then at each ``every_seconds`` slot within ``window_seconds``
    while the function has READ_RESERVE_MS left; the counts of every read, summed (LEVELS: the largest)."""
    started = clock()
    totals: Counter[str] = Counter()
    reads = slot = 0
    while True:
        counts = read(clock())
        reads += 1
        for key, value in counts.items():
            totals[key] = max(totals[key], value) if key in LEVELS else totals[key] + value
        elapsed = (clock() - started).total_seconds()
        slot = max(slot + 1, int(elapsed // every_seconds) + 1)
        wait = slot * every_seconds - elapsed
        if slot * every_seconds > window_seconds or remaining_ms() - wait * 1000 < READ_RESERVE_MS:
            break
        pause(wait)
        if (clock() - started).total_seconds() < slot * every_seconds - 1:
            break  # (a wait that did not wait: never two reads of one moment)
    totals["reads"] = reads
    return dict(totals)
