"""Progress from a training script: one call per step, so that a job that hangs or slows down becomes an
incident (docs/progress.md).

    from hyperpod_recovery.checkpointing import Progress

    progress = Progress.from_environment()        # a no-op where no progress table is configured
    for step in range(start, steps):
        loss = train_step(batch)
        progress.progress(step)                   # ~1 µs: no I/O, no network in the loop
        if step % 1000 == 0:
            with progress.paused("checkpoint"):   # a long save is not a hang
                dcp.save(state, storage_writer=...)
    progress.close()                              # the job ended cleanly: not a hang

``progress()`` only records the step and its time under a small lock. A daemon thread writes the
node's report (models/progress.py): a newer step at once when the last write is PROGRESS_WRITE_SECONDS
old, else when it becomes so (a hang then shows within seconds); every PROGRESS_IDLE_WRITE_SECONDS
when nothing moved (the heartbeat proves the reporter alive, and a write that still shows the old step
shows the job still); and at once when a pause begins or ends. A write
that fails is logged (at most once every few minutes), never reaches the training loop, and is
tried again PROGRESS_WRITE_SECONDS on; a write that is slow delays only the next write.

One process per node reports (local rank 0, by default): every rank of a synchronous job steps
together, and the node is what the pipeline checks or replaces.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from hyperpod_recovery.models.common import SlurmNodeName
from hyperpod_recovery.models.progress import (
    DEFAULT_PAUSE_LIMIT_SECONDS,
    HEARTBEAT_SECONDS,
    KUBE_JOB_ENV,
    KUBE_NAMESPACE_ENV,
    MAX_PAUSE_LIMIT_SECONDS,
    NODE_NAME_ENV,
    PROGRESS_IDLE_WRITE_SECONDS,
    PROGRESS_REGION_ENV,
    PROGRESS_TABLE_ENV,
    PROGRESS_WRITE_SECONDS,
    RECENT_INTERVALS,
    Pause,
    PauseKind,
    ProgressJobKey,
    ProgressReport,
    progress_item,
)

log = logging.getLogger("hyperpod_recovery.progress")

# Intervals skipped before the baseline is measured (compilation, warm-up, the first data loads).
WARMUP_INTERVALS = 5
# close() waits at most this long for a write in flight before its own last write.
CLOSE_WAIT_SECONDS = 5.0
# A failed write is logged at most this often (a network outage must not flood the job's log).
ERROR_LOG_EVERY_SECONDS = 300.0
# Which process of a node reports: the first local rank (torchrun's LOCAL_RANK, srun's SLURM_LOCALID).
LOCAL_RANK_SOURCES = ("LOCAL_RANK", "SLURM_LOCALID")
RANKS_PER_NODE_SOURCES = ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")
_JOB_KEY = TypeAdapter(ProgressJobKey)
_NODE = TypeAdapter(SlurmNodeName)


class ProgressWriter(Protocol):
    def write(self, report: ProgressReport) -> None: ...


class DynamoProgressWriter:
    """The real writer: one PutItem of the node's item (the training nodes' role may do nothing else)."""

    def __init__(self, table: str, region: str | None = None, client: Any = None) -> None:
        self.table = table
        if client is None:
            import boto3  # (only where a table is configured: a disabled reporter never imports it)
            from botocore.config import Config

            # Short timeouts and few attempts: a stuck write must not silence the heartbeat for
            # minutes (the node would read as gone), and the next heartbeat is the retry.
            config = Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 2, "mode": "standard"})
            client = boto3.client("dynamodb", region_name=region, config=config)
        self.client = client

    def write(self, report: ProgressReport) -> None:
        self.client.put_item(TableName=self.table, Item=progress_item(report))


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _median(values: deque[float] | list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


class Progress:
    """One node's progress reporter. ``writer`` None: disabled, every call a no-op."""

    def __init__(
        self,
        job: str,
        node: str,
        writer: ProgressWriter | None,
        *,
        ranks: int = 1,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        write_seconds: float = PROGRESS_WRITE_SECONDS,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        start_thread: bool = True,
    ) -> None:
        self.job, self.node, self.writer = job, node, writer
        self.ranks = max(1, min(ranks, 64))
        self.heartbeat_seconds = heartbeat_seconds
        self.write_seconds = min(write_seconds, heartbeat_seconds)
        # (with nothing newer to write: the heartbeat, at most every PROGRESS_IDLE_WRITE_SECONDS)
        self.idle_write_seconds = max(self.write_seconds, min(heartbeat_seconds, PROGRESS_IDLE_WRITE_SECONDS))
        self._wall, self._monotonic = wall, monotonic
        self._lock = threading.Lock()
        # Writes one at a time (the thread's and close()'s): the last one written is the last one taken.
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._started_at = wall()
        self._step: int | None = None
        self._step_wall = 0.0
        self._step_mono: float | None = None
        self._intervals: deque[float] = deque(maxlen=RECENT_INTERVALS)
        self._waits: deque[float] = deque(maxlen=RECENT_INTERVALS)
        self._baseline: list[float] = []
        self._intervals_seen = 0
        self._pause: Pause | None = None
        self._pause_ended_at: float | None = None
        self._ended = False
        self._last_error_logged = -ERROR_LOG_EVERY_SECONDS
        self._written_step: int | None = None  # the step the last write carried
        self._urgent = False  # a pause began or ended, or the job ended: written at once
        self._written_mono: float | None = None  # when the last write was taken
        self.writes = 0
        self.write_errors = 0
        self._thread: threading.Thread | None = None
        if writer is not None and start_thread:
            self._thread = threading.Thread(target=self._run, name="hyperpod-recovery-progress", daemon=True)
            self._thread.start()
            atexit.register(self.close)

    # --- the job's own configuration -----------------------------------------------------------
    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, writer: ProgressWriter | None = None, **options: Any) -> Progress:
        """The reporter the job's environment asks for: the table from HYPERPOD_RECOVERY_PROGRESS_TABLE
        (the job's opt-in); on Slurm the job from SLURM_JOB_ID and the node from SLURMD_NODENAME (else
        the short hostname); on EKS the job as namespace/name from HYPERPOD_RECOVERY_KUBE_NAMESPACE and
        HYPERPOD_RECOVERY_KUBE_JOB and the node from HYPERPOD_RECOVERY_NODE_NAME (the pod template's
        downward API: docs/progress.md). Disabled (every call a no-op) without a table, on a rank
        other than a node's first, or outside a job it can name."""
        env = os.environ if environ is None else environ
        job = env.get("SLURM_JOB_ID", "")
        node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]
        if not job and (env.get(KUBE_NAMESPACE_ENV) or env.get(KUBE_JOB_ENV)):
            job = f"{env.get(KUBE_NAMESPACE_ENV, '')}/{env.get(KUBE_JOB_ENV, '')}"
            # (a pod's hostname is the pod's name: only spec.nodeName names the node)
            node = env.get(NODE_NAME_ENV, "")
        table = env.get(PROGRESS_TABLE_ENV, "")
        local_rank = next((env[name] for name in LOCAL_RANK_SOURCES if name in env), "0")
        if not table or local_rank != "0":
            return cls(job or "0", node or "unknown", None, start_thread=False)
        try:
            _JOB_KEY.validate_python(job)
            _NODE.validate_python(node)
        except ValidationError:
            log.warning(
                "progress not reported: the environment names no job and node (SLURM_JOB_ID %r; on EKS %s, %s and %s)",
                env.get("SLURM_JOB_ID", ""),
                KUBE_NAMESPACE_ENV,
                KUBE_JOB_ENV,
                NODE_NAME_ENV,
            )
            return cls("0", "unknown", None, start_thread=False)
        ranks_text = next((env[name] for name in RANKS_PER_NODE_SOURCES if name in env), "1")
        ranks = int(ranks_text) if ranks_text.isdigit() else 1
        return cls(job, node, writer or DynamoProgressWriter(table, region=env.get(PROGRESS_REGION_ENV) or None), ranks=ranks, **options)

    @property
    def enabled(self) -> bool:
        return self.writer is not None

    # --- the training loop's calls -------------------------------------------------------------------
    def progress(self, step: int, wait_seconds: float | None = None) -> None:
        """The job reached ``step`` (``wait_seconds``: what this rank waited on the others in the
        step's collectives, if the script times it). No I/O: a few microseconds under a lock."""
        if self.writer is None:
            return
        now_mono, now_wall = self._monotonic(), self._wall()
        with self._lock:
            previous = self._step
            if previous is not None and step < previous:
                # Resumed from an earlier checkpoint: the statistics start again.
                self._intervals.clear()
                self._waits.clear()
                self._baseline.clear()
                self._intervals_seen = 0
                self._step_mono = None
            elif previous is not None and step == previous:
                return  # (the same step again: no progress)
            due = self._written_mono is None or now_mono - self._written_mono >= self.write_seconds
            if self._step_mono is not None and previous is not None and step > previous:
                interval = (now_mono - self._step_mono) / (step - previous)
                self._intervals.append(interval)
                self._intervals_seen += 1
                if WARMUP_INTERVALS < self._intervals_seen <= WARMUP_INTERVALS + RECENT_INTERVALS:
                    self._baseline.append(interval)
            if wait_seconds is not None and wait_seconds >= 0:
                self._waits.append(wait_seconds)
            self._step, self._step_mono, self._step_wall = step, now_mono, now_wall
        if due:
            self._wake.set()  # a newer step, the last write old enough: written now, not at the next beat

    def pause(self, kind: PauseKind, limit_seconds: int | None = None) -> None:
        """A pause begins (a checkpoint save, an evaluation, a data reshuffle): no step is expected
        for up to ``limit_seconds`` (default two hours). Past it, a stall is a stall anyway."""
        if self.writer is None:
            return
        limit = min(MAX_PAUSE_LIMIT_SECONDS, max(1, int(limit_seconds or DEFAULT_PAUSE_LIMIT_SECONDS)))
        with self._lock:
            self._pause = Pause(kind=kind, since=datetime.fromtimestamp(self._wall(), UTC), limit_seconds=limit)
            self._urgent = True
        self._wake.set()

    def resume(self) -> None:
        """The pause ended: steps are expected again from now (the pause is no step interval)."""
        if self.writer is None:
            return
        with self._lock:
            if self._pause is None:
                return
            self._pause = None
            self._pause_ended_at = self._wall()
            self._step_mono = None  # (the next step's interval would include the pause)
            self._urgent = True
        self._wake.set()

    @contextmanager
    def paused(self, kind: PauseKind, limit_seconds: int | None = None) -> Iterator[None]:
        self.pause(kind, limit_seconds)
        try:
            yield
        finally:
            self.resume()

    # --- what is written -----------------------------------------------------------------------------
    def report(self) -> ProgressReport | None:
        """The node's report as of now, or None before its first step (or when disabled)."""
        if self.writer is None:
            return None
        with self._lock:
            if self._step is None:
                return None
            return ProgressReport(
                job=self.job,
                node=self.node,
                ranks=self.ranks,
                step=self._step,
                step_at=_utc(self._step_wall),
                heartbeat_at=_utc(self._wall()),
                started_at=_utc(self._started_at),
                intervals_seen=self._intervals_seen,
                step_seconds=_median(self._intervals),
                baseline_step_seconds=_median(self._baseline) if len(self._baseline) == RECENT_INTERVALS else None,
                wait_seconds=_median(self._waits),
                pause=self._pause,
                pause_ended_at=_utc(self._pause_ended_at) if self._pause_ended_at is not None else None,
                ended=self._ended,
            )

    def flush(self) -> bool:
        """Write the report now, in this thread: True when written. Never raises."""
        with self._write_lock:
            return self._write()

    def _write(self) -> bool:
        report = self.report()
        if report is None or self.writer is None:
            return False
        with self._lock:
            self._written_mono = self._monotonic()  # (a failed write is tried again a write's interval on)
        try:
            self.writer.write(report)
        except Exception as exc:  # anything: the training job must never fail for its reporter
            self.write_errors += 1
            now = self._monotonic()
            if now - self._last_error_logged >= ERROR_LOG_EVERY_SECONDS:
                self._last_error_logged = now
                log.warning("progress report not written (%s errors so far): %s", self.write_errors, exc)
            return False
        with self._lock:
            self._written_step = report.step
        self.writes += 1
        return True

    def close(self) -> None:
        """The job ends cleanly: a last write says so (``ended``), and the reporter stops."""
        if self.writer is None or self._stopped.is_set():
            return
        with self._lock:
            self._ended = True
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=min(self.heartbeat_seconds, CLOSE_WAIT_SECONDS))
        # The last write is taken after any write in flight: it says ended. Bounded: a job's exit never
        # waits long on the network (without it, the items go silent, which the detector reads as gone).
        if self._write_lock.acquire(timeout=CLOSE_WAIT_SECONDS):
            try:
                self._write()
            finally:
                self._write_lock.release()

    def _next_write_in(self) -> float:
        """Seconds until the next write is due: a newer step's at PROGRESS_WRITE_SECONDS after the last
        write, else the heartbeat's at PROGRESS_IDLE_WRITE_SECONDS."""
        with self._lock:
            if self._step is None:
                return self.heartbeat_seconds  # (nothing to write yet: the first step wakes the thread)
            if self._written_mono is None or self._urgent:
                return 0.0
            newer = self._step != self._written_step
            due = self._written_mono + (self.write_seconds if newer else self.idle_write_seconds)
        return max(0.0, due - self._monotonic())

    def _run(self) -> None:
        while not self._stopped.is_set():
            woken = self._wake.wait(self._next_write_in())
            self._wake.clear()
            if self._stopped.is_set():
                return
            if woken and self._next_write_in() > 0:
                continue  # (a step came before the last write was old enough: the timer writes it)
            with self._lock:
                self._urgent = False
            self.flush()
