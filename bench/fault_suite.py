"""The fault-injection suite (sandbox/fault_suite.py) as a table: per fault, the incidents'
outcomes, BatchReplaceClusterNodes calls, nodes replaced, resubmissions (and the most of one job),
moments two copies of one job were live (must be 0), nodes acted on past the cluster cap (must be
0), places under the cap and resubmission claims still held when the drill ends (must be 0),
messages a human read that their record contradicts (must be 0), the largest state in KiB, and the
virtual time.

    python bench/fault_suite.py [--storm N]    (N failed jobs in the EKS storm row; the suite's own is 60)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "agent")]


def _storm_size(text: str) -> int:
    # More than 20 (the breaker's places) so the row shows the breaker open; the poller's memory
    # and the cluster's jobs bound the rest.
    if not (text.isascii() and text.isdigit()) or not 21 <= int(text) <= 2000:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of failed jobs from 21 to 2000")
    return int(text)


_parser = argparse.ArgumentParser(description="The fault-injection suite as a table.")
_parser.add_argument("--storm", type=_storm_size, default=None, help="failed jobs in the EKS storm row (the suite's own is 60)")
_storm = _parser.parse_args().storm
if _storm is not None:  # (read by sandbox/fault_suite.py when it is imported)
    os.environ["HYPERPOD_RECOVERY_STORM_JOBS"] = str(_storm)

from sandbox.fault_suite import SUITE, scenario_of, summary  # noqa: E402
from sandbox.runner import DrillRunner  # noqa: E402


def _outcomes_text(outcomes: list[str]) -> str:
    """Each incident's outcome in order; a storm's as counts (``recovered ×20, capped:… ×40``)."""
    if len(outcomes) <= 4:
        return ", ".join(outcomes)
    return ", ".join(f"{outcome} ×{count}" for outcome, count in Counter(outcomes).items())


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fault in SUITE:
            scenario = scenario_of(fault)
            rows.append(summary(fault, scenario, DrillRunner(scenario, log_path=Path(tmp) / f"{fault.name}.log").run()))
    print(
        "| fault | outcomes | replace calls | nodes replaced | resubmissions | most of one job | second copies "
        "| pages of one incident | past the cap | left reserved | open claims | contradicting messages | max state KiB | virtual s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['fault']} | {_outcomes_text(r['outcomes'])} | {r['replace calls']} | {r['nodes replaced']} | {r['resubmissions']} "
            f"| {r['max per job']} | {r['second copies']} | {r['max pages per incident']} | {r['past the cap']} | {r['left reserved']} "
            f"| {r['open claims']} | {r['contradicting messages']} | {r['max state KiB']} | {r['virtual s']:.0f} |"
        )


if __name__ == "__main__":
    main()
