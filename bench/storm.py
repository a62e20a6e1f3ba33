"""Correlated failures: N nodes of a 512-node cluster fail within 5 s (a rack), under eight 64-node
jobs, through the whole pipeline in the drill sandbox (events/drills/rack-storm.json, resized).

Prints, per storm size: executions, BatchReplaceClusterNodes calls, state transitions, virtual time
until every incident ended, jobs resubmitted (and how often each), nodes acted on past the cluster
cap (must be 0), and the wall time of the drill. The default cap is 20% of the compute nodes and at
most 64 nodes, so 128 failing nodes are capped, not replaced.

    python bench/storm.py [--sizes 16,64,128]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "agent")]

from sandbox.fault_suite import cap_limit  # noqa: E402
from sandbox.runner import DrillRunner  # noqa: E402
from sandbox.scenario import Scenario  # noqa: E402

FIRST_NODE = 96  # the rack starts inside the second job


def storm(size: int, log_dir: Path) -> dict[str, object]:
    raw = json.loads((ROOT / "events" / "drills" / "rack-storm.json").read_text())
    raw["faults"] = [{"at": 100 + (n % size) * 5 / size, "kind": "node_health", "node": f"workers:{FIRST_NODE + n}"} for n in range(size)]
    scenario = Scenario.model_validate(raw)
    report = DrillRunner(scenario, log_path=log_dir / f"storm-{size}.log").run()
    per_job = Counter(s["old_job_id"] for s in report["slurm"]["submissions"])
    outcomes = Counter(i["outcome"] for i in report["incidents"])
    replaced = len(report["replacements"])
    return {
        "failed nodes": size,
        "executions": report["executions"],
        "outcomes": " + ".join(f"{n} {o}" for o, n in sorted(outcomes.items())),
        "replace calls": report["api_calls"].get("sagemaker.BatchReplaceClusterNodes", 0),
        "nodes replaced": replaced,
        "past the cap": max(0, replaced - cap_limit(scenario)),
        "state transitions": report["state_transitions"],
        "virtual seconds to recover all": report["virtual_seconds"],
        "jobs resubmitted": len(per_job),
        "max resubmissions of one job": max(per_job.values(), default=0),
        "api calls": report["api_calls_total"],
        "wall seconds": report["wall_seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,64,128")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [storm(size, Path(tmp)) for size in sizes]
    print("rack storm on a 512-node cluster (8 jobs x 64 nodes), drill sandbox, default safety limits")
    for key in rows[0]:
        print(f"  {key:<32}" + "".join(f"{r[key]!s:>26}" for r in rows))


if __name__ == "__main__":
    main()
