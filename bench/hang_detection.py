"""Hangs and slowdowns: how soon a hung job is an incident, how soon it runs again, against NCCL's
watchdog; how many verdicts declared pauses cost; what the detector costs a month; and what the
progress call costs the training loop.

Runs drills in the sandbox (virtual time; the real state machines, handlers, the detector invoked
once a minute and reading every HangReadEverySeconds within it, simulated Slurm and EKS) and prints:

* **detection**: a job of the given step time hangs (its rank on one node stuck in its data loader;
  one idle spare) at several offsets within the detector's minute and the reporter's write cadence.
  ``after last progress`` is the stall verdict's time after the job's true last step (the drill's,
  not the detector's own dating), p50 and p99 over the offsets; ``running again`` is from the hang's
  start to the resubmitted copy running (p50). ``today`` rows run the same drills with the earlier
  settings (a read a minute, a 60 s floor, a reporter writing every 30 s).
* **hang, NCCL watchdog**: the same job without progress reporting (the job-failed path).
* **declared pauses** and healthy fast jobs: verdicts (false positives) and incidents.
* **monthly cost** of the detector at dated list prices (sandbox/fleet/prices.py), from the calls a
  read makes in the drills, beside today's.
* the library's ``progress()`` per-call cost (bench/progress_call.py).

    python bench/hang_detection.py [--offsets 12]

Goals (issue 50): a hung job of steps up to 5 s is an incident <= 30 s after its last progress (p99);
no verdict for a declared pause; (issue 32) running again <= 180 s with a spare; p99 of progress() <= 1 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import statistics
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "training"), str(ROOT / "agent")]

from hyperpod_recovery.domain.record.durations import format_duration  # noqa: E402
from hyperpod_recovery.models.progress import HEARTBEAT_SECONDS, PROGRESS_WRITE_SECONDS  # noqa: E402
from sandbox.fleet.prices import PRICES, TAKEN  # noqa: E402
from sandbox.runner import DrillRunner  # noqa: E402
from sandbox.scenario import load_scenario, with_changes  # noqa: E402

DRILLS = ROOT / "events" / "drills"
HANG_AT = 300.0
NCCL_TIMEOUTS = (600, 1800)
GOAL_SECONDS = 30.0
SHORT_PAUSE = {"at": 300, "kind": "pause", "job": "1001", "seconds": 60, "pause_kind": "checkpoint"}
# The settings of earlier versions: a read a minute, a 60 s floor, a reporter writing at its heartbeat.
TODAY = {"settings": {"hangs": {"read_every_seconds": 60, "stall_floor_seconds": 60}}}
TODAY_WRITE_SECONDS = float(HEARTBEAT_SECONDS)
# template.yaml: Globals MemorySize (256 MB), arm64; the detector's reads span 55 s of each minute.
MEMORY_GB = 0.25
READ_WINDOW_SECONDS = 55.0
# ASSUMPTION: one read's billed time (a Query or Scan, the memory's read and write: ~0.3 s in-region).
READ_SECONDS = 0.3
MINUTES_A_MONTH = 30 * 24 * 60
# What a row and a node's share of the detector's memory weigh (measured on the drills' items, rounded up).
PROGRESS_ROW_BYTES = 560
MEMORY_BYTES_PER_NODE = 40  # (compressed: a 125-node job's item is about 4 KB, docs/progress.md)


def run(name: str, changes: dict[str, Any]) -> dict[str, Any]:
    scenario = with_changes(load_scenario(DRILLS / f"{name}.json"), {"expect": None, **changes})
    with tempfile.TemporaryDirectory() as tmp:
        return DrillRunner(scenario, log_path=Path(tmp) / "lambda.log").run()


def offsets(count: int) -> list[tuple[float, float]]:
    """``count`` (hang moment, step phase) pairs spread over the detector's minute and the job's step
    (golden-ratio walks): the hang falls anywhere between two reads, the last step anywhere between two writes."""
    return [(round(HANG_AT + (k * 0.618034 * 60) % 60, 1), (k * 0.381966) % 1) for k in range(count)]


def _progress(step_seconds: float, write_seconds: float, phase: float = 0.0) -> dict[str, Any]:
    return {
        "step_seconds": step_seconds,
        "step": 2050,
        "write_seconds": write_seconds,
        "step_phase_seconds": round(phase * step_seconds, 3),
    }


def hang_once(
    name: str, step_seconds: float, moment: tuple[float, float], write_seconds: float, extra: dict[str, Any]
) -> tuple[float | None, float | None, int, int]:
    """(verdict after the true last step, running again after the hang, verdicts, incidents)."""
    at, phase = moment
    base = load_scenario(DRILLS / f"{name}.json")
    progress = _progress(step_seconds, write_seconds, phase)
    job = {**base.jobs[0].model_dump(exclude_unset=True), "progress": progress}
    hang = {**next(f for f in base.faults if f.kind == "hang").model_dump(exclude_unset=True), "at": at}
    report = run(name, {"jobs": [job], "faults": [hang], **extra})
    stalls = [v for v in report["hangs"]["verdicts"] if v["rule"] == "stall"]
    shift = progress["step_phase_seconds"]
    last_step = math.floor((at + shift) / step_seconds) * step_seconds - shift  # (the drill's own last step)
    detected = round(stalls[0]["decided_at"] - last_step, 1) if stalls else None
    return detected, copy_running_after(report, at), len(stalls), len(report["incidents"])


def copy_running_after(report: dict[str, Any], since: float) -> float | None:
    """From ``since`` to the first resubmitted copy running (the report's jobs: running again at)."""
    hangs = (report.get("hangs") or {}).get("hangs") or []
    if hangs and hangs[0]["copy_running_at"] is not None:
        return round(hangs[0]["copy_running_at"] - since, 1)
    jobs = [j for j in report.get("jobs", []) if j.get("running_again_at") is not None]
    made = [j["pending_since"] for j in report.get("jobs", []) if j.get("pending_since") is not None]
    if jobs:
        return round(min(j["running_again_at"] for j in jobs) - since, 1)
    # (EKS: the sandbox's API server has no kube-scheduler: the copy made, its pods created, is what is measured)
    return round(min(made) - since, 1) if made else None


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, nearest rank (p99 of a dozen runs is their largest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def detection_row(
    label: str, name: str, step_seconds: float, moments: Iterable[tuple[float, float]], write_seconds: float, extra: dict[str, Any]
) -> dict[str, Any]:
    runs = [hang_once(name, step_seconds, at, write_seconds, extra) for at in moments]
    detected = [d for d, _, _, _ in runs if d is not None]
    again = [a for _, a, _, _ in runs if a is not None]
    missed = sum(1 for d, _, _, _ in runs if d is None)
    double = sum(1 for _, _, verdicts, _ in runs if verdicts > 1)
    return {
        "label": label,
        "step_seconds": step_seconds,
        "runs": len(runs),
        "p50": statistics.median(detected) if detected else None,
        "p99": percentile(detected, 99) if detected else None,
        "again_p50": statistics.median(again) if again else None,
        "missed": missed,
        "double": double,
    }


def nccl_row(timeout: int) -> dict[str, Any]:
    """No progress reported: the watchdog ends the job ``timeout`` s into the hang; the epilog's event
    starts the job's recovery (an application failure, with its backoff)."""
    job = {**_job(), "progress": None}
    fault = {"at": HANG_AT + timeout, "kind": "job_failed", "job": "1001", "exit_code": 1, "reason": "NCCL watchdog timeout"}
    report = run("job-hang", {"jobs": [job], "faults": [fault]})
    return {
        "label": f"hang, NCCL watchdog {timeout} s",
        "p50": float(timeout),
        "p99": float(timeout),
        "again_p50": copy_running_after(report, HANG_AT),
        "runs": 1,
    }


def quiet_row(label: str, name: str, changes: dict[str, Any]) -> tuple[str, int, int, dict[str, int], int]:
    """A run that must give no verdict: (label, verdicts, incidents, the calls it made, reads)."""
    report = run(name, changes)
    reads = sum(int((t["answer"] or {}).get("reads", 1)) for t in report["hangs"]["ticks"] if isinstance(t["answer"], dict))
    return label, len(report["hangs"]["verdicts"]), len(report["incidents"]), report["api_calls"], reads


def pause_rows() -> list[tuple[str, int, int, dict[str, int], int]]:
    rows = []
    for minutes, kind in ((5, "checkpoint"), (20, "checkpoint"), (60, "evaluation")):
        fault = {
            "at": HANG_AT,
            "kind": "pause",
            "job": "1001",
            "seconds": minutes * 60,
            "pause_kind": kind,
            "pause_limit_seconds": 2 * 3600,
        }
        for step in (2.0, 10.0):
            job = {**_job(), "progress": _progress(step, PROGRESS_WRITE_SECONDS)}
            rows.append(
                quiet_row(
                    f"declared {kind} pause, {minutes} min, {step:g} s steps",
                    "job-hang-during-checkpoint-save",
                    {"jobs": [job], "faults": [fault]},
                )
            )
    rows.append(quiet_row("drill job-hang-during-checkpoint-save", "job-hang-during-checkpoint-save", {}))
    rows.append(quiet_row("drill eks-job-hang-during-checkpoint-save", "eks-job-hang-during-checkpoint-save", {}))
    for step in (1.0, 2.0, 5.0):
        job = {**_job(), "progress": _progress(step, PROGRESS_WRITE_SECONDS)}
        fault = {"at": 1800, "kind": "pause", "job": "1001", "seconds": 60, "pause_kind": "checkpoint"}
        rows.append(
            quiet_row(f"healthy, {step:g} s steps, 31 min (a 1-min checkpoint at 30)", "job-hang", {"jobs": [job], "faults": [fault]})
        )
    return rows


def _job() -> dict[str, Any]:
    return {
        "id": "1001",
        "name": "llama-70b-pretrain",
        "nodes": "workers:0-7",
        "checkpoint_uri": "s3://llm-train-checkpoints/llama-70b-pretrain",
        "checkpoints": [{"step": 1000}, {"step": 2000}],
    }


# --- the monthly cost ---------------------------------------------------------------------------


def calls_per_read(calls: dict[str, int], reads: int) -> dict[str, float]:
    """The detector's calls per read in a quiet run (every counted call there is the detector's)."""
    return {call: n / reads for call, n in sorted(calls.items()) if call.startswith("dynamodb.")}


def monthly_cost(
    per_read: dict[str, float], reads_a_minute: float, invocation_seconds: float, nodes: int, write_seconds: float
) -> dict[str, float]:
    """USD a month (30 days) at the dated list prices: Lambda requests and GB-seconds (an invocation is
    billed for its whole span, its waits too), DynamoDB read units (a Scan of the progress table reads
    every row; the memory's and the membership's items grow with the job's nodes; eventually consistent
    reads at half a unit per 4 KB, ASSUMPTION: the adapters' default), write units for the memory, and
    the training nodes' own progress writes (one PutItem of a row per write)."""
    reads = reads_a_minute * MINUTES_A_MONTH
    scan_units = 0.5 * max(1, math.ceil(nodes * PROGRESS_ROW_BYTES / 4096))
    memory_bytes = max(1024, nodes * MEMORY_BYTES_PER_NODE)
    item_read_units = 0.5 * max(1, math.ceil(memory_bytes / 4096))
    read_units = reads * (
        per_read.get("dynamodb.Scan", 0) * scan_units
        + per_read.get("dynamodb.Query", 0) * scan_units
        + (per_read.get("dynamodb.BatchGetItem", 0) + per_read.get("dynamodb.GetItem", 0)) * item_read_units
    )
    write_units = (
        reads * (per_read.get("dynamodb.BatchWriteItem", 0) + per_read.get("dynamodb.PutItem", 0)) * math.ceil(memory_bytes / 1024)
    )
    reporter_writes = nodes * (30 * 86_400 / write_seconds)  # (a row under 1 KB: one write unit each)
    lam = (
        PRICES["lambda_request"].usd_each * MINUTES_A_MONTH
        + PRICES["lambda_arm_gb_second"].usd_each * MINUTES_A_MONTH * invocation_seconds * MEMORY_GB
    )
    return {
        "lambda": lam,
        "dynamodb_reads": read_units * PRICES["dynamodb_read_unit"].usd_each,
        "dynamodb_writes": write_units * PRICES["dynamodb_write_unit"].usd_each,
        "detector": lam + read_units * PRICES["dynamodb_read_unit"].usd_each + write_units * PRICES["dynamodb_write_unit"].usd_each,
        "reporters": reporter_writes * PRICES["dynamodb_write_unit"].usd_each,
    }


def _s(seconds: float | None) -> str:
    return "never" if seconds is None else format_duration(seconds)


def _print_table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(title)
    for row in [header, *rows]:
        print("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offsets", type=int, default=12, help="hang moments per step time (default 12)")
    args = parser.parse_args(argv)
    moments = offsets(args.offsets)
    few = moments[: max(3, args.offsets // 3)]
    rows = [detection_row(f"{s:g} s steps", "job-hang", s, moments, PROGRESS_WRITE_SECONDS, {}) for s in (1.0, 2.0, 5.0)]
    rows.append(detection_row("2 s steps, EKS PyTorchJob", "eks-job-hang", 2.0, few, PROGRESS_WRITE_SECONDS, {}))
    rows += [detection_row(f"{s:g} s steps", "job-hang", s, few, PROGRESS_WRITE_SECONDS, {}) for s in (10.0, 40.0)]
    rows.append(detection_row("5 s steps, reporter of an earlier version (30 s writes)", "job-hang", 5.0, few, TODAY_WRITE_SECONDS, {}))
    today = [detection_row(f"today: {s:g} s steps", "job-hang", s, few, TODAY_WRITE_SECONDS, TODAY) for s in (2.0, 5.0, 10.0, 40.0)]
    nccl = [nccl_row(t) for t in NCCL_TIMEOUTS]
    header = ("hang (8 nodes + 1 spare)", "runs", "after last progress p50", "p99", "running again p50", "")
    table = [
        (
            r["label"],
            str(r["runs"]),
            _s(r["p50"]),
            _s(r["p99"]),
            _s(r["again_p50"]),
            (
                ("goal met" if r["p99"] is not None and r["p99"] <= GOAL_SECONDS else "OVER THE GOAL")
                if r["step_seconds"] <= 5 and not r["label"].startswith("today") and "earlier version" not in r["label"]
                else ""
            )
            + (f"; {r['missed']} missed" if r.get("missed") else "")
            + (f"; {r['double']} with two verdicts" if r.get("double") else ""),
        )
        for r in rows + today
    ]
    table += [(r["label"], "1", _s(r["p50"]), _s(r["p99"]), _s(r["again_p50"]), "the job's own failure") for r in nccl]
    print("Hangs: detection and time to running again (virtual time, the real pipeline in the sandbox)")
    print(f"(hangs at {len(moments)} moments over a minute from t={HANG_AT:g} s; 'today': a read a minute, 60 s floor, 30 s writes)")
    print()
    _print_table("Detection", header, table)

    quiet = pause_rows()
    _print_table(
        "Declared pauses and healthy fast jobs (false positives)",
        ("run", "verdicts", "incidents"),
        [(label, str(v), str(i)) for label, v, i, _, _ in quiet],
    )
    # The calls a read makes: the healthy 2 s job's run (no incident: every counted call is the detector's).
    _, _, _, calls, reads = next(q for q in quiet if q[0].startswith("healthy, 2 s"))
    per_read = calls_per_read(calls, reads)
    today_quiet = quiet_row(
        "healthy, 2 s steps, today's settings",
        "job-hang",
        # (a drill needs a fault: a minute's declared checkpoint)
        {"jobs": [{**_job(), "progress": _progress(2.0, TODAY_WRITE_SECONDS)}], "faults": [SHORT_PAUSE], **TODAY},
    )
    per_read_today = calls_per_read(today_quiet[3], today_quiet[4])
    cost_rows = []
    for nodes in (8, 2048):
        new = monthly_cost(per_read, 60 / 5, READ_WINDOW_SECONDS + READ_SECONDS, nodes, PROGRESS_WRITE_SECONDS)
        old = monthly_cost(per_read_today, 1, 0.5, nodes, TODAY_WRITE_SECONDS)
        for label, c in (("today (a read a minute)", old), ("every 5 s", new)):
            cost_rows.append(
                (
                    f"{nodes:,} nodes, {label}",
                    f"${c['lambda']:.2f}",
                    f"${c['dynamodb_reads']:.2f}",
                    f"${c['dynamodb_writes']:.2f}",
                    f"${c['detector']:.2f}",
                    f"${c['reporters']:.2f}",
                )
            )
    _print_table(
        f"Monthly cost (30 days, us-east-1 list prices read {TAKEN}; calls per read measured: "
        + ", ".join(f"{k.split('.')[1]} {v:.2f}" for k, v in per_read.items())
        + ")",
        ("detector", "Lambda", "DynamoDB reads", "DynamoDB writes", "detector total", "reporters' writes"),
        cost_rows,
    )
    print(
        "  (Lambda: 43,200 invocations, each billed for its span: 55.3 s at 5 s reads (its waits too), 0.5 s today, 256 MB arm64;\n"
        f"   a progress row ~{PROGRESS_ROW_BYTES} B, the memory ~{MEMORY_BYTES_PER_NODE} B a node; eventually consistent reads;\n"
        "   reporters: each node's PutItem every 5 s while stepping (30 s today); no Step Functions: the loop is in the invocation)"
    )
    from bench.progress_call import main as progress_call  # (the per-call cost, printed after)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = progress_call([])
    print()
    print(out.getvalue().rstrip())
    met = all(
        r["p99"] is not None and r["p99"] <= GOAL_SECONDS for r in rows if r["step_seconds"] <= 5 and "earlier version" not in r["label"]
    )
    clean = all(v == 0 and i == 0 for _, v, i, _, _ in quiet)
    return code or (0 if met and clean else 1)


if __name__ == "__main__":
    sys.exit(main())
