"""Hangs and slowdowns: how soon a hung job is an incident, how soon it runs again, against NCCL's
watchdog; how many verdicts declared pauses cost; and what the progress call costs the training loop.

Runs drills in the sandbox (virtual time; the real state machines, handlers, the detector on its
one-minute schedule, simulated Slurm) and prints one row each:

* **hang, our detector**: a job of the given step time hangs at t=300 s (its rank on one node stuck in
  its data loader; one idle spare). ``detected`` is the stall verdict's time after the job's last
  progress; ``running again`` is from the hang's start to the resubmitted copy running.
* **hang, NCCL watchdog**: the same job without progress reporting: it ends only when NCCL's
  watchdog kills it (TORCH_NCCL timeout 600 s, or 1,800 s), and the job-failed path resubmits it
  (application failure: the restart backoff applies). Same measure.
* **declared pauses**: checkpoint saves and evaluations of 5 to 60 minutes, declared: verdicts
  (false positives) counted, and incidents.
* the library's ``progress()`` per-call cost (bench/progress_call.py).

    python bench/hang_detection.py

Goals (issue 32): a hung job is an incident <= 120 s after its last progress; with a spare, running
again <= 180 s after the hang started; no verdict for a declared pause; p99 of progress() <= 1 ms.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "recovery_core"), str(ROOT / "training"), str(ROOT / "agent")]

from hyperpod_recovery.domain.record.durations import format_duration  # noqa: E402
from sandbox.runner import DrillRunner  # noqa: E402
from sandbox.scenario import load_scenario, with_changes  # noqa: E402

DRILLS = ROOT / "events" / "drills"
HANG_AT = 300.0
NCCL_TIMEOUTS = (600, 1800)


def run(name: str, changes: dict[str, Any]) -> dict[str, Any]:
    scenario = with_changes(load_scenario(DRILLS / f"{name}.json"), {"expect": None, **changes})
    with tempfile.TemporaryDirectory() as tmp:
        return DrillRunner(scenario, log_path=Path(tmp) / "lambda.log").run()


def copy_running_after(report: dict[str, Any], since: float) -> float | None:
    """From ``since`` to the first resubmitted copy running (the report's jobs: running again at)."""
    hangs = (report.get("hangs") or {}).get("hangs") or []
    if hangs and hangs[0]["copy_running_at"] is not None:
        return round(hangs[0]["copy_running_at"] - since, 1)
    jobs = [j for j in report.get("jobs", []) if j.get("running_again_at") is not None]
    return round(min(j["running_again_at"] for j in jobs) - since, 1) if jobs else None


def hang_row(step_seconds: float) -> tuple[str, str, str, str]:
    report = run("job-hang", {"jobs": [{**_job(), "progress": {"step_seconds": step_seconds, "step": 2050}}]})
    verdicts = report["hangs"]["verdicts"]
    detected = verdicts[0]["detected_after_seconds"] if verdicts else None
    again = copy_running_after(report, HANG_AT)
    return (f"hang, {step_seconds:g} s steps, our detector", _s(detected), _s(again), f"{len(verdicts)} verdict(s)")


def eks_hang_row() -> tuple[str, str, str, str]:
    """The same hang on EKS: a PyTorchJob reporting as namespace/name, its pods' logs as evidence,
    stopped and re-created from its checkpoint."""
    report = run("eks-job-hang", {})
    verdicts = report["hangs"]["verdicts"]
    detected = verdicts[0]["detected_after_seconds"] if verdicts else None
    # (the sandbox's API server has no kube-scheduler: the copy's pods stay Pending, so what is
    # measured is the copy made, its pods created; binding and image pulls come after)
    made = [j["pending_since"] for j in report["jobs"] if j.get("pending_since") is not None]
    again = round(min(made) - HANG_AT, 1) if made else None
    return ("hang, 10 s steps, EKS PyTorchJob", _s(detected), _s(again) + " (re-created)", f"{len(verdicts)} verdict(s)")


def nccl_row(timeout: int) -> tuple[str, str, str, str]:
    """No progress reported: the watchdog ends the job ``timeout`` s into the hang; the epilog's event
    starts the job's recovery (an application failure, with its backoff)."""
    job = {**_job(), "progress": None}
    fault = {"at": HANG_AT + timeout, "kind": "job_failed", "job": "1001", "exit_code": 1, "reason": "NCCL watchdog timeout"}
    report = run("job-hang", {"jobs": [job], "faults": [fault]})
    again = copy_running_after(report, HANG_AT)
    return (f"hang, NCCL watchdog {timeout} s", _s(float(timeout)), _s(again), "the job's own failure")


def pause_row(minutes: int, kind: str) -> tuple[str, str, str, str]:
    fault = {"at": HANG_AT, "kind": "pause", "job": "1001", "seconds": minutes * 60, "pause_kind": kind, "pause_limit_seconds": 2 * 3600}
    report = run("job-hang-during-checkpoint-save", {"faults": [fault]})
    verdicts, incidents = len(report["hangs"]["verdicts"]), len(report["incidents"])
    return (f"declared {kind} pause, {minutes} min", "-", "-", f"{verdicts} verdict(s), {incidents} incident(s)")


def _job() -> dict[str, Any]:
    return {
        "id": "1001",
        "name": "llama-70b-pretrain",
        "nodes": "workers:0-7",
        "checkpoint_uri": "s3://llm-train-checkpoints/llama-70b-pretrain",
        "checkpoints": [{"step": 1000}, {"step": 2000}],
    }


def _s(seconds: float | None) -> str:
    return "never" if seconds is None else format_duration(seconds)


def main() -> int:
    rows = [hang_row(s) for s in (2.0, 10.0, 40.0)]
    rows.append(eks_hang_row())
    rows += [nccl_row(t) for t in NCCL_TIMEOUTS]
    rows += [pause_row(m, k) for m, k in ((5, "checkpoint"), (20, "checkpoint"), (60, "evaluation"))]
    header = ("scenario (hang at t=300 s; 8 nodes + 1 spare)", "detected after last progress", "running again after the hang", "")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    print("Hangs: detection and time to running again (virtual time, the real pipeline in the sandbox)")
    for row in [header, *rows]:
        print("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    from bench.progress_call import main as progress_call  # (the per-call cost, printed after)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = progress_call([])
    print()
    print(out.getvalue().rstrip())
    return code


if __name__ == "__main__":
    sys.exit(main())
