"""The agent's periodic duty: which nodes slurmctld says each running job runs on, written to the
stack's ledger every 30 s (one item, models/job_nodes_item.py) for Detect Hung Jobs, which counts a
progress report only from a node of its job (docs/progress.md). AWS has no call that reads
slurmctld: the agent, on the controller, is the one reader the pipeline trusts.

It runs beside the command loop on a thread of its own, so a command never waits for squeue; a
failure (slurmctld away, the table throttled, a snapshot too large) is logged and retried with
backoff, never the loop's failure. The item's age tells the reader when the duty stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.job_nodes_item import item

log = logging.getLogger("hyperpod_recovery_agent")

SNAPSHOT_SECONDS = 30.0
# Well inside JOB_NODES_STALE_SECONDS (180): a slurmctld back from an outage is read again before
# the detector has gone without a snapshot for long.
MAX_BACKOFF_SECONDS = 120.0


class RunningJobNodes(Protocol):
    """The part of the Slurm port the duty reads (SlurmCli, and the sandbox's simulated Slurm)."""

    def running_job_nodes(self) -> Mapping[str, list[str]]: ...


class JobNodesReporter:
    def __init__(
        self,
        *,
        slurm: RunningJobNodes,
        dynamodb: Any,
        table_name: str,
        cluster: str,
        clock: Callable[[], float] = time.time,
        interval_seconds: float = SNAPSHOT_SECONDS,
        max_backoff_seconds: float = MAX_BACKOFF_SECONDS,
    ) -> None:
        self.slurm = slurm
        self.dynamodb = dynamodb
        self.table_name = table_name
        self.cluster = cluster
        self.clock = clock
        self.interval_seconds = interval_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.failures = 0  # in a row
        self.next_at: float | None = None  # None: due now

    def tick(self) -> float:
        """Write a snapshot when one is due; the seconds until the next one is."""
        now = self.clock()
        if self.next_at is not None and now < self.next_at:
            return self.next_at - now
        try:
            snapshot = self.write_once(now)
        except Exception as exc:  # whatever it is, the duty tries again later; commands go on
            self.failures += 1
            delay = min(self.interval_seconds * float(2**self.failures), self.max_backoff_seconds)
            log.warning("job nodes snapshot failed (%d in a row), next in %.0f s: %s: %s", self.failures, delay, type(exc).__name__, exc)
        else:
            # Said once when the duty starts working, and again when it works after failing.
            level = logging.INFO if self.failures or self.next_at is None else logging.DEBUG
            log.log(level, "job nodes snapshot written: %d running jobs", len(snapshot.jobs))
            self.failures = 0
            delay = self.interval_seconds
        self.next_at = now + delay
        return delay

    def write_once(self, now: float | None = None) -> JobNodes:
        """Read slurmctld and put the snapshot (taken when the read began)."""
        taken_at = datetime.fromtimestamp(self.clock() if now is None else now, UTC)
        snapshot = JobNodes(source="slurm", taken_at=taken_at, jobs=dict(self.slurm.running_job_nodes()))
        self.dynamodb.put_item(TableName=self.table_name, Item=item(snapshot, self.cluster))
        return snapshot

    def run(self, stop: threading.Event, wait: Callable[[threading.Event, float], bool] | None = None) -> None:
        """Tick until ``stop`` is set."""
        wait = wait or (lambda event, seconds: event.wait(seconds))
        while not stop.is_set():
            if wait(stop, self.tick()):
                return


class ReporterThread:
    """The duty on its own thread for as long as the command loop runs (Agent.run)."""

    def __init__(self, reporter: JobNodesReporter, wait: Callable[[threading.Event, float], bool] | None = None) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=reporter.run, args=(self.stop, wait), name="job-nodes", daemon=True)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        # A squeue in flight ends within slurm_timeout_seconds; the daemon thread never holds up a stop.
        self.thread.join(timeout=1)
