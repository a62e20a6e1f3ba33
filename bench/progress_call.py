"""The training loop's cost of reporting progress: ``Progress.progress(step)`` per call, measured.

The reporter's thread runs as in a job, against a writer that takes ``--write-ms`` per write (a slow
or distant DynamoDB) and a heartbeat of ``--heartbeat`` seconds (shorter than the real 30 s, so the
thread writes, and takes the lock, thousands of times during the run: the contention is there to be
measured). Every call is timed with perf_counter_ns. Exits 1 when the 99th percentile is over 1 ms
(issue 32's bound): the loop must never wait on the network.

    python bench/progress_call.py [--calls 200000] [--write-ms 200] [--heartbeat 0.001]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "layers" / "recovery_core"), str(ROOT / "training")]

from hyperpod_recovery.checkpointing.progress import Progress  # noqa: E402
from hyperpod_recovery.models.progress import ProgressReport  # noqa: E402

P99_BOUND_NS = 1_000_000


class SlowWriter:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.writes = 0

    def write(self, report: ProgressReport) -> None:
        report.model_dump_json()  # (what the real writer serializes)
        time.sleep(self.seconds)
        self.writes += 1


def percentile(ordered: list[int], share: float) -> int:
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--write-ms", type=float, default=200.0)
    parser.add_argument("--heartbeat", type=float, default=0.001)
    args = parser.parse_args(argv)
    writer = SlowWriter(args.write_ms / 1000)
    progress = Progress("1001", "ip-10-1-0-1", writer, heartbeat_seconds=args.heartbeat, ranks=8)
    timings: list[int] = []
    clock = time.perf_counter_ns
    started = time.perf_counter()
    for step in range(1, args.calls + 1):
        before = clock()
        progress.progress(step, wait_seconds=0.01)
        timings.append(clock() - before)
        if step % 50_000 == 0:  # (a declared pause now and then: the thread is woken, takes the lock)
            with progress.paused("evaluation"):
                pass
    elapsed = time.perf_counter() - started
    progress.close()
    ordered = sorted(timings)
    p99 = percentile(ordered, 0.99)
    rows = [
        ("calls", f"{len(timings):,}"),
        ("p50", f"{percentile(ordered, 0.50) / 1000:.2f} µs"),
        ("p99", f"{p99 / 1000:.2f} µs"),
        ("p99.9", f"{percentile(ordered, 0.999) / 1000:.2f} µs"),
        ("max", f"{ordered[-1] / 1000:.1f} µs"),
        ("mean", f"{statistics.fmean(timings) / 1000:.2f} µs"),
        ("writes during the run", f"{writer.writes} (each {args.write_ms:g} ms: the loop never waited on one)"),
        ("loop wall time", f"{elapsed:.2f} s"),
        ("bound", "p99 <= 1 ms"),
    ]
    width = max(len(name) for name, _ in rows)
    print("Progress.progress(step): cost per call in the training loop")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    ok = p99 <= P99_BOUND_NS
    print("PASS" if ok else "FAIL: p99 over 1 ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
