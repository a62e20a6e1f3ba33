"""Time to resume: how long a training job is down, and what of that is the pipeline's own time.

Runs drills in the sandbox (virtual time: a 10-minute replacement takes seconds) and prints, per
scenario, the job's downtime (from the fault to its resubmission running in the simulated Slurm),
the replacement's provisioning time, the pipeline's overhead per incident (the workflow's time that
is neither provisioning nor the agent's work nor a planned wait), the state transitions per
recovery, and for a dead controller agent the time from the fault to the escalation.

    python bench/time_to_resume.py

The issue's targets (docs/decisions.md): with a spare, downtime <= 30 s; without one, downtime <=
provisioning + 10 s; overhead <= 5 s per incident on the event-driven path; a dead agent noticed
within 120 s. A row names the scenario file in events/drills/.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "training"), str(ROOT / "agent")]

from hyperpod_recovery.domain.durations import format_duration  # noqa: E402
from sandbox.runner import DrillRunner  # noqa: E402
from sandbox.scenario import load_scenario  # noqa: E402

# (scenario, what it measures)
SCENARIOS = [
    ("spare-capacity", "spare nodes idle: the job could run again at once"),
    ("no-spare-capacity", "no spare: the job runs again on the replacement"),
    ("job-node-failure", "the job failed first (JobRecovery, nested node recovery)"),
    ("rack-storm", "a rack of 8 nodes under 2 jobs"),
    ("agent-down", "the controller agent is down: time to escalation"),
]


def measure(name: str, log_dir: Path) -> dict[str, str]:
    scenario = load_scenario(ROOT / "events" / "drills" / f"{name}.json")
    report = DrillRunner(scenario, log_path=log_dir / f"{name}.log").run()
    jobs = [j for j in report["jobs"] if j["fault_at"] is not None]
    downtimes = [j["downtime_seconds"] for j in jobs if j["downtime_seconds"] is not None]
    incidents = [i for i in report["incidents"] if i["workflow"] == "node"]
    provisioning = [i["provisioning_seconds"] for i in incidents if i["provisioning_seconds"]]
    overheads = [i["pipeline_overhead_seconds"] for i in report["incidents"] if i["pipeline_overhead_seconds"] is not None]
    first_fault = min((f.at for f in scenario.faults), default=0.0)
    escalated = [max(p["end"] for p in i["phases"]) - first_fault for i in report["incidents"] if i["outcome"] == "escalated"]
    longest_provisioning = max(provisioning) if provisioning else None
    return {
        "scenario": name,
        "job downtime": " / ".join(format_duration(d) for d in downtimes) or "-",
        "provisioning": format_duration(longest_provisioning) if longest_provisioning else "-",
        # What the job waits beyond the replacement itself: detection, polling lag, the steps after it.
        "downtime - provisioning": format_duration(max(downtimes) - longest_provisioning) if downtimes and longest_provisioning else "-",
        "overhead / incident": format_duration(max(overheads)) if overheads else "-",
        "transitions / execution": str(report["state_transitions"] // max(1, report["executions"])),
        "fault to escalation": format_duration(min(escalated)) if escalated else "-",
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(name, Path(tmp)) for name, _ in SCENARIOS]
    print("time to resume, drill sandbox (virtual time), default settings")
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  " + "  ".join(f"{c:<{widths[c]}}" for c in columns))
    for row in rows:
        print("  " + "  ".join(f"{row[c]:<{widths[c]}}" for c in columns))
    print()
    for name, what in SCENARIOS:
        print(f"  {name}: {what}")


if __name__ == "__main__":
    main()
