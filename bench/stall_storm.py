"""A stall storm: hundreds of jobs stall at once (a shared file system goes away) and a real hang
follows ten seconds later. Detect Hung Jobs ticks every minute on the sandbox's progress model and
the real adapters on moto (sandbox/stall_storm.py); its recoveries are recorded as started, not run.

    python bench/stall_storm.py [--stalled 300 1000]

Prints, per storm size: the ticks from the first start to the last, the starts per tick, the
deferred starts counted, the minute the real hang was started, and the wall time of a tick here.
Goal: 300 stalled jobs all started within 10 ticks, each once, the real hang among them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "training"), str(ROOT / "agent")]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")  # (a verdict logged per stalled job would bury the table)

from hyperpod_recovery.steps.detect_hung_jobs import MAX_STARTS_PER_TICK  # noqa: E402
from sandbox.stall_storm import STALL_AT, run_storm  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stalled", type=int, nargs="+", default=[299, 999], help="jobs that stall together, besides the real hang")
    args = parser.parse_args(argv)
    print(f"Detect Hung Jobs in a stall storm (at most {MAX_STARTS_PER_TICK} starts a tick; the storm stalls at t={STALL_AT:.0f} s)")
    columns = (("stalled", 8), ("ticks", 6), ("first", 6), ("last", 5), ("real hang", 9), ("twice", 6), ("deferred (sum)", 14))
    print(" ".join(f"{name:>{width}}" for name, width in columns), f"{'max starts':>10} {'s/tick':>7}")
    for stalled in args.stalled:
        minutes = 8 + (stalled + 1) // MAX_STARTS_PER_TICK + 2
        began = time.perf_counter()
        run = run_storm(stalled, minutes)
        per_tick = (time.perf_counter() - began) / minutes
        first, last = min(run.started_at.values()), max(run.started_at.values())
        twice = sum(1 for n in run.jobs_started.values() if n > 1)
        deferred = sum(t.get("starts_deferred", 0) for t in run.ticks)
        most = max(t.get("recoveries_started", 0) for t in run.ticks)
        print(
            f"{stalled + 1:>8} {last - first + 1:>6} {first:>6} {last:>5} {run.real_hang_minute() or '-':>9} {twice:>6} "
            f"{deferred:>14} {most:>10} {per_tick:>7.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
