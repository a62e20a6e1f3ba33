"""Time to resume: how long a training job is down, and what of that is the pipeline's own time.

Runs drills in the sandbox (virtual time: a 10-minute replacement takes seconds) and prints, per
scenario, the job's downtime (from the fault to its resubmission running in the simulated Slurm),
the replacement's provisioning time, the pipeline's overhead per incident (the workflow's time that
is neither provisioning nor the agent's work nor a planned wait), the state transitions per
recovery, for a replacement that fails its health check the time from the fault to its own
replacement, and for a dead controller agent the time from the fault to the escalation.

    python bench/time_to_resume.py

The issue's targets (docs/decisions.md): with a spare, downtime <= 30 s; without one, downtime <=
provisioning + 10 s; overhead <= 5 s per incident on the event-driven path; a dead agent noticed
within 120 s. A row names the scenario file in events/drills/.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "training"), str(ROOT / "agent")]

from hyperpod_recovery.domain.record.durations import format_duration  # noqa: E402
from sandbox.runner import DrillRunner  # noqa: E402
from sandbox.scenario import load_scenario, with_changes  # noqa: E402

# (row, scenario, changes to it, what it measures, target)
SCENARIOS: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("spare-capacity", "spare-capacity", {}, "idle nodes: the job runs again at once", "downtime <= 30 s"),
    ("no-spare, polled", "no-spare-capacity", {}, "no spare, a cluster without Cluster Events: polling", "-"),
    (
        "no-spare, event",
        "rejoin-event",
        {},
        "no spare, Continuous mode: a Cluster Event ends the wait",
        "downtime <= prov + 10 s, overhead <= 5 s",
    ),
    (
        "no-spare, event lost",
        "rejoin-event",
        {"behaviour": {"cluster_events_lost": True}},
        "the same, the event lost: the fallback check at the typical duration",
        "-",
    ),
    ("resume-per-job", "resume-per-job", {}, "two jobs: one resume=after_rejoin, one at once", "-"),
    ("job-node-failure", "job-node-failure", {}, "the job failed first (JobRecovery, nested node recovery)", "-"),
    ("rack-storm", "rack-storm", {}, "a rack: 64 of 512 nodes at once, under 2 of 8 jobs", "-"),
    (
        "health-gate, 2nd ok",
        "health-gate-replaced-again",
        {},
        "the first replacement fails its health check: time to the second replacement, which passes",
        "-",
    ),
    ("health-gate-fails", "health-gate-fails", {}, "every replacement fails its health check: the second, then escalation", "-"),
    ("agent-down", "agent-down", {}, "the controller agent is down: time to escalation", "escalation <= 120 s"),
    ("no-spare, rigid", "no-spare-rigid", {}, "no spare, a rigid job: it waits for its replacement", "-"),
    (
        "no-spare, elastic",
        "no-spare-elastic",
        {},
        "no spare, an elastic job (resume=elastic,min=12): on 15 nodes at once, grown back to 16 at its next checkpoint",
        "downtime <= 60 s",
    ),
    (
        "no-spare, elastic x4",
        "no-spare-elastic-replicas",
        {},
        "the same, in whole replicas of 4 nodes: on 12 nodes, then 16",
        "downtime <= 60 s",
    ),
]
# Shrink or wait, by the replacement's duration (the stack expecting that long): the same fault, the job
# elastic or rigid. The rule (T x n/N > ElasticGrowBackSeconds, 300 s) shrinks a 16-node job to 15 when
# T > 320 s: at 4 minutes the elastic job waits too.
REPLACEMENT_SECONDS = (240, 600, 1200)


def measure(row: str, name: str, changes: dict[str, Any], target: str, log_dir: Path) -> dict[str, str]:
    scenario = load_scenario(ROOT / "events" / "drills" / f"{name}.json")
    if changes:
        scenario = with_changes(scenario, changes)
    report = DrillRunner(scenario, log_path=log_dir / f"{row}.log").run()
    jobs = [j for j in report["jobs"] if j["fault_at"] is not None]
    downtimes = [j["downtime_seconds"] for j in jobs if j["downtime_seconds"] is not None]
    incidents = [i for i in report["incidents"] if i["workflow"] == "node"]
    provisioning = [i["provisioning_seconds"] for i in incidents if i["provisioning_seconds"]]
    overheads = [i["pipeline_overhead_seconds"] for i in report["incidents"] if i["pipeline_overhead_seconds"] is not None]
    first_fault = min((f.at for f in scenario.faults), default=0.0)
    escalated = [max(p["end"] for p in i["phases"]) - first_fault for i in report["incidents"] if i["outcome"] == "escalated"]
    longest = max(provisioning) if provisioning else None
    # A replacement of a replacement (the first failed the health gate): when it was asked for.
    replaced_ids = {r["new_node_id"] for r in report["replacements"]}
    again = [r["initiated_at"] - first_fault for r in report["replacements"] if r["old_node_id"] in replaced_ids]
    beyond = max(downtimes) - longest if downtimes and longest and max(downtimes) >= longest else None
    return {
        "scenario": row,
        "job downtime": " / ".join(format_duration(d) for d in downtimes) or "-",
        "provisioning": format_duration(longest) if longest else "-",
        # What the job waits beyond the replacement itself (a job that ran again before it: -).
        "downtime - provisioning": format_duration(beyond) if beyond is not None else "-",
        "overhead / incident": format_duration(max(overheads)) if overheads else "-",
        "transitions / execution": str(report["state_transitions"] // max(1, report["executions"])),
        "fault to 2nd replacement": format_duration(min(again)) if again else "-",
        "fault to escalation": format_duration(min(escalated)) if escalated else "-",
        # The job's node-time lost from the fault to the drill's end: all of it while down, the nodes
        # it ran without while shrunk (sandbox/job_downtime.py node_time_lost).
        "node-min lost": " / ".join(f"{j['node_seconds_lost'] / 60:.1f}" for j in jobs if j.get("node_seconds_lost") is not None) or "-",
        "sizes": " / ".join("->".join(str(c["nodes"]) for c in j.get("copies", [])) for j in jobs) or "-",
        "target": target,
    }


def shrink_or_wait(log_dir: Path) -> list[dict[str, str]]:
    """Node-minutes the job loses per fault, elastic against rigid, as the replacement takes longer."""
    rows = []
    for seconds in REPLACEMENT_SECONDS:
        row = {"replacement": format_duration(seconds)}
        for label, name in (("rigid", "no-spare-rigid"), ("elastic", "no-spare-elastic")):
            # The stack expects what the cluster's replacements take (as the measured median would say).
            changes = {"behaviour": {"replacement_seconds": seconds}, "settings": {"expected_replacement_seconds": seconds}}
            scenario = with_changes(load_scenario(ROOT / "events" / "drills" / f"{name}.json"), changes)
            report = DrillRunner(scenario, log_path=log_dir / f"{name}-{seconds}.log").run()
            (job,) = [j for j in report["jobs"] if j["fault_at"] is not None]
            sizes = "->".join(str(c["nodes"]) for c in job.get("copies", []))
            row[f"{label}: node-min lost"] = f"{job['node_seconds_lost'] / 60:.1f}"
            row[f"{label}: downtime"] = format_duration(job["downtime_seconds"]) if job["downtime_seconds"] is not None else "never"
            row[f"{label}: sizes"] = sizes
        rows.append(row)
    return rows


def table(title: str, rows: list[dict[str, str]]) -> None:
    print(title)
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  " + "  ".join(f"{c:<{widths[c]}}" for c in columns))
    for row in rows:
        print("  " + "  ".join(f"{row[c]:<{widths[c]}}" for c in columns))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(row, name, changes, target, Path(tmp)) for row, name, changes, _, target in SCENARIOS]
        compared = shrink_or_wait(Path(tmp))
    table("time to resume, drill sandbox (virtual time), default settings", rows)
    print()
    table("shrink or wait: one node of a 16-node job fails, no spare (node-minutes lost per fault, to the drill's end)", compared)
    print()
    for row, name, changes, what, _ in SCENARIOS:
        print(f"  {row}: {what} (events/drills/{name}.json{' with ' + json.dumps(changes) if changes else ''})")


if __name__ == "__main__":
    main()
