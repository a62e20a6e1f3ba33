"""The largest state every drill's executions carried (Step Functions fails an execution whose state
input or output passes 256 KiB), and a storm built to be as large as the limits allow: 100 nodes,
each reported by a health event and an alarm with long distinct reasons, under 100 jobs with long
names, long checkpoint prefixes and 64 KiB batch scripts.

Prints, per scenario: the largest payload in bytes (compact JSON, as Step Functions measures it),
where it was, its share of the 256 KiB limit, and the incidents' outcomes.

    python bench/state_size.py [--only default,rack-storm-64-jobs]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "agent")]

from sandbox.runner import DrillRunner  # noqa: E402
from sandbox.scenario import Scenario, load_scenario  # noqa: E402

LIMIT = 256 * 1024
DRILLS = ROOT / "events" / "drills"


def largest_storm() -> Scenario:
    """100 nodes (the most one incident takes) under 100 single-node jobs, every text long."""
    raw = json.loads((DRILLS / "rack-storm.json").read_text())
    raw["name"] = "largest-storm"
    raw["description"] = "100 nodes, 2 long distinct reasons each, under 100 jobs with long names and prefixes"
    first = 96
    raw["jobs"] = [
        {
            "id": str(9001 + n),
            "name": (f"{n:03d}-" + "very-long-experiment-name-" * 9)[:128],
            "nodes": f"workers:{first + n}",
            "checkpoint_uri": f"s3://llm-train-checkpoints/{'deeply/nested/prefix/' * 9}job-{n:03d}",
            "checkpoints": [{"step": 1000}, {"step": 2000, "damage": "missing_shard"}],
            "script_bytes": 65536,
        }
        for n in range(100)
    ]
    raw["faults"] = [
        fault
        for n in range(100)
        for fault in (
            {"at": 100 + n * 0.04, "kind": "node_health", "node": f"workers:{first + n}", "reason": f"node {n}: " + "HMA detail " * 80},
            {"at": 100 + n * 0.04, "kind": "alarm", "node": f"workers:{first + n}", "reason": f"alarm {n}: " + "threshold " * 80},
        )
    ]
    raw["settings"] = {"dry_run": False, "caps": {"max_nodes": 100, "max_percent": 50}}
    return Scenario.model_validate(raw)


def measure(scenario: Scenario, log_dir: Path) -> dict[str, object]:
    report = DrillRunner(scenario, log_path=log_dir / f"{scenario.name}.log").run()
    size = int(report["max_state_bytes"])
    return {
        "scenario": scenario.name,
        "max state bytes": size,
        "of 256 KiB": f"{size / LIMIT:.0%}",
        "where": str(report["max_state_at"]).split(": ", 1)[-1],
        "outcomes": ",".join(sorted({i["outcome"] for i in report["incidents"]})),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated drill names (default: every drill and the largest storm)")
    only = [n for n in parser.parse_args().only.split(",") if n]
    names = only or sorted(p.stem for p in DRILLS.glob("*.json") if p.stem != "real-slurm")
    scenarios = [largest_storm() if n == "largest-storm" else load_scenario(DRILLS / f"{n}.json") for n in names]
    if not only:
        scenarios.append(largest_storm())
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(s, Path(tmp)) for s in scenarios]
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(str(row[c]).ljust(widths[c]) for c in columns))


if __name__ == "__main__":
    main()
