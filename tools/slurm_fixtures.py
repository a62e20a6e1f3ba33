"""Capture what each real Slurm version prints, for the agent's reader tests (tests/fixtures/slurm/<version>/).

    sudo .venv/bin/python tools/slurm_fixtures.py [--version 22.05|24.11|all] [--out tests/fixtures/slurm]

Starts a 5-node Slurm of its own with tools/slurm_up.sh (no other Slurm may run: the ports are fixed),
sets up the same cluster on every version, saves the outputs the agent reads, and stops it again
(tools/slurm_down.sh --purge). tests/unit/test_slurm_json.py holds every version's files to the same
agent-level answers, so the scenario below is the contract: change both together.

Nodes: ip-10-1-0-1 runs fixture-running; ip-10-1-0-2 is draining (fixture-draining runs on it);
ip-10-1-0-3 drained idle (by us); ip-10-1-0-4 down (by an admin); ip-10-1-0-5 idle.
Jobs: fixture-running, fixture-draining (running); fixture-options, fixture-gpus, fixture-gpus-per-task,
fixture-gpu-bind (held, submitted with many options); fixture-copy (held, our resubmission mark);
fixture-completed (exit 0), fixture-failed (exit 3), fixture-killed (SIGKILL), all three ended.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODES = [f"ip-10-1-0-{n}" for n in range(1, 6)]
DEADLINE_SECONDS = 90
OUR_REASON = "hyperpod-recovery: fixture drained by the pipeline"
ADMIN_REASON = "fixture: down by an admin"
# fixture-options: what a training job asks for, given on the command line (held: it never runs).
OPTIONS = (
    "--hold", "--job-name=fixture-options", "--account=acme", "--partition=dev", "--nodes=1-2", "--time=30",
    "--gres=gpu:1", "--ntasks-per-node=1", "--cpus-per-task=1", "--mem=100", "--constraint=fast", "--exclusive",
    "--licenses=fluent:1", "--output=train-%j.out", "--error=train-%j.err", "--mail-user=trainer@example.com",
    "--mail-type=END,FAIL", "--comment=team=llm checkpoint=s3://fixture-bucket/llama", "--no-requeue", "--nice=5",
    "--wckey=pretrain", "--open-mode=append", "--kill-on-invalid-dep=yes", "--use-min-nodes",
)  # fmt: skip
# fixture-gpus, fixture-gpus-per-task, fixture-gpu-bind: the GPU options whose TRES spelling changed in
# 23.02, and the binding 23.11+ add for --gpus-per-task (held too).
GPU_OPTIONS = (
    ("--hold", "--job-name=fixture-gpus", "--nodes=2", "--gpus=2", "--cpus-per-gpu=1", "--mem-per-gpu=100"),
    ("--hold", "--job-name=fixture-gpus-per-task", "--nodes=2", "--ntasks=2", "--gpus-per-task=1"),
    ("--hold", "--job-name=fixture-gpu-bind", "--gpus-per-node=1", "--gpu-bind=closest", "--gpu-freq=high"),
)
SCRIPT = "#!/bin/bash\nsleep 100000\n"


def run(env: dict[str, str], *argv: str, stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, text=True, check=False)  # noqa: S603 - an argument list
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def sbatch(env: dict[str, str], work: Path, *args: str, script: str = SCRIPT) -> str:
    return run(env, "sbatch", "--parsable", f"--chdir={work}", "--output=/dev/null", *args, stdin=script).strip().split(";")[0]


def wait_for(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)  # real time: a real scheduler


def short_states(env: dict[str, str]) -> dict[str, str]:
    """squeue's own words (%T) per job name: the same on every version."""
    out = run(env, "squeue", "-h", "--states=all", "-o", "%j %T")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def node_words(env: dict[str, str]) -> dict[str, str]:
    out = run(env, "sinfo", "-h", "-N", "-o", "%N %T")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def set_up(env: dict[str, str], work: Path) -> None:
    running = sbatch(env, work, "--job-name=fixture-running", "--nodelist=ip-10-1-0-1", "--time=90",
                     "--comment=checkpoint=s3://fixture-bucket/run")  # fmt: skip
    sbatch(env, work, "--job-name=fixture-draining", "--nodelist=ip-10-1-0-2")
    sbatch(env, work, *OPTIONS)
    for options in GPU_OPTIONS:
        sbatch(env, work, *options)
    sbatch(env, work, "--hold", "--job-name=fixture-copy",
           f"--comment=hyperpod-recovery:resubmission-of={running} incident=inc-fixture team=llm")  # fmt: skip
    for name, body in (("fixture-completed", "exit 0"), ("fixture-failed", "exit 3"), ("fixture-killed", "kill -KILL $$")):
        sbatch(env, work, f"--job-name={name}", "--nodelist=ip-10-1-0-5", script=f"#!/bin/bash\n{body}\n")
    wanted = {"fixture-running": "RUNNING", "fixture-draining": "RUNNING", "fixture-completed": "COMPLETED",
              "fixture-failed": "FAILED", "fixture-killed": "FAILED"}  # fmt: skip
    wait_for(f"jobs {wanted}", lambda: all(short_states(env).get(k) == v for k, v in wanted.items()))
    run(env, "scontrol", "update", "NodeName=ip-10-1-0-2,ip-10-1-0-3", "State=DRAIN", f"Reason={OUR_REASON}")
    run(env, "scontrol", "update", "NodeName=ip-10-1-0-4", "State=DOWN", f"Reason={ADMIN_REASON}")
    wait_for("node states", lambda: node_words(env) == {
        "ip-10-1-0-1": "allocated", "ip-10-1-0-2": "draining", "ip-10-1-0-3": "drained", "ip-10-1-0-4": "down",
        "ip-10-1-0-5": "idle"})  # fmt: skip


def capture(env: dict[str, str], version: str, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    utc = {**env, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    files = {
        "version.txt": run(env, "scontrol", "--version"),
        "sinfo.json": run(env, "sinfo", "--json"),
        "squeue.json": run(env, "squeue", "--json", "--states=all"),  # as the agent asks (23.02+ hide ended jobs)
        "scontrol-show-node-o.txt": run(utc, "scontrol", "show", "node", "-o"),
    }
    options = next(j for j in json.loads(files["squeue.json"])["jobs"] if j["name"] == "fixture-options")
    files["scontrol-show-job-options.txt"] = run(env, "scontrol", "show", "job", str(options["job_id"]))
    if version != "22.05":  # 22.05's scontrol has no --json
        files["scontrol-show-nodes.json"] = run(env, "scontrol", "show", "nodes", "--json")
        files["scontrol-show-jobs.json"] = run(env, "scontrol", "show", "jobs", "--json")
        files["sinfo-grouped.json"] = files.pop("sinfo.json")  # rows of nodes alike, no node dump
    for name, text in files.items():
        if name.endswith(".json"):
            text = json.dumps(json.loads(text), indent=1) + "\n"
        (out / name).write_text(text)
    return sorted(files)


def one_version(version: str, out_root: Path) -> None:
    base = Path(tempfile.gettempdir()) / f"hyperpod-recovery-slurm-fixtures-{version}"
    work = base / "jobs"
    env = {**os.environ, "BASE": str(base), "NODES": str(len(NODES)), "SLURM_VERSION": version}
    up = subprocess.run([str(ROOT / "tools" / "slurm_up.sh")], env=env, capture_output=True, text=True, check=False)  # noqa: S603
    try:
        if up.returncode != 0:
            raise SystemExit(f"tools/slurm_up.sh failed:\n{up.stdout}{up.stderr}")
        for line in up.stdout.splitlines():  # export SLURM_CONF=... / export PATH=...:$PATH
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value.replace("$PATH", os.environ["PATH"])
        work.mkdir(parents=True, exist_ok=True)
        set_up(env, work)
        files = capture(env, version, out_root / version)
        print(f"Slurm {version}: {', '.join(files)} -> {out_root / version}")
    finally:
        subprocess.run([str(ROOT / "tools" / "slurm_down.sh"), "--purge"], env=env, capture_output=True, check=False)  # noqa: S603


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", choices=("22.05", "24.11", "all"), default="all")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "slurm")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root: it starts slurmctld and slurmd", file=sys.stderr)
        return 2
    for version in ("22.05", "24.11") if args.version == "all" else (args.version,):
        one_version(version, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
